"""Your own preference triples: the schema (``schemas/triples.schema.json``), a validator that
names ``file:line`` and the field, and the mapping of a Hugging Face ``datasets`` table.

A triple says: for ``query``, memory ``pos`` is preferred over memory ``neg``. Each of the three
is text (``query_text``, ``pos_text``, ``neg_text``; embedded with the bundled encoder) or a
pre-computed vector (``query_vector``, ...); one file uses one kind throughout. Optional:
``text_visible`` (default true; false rows are left out), ``category`` (default ``all``),
``source`` (default ``user``), ``group`` (the bootstrap unit; default the query).

A ``datasets`` table in the sentence-transformers convention, columns ``(anchor, positive,
negative)``, maps to ``(query_text, pos_text, neg_text)``; ``query``/``pos``/``neg`` too.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract.jsonl import iter_jsonl

SCHEMA_PATH = Path(__file__).with_name("schemas") / "triples.schema.json"
ROLES = ("query", "pos", "neg")
OPTIONAL_STRINGS = ("category", "source", "group")
# Hugging Face / sentence-transformers column names -> ours.
HF_COLUMNS = {"anchor": "query_text", "query": "query_text", "positive": "pos_text", "pos": "pos_text",
              "negative": "neg_text", "neg": "neg_text"}


class TripleError(ValueError):
    """A bad triple; the message names ``where`` (file:line or table:row) and the field."""


@dataclass
class TripleSet:
    """Validated triples. ``rows`` carry ``query_text``/``pos_text``/``neg_text`` keys: the texts,
    or (vector files) ``vec:<sha256>`` keys into ``vectors``. ``skipped`` counts text_visible=false."""

    name: str
    rows: list[dict]
    kind: str  # "text" | "vector"
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: int = 0

    @property
    def dim(self) -> Optional[int]:
        return len(next(iter(self.vectors.values()))) if self.vectors else None

    def __len__(self) -> int:
        return len(self.rows)

    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for row in self.rows:
            digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode() + b"\n")
        for key in sorted(self.vectors):
            digest.update(key.encode() + self.vectors[key].tobytes())
        return digest.hexdigest()


def _vector(value, where: str, key: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) < 2:
        raise TripleError(f"{where}: field {key!r} must be a list of at least 2 numbers")
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise TripleError(f"{where}: field {key!r}[{i}] must be a finite number, got {x!r}")
    return np.asarray(value, dtype=np.float32)


def _vector_key(vec: np.ndarray) -> str:
    return "vec:" + hashlib.sha256(vec.tobytes()).hexdigest()[:24]


def validate_row(raw, where: str) -> tuple[dict, dict[str, np.ndarray], str]:
    """One triple -> (normalised row, its vectors by key, kind). Raises TripleError."""
    if not isinstance(raw, dict):
        raise TripleError(f"{where}: a triple must be a JSON object, got {type(raw).__name__}")
    row = dict(raw)
    vectors: dict[str, np.ndarray] = {}
    kinds = set()
    for role in ROLES:
        text_key, vec_key = f"{role}_text", f"{role}_vector"
        text, vec = raw.get(text_key), raw.get(vec_key)
        if vec is not None:
            v = _vector(vec, where, vec_key)
            key = _vector_key(v)
            vectors[key] = v
            row.pop(vec_key)
            row[text_key] = key
            if text is not None:
                row[f"{role}_display"] = text
            kinds.add("vector")
        elif text is None:
            raise TripleError(f"{where}: missing field {text_key!r} (or {vec_key!r})")
        elif not isinstance(text, str) or not text.strip():
            raise TripleError(f"{where}: field {text_key!r} must be a non-empty string, got {text!r}")
        else:
            kinds.add("text")
    if len(kinds) > 1:
        raise TripleError(f"{where}: mixes texts and vectors across query/pos/neg; give all three "
                          "as *_text or all three as *_vector")
    if row["pos_text"] == row["neg_text"]:
        raise TripleError(f"{where}: fields 'pos_text' and 'neg_text' are the same memory")
    visible = raw.get("text_visible", True)
    if not isinstance(visible, bool):
        raise TripleError(f"{where}: field 'text_visible' must be true or false, got {visible!r}")
    row["text_visible"] = visible
    for key in OPTIONAL_STRINGS:
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise TripleError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    row.setdefault("category", "all")
    row.setdefault("source", "user")
    row.setdefault("group", row["query_text"])
    return row, vectors, kinds.pop()


def validate_rows(items: Iterable[tuple[str, object]], name: str) -> TripleSet:
    """(where, raw row) pairs -> a TripleSet; one kind per file, one vector dimension."""
    rows, vectors, kind, dim, skipped = [], {}, None, None, 0
    for where, raw in items:
        row, vecs, row_kind = validate_row(raw, where)
        if kind is None:
            kind = row_kind
        elif row_kind != kind:
            raise TripleError(f"{where}: this triple uses {row_kind}s but earlier ones use {kind}s; "
                              "one file uses one kind")
        for key, v in vecs.items():
            if dim is None:
                dim = len(v)
            elif len(v) != dim:
                role = next(r for r in ROLES if row[f"{r}_text"] == key)
                raise TripleError(f"{where}: field '{role}_vector' has {len(v)} dimensions, "
                                  f"earlier vectors have {dim}")
            vectors[key] = v
        if not row["text_visible"]:
            skipped += 1
            continue
        rows.append(row)
    if not rows:
        raise TripleError(f"{name}: no usable triples"
                          + (f" ({skipped} have text_visible=false)" if skipped else " (empty)"))
    return TripleSet(name=name, rows=rows, kind=kind, vectors=vectors, skipped=skipped)


def from_hf(table, name: str = "table") -> TripleSet:
    """A ``datasets.Dataset`` (or any table with ``column_names`` and row iteration) -> TripleSet.
    Columns ``anchor/positive/negative`` (or ``query/pos/neg``) map to ``*_text``."""
    columns = list(getattr(table, "column_names", []) or [])
    rename = {c: HF_COLUMNS[c] for c in columns if c in HF_COLUMNS and HF_COLUMNS[c] not in columns}
    have = {rename.get(c, c) for c in columns}
    for role in ROLES:
        if f"{role}_text" not in have and f"{role}_vector" not in have:
            raise TripleError(f"{name}: no column for {role!r}: expected one of "
                              f"{[c for c, t in HF_COLUMNS.items() if t == f'{role}_text'] + [f'{role}_text', f'{role}_vector']}, "
                              f"got {columns}")

    def items():
        for i, raw in enumerate(table):
            yield f"{name}:row {i}", {rename.get(k, k): v for k, v in raw.items() if v is not None}

    return validate_rows(items(), name)


def load_triples(path) -> TripleSet:
    """A triples file: ``.jsonl`` (the schema), a ``datasets.save_to_disk`` directory, or a
    ``.parquet`` / ``.csv`` table (read with ``datasets``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such triples file")
    if path.is_dir():
        if not (path / "dataset_info.json").exists() and not (path / "state.json").exists():
            raise TripleError(f"{path}: a directory must be a `datasets` save_to_disk folder "
                              "(dataset_info.json); give a .jsonl file otherwise")
        import datasets

        table = datasets.load_from_disk(str(path))
        if isinstance(table, datasets.DatasetDict):
            raise TripleError(f"{path}: a DatasetDict; pass one split's folder ({list(table)})")
        return from_hf(table, name=str(path))
    if path.suffix in (".parquet", ".csv"):
        import datasets

        table = datasets.Dataset.from_parquet(str(path)) if path.suffix == ".parquet" \
            else datasets.Dataset.from_csv(str(path))
        return from_hf(table, name=str(path))
    return validate_rows(((f"{path}:{lineno}", raw) for lineno, raw in iter_jsonl(path)), str(path))


def json_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
