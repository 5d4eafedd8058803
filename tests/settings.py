"""Settings for the test suite: ``DATABASE_URL`` or an embedded PostgreSQL 18."""

from __future__ import annotations

from pathlib import Path

import environ

from astral_taskclaim.contrib.embedded_postgres import database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

DATABASES = {
    "default": environ.Env.db_url_config(database_url(base_dir=BASE_DIR)),
    # A real non-PostgreSQL database, for the checks that must reject it.
    "sqlite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "astral_taskclaim",
    "tests.testapp",
]
try:  # Django 6 has the Tasks framework; Django 5.2 gets it from django-tasks
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")

# No built-in upkeep schedules in the workers the tests start (they would
# delete expired claims a test put in place, at minutes 15 and 45 only);
# tests/schedules turns them on where it tests them.
TASKCLAIM_UPKEEP = False

# Django Tasks through the app's PostgreSQL queue (tests/tasks_backend).
TASKS = {
    "default": {
        "BACKEND": "astral_taskclaim.tasks_backend.ClaimTaskBackend",
        "QUEUES": ["default", "urgent"],
        "OPTIONS": {"queue": "default", "max_retries": 2},
    }
}
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"null": {"class": "logging.NullHandler"}},
    "loggers": {"astral_taskclaim": {"handlers": ["null"], "level": "DEBUG"}},
}
