"""A producer of the trailing-runs test, run as ``python -m
tests.reliability.trailer``: until told to stop, it saves a random
document (its version goes up by one) and triggers the document's key with
``enqueue_claimed(..., trailing="latest")`` in the same transaction, as an
app's save handler would; a save the database fails (a restart) is not
made, and the next one goes on.

Arguments as JSON in argv[1]: ``keys``, ``window``, ``seed``, ``queue``
(the PostgreSQL queue's options), ``ready`` (a path it creates once
connected), ``stop`` (a path whose existence means stop) and, optionally,
``debounce`` (``[seconds, max_wait_seconds]``: trigger with that
:class:`~astral_taskclaim.Debounce`, in bursts of saves of one key). Each
trigger's time is recorded in ``trailing_save`` in its transaction, after
the enqueue. Prints how many triggers it made.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path


def main() -> None:
    """The process entry point (see the module docstring)."""
    import django

    django.setup()
    from django.db import DatabaseError, connection, transaction

    from astral_taskclaim import Debounce
    from astral_taskclaim.claims.claim import enqueue_claimed
    from astral_taskclaim.queues.postgres import PostgresQueue

    arguments = json.loads(sys.argv[1])
    rng = random.Random(arguments["seed"])
    queue = PostgresQueue("reliability", options=arguments["queue"])
    stop = Path(arguments["stop"])
    connection.ensure_connection()
    Path(arguments["ready"]).touch()
    debounce = arguments.get("debounce")
    trailing = Debounce(*debounce) if debounce else "latest"
    triggers = burst = 0
    while not stop.exists():
        if burst == 0:  # debouncing: a burst of saves of one key, then quiet
            key, burst = rng.choice(arguments["keys"]), rng.randint(1, 4) if debounce else 1
        burst -= 1
        # A few runs last longer than the window.
        sleep_ms = 1500 if rng.random() < 0.03 else rng.randrange(0, 60)
        task = {"key": key, "sleep_ms": sleep_ms}
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE trailing_doc SET version = version + 1 WHERE key = %s", [key]
                )
                window = arguments["window"]
                enqueue_claimed(queue, key, task, window_seconds=window, trailing=trailing)
                cursor.execute("INSERT INTO trailing_save (key) VALUES (%s)", [key])
        except DatabaseError:
            connection.close()  # the server restarted: reconnect for the next save
            continue
        triggers += 1
        # Pacing the saves, not waiting for an event.
        time.sleep(rng.uniform(0, 0.1) if debounce else rng.uniform(0, 0.02))
    print(json.dumps({"triggers": triggers}))


if __name__ == "__main__":
    main()
