"""procrastinate's no-op task (its Django integration imports this module)."""

from __future__ import annotations

from procrastinate.contrib.django import app


@app.task(name="bench_noop", queue="bench")
def noop(k: str) -> None:
    """Nothing: the cost measured is the queue's."""
