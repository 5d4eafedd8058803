"""The table row 12's ORM-writing tasks insert into (12.3's two write
types, and every task of 12.4).

Unmanaged: the app has no migrations (row 12's driver creates the table in
each system's database, :data:`CREATE`), so ``migrate`` leaves it alone.
"""

from __future__ import annotations

from django.db import models

__all__ = ["CREATE", "Write"]

CREATE = """CREATE TABLE IF NOT EXISTS bench_write (
  id bigserial PRIMARY KEY, key text NOT NULL, kind integer NOT NULL,
  at timestamptz NOT NULL DEFAULT now())"""


class Write(models.Model):
    """One row per ORM-writing task run (``kind``: the task type)."""

    key = models.TextField()
    kind = models.IntegerField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        managed = False
        db_table = "bench_write"

    def __str__(self) -> str:
        return f"{self.key} ({self.kind})"
