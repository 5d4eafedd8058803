"""procrastinate's no-op task (its Django integration imports this module).

An ``async def`` task, as procrastinate recommends: its worker runs
coroutines on its event loop, where a sync task would go to a thread.
"""

from __future__ import annotations

from procrastinate.contrib.django import app


@app.task(name="bench_noop", queue="bench")
async def noop(k: str) -> None:
    """Nothing: the cost measured is the queue's."""
