"""The package's lazy public API."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import astral_taskclaim

PUBLIC = [
    "claim_task",
    "hold_task",
    "release_task",
    "enqueue_claimed",
    "consume_claimed",
    "retry_delay_seconds",
]


def test_importing_the_package_loads_neither_django_models_nor_settings() -> None:
    script = textwrap.dedent(
        """
        import os, sys
        os.environ.pop("DJANGO_SETTINGS_MODULE", None)
        import astral_taskclaim
        loaded = [m for m in ("django.db.models", "django.conf", "astral_taskclaim.claims.claim")
                  if m in sys.modules]
        assert loaded == [], loaded
        assert astral_taskclaim.__version__
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("name", PUBLIC)
def test_public_names_resolve_to_their_modules(name: str) -> None:
    value = getattr(astral_taskclaim, name)
    assert callable(value)
    assert value.__module__ in {
        "astral_taskclaim.claims.claim",
        "astral_taskclaim.consumer.consume",
        "astral_taskclaim.consumer.retry",
    }
    assert name in astral_taskclaim.__all__
    assert name in dir(astral_taskclaim)


def test_an_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        astral_taskclaim.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
