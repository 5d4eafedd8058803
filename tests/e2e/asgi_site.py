"""A one-view ASGI site: ``POST /enqueue/<key>`` enqueues a claimed task
for ``key`` with ``ClaimedTask.aenqueue`` and answers with the token."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_POST

from astral_taskclaim.tasks import claimed_task

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.e2e.asgi_settings")
application = get_asgi_application()


@claimed_task(queue="asgi", window_seconds=3600)
def refresh(task: dict[str, str]) -> None:
    """Never consumed here; the test reads the queued messages."""


@require_POST
async def enqueue(request: HttpRequest, key: str) -> JsonResponse:
    token = await refresh.aenqueue(key, {"key": key})
    return JsonResponse({"key": key, "token": token})


async def health(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


urlpatterns = [
    path("enqueue/<str:key>", enqueue),
    path("health", health),
]
