"""The SQL migrations: what they create, reverse and re-apply."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from astral_taskclaim.db import sqlfiles
from astral_taskclaim.db.connections import separate_connection
from astral_taskclaim.db.cron import _JOB_SCHEDULE, _job_command, _job_name

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = Path(__file__).resolve().parent.parent / "astral_taskclaim"
MIGRATION_SQL = PACKAGE / "migrations" / "sql"


def fetch(query: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchall()


def schemas() -> set[str]:
    return {row[0] for row in fetch("SELECT nspname FROM pg_namespace")}


def cron_jobs() -> list[tuple[object, ...]]:
    """taskclaim-ttl jobs for this database, wherever pg_cron keeps them."""
    cron_database = fetch("SELECT current_setting('cron.database_name', true)")[0][0]
    if cron_database is None:
        return []
    database = connection.settings_dict["NAME"]
    with separate_connection(connection, dbname=cron_database) as conn:
        if conn.execute("SELECT to_regclass('cron.job')").fetchone() == (None,):
            return []
        return conn.execute(
            "SELECT schedule, command, database FROM cron.job WHERE jobname = %s AND database = %s",
            [_job_name(database, cron_database), database],
        ).fetchall()


@pytest.fixture
def migrated_back() -> Iterator[None]:
    """Leaves the app fully migrated whatever the test did."""
    yield
    call_command("migrate", verbosity=0)  # dependent apps too


def test_claim_table_matches_the_typescript_package() -> None:
    columns = fetch(
        """SELECT column_name, data_type, is_nullable FROM information_schema.columns
           WHERE table_schema = 'taskclaim' AND table_name = 'claim' ORDER BY ordinal_position"""
    )
    assert columns == [
        ("key", "text", "NO"),
        ("expires_at", "timestamp with time zone", "NO"),
        ("token", "uuid", "NO"),
    ]
    indexes = dict(
        fetch("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'taskclaim'")
    )
    assert indexes["claim_pkey"].endswith("USING btree (key)")
    assert indexes["claim_expires_at_idx"].endswith("USING btree (expires_at)")


def test_delete_expired_is_reserved_and_pinned() -> None:
    rows = fetch(
        """SELECT p.prorettype::regtype::text, p.proconfig,
                  EXISTS (SELECT FROM aclexplode(p.proacl) WHERE grantee = 0)
           FROM pg_proc p WHERE p.oid = 'taskclaim.delete_expired()'::regprocedure"""
    )
    returns, config, public_can_execute = rows[0]
    assert returns == "bigint"
    assert config == ["search_path=pg_catalog"]
    assert public_can_execute is False


def test_delete_expired_deletes_only_expired_rows() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim")  # other tests may leave claims behind
        cursor.execute(
            """INSERT INTO taskclaim.claim (key, expires_at, token) VALUES
               ('old-1', now() - interval '1 hour', gen_random_uuid()),
               ('old-2', now() - interval '1 second', gen_random_uuid()),
               ('live', now() + interval '1 hour', gen_random_uuid())"""
        )
        cursor.execute("SELECT taskclaim.delete_expired()")
        assert cursor.fetchone() == (2,)
        cursor.execute("SELECT key FROM taskclaim.claim")
        assert cursor.fetchall() == [("live",)]
        cursor.execute("TRUNCATE taskclaim.claim")


def test_scrub_empties_the_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO taskclaim.claim VALUES ('a', now() + interval '1 hour', gen_random_uuid())"
        )
        cursor.execute(sqlfiles.read("taskclaim/scrub.sql"))
        cursor.execute("SELECT count(*) FROM taskclaim.claim")
        assert cursor.fetchone() == (0,)


def test_migrations_reverse_to_zero_and_apply_again(migrated_back: None) -> None:
    call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
    assert {"slug", "taskclaim"}.isdisjoint(schemas())
    assert cron_jobs() == []
    call_command("migrate", "astral_taskclaim", verbosity=0)
    assert {"slug", "taskclaim"} <= schemas()
    assert fetch("SELECT slug.slug('Room 52')") == [("room-52",)]


def test_cron_job_matches_the_typescript_package_where_pg_cron_runs() -> None:
    cron_database = fetch("SELECT current_setting('cron.database_name', true)")[0][0]
    if cron_database is None:
        # The migration succeeded without pg_cron (the suite is running).
        assert cron_jobs() == []
        return
    assert cron_jobs() == [(_JOB_SCHEDULE, _job_command(), connection.settings_dict["NAME"])]
    assert _JOB_SCHEDULE == "15 * * * *"
    assert "SET statement_timeout = '30s';" in _job_command()
    assert "SELECT taskclaim.delete_expired();" in _job_command()


def test_makemigrations_is_clean() -> None:
    out = StringIO()
    call_command("makemigrations", "astral_taskclaim", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def _string_literals() -> set[str]:
    found: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def _included() -> set[str]:
    """SQL files another one includes (a statement another family owns)."""
    return {
        line.split("-- include:", 1)[1].strip()
        for path in sqlfiles._all_paths()
        for line in sqlfiles.source(path).splitlines()
        if "-- include:" in line
    }


def test_every_sql_file_is_used() -> None:
    unused = set(sqlfiles._all_paths()) - _string_literals() - _included()
    assert unused == set()


def test_read_rejects_a_path_that_is_not_shipped() -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.sql"):
        sqlfiles.read("nope.sql")


def _cron_connection() -> psycopg.Connection:
    cron_database = fetch("SELECT current_setting('cron.database_name', true)")[0][0]
    return separate_connection(connection, dbname=cron_database)


def _jobs_by_name(conn: psycopg.Connection) -> dict[str, str]:
    rows = conn.execute(
        "SELECT jobname, database FROM cron.job WHERE jobname LIKE 'taskclaim-ttl%'"
    ).fetchall()
    return dict(rows)


def test_each_database_gets_its_own_cron_job_and_stale_ones_go(migrated_back: None) -> None:
    # Another database on the server already using the app (another
    # project, or staging beside production) holds `taskclaim-ttl` and its
    # own per-database job; a dropped database left a job behind.
    cron_database = fetch("SELECT current_setting('cron.database_name', true)")[0][0]
    database = connection.settings_dict["NAME"]
    if cron_database in (None, database):
        pytest.skip("needs pg_cron running in another database of this server")
    other, dropped = "taskclaim_cron_other", "taskclaim_cron_dropped"
    call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
    with _cron_connection() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {other}")
        conn.execute(f"CREATE DATABASE {other}")
        schedule = "SELECT cron.schedule_in_database(%s, '15 * * * *', 'SELECT 1', %s)"
        # pg_cron has one `taskclaim-ttl` per user: keep one that serves a
        # database already (a neighbour's), else make it serve `other`.
        shared = _jobs_by_name(conn).get("taskclaim-ttl")
        try:
            if shared is None:
                conn.execute(schedule, ["taskclaim-ttl", other])
                shared = other
            conn.execute(schedule, [f"taskclaim-ttl:{other}", other])
            conn.execute(f"DROP DATABASE IF EXISTS {dropped}")
            conn.execute(f"CREATE DATABASE {dropped}")
            conn.execute(schedule, [f"taskclaim-ttl:{dropped}", dropped])
            conn.execute(f"DROP DATABASE {dropped}")
            call_command("migrate", "astral_taskclaim", verbosity=0)
            assert cron_jobs() == [(_JOB_SCHEDULE, _job_command(), database)]
            jobs = _jobs_by_name(conn)
            assert jobs["taskclaim-ttl"] == shared
            assert jobs[f"taskclaim-ttl:{other}"] == other
            assert jobs[f"taskclaim-ttl:{database}"] == database
            assert f"taskclaim-ttl:{dropped}" not in jobs
            call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
            assert cron_jobs() == []
            jobs = _jobs_by_name(conn)
            assert (jobs["taskclaim-ttl"], jobs[f"taskclaim-ttl:{other}"]) == (shared, other)
            assert f"taskclaim-ttl:{database}" not in jobs
        finally:
            conn.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE database = %s", [other])
            conn.execute(f"DROP DATABASE {other}")
    call_command("migrate", verbosity=0)
    assert cron_jobs() == [(_JOB_SCHEDULE, _job_command(), database)]


def test_a_job_under_the_shared_name_is_renamed_for_its_database(migrated_back: None) -> None:
    # An earlier release scheduled `taskclaim-ttl` from pg_cron's database
    # for this one: migrating again leaves one job, under the new name.
    cron_database = fetch("SELECT current_setting('cron.database_name', true)")[0][0]
    database = connection.settings_dict["NAME"]
    if cron_database in (None, database):
        pytest.skip("needs pg_cron running in another database of this server")
    call_command("migrate", "astral_taskclaim", "zero", verbosity=0)
    with _cron_connection() as conn:
        if "taskclaim-ttl" in _jobs_by_name(conn):
            pytest.skip("`taskclaim-ttl` serves another database of this server")
        conn.execute(
            "SELECT cron.schedule_in_database('taskclaim-ttl', '15 * * * *', 'SELECT 1', %s)",
            [database],
        )
        call_command("migrate", "astral_taskclaim", verbosity=0)
        assert {name: db for name, db in _jobs_by_name(conn).items() if db == database} == {
            f"taskclaim-ttl:{database}": database
        }


def _recorded_hashes() -> dict[str, str]:
    lines = (MIGRATION_SQL / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


@pytest.mark.django_db(transaction=False)
def test_released_migration_sql_never_changes() -> None:
    # A released migration's SQL is history: a change is a new migration.
    recorded = _recorded_hashes()
    assert sorted(path.name for path in MIGRATION_SQL.glob("*.sql")) == sorted(recorded)
    changed = [
        name
        for name, digest in recorded.items()
        if hashlib.sha256((MIGRATION_SQL / name).read_bytes()).hexdigest() != digest
    ]
    assert changed == []


@pytest.mark.django_db(transaction=False)
def test_each_migration_sql_file_is_run_by_its_migration_and_stands_alone() -> None:
    migrations = {
        path.stem: path.read_text(encoding="utf-8") for path in PACKAGE.glob("migrations/0*.py")
    }
    for path in MIGRATION_SQL.glob("*.sql"):
        number = path.name[:4]
        [source] = [text for name, text in migrations.items() if name.startswith(number)]
        assert f'"{path.name}"' in source
        # No include or placeholder: the text is what runs, whatever changes around it.
        assert "-- include:" not in path.read_text(encoding="utf-8")
