"""The SQS queue's ``OPTIONS``: their parsers and defaults, and the checks
across them (``SQSQueue.option_spec``).

``queue_url`` (required); ``region_name``, ``endpoint_url``,
``aws_access_key_id`` with ``aws_secret_access_key`` (and
``aws_session_token``), each left to boto3 when not given;
``wait_time_seconds``, ``visibility_timeout`` and ``outbox``.
"""

from __future__ import annotations

from typing import Any

from astral_taskclaim.queues.options import (
    Option,
    Problem,
    flag,
    http_url,
    integer,
    optional,
    secret,
    text,
)

#: Longest long poll of one ``ReceiveMessage`` call (SQS's maximum).
_MAX_WAIT_TIME_SECONDS = 20
_DEFAULT_WAIT_TIME_SECONDS = 10

OPTIONS = {
    "queue_url": Option(http_url),
    "region_name": Option(optional(text), default=None),
    "endpoint_url": Option(optional(http_url), default=None),
    "aws_access_key_id": Option(optional(secret), default=None, secret=True),
    "aws_secret_access_key": Option(optional(secret), default=None, secret=True),
    "aws_session_token": Option(optional(secret), default=None, secret=True),
    "wait_time_seconds": Option(
        integer(0, _MAX_WAIT_TIME_SECONDS), default=_DEFAULT_WAIT_TIME_SECONDS
    ),
    "visibility_timeout": Option(optional(integer(0, 43_200)), default=None),
    "outbox": Option(flag, default=False),
}
#: The options holding credentials, handed to boto3 when given.
SECRETS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")


def option_problems(config: dict[str, Any]) -> list[Problem]:
    """E013 for half a key pair or a FIFO queue."""
    problems: list[Problem] = []
    if (config["aws_access_key_id"] is None) != (config["aws_secret_access_key"] is None):
        pair = "needs both aws_access_key_id and aws_secret_access_key, or neither"
        problems.append(Problem("E013", pair))
    if isinstance(config["queue_url"], str) and config["queue_url"].endswith(".fifo"):
        fifo = "is a FIFO queue, which this backend does not support: use a standard "
        fifo += "queue (the claim already keeps a key from being enqueued twice in its window)"
        problems.append(Problem("E013", fifo, "queue_url"))
    return problems
