"""Two-stage shutdown: the first signal asks to stop, the second exits."""

from __future__ import annotations

import signal
import threading

from astral_taskclaim.shutdown import TwoStageStop


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
