"""The PostgreSQL queue's wake-up: a ``LISTEN`` connection per queue.

Senders ``NOTIFY taskclaim.<queue>``; a waiting ``receive()`` listens on its
own connection, so it holds no transaction open. When ``LISTEN`` fails the
queue polls (logged once per connection) and listens again next time.
Behind a pooler (:mod:`astral_taskclaim.db.connections`) a ``LISTEN`` would
hear nothing, so the queue only polls, saying so once.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.db import connections
from psycopg import sql

from astral_taskclaim.core.logtext import printable
from astral_taskclaim.db.connections import known_pooler, pooled, separate_connection
from astral_taskclaim.db.statements import may_prepare

logger = logging.getLogger(__name__)


class Listener:
    """``LISTEN`` on ``channel`` over a connection of Django database
    ``database``, opened by the first :meth:`start`. ``alias`` and
    ``poll_interval`` only word the warning when listening fails."""

    def __init__(self, database: str, channel: str, *, alias: str, poll_interval: float) -> None:
        self.database = database
        self.channel = channel
        self.alias = alias
        self.poll_interval = poll_interval
        self._connection: psycopg.Connection[Any] | None = None
        self._pooled = False  # seen behind a pooler: poll, for good

    def __repr__(self) -> str:
        return f"<Listener {self.channel!r} pid={self.backend_pid}>"

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection, if one is open."""
        connection = self._connection
        if connection is None or connection.closed:
            return None
        return connection.info.backend_pid

    def start(self) -> bool:
        """Listens (again, if the connection broke); ``False`` when it
        cannot, so the caller polls."""
        if self._connection is not None and not self._connection.closed:
            return True
        self._connection = None
        if self._pooled:
            return False
        if known_pooler(self.database) or not may_prepare(connections[self.database]):
            return self._behind_pooler()
        try:
            connection = separate_connection(self.database)
            if pooled(self.database, connection):
                connection.close()
                return self._behind_pooler()
            connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except psycopg.Error as error:
            self._failed(error)
            return False
        self._connection = connection
        return True

    def _behind_pooler(self) -> bool:
        self._pooled = True
        logger.info(
            "%s: the database connection goes through a pooler, which LISTEN cannot pass; "
            "polling every %s s",
            *(printable(self.alias), self.poll_interval),
            extra={"event": "queue.listen_pooled", "queue": self.alias},
        )
        return False

    def wait(self, seconds: float) -> bool:
        """Waits up to ``seconds`` for a NOTIFY; ``False`` if the listening
        connection broke (closed here) or was closed (the caller polls instead)."""
        connection = self._connection
        if connection is None:
            # Closed by another thread since start(): a --concurrency lane
            # reconnecting after a failed settlement closes the queue's
            # connections while the main thread's receive waits.
            return False
        try:
            for _ in connection.notifies(timeout=seconds, stop_after=1):
                pass
        except psycopg.Error as error:
            self._failed(error)
            self.close()
            return False
        return True

    def close(self) -> None:
        """Closes the listening connection, if open."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except psycopg.Error:
                logger.debug("closing the LISTEN connection failed", exc_info=True)

    def _failed(self, error: psycopg.Error) -> None:
        logger.warning(
            "%s: cannot LISTEN (%s); polling every %s s",
            *(printable(self.alias), type(error).__name__, self.poll_interval),
            extra={"event": "queue.listen_failed", "queue": self.alias},
        )
