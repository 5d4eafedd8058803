"""Fixtures of the PostgreSQL queue tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .pgqueue import MakeQueue, queue_factory


@pytest.fixture
def make_queue() -> Iterator[MakeQueue]:
    """Makes PostgresQueues on fresh queue names; deletes their rows after the test."""
    with queue_factory() as make:
        yield make
