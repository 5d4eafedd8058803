"""The app's own upkeep as built-in schedules, where pg_cron is not loaded.

With pg_cron, the migrations schedule the expired-claim cleanup
(``taskclaim-ttl``) and the results retention (``taskclaim-task-results``)
inside the database. Without it (the embedded server, many managed
databases), every worker takes part in two schedules of the same times
instead, so nothing grows without bound and nothing else must be run;
``TASKCLAIM_UPKEEP = False`` turns them off.
"""

from __future__ import annotations

from django.db import connections

from astral_taskclaim.claims.maintenance import delete_expired
from astral_taskclaim.core.conf import app_settings
from astral_taskclaim.db import cron as claim_cron
from astral_taskclaim.schedules.schedule import Schedule
from astral_taskclaim.schedules.timing import Cron
from astral_taskclaim.tasks_backend import retention

#: A missed cleanup is worth one run when a worker comes back.
_GRACE = 600.0


def delete_expired_claims() -> int:
    """The expired-claim cleanup (``maintenance.delete_expired``)."""
    return delete_expired()


def delete_old_results() -> int:
    """The results retention (``TASKCLAIM_TASK_RESULTS_RETENTION``); 0 when
    results are kept forever."""
    kept = app_settings.TASK_RESULTS_RETENTION
    if kept is None:
        return 0
    return retention.delete_old_results(connections[app_settings.DATABASE], kept)


def cron_loaded(alias: str) -> bool:
    """Whether pg_cron is loaded on the server of ``alias``."""
    return claim_cron.cron_database(connections[alias]) is not None


def builtin_schedules() -> list[Schedule]:
    """The two upkeep schedules, at the minutes of the pg_cron jobs they stand for."""
    return [
        Schedule(
            "taskclaim.delete_expired",
            Cron(claim_cron.CLAIMS_JOB.schedule),
            delete_expired_claims,
            "taskclaim.delete_expired",
            grace_seconds=_GRACE,
        ),
        Schedule(
            "taskclaim.delete_task_results",
            Cron(retention.JOB.schedule),
            delete_old_results,
            "taskclaim.delete_task_results",
            grace_seconds=_GRACE,
        ),
    ]
