"""The claims admin on a table of 1,000,000 claims: how long the changelist
and the key search take through the Django test client, and the ``EXPLAIN``
of the search query the page runs (it must use ``claim_pkey``).

Run on its own (it creates and drops its own database on the configured
server, so nothing else is touched)::

    DJANGO_SETTINGS_MODULE=tests.settings python -m benchmarks.admin_search
    DJANGO_SETTINGS_MODULE=tests.settings python -m benchmarks.admin_search --claims 100000

:func:`measure` is the part to call from another runner, inside a migrated
database.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

DATABASE_NAME = "taskclaim_bench_admin_search"
CHANGELIST = "/admin/astral_taskclaim/claim/"

#: (name, query string) of each timed page.
PAGES: list[tuple[str, dict[str, str]]] = [
    ("changelist", {}),
    ("changelist, active only", {"state": "active"}),
    ("search, exact key", {"q": "project:500000"}),
    ("search, prefix of 11 keys", {"q": "project:12345"}),
    ("search, prefix of 111,111 keys", {"q": "project:1"}),
    ("search, no match", {"q": "nothing:"}),
]

FILL_SQL = """
INSERT INTO taskclaim.claim (key, expires_at, token)
SELECT 'project:' || n,
       CURRENT_TIMESTAMP + make_interval(secs => (n %% 7200) - 3600),
       gen_random_uuid()
FROM generate_series(1, %s) AS n
"""


@dataclass
class Timing:
    """One page's response times in milliseconds."""

    name: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


@dataclass
class Result:
    """What :func:`measure` found."""

    claims: int
    fill_seconds: float
    timings: list[Timing]
    search_plan: str

    @property
    def search_uses_primary_key(self) -> bool:
        return "claim_pkey" in self.search_plan and "Seq Scan" not in self.search_plan


def fill(claims: int) -> float:
    """Replaces the claim table's rows with ``claims`` claims (one
    ``INSERT ... SELECT generate_series``), half expired; seconds taken."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE taskclaim.claim")
        cursor.execute(FILL_SQL, [claims])
        cursor.execute("VACUUM ANALYZE taskclaim.claim")
    return time.perf_counter() - started


def search_plan(client: object, term: str) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of the page query the changelist runs
    when searching ``term``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        client.get(CHANGELIST, {"q": term})  # type: ignore[attr-defined]
    # The page's own SELECT (the bounded count is the other key-range query).
    statements = [q["sql"] for q in queries if '"key" >= ' in q["sql"] and "ORDER BY" in q["sql"]]
    if not statements:
        raise RuntimeError("the changelist ran no key-range query")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statements[-1])
        return "\n".join(row[0] for row in cursor.fetchall())


def measure(*, claims: int = 1_000_000, repeats: int = 5) -> Result:
    """Fills ``claims`` claims, then times each of :data:`PAGES` ``repeats``
    times (after one warm-up request) as a logged-in superuser."""
    from django.contrib.auth.models import User
    from django.test import Client

    if claims < 1 or repeats < 1:
        raise ValueError(f"claims and repeats must be at least 1, got {claims}, {repeats}")
    fill_seconds = fill(claims)
    user, _ = User.objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    timings = []
    for name, params in PAGES:
        timing = Timing(name)
        response = client.get(CHANGELIST, params)
        if response.status_code != 200:
            raise RuntimeError(f"{name}: HTTP {response.status_code}")
        for _ in range(repeats):
            started = time.perf_counter()
            client.get(CHANGELIST, params)
            timing.samples.append((time.perf_counter() - started) * 1000)
        timings.append(timing)
    return Result(claims, fill_seconds, timings, search_plan(client, "project:12345"))


def report(result: Result) -> str:
    """``result`` as a plain-text table and the search plan."""
    lines = [
        f"claims admin on {result.claims:,} claims (filled in {result.fill_seconds:.1f} s)",
        "",
        f"{'page':<34}{'median ms':>12}{'min ms':>10}{'max ms':>10}",
    ]
    for timing in result.timings:
        lines.append(
            f"{timing.name:<34}{timing.median:>12.1f}"
            f"{min(timing.samples):>10.1f}{max(timing.samples):>10.1f}"
        )
    verdict = "uses claim_pkey" if result.search_uses_primary_key else "DOES NOT use claim_pkey"
    lines += ["", f"key search plan ({verdict}):", result.search_plan]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--claims", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--keepdb", action="store_true", help="keep the benchmark database for another run"
    )
    args = parser.parse_args(argv)

    import django
    from django.conf import settings
    from django.db import connection

    django.setup()
    # A database of its own, created and migrated like a test database.
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = DATABASE_NAME
    original = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=args.keepdb)
    try:
        result = measure(claims=args.claims, repeats=args.repeats)
    finally:
        connection.creation.destroy_test_db(original, verbosity=0, keepdb=args.keepdb)
    print(report(result))
    return 0 if result.search_uses_primary_key else 1


if __name__ == "__main__":
    raise SystemExit(main())
