"""The end-to-end helpers read what a running process writes."""

from __future__ import annotations

from pathlib import Path

from .support import json_lines


def test_a_line_still_being_written_is_not_read(tmp_path: Path) -> None:
    # A worker's log record longer than one write, or cut off by SIGKILL.
    path = tmp_path / "events.jsonl"
    assert json_lines(path) == []
    path.write_text('{"event": "a"}\n{"event": "b"}\n{"event": "c", "mess', encoding="utf-8")
    assert json_lines(path) == [{"event": "a"}, {"event": "b"}]
