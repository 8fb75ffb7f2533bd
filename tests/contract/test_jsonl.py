"""The one JSONL reader / writer: blank lines skipped, a malformed line named by file:line in
one line, sorted-key rows byte-stable."""

from __future__ import annotations

import pytest

from memgate.contract.jsonl import RecordError, iter_jsonl, parse_jsonl, read_jsonl, write_jsonl
from memgate.contract.records import RecordError as RecordsRecordError


def test_rows_round_trip_with_sorted_keys_and_utf8(tmp_path):
    path = tmp_path / "sub" / "rows.jsonl"
    assert write_jsonl(path, [{"b": 1, "a": "é"}, {"z": None}]) == 2
    assert path.read_bytes() == '{"a": "é", "b": 1}\n{"z": null}\n'.encode()
    assert read_jsonl(path) == [{"a": "é", "b": 1}, {"z": None}]


def test_blank_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('\n{"a": 1}\n  \n{"a": 2}\n', encoding="utf-8")
    assert list(iter_jsonl(path)) == [(2, {"a": 1}), (4, {"a": 2})]


def test_a_malformed_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n', encoding="utf-8")
    with pytest.raises(RecordError) as info:
        read_jsonl(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: invalid JSON (") and "\n" not in message
    with pytest.raises(RecordError, match=r"^routes\.jsonl\.gz:3: invalid JSON"):
        parse_jsonl('{"a": 1}\n\nnot json\n', "routes.jsonl.gz")
    assert RecordError is RecordsRecordError  # one error type for records and their files
