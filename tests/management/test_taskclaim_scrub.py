"""manage.py taskclaim_scrub: empties the claim table, after asking."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from tests.claimkit import claims, insert_claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_claims")]


def scrub(*args: str) -> str:
    out = io.StringIO()
    call_command("taskclaim_scrub", *args, stdout=out)
    return out.getvalue().strip()


def test_no_input_empties_the_table() -> None:
    insert_claim("a", seconds=60)
    insert_claim("b", seconds=-60)
    assert scrub("--no-input") == "Emptied taskclaim.claim of database 'default'."
    assert claims() == {}


@pytest.mark.parametrize(("answer", "left"), [("no", {"a"}), ("", {"a"}), ("YES", set())])
def test_asks_first(monkeypatch: pytest.MonkeyPatch, answer: str, left: set[str]) -> None:
    insert_claim("a", seconds=60)
    prompts: list[str] = []

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        return answer

    monkeypatch.setattr("builtins.input", reply)
    out = scrub()
    assert "deletes every claim" in prompts[0]
    assert set(claims()) == left
    assert out == ("Scrub cancelled." if left else "Emptied taskclaim.claim of database 'default'.")
