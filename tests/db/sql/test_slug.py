"""slug.slug: the same output on every supported server and collation."""

from __future__ import annotations

import re

import pytest
from django.db import NotSupportedError, connection, transaction

from astral_taskclaim.db.operations import _migration_sql
from tests.tools.slug_fallback import FALLBACK

pytestmark = pytest.mark.django_db

# Input and the slug PostgreSQL 18's pg_c_utf8 gives it. Covers ASCII,
# composed and decomposed accents, German sharp s, Turkish dotted and
# dotless i, Greek (no final-sigma rule), Cyrillic, CJK, emoji, fullwidth
# letters and digits (pg_c_utf8 counts only ASCII digits), tabs and spaces.
CORPUS = [
    ("Room 52", "room-52"),
    ("O'Brien", "obrien"),
    ("hello world", "hello-world"),
    ("ALL CAPS", "all-caps"),
    ("snake_case-and-dash", "snakecaseanddash"),
    ("Caf\xe9 cr\xe8me", "caf\xe9-cr\xe8me"),
    ("Cafe\u0301 cre\u0300me", "caf\xe9-cr\xe8me"),
    ("\xc5ngstr\xf6m", "\xe5ngstr\xf6m"),
    ("A\u030angstro\u0308m", "\xe5ngstr\xf6m"),
    ("Stra\xdfe", "stra\xdfe"),
    ("STRASSE", "strasse"),
    ("\u1e9e", "\xdf"),
    ("\u0130stanbul", "istanbul"),
    ("\u0131s\u0131k", "\u0131s\u0131k"),
    ("I\u0307", "i"),
    ("\u0391\u03b8\u03ae\u03bd\u03b1", "\u03b1\u03b8\u03ae\u03bd\u03b1"),
    (
        "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3",
        "\u03bf\u03b4\u03c5\u03c3\u03c3\u03b5\u03c5\u03c3",
    ),
    ("\u041c\u043e\u0441\u043a\u0432\u0430 2024", "\u043c\u043e\u0441\u043a\u0432\u0430-2024"),
    ("\u0401\u0436", "\u0451\u0436"),
    ("\u6771\u4eac \u30bf\u30ef\u30fc", "\u6771\u4eac-\u30bf\u30ef\u30fc"),
    ("\ud55c\uad6d\uc5b4", "\ud55c\uad6d\uc5b4"),
    ("emoji \U0001f600 \U0001f44d\U0001f3fd", "emoji--"),
    ("\U0001f1eb\U0001f1f7", ""),
    (
        "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 \uff11\uff12\uff13",
        "\uff46\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48-",
    ),
    ("\u2460\u2461 \xbd \xb2", "--"),
    ("tab\there", "tabhere"),
    ("many   spaces", "many---spaces"),
    (" leading and trailing ", "-leading-and-trailing-"),
    ("new\nline", "newline"),
    ("\xa0nbsp\u2003em", "nbspem"),
    ("\u0661\u0662\u0663 \u0968", "-"),
    ("\xc6sir \u0152uvre", "\xe6sir-\u0153uvre"),
    ("\u01c5 \u01c4 \u01c6", "\u01c6-\u01c6-\u01c6"),
    ("\u2126 \u212a \u212b", "\u03c9-k-\xe5"),
    ("", ""),
    ("---", ""),
    ("100%", "100"),
    ("a.b,c;d", "abcd"),
    ("\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629"),
    ("\u05e2\u05d1\u05e8\u05d9\u05ea", "\u05e2\u05d1\u05e8\u05d9\u05ea"),
    ("\u0939\u093f\u0928\u094d\u0926\u0940", "\u0939\u093f\u0928\u0926\u0940"),
    ("\u0e44\u0e17\u0e22", "\u0e44\u0e17\u0e22"),
    ("Zo\xeb \xdf\u1e9e", "zo\xeb-\xdf\xdf"),
]

# Collations the argument may carry; each must give the same slug. ICU ones
# (Turkish, and a nondeterministic case-insensitive one, which regular
# expressions reject unless slug.slug overrides it) where the server has ICU.
BASE_COLLATIONS = ["C", "POSIX", "ucs_basic"]
ICU_COLLATIONS = {
    "taskclaim_test_tr": "provider = icu, locale = 'tr-TR'",
    "taskclaim_test_ci": "provider = icu, locale = 'und-u-ks-level2', deterministic = false",
}


def fetch_one(query: str, params: list[object] | None = None) -> object:
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchone()[0]


@pytest.fixture
def collations() -> list[str]:
    found = list(BASE_COLLATIONS)
    if fetch_one("SELECT count(*) FROM pg_collation WHERE collname = 'C.utf8'"):
        found.append("C.utf8")
    with connection.cursor() as cursor:
        for name, definition in ICU_COLLATIONS.items():
            try:
                with transaction.atomic():
                    cursor.execute(f"CREATE COLLATION IF NOT EXISTS {name} ({definition})")
            except NotSupportedError:
                continue  # a server built without ICU
            found.append(name)
    return found


@pytest.mark.parametrize(("name", "expected"), CORPUS)
def test_corpus(name: str, expected: str) -> None:
    assert fetch_one("SELECT slug.slug(%s)", [name]) == expected


def test_the_argument_collation_does_not_matter(collations: list[str]) -> None:
    for collation in collations:
        for name, expected in CORPUS:
            query = f'SELECT slug.slug(%s::text COLLATE "{collation}")'
            assert (collation, fetch_one(query, [name])) == (collation, expected)


def test_the_column_collation_does_not_matter(collations: list[str]) -> None:
    with connection.cursor() as cursor:
        columns = ", ".join(f'c{i} text COLLATE "{c}"' for i, c in enumerate(collations))
        cursor.execute(f"CREATE TEMP TABLE slug_names ({columns})")
        values = ", ".join(["%s"] * len(collations))
        for name, _ in CORPUS:
            cursor.execute(f"INSERT INTO slug_names VALUES ({values})", [name] * len(collations))
        slugs = ", ".join(f"slug.slug(c{i})" for i in range(len(collations)))
        cursor.execute(f"SELECT {slugs} FROM slug_names")
        rows = cursor.fetchall()
    for (_, expected), row in zip(CORPUS, rows, strict=True):
        assert set(row) == {expected}


def test_it_can_back_an_index() -> None:
    volatility, parallel = (
        connection.cursor()
        .execute(
            "SELECT provolatile, proparallel FROM pg_proc "
            "WHERE oid = 'slug.slug(text)'::regprocedure"
        )
        .fetchone()
    )
    assert (volatility, parallel) == ("i", "s")
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE rooms (name text)")
        cursor.execute("CREATE INDEX ON rooms (slug.slug(name))")
        cursor.execute("INSERT INTO rooms VALUES ('Room 52')")
        cursor.execute("SELECT name FROM rooms WHERE slug.slug(name) = 'room-52'")
        assert cursor.fetchall() == [("Room 52",)]


def test_null_gives_null() -> None:
    assert fetch_one("SELECT slug.slug(NULL)") is None


def _install_fallback(schema: str) -> None:
    text = _migration_sql(FALLBACK)
    text = re.sub(r"\bslug\.slug\b", f"{schema}.slug", text)
    text = text.replace("CREATE SCHEMA slug;", f"CREATE SCHEMA {schema};")
    with connection.cursor() as cursor:
        cursor.execute(text)


def _require_generating_major(server_version: int) -> None:
    """The fallback tabulates one major version's Unicode tables; compare on that one."""
    header = re.search(r"from PostgreSQL (\d+)", _migration_sql(FALLBACK))
    assert header is not None
    if server_version // 10000 != int(header.group(1)):
        pytest.skip(f"the fallback was generated from PostgreSQL {header.group(1)}")


def test_fallback_equals_pg_c_utf8_on_every_code_point(server_version: int) -> None:
    _require_generating_major(server_version)
    _install_fallback("slug_fallback")
    differing = fetch_one(
        """SELECT count(*) FROM generate_series(1, 1114111) AS cp
           WHERE cp NOT BETWEEN 55296 AND 57343
             AND slug.slug('A' || chr(cp) || ' x') IS DISTINCT FROM
                 slug_fallback.slug('A' || chr(cp) || ' x')"""
    )
    assert differing == 0


def test_the_fallback_file_is_current(server_version: int) -> None:
    _require_generating_major(server_version)
    from tests.tools.slug_fallback import render

    params = connection.get_connection_params()
    conninfo = " ".join(
        f"{key}='{value}'"
        for key, value in params.items()
        if key in {"host", "port", "user", "dbname", "password"} and value
    )
    assert render(conninfo).split("\n", 2)[2] == _migration_sql(FALLBACK).split("\n", 2)[2]
