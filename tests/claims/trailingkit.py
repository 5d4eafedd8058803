"""The trailing-run tests' queue and what waits on it."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

QUEUE = "trailing"


def queued() -> list[tuple[dict[str, Any], float]]:
    """Bodies on the test queue and the seconds until each is visible."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT body, extract(epoch FROM visible_at - clock_timestamp())
               FROM taskclaim.message WHERE queue = %s ORDER BY id""",
            [QUEUE],
        )
        return [(json.loads(body), float(wait)) for body, wait in cursor.fetchall()]
