"""Internal: the messages a process's workers may still receive together
(``consume_claimed --max-messages N``: N over every queue of the process)."""

from __future__ import annotations

import threading

from astral_taskclaim.core.validation import validate_count
from astral_taskclaim.queues import ReceivedMessage


class MessageBudget:
    """How many messages the workers sharing it may still receive, together
    (``consume_claimed --max-messages``: the sum over a process's queues)."""

    def __init__(self, total: int) -> None:
        self.total = validate_count("max_messages", total)
        self._left = self.total
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        """How many are still to receive."""
        return self._left

    def take(self, count: int) -> int:
        """Counts up to ``count`` received; how many of them were left to receive."""
        with self._lock:
            taken = min(count, self._left)
            self._left -= taken
            return taken

    def trim(self, messages: list[ReceivedMessage]) -> list[ReceivedMessage]:
        """Counts the received ``messages`` in the budget; removes from them
        and returns, handed back unrun, those past what it had left."""
        kept = self.take(len(messages))
        surplus = messages[kept:]
        del messages[kept:]
        for message in surplus:
            message.hand_back()
        return surplus
