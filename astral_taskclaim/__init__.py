"""Run Django background work at most once per key per window.

Claims live in PostgreSQL (``taskclaim.claim``); queues carry claimed tasks
to workers that retry with backoff while holding the claim.
"""

from __future__ import annotations

__version__ = "0.1.0"
