"""A small ASGI site: ``POST /enqueue/<key>`` enqueues a claimed task for
``key`` with ``ClaimedTask.aenqueue`` and answers with the token;
``POST /task/<key>`` enqueues a coalescing Django Task keyed ``key`` with
``Task.aenqueue`` and answers with its result id."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_POST

from astral_taskclaim.tasks import claimed_task
from astral_taskclaim.tasks_backend.compat import FRAMEWORK

if FRAMEWORK == "django.tasks":
    from django.tasks import task
else:
    from django_tasks import task

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.e2e.asgi_settings")
application = get_asgi_application()


@claimed_task(queue="asgi", window_seconds=3600)
def refresh(task: dict[str, str]) -> None:
    """Never consumed here; the test reads the queued messages."""


@task(key=lambda key: key, window_seconds=3600)
def rebuild(key: str) -> None:
    """Never run here; the test reads the queued messages and results."""


@require_POST
async def enqueue(request: HttpRequest, key: str) -> JsonResponse:
    token = await refresh.aenqueue(key, {"key": key})
    return JsonResponse({"key": key, "token": token})


@require_POST
async def enqueue_task(request: HttpRequest, key: str) -> JsonResponse:
    result = await rebuild.aenqueue(key)
    return JsonResponse({"key": key, "id": result.id})


async def health(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns = [
    path("enqueue/<str:key>", enqueue),
    path("task/<str:key>", enqueue_task),
    path("health", health),
]
