"""Training preferences (``triples.jsonl``): read without importing the trainer."""

from __future__ import annotations

from pathlib import Path

from memgate.contract.jsonl import iter_jsonl


def read_triples(path: Path, text_visible_only: bool) -> list[dict]:
    rows = []
    for lineno, row in iter_jsonl(path):
        for key in ("query_text", "pos_text", "neg_text"):
            if not isinstance(row.get(key), str):
                raise ValueError(f"{path}:{lineno}: field {key!r} must be a string")
        if text_visible_only and row.get("text_visible") is not True:
            continue
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no usable triples (text_visible_only={text_visible_only})")
    return rows
