"""Load a generated split (``data_gen`` output) as an evaluation source.

Routes read ``memories.jsonl`` and ``queries.jsonl``; the scorer reads ``labels.jsonl`` and
``query_meta.jsonl``. The store of a split is shared: every query's pool is every memory of the
split, so other groups' memories are wrong-scope candidates for the global routes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from memgate.contract.admissibility import PolicyRules
from memgate.contract.jsonl import iter_jsonl
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext, read_records
from memgate.contract.sources import EvalSource


def read_meta(data_dir: Path) -> dict:
    path = Path(data_dir) / "meta.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: generate data with `python -m data_gen`")
    return json.loads(path.read_text(encoding="utf-8"))


def load_split(data_dir: Path, split: str, name: str = "synthetic_test") -> EvalSource:
    data_dir = Path(data_dir)
    split_dir = data_dir / split
    meta = read_meta(data_dir)
    memories = read_records(split_dir / "memories.jsonl", MemoryRecord)
    queries = read_records(split_dir / "queries.jsonl", QueryContext)
    labels: dict[str, dict[str, PairLabel]] = {}
    for label in read_records(split_dir / "labels.jsonl", PairLabel):
        labels.setdefault(label.query_id, {})[label.memory_id] = label
    query_meta = {}
    meta_path = split_dir / "query_meta.jsonl"
    if meta_path.exists():
        for _, row in iter_jsonl(meta_path):
            query_meta[row["query_id"]] = row
    anchors = {
        q.query_id: [
            frozenset({mid}) for mid, lab in sorted(labels.get(q.query_id, {}).items())
            if lab.relevance == "required"
        ]
        for q in queries
    }
    pool = np.arange(len(memories), dtype=np.int64)
    return EvalSource(
        name=name,
        memories=memories,
        queries=queries,
        pools={q.query_id: pool for q in queries},
        labels=labels,
        anchor_groups=anchors,
        policy_rules=PolicyRules.from_dict(meta["policy_rules"]),
        query_meta=query_meta,
    )
