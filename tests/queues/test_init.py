"""The queue registry: ``queues[alias]``, built on Django's connection handler."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils.connection import BaseConnectionHandler

from astral_taskclaim.queues import queues
from astral_taskclaim.queues.memory import MemoryQueue
from astral_taskclaim.queues.postgres import PostgresQueue


class ClosingQueue(MemoryQueue):
    """A memory queue that notes every instance closed."""

    closed: ClassVar[list[ClosingQueue]] = []

    def close(self) -> None:
        type(self).closed.append(self)
        super().close()


CLOSING = {"BACKEND": f"{__name__}.ClosingQueue"}


@pytest.fixture(autouse=True)
def forget_closed() -> None:
    ClosingQueue.closed.clear()


def in_another_thread(alias: str) -> Any:
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(queues[alias]))
    thread.start()
    thread.join()
    return found[0]


def test_the_registry_is_djangos_connection_handler() -> None:
    assert isinstance(queues, BaseConnectionHandler)


def test_without_the_setting_there_is_one_postgresql_queue() -> None:
    with override_settings():
        from django.conf import settings

        del settings.TASKCLAIM_QUEUES
        assert list(queues) == ["default"]
        assert isinstance(queues["default"], PostgresQueue)


@override_settings(TASKCLAIM_QUEUES={"jobs": CLOSING, "mail": CLOSING})
def test_one_instance_per_alias_and_thread() -> None:
    jobs = queues["jobs"]
    assert isinstance(jobs, ClosingQueue)
    assert jobs.alias == "jobs"
    assert queues["jobs"] is jobs
    assert queues["mail"] is not jobs
    other = in_another_thread("jobs")
    assert isinstance(other, ClosingQueue)
    assert other is not jobs
    assert [queue.alias for queue in queues.all()] == ["jobs", "mail"]


@override_settings(TASKCLAIM_QUEUES={"jobs": CLOSING})
def test_an_unknown_alias_names_the_known_ones() -> None:
    with pytest.raises(
        ImproperlyConfigured, match=r"unknown queue 'nope'; TASKCLAIM_QUEUES has: jobs"
    ):
        queues["nope"]


@override_settings(TASKCLAIM_QUEUES={"jobs": {"BACKEND": "no.such.Backend"}})
def test_a_backend_that_cannot_load_names_it() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"cannot import BACKEND 'no\.such\.Backend'"):
        queues["jobs"]


def test_changing_the_setting_closes_and_replaces_the_instances() -> None:
    with override_settings(TASKCLAIM_QUEUES={"jobs": CLOSING}):
        before = queues["jobs"]
        with override_settings(TASKCLAIM_QUEUES={"mail": CLOSING}):
            assert ClosingQueue.closed == [before]
            assert list(queues) == ["mail"]
            with pytest.raises(ImproperlyConfigured, match="unknown queue 'jobs'"):
                queues["jobs"]
            during = queues["mail"]
        assert ClosingQueue.closed == [before, during]
        assert queues["jobs"] is not before


def test_an_invalid_setting_is_reported_on_use_not_when_set() -> None:
    with override_settings(TASKCLAIM_QUEUES={"jobs": CLOSING}):
        queues["jobs"]
        with (
            override_settings(TASKCLAIM_QUEUES=["not", "a", "dict"]),
            pytest.raises(ImproperlyConfigured, match="TASKCLAIM_QUEUES must be a dict"),
        ):
            queues["jobs"]
        assert isinstance(queues["jobs"], ClosingQueue)
