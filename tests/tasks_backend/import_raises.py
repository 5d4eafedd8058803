"""A module whose import raises, as a misconfigured app's module does: a
worker must never import it because a message names it."""

from django.core.exceptions import ImproperlyConfigured

raise ImproperlyConfigured("tests.tasks_backend.import_raises was imported")
