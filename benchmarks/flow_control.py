"""Row 15, flow control: hot keys with trailing runs on (row 2's shape).

Every key is claimed for an hour and already has its pending follow-up, so
each trigger is the common case of a trailing key under load: a merge into
the follow-up. ``enqueue_claimed(..., trailing="first")`` writes nothing on
a merge (one read-only statement), and is compared with the TypeScript
package's claim upsert, as row 2 is (target ≥ 3x). ``trailing="latest"``
writes the trigger's task into the follow-up, and is compared with its
floor: a raw one-row ``UPDATE`` of the follow-up by raw psycopg, prepared
(target ≥ 0.8x). Both with 1 and with 4 producer threads, and each mode
both one ``enqueue_claimed`` per trigger and grouped, as row 2's
pipelined variant groups its triggers: ``enqueue_claimed_many`` of 50
triggers a call, one statement; each row shows the best of the two.

Exactness: every trigger must answer "merged", with the follow-up's token.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .common import Context, Figure
from .hot_keys import PIPELINE, TS_UPSERT, _race
from .report import Row

FIRST = 'trailing="first"'
LATEST = 'trailing="latest"'
GROUPED = ", enqueue_claimed_many 50"
TS = "TypeScript upsert, raw prepared"
FLOOR = "one-row UPDATE, raw prepared"
TARGETS = {FIRST: (TS, 3.0), LATEST: (FLOOR, 0.8)}
HOT_KEYS = 16
QUEUE = "bench-flow"
FLOOR_UPDATE = """
UPDATE taskclaim.follow_up SET task = %(task)s, updated_at = statement_timestamp()
WHERE key = %(key)s AND taken_at IS NULL
"""


def run(ctx: Context, *, triggers: int = 6000, producers: tuple[int, ...] = (1, 4)) -> list[Row]:
    rows: list[Row] = []
    wrong = 0
    names = [FIRST, LATEST, FIRST + GROUPED, LATEST + GROUPED, TS, FLOOR]
    for threads in producers:
        per_thread = max(50, ctx.size(triggers, minimum=40) // threads)
        figures = {name: Figure("triggers/s") for name in names}
        for index in range(ctx.runs):
            shift = index % len(names)
            for variant in names[shift:] + names[:shift]:
                keys = _prepare(ctx, f"flow:{threads}:{index}:{variant}")
                rng = random.Random(ctx.seed + index)
                plans = [
                    [rng.choice(list(keys)) for _ in range(per_thread)] for _ in range(threads)
                ]
                seconds, results = _race([_work(ctx, variant, plan) for plan in plans])
                figures[variant].add(threads * per_thread / seconds)
                if variant not in (TS, FLOOR):
                    for plan, answers in zip(plans, results, strict=True):
                        wrong += sum(
                            getattr(answer, "outcome", None) != "merged" or answer != keys[key]
                            for key, answer in zip(plan, answers, strict=True)
                        )
        for variant, (baseline, target) in TARGETS.items():
            ratios = {
                name: figures[name].median / figures[baseline].median
                for name in (variant + GROUPED, variant)
            }
            best = max(ratios.values())
            shown = f"grouped {ratios[variant + GROUPED]:.2f}x, one by one {ratios[variant]:.2f}x"
            rows.append(
                Row(
                    f"15.{len(rows) + 1}",
                    f"hot keys, {variant}, {threads} producer{'s' if threads > 1 else ''}",
                    f"{best:.2f}x {baseline} ({shown})",
                    f"≥ {target:g}x, every trigger merged",
                    best >= target and wrong == 0,
                    {name: figures[name] for name in (*ratios, baseline)},
                    value=best,
                    details={
                        "triggers_per_thread": per_thread,
                        "batch": PIPELINE,
                        "ratios": ratios,
                        "wrong_answers": wrong,
                    },
                )
            )
    with ctx.connect() as raw:
        raw.execute("DELETE FROM taskclaim.claim WHERE key LIKE 'flow:%'")
        raw.execute("DELETE FROM taskclaim.follow_up WHERE key LIKE 'flow:%'")
        raw.execute("DELETE FROM taskclaim.message WHERE queue = %s", (QUEUE,))
    return rows


def _prepare(ctx: Context, prefix: str) -> dict[str, str]:
    """Hot keys claimed for an hour, each with its pending follow-up: key → its token."""
    keys = [f"{prefix}:{i}" for i in range(HOT_KEYS)]
    with ctx.connect() as raw:
        raw.execute(
            "INSERT INTO taskclaim.claim (key, expires_at, token) "
            "SELECT k, now() + interval '1 hour', gen_random_uuid() FROM unnest(%s::text[]) k",
            (keys,),
        )
        rows = raw.execute(
            "INSERT INTO taskclaim.follow_up (token, key, task, window_seconds, created_at, "
            "updated_at) SELECT gen_random_uuid(), k, '{}', 3600, now(), now() "
            "FROM unnest(%s::text[]) k RETURNING key, token::text",
            (keys,),
        ).fetchall()
    return dict(rows)


def _work(ctx: Context, variant: str, plan: list[str]) -> Callable[[], list[Any]]:
    if variant not in (TS, FLOOR):
        from django.db import connection

        from astral_taskclaim import enqueue_claimed, enqueue_claimed_many
        from astral_taskclaim.queues.postgres import PostgresQueue

        queue = PostgresQueue("bench", options={"queue_name": QUEUE})
        mode = "first" if variant.startswith(FIRST) else "latest"

        def trailing() -> list[Any]:
            try:
                if not variant.endswith(GROUPED):
                    return [
                        enqueue_claimed(queue, key, {"n": n}, window_seconds=3600, trailing=mode)
                        for n, key in enumerate(plan)
                    ]
                out: list[Any] = []
                for start in range(0, len(plan), PIPELINE):  # row 2's pipeline depth
                    batch = plan[start : start + PIPELINE]
                    items = [(key, {"n": start + n}) for n, key in enumerate(batch)]
                    out += enqueue_claimed_many(queue, items, window_seconds=3600, trailing=mode)
                return out
            finally:
                connection.close()

        return trailing
    statement = TS_UPSERT if variant == TS else FLOOR_UPDATE

    def raw() -> list[Any]:
        with ctx.connect() as conn, conn.cursor() as cursor:
            for n, key in enumerate(plan):
                params = {"key": key, "seconds": 3600.0, "task": f'{{"n":{n}}}'}
                cursor.execute(statement, params, prepare=True)
        return []

    return raw
