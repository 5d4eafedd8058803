"""The Django admin of astral_taskclaim, registered on ``admin.site``.

One ``ModelAdmin`` per table: claims (:mod:`.claims`, with the overview and
"delete expired claims" pages of :mod:`.views`), the PostgreSQL queue's
messages (:mod:`.messages`), the remote queues' outbox rows (:mod:`.outbox`),
stored task results (:mod:`.results`), claimed-task runs
(:mod:`.claimed_runs`) and schedules (:mod:`.schedules`).
:mod:`.queries` and :mod:`.times` hold what they share: the base admins,
estimated counts, key search, deleting a selection and how times are shown.
"""

from __future__ import annotations

from django.contrib import admin

from astral_taskclaim.admin.claimed_runs import ClaimedRunAdmin
from astral_taskclaim.admin.claims import ClaimAdmin, FollowUpAdmin
from astral_taskclaim.admin.messages import QueueMessageAdmin
from astral_taskclaim.admin.outbox import OutboxRowAdmin
from astral_taskclaim.admin.results import TaskResultAdmin
from astral_taskclaim.admin.schedules import ScheduleAdmin
from astral_taskclaim.models import (
    Claim,
    ClaimedRun,
    FollowUp,
    OutboxRow,
    QueueMessage,
    ScheduleRecord,
    StoredTaskResult,
)

__all__ = [
    "ClaimAdmin",
    "ClaimedRunAdmin",
    "FollowUpAdmin",
    "OutboxRowAdmin",
    "QueueMessageAdmin",
    "ScheduleAdmin",
    "TaskResultAdmin",
]

admin.site.register(Claim, ClaimAdmin)
admin.site.register(FollowUp, FollowUpAdmin)
admin.site.register(QueueMessage, QueueMessageAdmin)
admin.site.register(OutboxRow, OutboxRowAdmin)
admin.site.register(StoredTaskResult, TaskResultAdmin)
admin.site.register(ClaimedRun, ClaimedRunAdmin)
admin.site.register(ScheduleRecord, ScheduleAdmin)
