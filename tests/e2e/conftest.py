"""The remote queue servers, shared with ``tests/queues`` (one of each per
test process, whichever directory starts it first)."""

from __future__ import annotations

from tests.queues.conftest import cloudflare_options, cloudflare_server, moto_sqs

__all__ = ["cloudflare_options", "cloudflare_server", "moto_sqs"]
