"""The example project's settings, from the environment (django-environ).

``DATABASE_URL``: the database; unset, an embedded PostgreSQL 18 is started
in ``example_project/.pgdata`` (``TASKCLAIM_PGDATA`` to move it).
``SECRET_KEY``, ``DEBUG``, ``ALLOWED_HOSTS``: as usual (the defaults are for
local use only). ``.env`` beside ``manage.py`` is read when present.

The ``refresh`` queue: ``TASKCLAIM_QUEUE`` picks its backend, ``postgres``
(the default), ``memory``, ``cloudflare`` (``CLOUDFLARE_ACCOUNT_ID``,
``CLOUDFLARE_QUEUE_ID``, ``CLOUDFLARE_API_TOKEN``) or ``sqs``
(``SQS_QUEUE_URL``; credentials and region as boto3 finds them).
``TASKCLAIM_DELAY_SCALE`` shortens retry delays (the demo uses 0.02).
Django Tasks (``TASKS``) run on the PostgreSQL queue ``tasks``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from astral_taskclaim.contrib.embedded_postgres import database_url

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    env.read_env(BASE_DIR / ".env")

SECRET_KEY = env.str("SECRET_KEY", default="example-project-not-secret-do-not-deploy")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
USE_TZ = True
TIME_ZONE = "UTC"

DATABASES = {"default": env.db_url_config(database_url(base_dir=BASE_DIR))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _refresh_queue() -> dict[str, Any]:
    backend = env.str("TASKCLAIM_QUEUE", default="postgres")
    if backend == "postgres":
        return {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"}
    if backend == "memory":
        return {"BACKEND": "astral_taskclaim.queues.memory.MemoryQueue"}
    if backend == "cloudflare":
        return {
            "BACKEND": "astral_taskclaim.queues.cloudflare.CloudflareQueue",
            "OPTIONS": {
                "account_id": env.str("CLOUDFLARE_ACCOUNT_ID"),
                "queue_id": env.str("CLOUDFLARE_QUEUE_ID"),
                "api_token": env.str("CLOUDFLARE_API_TOKEN"),
            },
        }
    if backend == "sqs":
        return {
            "BACKEND": "astral_taskclaim.queues.sqs.SQSQueue",
            "OPTIONS": {"queue_url": env.str("SQS_QUEUE_URL")},
        }
    raise ImproperlyConfigured(
        f"TASKCLAIM_QUEUE must be postgres, memory, cloudflare or sqs, got {backend!r}"
    )


TASKCLAIM_QUEUES = {
    "refresh": _refresh_queue(),
    # Django Tasks (``@task`` in rooms/tasks.py) go through this queue.
    "tasks": {"BACKEND": "astral_taskclaim.queues.postgres.PostgresQueue"},
}
TASKS = {
    "default": {
        "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
        "OPTIONS": {"queue": "tasks"},
    }
}
TASKCLAIM_DELAY_SCALE = env.float("TASKCLAIM_DELAY_SCALE", default=1.0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "astral_taskclaim",
    "rooms",
]
try:  # Django 6 has the Tasks framework; Django 5.2 gets it from django-tasks
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"
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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "astral_taskclaim": {
            "handlers": ["console"],
            "level": env.str("TASKCLAIM_LOG_LEVEL", default="WARNING"),
            "propagate": False,
        },
        # Django's Tasks framework logs every start and finish at INFO.
        **{
            name: {
                "handlers": ["console"],
                "level": env.str("TASKCLAIM_LOG_LEVEL", default="WARNING"),
                "propagate": False,
            }
            for name in ("django.tasks", "django_tasks")
        },
    },
}
