"""A view that enqueues, for the trace from a request to the worker's run."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues import queues


def refresh(request: HttpRequest) -> HttpResponse:
    task = {"id": int(request.GET["id"]), "log": request.GET["log"]}
    token = enqueue_claimed(queues["e2e"], f"e2e:{task['id']}", task, window_seconds=300)
    return HttpResponse(token or "", status=202)


urlpatterns = [path("refresh/", refresh)]
