"""A record of every write to ``taskclaim.claim`` (a trigger, for the
exclusivity test) and its replay: does a token ever take a key another
token still holds?"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

AUDIT = """
CREATE TABLE reliability_claim_audit (
  id bigserial PRIMARY KEY,
  op text NOT NULL,
  key text NOT NULL,
  token uuid NOT NULL,
  expires_at timestamptz NOT NULL,
  started timestamptz NOT NULL,
  application text NOT NULL
);
CREATE FUNCTION reliability_claim_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  row taskclaim.claim;
BEGIN
  row := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  INSERT INTO reliability_claim_audit (op, key, token, expires_at, started, application)
  VALUES (TG_OP, row.key, row.token, row.expires_at, statement_timestamp(),
          current_setting('application_name'));
  RETURN NULL;
END;
$$;
CREATE TRIGGER reliability_claim_audit
AFTER INSERT OR UPDATE OR DELETE ON taskclaim.claim
FOR EACH ROW EXECUTE FUNCTION reliability_claim_audit();
"""
DROP_AUDIT = """
DROP TRIGGER IF EXISTS reliability_claim_audit ON taskclaim.claim;
DROP FUNCTION IF EXISTS reliability_claim_audit();
DROP TABLE IF EXISTS reliability_claim_audit;
"""


@dataclass(frozen=True)
class Write:
    """One row of the audit: a write to the claim table."""

    id: int
    op: str
    key: str
    token: str
    expires_at: datetime
    started: datetime
    application: str


def writes(*, after: int = 0) -> list[Write]:
    """The writes recorded after row ``after``, in order."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT id, op, key, token::text, expires_at, started, application
               FROM reliability_claim_audit WHERE id > %s ORDER BY id""",
            [after],
        )
        return [Write(*row) for row in cursor.fetchall()]


def overlaps(history: list[Write], *, shortest: float = 0.0) -> list[str]:
    """Replays the writes key by key: a token may take a key only when no
    one holds it or the holder's claim ended before the taking statement
    began; only the holder may delete; no claim is written for less than
    ``shortest`` seconds from its statement (a window timed from an earlier
    moment, such as the transaction's start, would end too soon). Every
    breach, described."""
    holder: dict[str, tuple[str, datetime] | None] = {}
    breaches = []
    for write in history:
        current = holder.get(write.key)
        if write.op != "DELETE" and write.expires_at - write.started < timedelta(seconds=shortest):
            breaches.append(f"{write}: written for less than {shortest} s from its statement")
        if write.op == "DELETE":
            if current is None or current[0] != write.token:
                breaches.append(f"{write}: deleted a claim it did not hold ({current})")
            holder[write.key] = None
            continue
        if write.op == "INSERT" and current is not None:
            breaches.append(f"{write}: inserted over a live row ({current})")
        if current is not None and current[0] != write.token and not current[1] < write.started:
            breaches.append(f"{write}: took the key while {current} still held it")
        holder[write.key] = (write.token, write.expires_at)
    return breaches


def claimed_windows(after: int) -> dict[str, int]:
    """Key → fresh claims (distinct tokens) written after audit row ``after``."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT key, count(DISTINCT token) FROM reliability_claim_audit
               WHERE id > %s AND op <> 'DELETE' GROUP BY key""",
            [after],
        )
        return dict(cursor.fetchall())
