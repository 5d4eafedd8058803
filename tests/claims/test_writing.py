"""What the claim writes share: here, whether the caller holds a transaction."""

from __future__ import annotations

import pytest
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext

from astral_taskclaim.claims.writing import in_transaction

pytestmark = pytest.mark.django_db(transaction=True)


def test_outside_any_block_there_is_no_transaction_until_autocommit_is_off() -> None:
    connection = connections["default"]
    assert not in_transaction(connection)
    transaction.set_autocommit(False)
    try:
        assert in_transaction(connection)
    finally:
        transaction.rollback()
        transaction.set_autocommit(True)


def test_an_atomic_block_is_a_transaction_and_asking_sends_nothing() -> None:
    connection = connections["default"]
    with transaction.atomic():
        blocks = len(connection.atomic_blocks)
        with CaptureQueriesContext(connection) as queries:
            assert in_transaction(connection)
        assert len(connection.atomic_blocks) == blocks
        assert len(queries) == 0


@pytest.mark.django_db  # the test runs inside TestCase's atomic blocks
def test_the_blocks_of_testcase_do_not_count_but_a_block_inside_them_does() -> None:
    connection = connections["default"]
    assert connection.in_atomic_block
    blocks = len(connection.atomic_blocks)
    with CaptureQueriesContext(connection) as queries:
        assert not in_transaction(connection)
    assert len(queries) == 0
    assert len(connection.atomic_blocks) == blocks
    with transaction.atomic():
        assert in_transaction(connection)
    assert not in_transaction(connection)
