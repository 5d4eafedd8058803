"""Run Django background work at most once per key per window.

Claims live in PostgreSQL (``taskclaim.claim``); queues carry claimed tasks
to workers that retry with backoff while holding the claim.

The public functions are importable from here; they are loaded on first use,
so importing the package never imports Django models or reads settings.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from astral_taskclaim.claims.async_api import (
        aclaim_task,
        aenqueue_claimed,
        ahold_task,
        arelease_task,
    )
    from astral_taskclaim.claims.bulk import claim_tasks, enqueue_claimed_many
    from astral_taskclaim.claims.claim import claim_task, enqueue_claimed, hold_task, release_task
    from astral_taskclaim.claims.trailing import Enqueued
    from astral_taskclaim.consumer.consume import consume_claimed
    from astral_taskclaim.consumer.retry import retry_delay_seconds
    from astral_taskclaim.core.validation import Debounce

# Public name → the module defining it.
_EXPORTS = {
    "Debounce": "core.validation",
    "Enqueued": "claims.trailing",
    "aclaim_task": "claims.async_api",
    "aenqueue_claimed": "claims.async_api",
    "ahold_task": "claims.async_api",
    "arelease_task": "claims.async_api",
    "claim_task": "claims.claim",
    "claim_tasks": "claims.bulk",
    "enqueue_claimed_many": "claims.bulk",
    "hold_task": "claims.claim",
    "release_task": "claims.claim",
    "enqueue_claimed": "claims.claim",
    "consume_claimed": "consumer.consume",
    "retry_delay_seconds": "consumer.retry",
}

__all__ = [
    "Debounce",
    "Enqueued",
    "__version__",
    "aclaim_task",
    "aenqueue_claimed",
    "ahold_task",
    "arelease_task",
    "claim_task",
    "claim_tasks",
    "consume_claimed",
    "enqueue_claimed",
    "enqueue_claimed_many",
    "hold_task",
    "release_task",
    "retry_delay_seconds",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
