"""``python -m benchmarks``: every row, a table, ``results/latest.{json,png}``.

Options: ``--runs N`` (interleaved runs per figure, default 5), ``--scale F``
(multiplies row counts; 1 is the published size), ``--only 1,2,4`` (rows),
``--out DIR``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import common, disk, report, server

#: (row number, module, title, target) in the order they run: row 5 uses
#: the maximum load row 4 measured.
ROWS: list[tuple[str, str, str, str]] = [
    ("1", "claim_floor", "claim floor", "≥ 0.90x raw"),
    ("2", "hot_keys", "hot keys", "≥ 3x TypeScript upsert"),
    ("3", "bulk", "bulk claims and enqueues", "≥ 50,000/s and ≥ 0.70x floor"),
    ("4", "end_to_end", "enqueue, drain, end to end vs peers", "≥ 1.2x-2x best peer"),
    ("5", "latency", "enqueue-to-start latency", "p50 ≤ 5 ms, p99 ≤ 50 ms"),
    ("6", "growth", "growth and cleanup", "≤ 1.2x; no wait > 50 ms"),
    ("7", "memory", "worker memory", "RSS growth ≤ 10%"),
    ("8", "round_trips", "round trips per message", "recorded"),
    ("9", "admin_row", "admin on 1,000,000 claims", "index scans"),
    ("10", "django_tasks_row", "Django Tasks backends", "≥ 0.8x floor; ≥ 5x django-tasks-db"),
    ("11", "history_row", "run history cost", "≥ 0.85x history off"),
    (
        "12",
        "io_bound",
        "tasks side by side (one process; 12.4 ORM writes, two) vs Celery, procrastinate, "
        "django-tasks-db",
        "≥ 0.95x of 500/s; ≥ 1x, 1.5x, 1.2x, 2x best peer",
    ),
    ("13", "public_paths", "Django's public paths vs the package's own", "recorded"),
    ("14", "tracing_row", "OpenTelemetry tracing on vs off, row 4.7", "recorded"),
    ("15", "flow_control", "hot keys with trailing runs", "≥ 3x TypeScript upsert; ≥ 0.8x floor"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs per figure")
    parser.add_argument("--scale", type=float, default=1.0, help="row-count multiplier")
    parser.add_argument("--only", default="", help="comma-separated row numbers")
    parser.add_argument("--out", type=Path, default=common.RESULTS, help="results directory")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not args.scale > 0:
        parser.error("--scale must be above 0")
    wanted = {part.strip() for part in args.only.split(",") if part.strip()}
    unknown = wanted - {number for number, *_ in ROWS}
    if unknown:
        parser.error(f"--only: unknown rows {sorted(unknown)}")

    started = time.time()
    server_url = server.start()
    database_url = common.recreate_database(server_url, common.DB_PREFIX)
    print(f"benchmarks: database {common.DB_PREFIX} on {_where(server_url)}", flush=True)
    common.setup_django(database_url)
    ctx = common.Context(server_url, database_url, runs=args.runs, scale=args.scale)
    machine = common.machine_info(database_url)
    machine.update(disk.flush_latency(common.DATA_DIR))
    machine["load_average_start"] = [round(x, 2) for x in os.getloadavg()]
    print(_machine_line(machine), flush=True)

    rows: list[report.Row] = []
    for number, module, title, target in ROWS:
        if wanted and number not in wanted:
            continue
        print(f"\n== {number}. {title}", flush=True)
        row_started = time.perf_counter()
        rows += _run_row(number, module, title, target, ctx)
        for row in rows:
            if row.number.split(".")[0] == number:
                print(
                    f"   {row.title}: {row.measured} (target {row.target}) "
                    f"{report.verdict(row.holds)}",
                    flush=True,
                )
        print(f"   [{time.perf_counter() - row_started:.0f} s]", flush=True)

    machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "runs": args.runs,
        "scale": args.scale,
        "seed": ctx.seed,
        "started": started,
        "seconds": round(time.time() - started, 1),
        "rows": sorted(wanted) or "all",
    }
    report.write_json(args.out / "latest.json", machine=machine, rows=rows, meta=meta)
    charted = report.write_chart(args.out / "latest.png", rows, title=_machine_line(machine))
    print("\n" + report.table(rows))
    print(
        f"\nwrote {args.out / 'latest.json'}"
        + (f" and {args.out / 'latest.png'}" if charted else "")
    )
    print(f"total {time.time() - started:.0f} s")
    return 0


def _run_row(
    number: str, module: str, title: str, target: str, ctx: common.Context
) -> list[report.Row]:
    try:
        imported = __import__(f"benchmarks.{module}", fromlist=["run"])
    except ImportError as error:
        return [report.skipped(number, title, target, f"cannot import: {error}")]
    runner: Callable[[common.Context], list[report.Row]] = imported.run
    try:
        return runner(ctx)
    except Exception as error:  # one broken row must not lose the others
        traceback.print_exc()
        return [report.skipped(number, title, target, f"failed: {type(error).__name__}: {error}")]


def _where(url: str) -> str:
    return "DATABASE_URL" if "DATABASE_URL" in os.environ else "embedded PostgreSQL"


def _machine_line(machine: dict[str, object]) -> str:
    return (
        f"{machine['cores']} cores, {machine.get('memory_gib', '?')} GiB, "
        f"PostgreSQL {machine['pg_server_version']} "
        f"(synchronous_commit={machine['pg_synchronous_commit']}), "
        f"Python {machine['python']}, Django {machine['django']}, "
        f"flush {machine.get('flush_us_pg_test_fsync') or machine.get('flush_us_python')} µs, "
        f"load {machine.get('load_average_start', ['?'])[0]}"
    )


if __name__ == "__main__":
    sys.exit(main())
