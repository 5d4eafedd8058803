"""Every benchmark row, run tiny, so ``make test`` keeps the bench code
working. These assert the shape of the results, never a timing."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import socket

import pytest
from django.db import connection
from django.test import override_settings

from benchmarks import (
    bulk,
    claim_floor,
    common,
    end_to_end,
    growth,
    history_row,
    hot_keys,
    io_bound,
    memory,
    public_paths,
    redis_server,
    report,
    round_trips,
    systems,
)
from benchmarks.benchapp.work import IO_SECONDS

POSTGRES = "astral_taskclaim.queues.postgres.PostgresQueue"
QUEUES = {"bench": {"BACKEND": POSTGRES}, "latency": {"BACKEND": POSTGRES}}

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("bench_queues"),
]


@pytest.fixture
def bench_queues():
    with override_settings(TASKCLAIM_QUEUES=QUEUES):
        yield


@pytest.fixture
def ctx() -> common.Context:
    connection.ensure_connection()
    url = common.url_from_settings(connection.settings_dict)
    return common.Context(url, url, runs=1, scale=1.0)


def assert_rows(rows: list[report.Row], numbers: list[str]) -> None:
    assert [row.number for row in rows] == numbers
    for row in rows:
        assert row.holds in (True, False, None)
        assert row.measured
        assert row.target
        for figure in row.figures.values():
            assert figure.samples, row.title
            assert all(math.isfinite(s) and s >= 0 for s in figure.samples)
        json.dumps(row.as_dict())  # every row serialises


def test_claim_floor(ctx: common.Context) -> None:
    rows = claim_floor.run(ctx, claims=20)
    assert_rows(rows, ["1.1", "1.2", "1.3"])
    assert set(rows[0].figures) == {claim_floor.OURS, claim_floor.FLOOR}


def test_public_paths(ctx: common.Context) -> None:
    options = dict(connection.settings_dict.get("OPTIONS") or {})
    rows = public_paths.run(ctx, claims=20)
    assert_rows(rows, ["13.1", "13.2", "13.3"])
    assert set(rows[0].figures) == {
        public_paths.CONNECTOR,
        public_paths.PUBLIC,
        public_paths.DEFAULT,
    }
    assert connection.settings_dict["OPTIONS"] == options  # put back as it was


def test_hot_keys_claims_every_expired_key_once(ctx: common.Context) -> None:
    rows = hot_keys.run(ctx, triggers=60, producers=(1, 2))
    assert_rows(rows, ["2.1", "2.2"])
    # Exactness is measured, not timed: both sides claimed each expired key once.
    assert all(row.details["missed"] == 0 and row.details["doubled"] == 0 for row in rows)


def test_bulk(ctx: common.Context) -> None:
    rows = bulk.run(ctx, keys=200, batch=100)
    assert_rows(rows, ["3.1", "3.2"])


def test_growth(ctx: common.Context) -> None:
    rows = growth.run(ctx, small=10, big=200, claims=20, expired=300)
    assert_rows(rows, ["6.1", "6.2"])
    assert rows[1].details["claims"] > 0


def test_round_trips(ctx: common.Context) -> None:
    rows = round_trips.run(ctx, messages=100)
    assert_rows(rows, ["8"])
    if rows[0].figures:  # pg_stat_statements loaded on this server
        enqueue = rows[0].figures["per enqueue_claimed"].median
        assert enqueue >= 1


def test_end_to_end_driver_runs_every_task_and_times_latency(ctx: common.Context) -> None:
    connection.close()
    result = end_to_end.drive(
        ctx.database_url, end_to_end.OURS, tasks=20, dedup=True, tag="smoke", rate=200.0
    )
    assert result["tasks"] == 20
    assert result["unmatched"] == 0
    assert len(result["latencies_ms"]) == 20


@pytest.mark.parametrize(("mode", "batch"), [("enqueue", 10), ("drain", 1), ("e2e", 10)])
def test_end_to_end_driver_modes_run_every_task(ctx: common.Context, mode: str, batch: int) -> None:
    connection.close()
    result = end_to_end.drive(
        ctx.database_url, end_to_end.OURS, tasks=30, dedup=True, tag=mode, mode=mode, batch=batch
    )
    assert result["tasks"] == 30
    assert result["mode"] == mode
    assert float(result["seconds"]) > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM taskclaim.message")
        left = cursor.fetchone()[0]
    assert left == 0  # enqueue-only runs clear their queue; the others drain it


def test_the_django_tasks_enqueue_floor_sends_the_backends_statement(ctx: common.Context) -> None:
    connection.close()
    url = common.recreate_database(ctx.server_url, systems.DATABASES[systems.FLOOR])
    try:
        end_to_end._call(url, [systems.FLOOR, "--setup"])
        result = end_to_end.drive(
            url, systems.FLOOR, tasks=20, dedup=False, tag="floor", mode="enqueue"
        )
        assert (result["tasks"], result["mode"]) == (20, "enqueue")
        assert float(result["seconds"]) > 0
    finally:
        with common.connect(common.with_database(ctx.server_url, "postgres")) as conn:
            conn.execute(f"DROP DATABASE {systems.DATABASES[systems.FLOOR]} WITH (FORCE)")


def test_history_row_drains_with_the_history_on_and_off(ctx: common.Context) -> None:
    connection.close()
    assert_rows(history_row.run(ctx, tasks=30), ["11"])


def test_io_bound_row_runs_ours_on_every_case(ctx: common.Context) -> None:
    connection.close()
    ours_only = tuple(dataclasses.replace(case, sides=case.sides[:1]) for case in io_bound.CASES)
    rows = io_bound.run(ctx, tasks=20, cases=ours_only)
    assert_rows(rows, ["12.1", "12.2", "12.3", "12.4"])
    assert all(row.holds is None for row in rows)  # no peer, no verdict
    assert all(row.details["tasks"] == 20 for row in rows)
    assert [row.details["processes"] for row in rows] == [1, 1, 1, 2]
    # 12.1 times its floor, bare threads waiting 20 ms, beside ours; the rest none.
    floor = rows[0].details["bare_threads_per_s"]
    assert 0 < floor["median"] <= 10 / IO_SECONDS
    assert "x bare threads'" in rows[0].measured
    assert [row.details["bare_threads_per_s"] for row in rows[1:]] == [None, None, None]


PEERS_HERE = (
    all(importlib.util.find_spec(package) for package in io_bound.PACKAGES.values())
    and redis_server.available()
)


@pytest.mark.skipif(
    not PEERS_HERE,
    reason="needs the bench extra (Celery, procrastinate, django-tasks-db) and redis-server",
)
def test_io_bound_row_runs_every_peer_in_the_same_run(ctx: common.Context) -> None:
    connection.close()
    rows = io_bound.run(ctx, tasks=20)
    assert_rows(rows, ["12.1", "12.2", "12.3", "12.4"])
    for row, case in zip(rows, io_bound.CASES, strict=True):
        assert set(row.figures) == {label for _, label in case.sides}
        assert row.holds in (True, False)
        assert set(row.details["ratio_to_each_peer"]) == {label for _, label in case.sides[1:]}
    # 12.4: every side on two worker processes, at its default concurrency.
    assert rows[3].details["processes"] == 2
    assert rows[3].details["concurrency"] is None
    assert set(rows[3].details["cpu_ms_per_task"]) == {
        label for _, label in io_bound.CASES[3].sides
    }


@pytest.mark.skipif(not redis_server.available(), reason="redis-server is not installed")
def test_redis_server_answers_while_running_and_is_gone_after() -> None:
    with redis_server.running() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"PING\r\n")
            assert conn.recv(16).startswith(b"+PONG")
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_memory(ctx: common.Context) -> None:
    rows = memory.run(ctx, messages=300)
    assert_rows(rows, ["7"])


def test_report_writes_table_json_and_chart(tmp_path) -> None:
    figure = common.Figure("claims/s", [1.0, 2.0, 3.0])
    rows = [
        report.Row("1", "a", "2.0x", "≥ 1x", True, {"claim_task": figure}, value=2.0),
        report.skipped("2", "b", "≥ 1x", "not here"),
    ]
    text = report.table(rows)
    assert "yes" in text
    assert "n/a" in text
    assert "not here" in text
    report.write_json(tmp_path / "latest.json", machine={"cores": 2}, rows=rows, meta={})
    data = json.loads((tmp_path / "latest.json").read_text())
    assert data["rows"][0]["figures"]["claim_task"]["median"] == 2.0
    if report.write_chart(tmp_path / "latest.png", rows, title="t"):
        assert (tmp_path / "latest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
