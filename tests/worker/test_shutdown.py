"""Two-stage shutdown: the first signal asks to stop, the second exits."""

from __future__ import annotations

import logging
import signal
import threading

import pytest

from astral_taskclaim.worker.shutdown import TwoStageStop


def test_the_first_signal_requests_a_stop_and_the_second_exits_at_once() -> None:
    exits: list[int] = []
    stop = TwoStageStop("relay", "relaying q", exit=exits.append)
    assert not stop.requested
    stop.handle_signal(signal.SIGTERM)
    assert stop.requested
    assert exits == []
    stop.handle_signal(signal.SIGINT)
    assert exits == [128 + signal.SIGINT]


def test_a_request_ends_a_wait_early() -> None:
    stop = TwoStageStop("relay", "relaying q", exit=lambda status: None)
    threading.Timer(0, stop.request).start()
    assert stop.wait(60) is True
    assert stop.wait(0) is True


def test_handlers_are_installed_inside_the_block_only() -> None:
    stop = TwoStageStop("relay", "relaying q", exit=lambda status: None)
    before = signal.getsignal(signal.SIGTERM)
    with stop.signal_handlers():
        assert signal.getsignal(signal.SIGTERM) == stop.handle_signal
    assert signal.getsignal(signal.SIGTERM) == before


def test_the_log_says_what_finishes_and_names_the_queue(caplog: pytest.LogCaptureFixture) -> None:
    exits: list[int] = []
    stop = TwoStageStop("worker", "consuming q", work="the message", queue="q", exit=exits.append)
    with caplog.at_level(logging.INFO, logger="astral_taskclaim.worker.shutdown"):
        stop.handle_signal(signal.SIGTERM)
        stop.handle_signal(signal.SIGTERM)
    first, second = caplog.records
    assert first.getMessage() == (
        "SIGTERM: finishing the message, then stopping consuming q (again to exit at once)"
    )
    assert [(r.event, r.queue) for r in (first, second)] == [  # type: ignore[attr-defined]
        ("worker.stopping", "q"),
        ("worker.forced_exit", "q"),
    ]
    assert exits == [128 + signal.SIGTERM]
