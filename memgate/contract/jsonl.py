"""The one JSONL reader and writer: one JSON object per line, blank lines skipped, a malformed
line named by ``file:line``; rows written as sorted-key JSON (byte-stable for the same rows)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path


class RecordError(ValueError):
    """A malformed record; the message names the file, line and field."""


def iter_lines(lines: Iterable[str], where: str) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for the non-blank ``lines``; bad JSON is a one-line
    :class:`RecordError` naming ``where:line``."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{where}:{lineno}: invalid JSON ({exc.msg})") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) of a JSONL file; blank lines are skipped; bad JSON names the line."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        yield from iter_lines(handle, str(path))


def read_jsonl(path: Path) -> list:
    """Every object of a JSONL file, in order."""
    return [row for _, row in iter_jsonl(path)]


def parse_jsonl(text: str, where: str) -> list:
    """Every object of JSONL ``text`` (read from ``where``, named in errors), in order."""
    return [row for _, row in iter_lines(text.splitlines(), where)]


def dumps_row(row: dict) -> str:
    """One row as its JSONL line (sorted keys, UTF-8 kept, newline included)."""
    return json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n"


def write_jsonl(path: Path, rows: Iterable[dict]) -> int:
    """Write rows as sorted-key JSON lines (byte-stable for the same rows); return the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps_row(row))
            count += 1
    return count


__all__ = ["RecordError", "dumps_row", "iter_jsonl", "iter_lines", "parse_jsonl", "read_jsonl", "write_jsonl"]
