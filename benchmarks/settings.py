"""Django settings of the benchmark processes.

The database comes from ``TASKCLAIM_BENCH_DATABASE_URL``, which the runner
sets to a fresh database before Django starts (worker subprocesses inherit
it). ``TASKCLAIM_BENCH_PEER`` adds a peer's Django app for the processes that
run that peer: each peer lives in its own database on the same server.
"""

from __future__ import annotations

import os

import environ

SECRET_KEY = "benchmarks-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

_url = os.environ.get("TASKCLAIM_BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL", "")
if not _url:
    # Only reached when the settings are imported outside the runner (a worker
    # started by hand): say which variable is missing instead of a KeyError.
    raise RuntimeError("benchmarks.settings needs TASKCLAIM_BENCH_DATABASE_URL")

DATABASES = {"default": environ.Env.db_url_config(_url)}
# Persistent connections: a benchmark measures statements, not connects.
DATABASES["default"]["CONN_MAX_AGE"] = None

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "astral_taskclaim",
    "benchmarks.benchapp",
]

PEER = os.environ.get("TASKCLAIM_BENCH_PEER", "")
if PEER == "procrastinate":
    INSTALLED_APPS.append("procrastinate.contrib.django")
    PROCRASTINATE_IMPORT_PATHS = ["benchmarks.benchapp.peer_procrastinate"]
elif PEER == "django_tasks":
    INSTALLED_APPS += ["django_tasks", "django_tasks_db"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
elif PEER == "celery":
    # Row 12's Celery worker; the harness starts the Redis server.
    CELERY_BROKER_URL = os.environ.get("TASKCLAIM_BENCH_REDIS_URL", "")
elif PEER == "taskclaim_tasks":
    # This app's Django Tasks backend, on a PostgreSQL queue of its own.
    TASKS = {
        "default": {
            "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
            "OPTIONS": {"queue": "djtasks"},
        }
    }

_POSTGRES = "astral_taskclaim.queues.postgres.PostgresQueue"
TASKCLAIM_QUEUES = {
    # Row 11 drains with the run history on and off.
    "bench": {"BACKEND": _POSTGRES, "HISTORY": os.environ.get("TASKCLAIM_BENCH_HISTORY", "all")},
    "latency": {"BACKEND": _POSTGRES},
    "djtasks": {"BACKEND": _POSTGRES},
    "io": {"BACKEND": _POSTGRES},
    "aio": {"BACKEND": _POSTGRES},
    "mixed": {"BACKEND": _POSTGRES},
    "db": {"BACKEND": _POSTGRES},
}

# Row 12.3's ten task types share one queue, on purpose.
SILENCED_SYSTEM_CHECKS = ["astral_taskclaim.W034"]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "benchmarks.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every logger quiet below WARNING: logging a line per task would measure the
# log handler. Warnings and errors still show.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "level": "WARNING"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}

# Row 14: tracing on is the OpenTelemetry SDK's tracer provider with no
# exporter (spans made and dropped); off is no provider at all.
if os.environ.get("TASKCLAIM_BENCH_TRACING") == "on":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
