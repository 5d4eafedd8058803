"""What the remote backends share: splitting batches to the service's limits."""

from __future__ import annotations

from astral_taskclaim.queues.remote import chunks


def test_chunks_respect_count_and_size() -> None:
    items = [b"a" * 40, b"b" * 40, b"c" * 40, b"d" * 200, b"e"]
    assert list(chunks(items, 100, 100)) == [items[:2], items[2:3], items[3:4], items[4:]]
    assert list(chunks(items, 2, 10_000)) == [items[:2], items[2:4], items[4:]]
    assert list(chunks([], 2, 10)) == []
