"""System checks, with stable ids ``astral_taskclaim.E001`` and so on.

=========  =======  ==========================================================
Id         Level    Meaning
=========  =======  ==========================================================
E001       error    ``TASKCLAIM_DATABASE`` is not a PostgreSQL database.
E002       error    The PostgreSQL server is older than 14.
W003       warning  PostgreSQL 14-16 and a model uses ``slug.slug`` (a
                    ``DbSlugField`` or a ``Slug`` index): a few rare characters
                    may slug differently than on PostgreSQL 17+.
W004       warning  pg_cron is not loaded and ``TASKCLAIM_UPKEEP`` is off:
                    expired claims are not deleted automatically; schedule
                    ``manage.py taskclaim_delete_expired``.
E005       error    A configured ``TASKCLAIM_*_ROLE`` does not exist.
E006       error    A ``TASKCLAIM_*`` setting has a wrong type or value.
W007       warning  The server could not be inspected (the error is shown).
W008       warning  A ``TASKCLAIM_*`` setting the app does not read (a typo).
E010       error    A ``TASKCLAIM_QUEUES`` entry cannot be loaded.
E011       error    A PostgreSQL queue's ``database`` option is not a PostgreSQL alias.
E012       error    A queue backend lacks a required option.
E013       error    A queue backend option has a wrong type or value.
E014       error    A queue backend has an option it does not know (a typo).
E015       error    A queue's ``outbox`` cannot work: the queue is not a remote
                    one, or ``TASKCLAIM_DATABASE`` is not PostgreSQL.
E016       error    A ``TASKCLAIM_QUEUES`` entry has a key it does not take.
W018       warning  A PostgreSQL queue lives outside ``TASKCLAIM_DATABASE``.
E020       error    A ``DbSlugField``'s ``source`` is not a text field.
W021       warning  A ``DbSlugField`` is shorter than its source field.
W030       warning  The app is not migrated in ``TASKCLAIM_DATABASE``: run
                    ``manage.py migrate``.
E031       error    A ``@claimed_task``'s queue is not in ``TASKCLAIM_QUEUES``.
W032       warning  pg_cron is loaded but no job deletes this database's
                    expired claims.
E033       error    A ``ClaimTaskBackend`` in ``TASKS`` has a wrong option.
W034       warning  A remote queue (Cloudflare, SQS) carries several claimed
                    tasks: its messages name their task, which a TypeScript
                    consumer would ignore, so do not share it with one.
W035       warning  A remote queue carries several claimed tasks and none is
                    its ``default``: no task runs a message naming none (a
                    TypeScript producer's), which is given up in the end.
W036       warning  A PostgreSQL queue holds messages, but no claimed task (nor
                    Django Tasks backend) of this project consumes it.
W037       warning  A PostgreSQL queue holds messages naming a task (or none,
                    with no default) that no installed module registers for it.
W040       warning  A connection pooler relays ``TASKCLAIM_DATABASE`` and
                    ``DISABLE_SERVER_SIDE_CURSORS`` is not set.
W041       warning  A connection pooler relays ``TASKCLAIM_DATABASE`` and
                    ``OPTIONS["assume_role"]`` is set.
E050       error    A schedule cannot work: a bad cron expression or time zone,
                    a claimed task with no ``window_seconds``, or a malformed
                    ``TASKCLAIM_SCHEDULES`` entry (the message names the task).
E051       error    A schedule declared ``in_database`` that pg_cron cannot run
                    exactly (not UTC, not a plain cron or cron-grid interval,
                    not a claimed task on the PostgreSQL queue; with
                    ``--database``, a ``cron.timezone`` other than UTC).
W052       warning  A schedule declared ``in_database`` has no pg_cron job for
                    this database: the workers enqueue it instead.
W053       warning  A schedule's cron expression fires more than once a minute
                    (a sixth field, the seconds, typed by mistake).
=========  =======  ==========================================================

E002 to E005, W030, W032, W036, W037, W040, W041 and W052 ask the server, so they run
with ``manage.py check --database`` and before ``migrate``, like Django's own database checks.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management.commands.migrate import Command as Migrate
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

# core.checks registers W008 and E016 too.
from astral_taskclaim.core.checks import CHECK_ID, configured_queues
from astral_taskclaim.core.conf import AppSettings, app_settings
from astral_taskclaim.core.not_migrated import advice, missing_tables
from astral_taskclaim.db import cron, roles
from astral_taskclaim.db.connections import PROBE, server_version
from astral_taskclaim.fields import DbSlugField
from astral_taskclaim.functions import Slug
from astral_taskclaim.queues import check_queue

# The schedules' and the workers' checks modules (here and two lines down)
# are imported for the checks they register: E050 and on, and W034-W037.
from astral_taskclaim.schedules import checks as schedule_checks  # noqa: F401
from astral_taskclaim.tasks import registry
from astral_taskclaim.worker import checks as worker_checks  # noqa: F401

MIN_SERVER_VERSION = 140000
NATIVE_SLUG_VERSION = 170000


@checks.register()
def check_settings(**kwargs: Any) -> list[checks.CheckMessage]:
    """E006 for a malformed setting, E001 for a database that is not PostgreSQL."""
    try:
        alias = app_settings.DATABASE
        # Every setting, so one added to AppSettings is checked too.
        for name, member in vars(AppSettings).items():
            if isinstance(member, property):
                getattr(app_settings, name)
    except ImproperlyConfigured as error:
        return [checks.Error(str(error), id=CHECK_ID.format("E006"))]
    vendor = connections[alias].vendor
    if vendor != "postgresql":
        return [
            checks.Error(
                f"Database {alias!r} uses {vendor}; astral_taskclaim needs PostgreSQL 14 or newer.",
                hint="Point TASKCLAIM_DATABASE at a PostgreSQL database.",
                id=CHECK_ID.format("E001"),
            )
        ]
    return []


def _uses_slug_function() -> bool:
    """Whether an installed model computes ``slug.slug`` in the database: a
    ``DbSlugField``, or a ``Slug`` expression in an index or constraint."""

    def has_slug(expression: Any) -> bool:
        if isinstance(expression, Slug):
            return True
        return any(has_slug(e) for e in getattr(expression, "get_source_expressions", list)())

    for model in apps.get_models():
        if any(isinstance(field, DbSlugField) for field in model._meta.get_fields()):
            return True
        declared = [*model._meta.indexes, *model._meta.constraints]
        if any(has_slug(e) for item in declared for e in getattr(item, "expressions", ())):
            return True
    return False


def _version_messages(server_version: int, *, uses_slug: bool = True) -> list[checks.CheckMessage]:
    """E002 or W003 for a server of ``server_version`` (``server_version_num``);
    W003 only for a project whose models use ``slug.slug`` (``uses_slug``)."""
    if server_version < MIN_SERVER_VERSION:
        return [
            checks.Error(
                f"PostgreSQL {server_version // 10000} is too old; astral_taskclaim needs 14+.",
                id=CHECK_ID.format("E002"),
            )
        ]
    if server_version < NATIVE_SLUG_VERSION and uses_slug:
        return [
            checks.Warning(
                f"PostgreSQL {server_version // 10000} has no pg_c_utf8 collation, so slug.slug "
                "(behind your DbSlugField or Slug index) uses a built-in table instead. Slugs "
                "are the same as on PostgreSQL 17+ except for rare characters whose Unicode "
                "normalization changed after this server's Unicode version; it matters only if "
                "slugs made here must equal slugs made on PostgreSQL 17+.",
                hint="Upgrade to PostgreSQL 17+, or add 'astral_taskclaim.W003' to "
                "SILENCED_SYSTEM_CHECKS if slugs are only compared within this server.",
                id=CHECK_ID.format("W003"),
            )
        ]
    return []


@checks.register()
def check_task_queues(**kwargs: Any) -> list[checks.CheckMessage]:
    """E031 for a claimed task whose queue ``TASKCLAIM_QUEUES`` lacks."""
    configured = configured_queues()
    if configured is None:
        return []
    return [
        checks.Error(
            f"claimed task {task.name} uses queue {task.queue!r}, which TASKCLAIM_QUEUES does "
            f"not define (it has: {', '.join(configured) or 'none'})",
            hint=f"Add {task.queue!r} to TASKCLAIM_QUEUES, or pass one of its aliases as "
            "@claimed_task(queue=...).",
            obj=task.name,
            id=CHECK_ID.format("E031"),
        )
        for task in registry
        if task.queue not in configured
    ]


def _ask(connection: BaseDatabaseWrapper, query: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchone()[0]


@checks.register()
def check_queues(**kwargs: Any) -> list[checks.CheckMessage]:
    """E010 for a queue that cannot be loaded, then each backend's ``check()``."""
    return [message for alias in configured_queues() or {} for message in check_queue(alias)]


def _run_by_migrate() -> bool:
    """Whether ``manage.py migrate`` runs these checks (it does before it
    migrates): W030 there would tell it to run itself."""
    # The command's own frames (Django 5.2 checks in handle(), 6 in execute()).
    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("self"), Migrate):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@checks.register(checks.Tags.database)
def check_server(
    databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E002, W003, W004, E005, W030, W032, W040 and W041: what the server has."""
    try:
        alias = app_settings.DATABASE
    except ImproperlyConfigured:
        return []  # reported as E006
    if not databases or alias not in databases:
        return []
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return []  # reported as E001
    try:
        messages = _version_messages(
            server_version(connection),
            uses_slug=_uses_slug_function(),
        )
        cron_database = cron.cron_database(connection)
        missing = roles.missing_roles(connection)
        absent = missing_tables(alias)
        cleaned = None if absent or cron_database is None else cron.has_cleanup_job(connection)
        relayed = _ask(connection, PROBE) != connection.connection.info.backend_pid
    except DatabaseError as error:
        return [
            checks.Warning(
                f"Could not inspect database {alias!r}: {error}", id=CHECK_ID.format("W007")
            )
        ]
    if cron_database is None and not app_settings.UPKEEP:
        messages.append(
            checks.Warning(
                "pg_cron is not loaded and TASKCLAIM_UPKEEP is off, so expired claims are not "
                "deleted automatically.",
                hint="Run `manage.py taskclaim_delete_expired` hourly (cron, systemd timer or "
                "your scheduler), turn TASKCLAIM_UPKEEP on (the workers do it), or load "
                "pg_cron and migrate again.",
                id=CHECK_ID.format("W004"),
            )
        )
    if absent and not _run_by_migrate():
        messages.append(
            checks.Warning(
                f"astral_taskclaim is not migrated in database {alias!r} "
                f"({', '.join(absent)} missing): claims, enqueues and workers fail until it is.",
                hint=advice(alias).capitalize() + ".",
                id=CHECK_ID.format("W030"),
            )
        )
    if cleaned is False:
        messages.append(
            checks.Warning(
                f"pg_cron is loaded (in database {cron_database}) but no taskclaim job deletes "
                f"expired claims in database {connection.settings_dict['NAME']}, so they pile up.",
                hint="Run `manage.py taskclaim_delete_expired --schedule` as a user pg_cron "
                "lets schedule jobs, or run `manage.py taskclaim_delete_expired` hourly from "
                "cron or your scheduler.",
                id=CHECK_ID.format("W032"),
            )
        )
    if relayed:
        messages.extend(_pooler_messages(connection))
    messages.extend(
        checks.Error(roles.how_to_create(setting, role), id=CHECK_ID.format("E005"))
        for setting, role in missing.items()
    )
    return messages


def _pooler_messages(connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
    """W040 and W041: what a transaction-mode pooler relaying ``connection``
    (e.g. PgBouncer's ``pool_mode = transaction``) would break. The app's own
    statements need nothing: they run unprepared there, and the PostgreSQL
    queues poll instead of ``LISTEN``."""
    alias = connection.alias
    messages: list[checks.CheckMessage] = []
    if not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        messages.append(
            checks.Warning(
                f"A connection pooler relays database {alias!r} and "
                "DISABLE_SERVER_SIDE_CURSORS is not set: in transaction mode, Django's "
                "server-side cursors (QuerySet.iterator()) fail.",
                hint=f"Set DATABASES[{alias!r}]['DISABLE_SERVER_SIDE_CURSORS'] = True; "
                "behind a pooler in session mode, silence astral_taskclaim.W040.",
                id=CHECK_ID.format("W040"),
            )
        )
    if (connection.settings_dict.get("OPTIONS") or {}).get("assume_role"):
        messages.append(
            checks.Warning(
                f"A connection pooler relays database {alias!r} and OPTIONS['assume_role'] "
                "is set: in transaction mode the role, set once per connection, applies to "
                "one server connection only, so queries may run as the login user.",
                hint="Log in as the role itself (USER) instead; behind a pooler in session "
                "mode, silence astral_taskclaim.W041.",
                id=CHECK_ID.format("W041"),
            )
        )
    return messages
