"""Rows and users for the admin tests: many claims and queue messages
written straight into their tables (times relative to the database clock),
and staff users holding chosen permissions. Single claims are written with
:func:`tests.claimkit.insert_claim`."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client

from tests.claimkit import claims

PASSWORD = "admin-tests-password"  # a throwaway test account


def add_claims(count: int, *, prefix: str = "bulk:", seconds: float = 3600) -> None:
    """``count`` claims ``<prefix>1``..``<prefix><count>`` in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.claim (key, expires_at, token)
               SELECT %s || n, clock_timestamp() + make_interval(secs => %s + n %% 600),
                      gen_random_uuid()
               FROM generate_series(1, %s) AS n""",
            [prefix, seconds, count],
        )
        cursor.execute("ANALYZE taskclaim.claim")


def envelope(key: str, task: Any, *, window: int = 300) -> str:
    """A claimed-task message body, as ``enqueue_claimed`` writes it."""
    body = {"key": key, "claim": str(uuid.uuid4()), "windowSeconds": window, "task": task}
    return json.dumps(body, separators=(",", ":"))


def add_message(
    queue: str,
    body: str,
    *,
    visible_in: float = 0,
    leased: bool = False,
    attempts: int = 0,
) -> int:
    """A message of ``queue`` visible ``visible_in`` seconds from now; a
    leased one also gets a lease (its lease ends at ``visible_in``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.message (queue, body, attempts, visible_at, lease, leased_at)
               VALUES (%s, %s, %s, clock_timestamp() + make_interval(secs => %s),
                       %s, CASE WHEN %s THEN clock_timestamp() END)
               RETURNING id""",
            [queue, body, attempts, visible_in, uuid.uuid4() if leased else None, leased],
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def claim_keys() -> set[str]:
    """Every key in the claim table."""
    return set(claims())


def seconds_until_visible(message_id: int) -> float | None:
    """How far (by the database clock) message ``message_id`` is from
    visible; ``None`` once deleted."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT extract(epoch FROM visible_at - clock_timestamp())::float8
               FROM taskclaim.message WHERE id = %s""",
            [message_id],
        )
        row = cursor.fetchone()
    return None if row is None else float(row[0])


def staff(username: str, *permissions: str) -> User:
    """An active staff user holding ``permissions`` (codenames of this app)."""
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    if permissions:
        user.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="astral_taskclaim", codename__in=permissions
            )
        )
    assert {f"astral_taskclaim.{p}" for p in permissions} <= user.get_all_permissions()
    return user


def client_for(user: User, *, enforce_csrf_checks: bool = False) -> Client:
    """A test client logged in as ``user``."""
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client


def add_run(
    status: str,
    *,
    finished_ago: float | None = None,
    retried_ago: tuple[float, ...] = (),
    final_error: bool = False,
    task_path: str = "tests.tasks_backend.jobs.add",
    traceback: str = "Traceback (most recent call last):\nBoom: failed\n",
) -> str:
    """A Django Task run in ``taskclaim.task_result`` (times relative to the
    database clock): finished ``finished_ago`` seconds ago, with a retried
    error at each of ``retried_ago`` and, with ``final_error``, a final one
    at its finish (as the worker writes them)."""
    errors: list[tuple[float | None, bool]] = [(ago, False) for ago in retried_ago]
    if final_error:
        errors.append((finished_ago, True))
    run_id = str(uuid.uuid4())
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO taskclaim.task_result
                 (id, task_path, backend, queue_name, queue, status, args, errors, worker_ids,
                  enqueued_at, started_at, last_attempted_at, finished_at)
               SELECT %(id)s, %(task_path)s, 'default', 'default', 'default', %(status)s, '[1, 2]',
                      coalesce((
                        SELECT jsonb_agg(jsonb_build_object(
                          'exception_class_path', 'tests.tasks_backend.jobs.Boom',
                          'traceback', %(traceback)s::text, 'attempt', n, 'final', final,
                          'at', clock_timestamp() - make_interval(secs => ago)) ORDER BY n)
                        FROM unnest(%(agos)s::float8[], %(finals)s::boolean[])
                             WITH ORDINALITY AS e (ago, final, n)), '[]'),
                      (SELECT jsonb_agg('test-host:1'::text) FROM generate_series(0, %(attempts)s)),
                      clock_timestamp() - interval '2 days', clock_timestamp() - interval '1 day',
                      clock_timestamp() - interval '1 minute',
                      clock_timestamp() - make_interval(secs => %(finished_ago)s::float8)""",
            {
                "id": run_id,
                "task_path": task_path,
                "status": status,
                "traceback": traceback,
                "agos": [ago for ago, _final in errors],
                "finals": [final for _ago, final in errors],
                "attempts": len(retried_ago),
                "finished_ago": finished_ago,
            },
        )
    return run_id
