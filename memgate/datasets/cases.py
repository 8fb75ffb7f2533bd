"""The verify-agent-memory case format (docs/design.md section 5) -> evaluation sources.

One JSON object per query::

    {"source": "...", "group_id": "...",
     "query": {"query_id", "namespace", "text", "embedding", "intent", "policy_purpose"},
     "memories": [{"memory_id", "namespace", "text", "embedding", "released_order",
                   "lifecycle_state", "released_policy": {"content_disclosure_allowed",
                   "operation_trace_allowed"}, "assessment": {"relevance", "scope",
                   "policy_allowed"}}]}

Explicit mapping of assessment strings to tri-states (anything else is an error):

    scope:          "allowed" -> True, "disallowed" -> False, "unknown" -> None
    policy_allowed: true -> True, false -> False, null -> None (numbers are rejected)
    relevance:      required | supportive | not_useful | unresolved (kept as the string)
    lifecycle:      from ``lifecycle_state`` and the query's intent by the docs/design.md table

Assessments are scorer-only. Routes see the namespace (scope = memory namespace equals the
query namespace), the lifecycle state and ``released_policy`` for the query's purpose, encoded
as the policy tags ``<purpose>:allowed`` / ``<purpose>:denied`` (null -> tags missing -> None).
Each record is its own store; memory ids are made unique as ``<query_id>/<memory_id>``, which
keeps "ties by id ascending" in the file's memory-id order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract.admissibility import (
    INTENTS,
    LIFECYCLE_STATES,
    RELEVANCE_LABELS,
    PolicyRules,
    check_tristate,
    lifecycle_value,
)
from memgate.contract.jsonl import RecordError, iter_jsonl
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext
from memgate.contract.sources import EvalSource

PURPOSES = ("content_disclosure", "operation_trace")
SCOPE_MAP = {"allowed": True, "disallowed": False, "unknown": None}

RECORD_KEYS = {"source", "group_id", "query", "memories"}
QUERY_KEYS = {"query_id", "namespace", "text", "embedding", "intent", "policy_purpose"}
MEMORY_KEYS = {
    "memory_id", "namespace", "text", "embedding", "released_order", "lifecycle_state",
    "released_policy", "assessment",
}
POLICY_KEYS = {f"{p}_allowed" for p in PURPOSES}
ASSESSMENT_KEYS = {"relevance", "scope", "policy_allowed"}


def case_policy_rules() -> PolicyRules:
    rules = {}
    for purpose in PURPOSES:
        rules[f"{purpose}:allowed"] = {"reason": "purpose"}
        rules[f"{purpose}:denied"] = {"reason": "purpose", "deny": [purpose]}
    return PolicyRules.from_dict(rules)


@dataclass
class CaseSource:
    """A source built from a cases file, with the embeddings the file supplied."""

    source: EvalSource
    memory_embeddings: np.ndarray  # (n_memories, d) in source.memories order
    query_embeddings: np.ndarray  # (n_queries, d) in source.queries order


def _keys(obj: object, required: set, where: str, optional: set = frozenset()) -> dict:
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: must be a JSON object, got {type(obj).__name__}")
    missing = sorted(required - set(obj))
    if missing:
        raise RecordError(f"{where}: missing field(s) {missing}")
    unknown = sorted(set(obj) - required - set(optional))
    if unknown:
        raise RecordError(f"{where}: unknown field(s) {unknown}")
    return obj


def _string(obj: dict, key: str, where: str) -> str:
    value = obj[key]
    if not isinstance(value, str) or not value:
        raise RecordError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value


_F32_MAX = float(np.finfo(np.float32).max)


def _embedding(value: object, where: str, dim: Optional[int]) -> np.ndarray:
    """A finite, non-zero float32 vector; each number is checked as the float32 it becomes
    (1e39 is inf in float32, 10**400 is no float at all)."""
    if not isinstance(value, list) or not value:
        raise RecordError(f"{where}.embedding: must be a non-empty list of numbers")
    for i, x in enumerate(value):
        if type(x) is bool or not isinstance(x, (int, float)):
            raise RecordError(f"{where}.embedding[{i}]: must be a number, got {x!r}")
        try:
            finite = math.isfinite(x) and abs(float(x)) <= _F32_MAX
        except OverflowError:  # an int beyond any float
            finite = False
        if not finite:
            shown = repr(x) if not isinstance(x, int) else f"an integer of {len(str(abs(x)))} digits"
            raise RecordError(f"{where}.embedding[{i}]: NaN or inf is not allowed (after the float32 "
                              f"cast), got {shown}")
    if dim is not None and len(value) != dim:
        raise RecordError(f"{where}.embedding: dimension {len(value)} differs from {dim} earlier")
    vector = np.asarray(value, dtype=np.float32)
    if not np.isfinite(np.linalg.norm(vector.astype(np.float64))) or not vector.any():
        raise RecordError(f"{where}.embedding: an all-zero vector has no direction to rank by")
    return vector


def _scope(value: object, where: str):
    if not isinstance(value, str) or value not in SCOPE_MAP:
        raise RecordError(f"{where}.scope: must be one of {sorted(SCOPE_MAP)}, got {value!r}")
    return SCOPE_MAP[value]


def _tristate_json(value: object, where: str):
    try:
        return check_tristate(value, where)
    except TypeError as exc:
        raise TypeError(str(exc)) from None


def load_cases(path: Path) -> list[CaseSource]:
    """Parse a cases file into one source per ``source`` field (``cases:<stem>/<source>``)."""
    path = Path(path)
    stem = path.stem
    grouped: dict[str, dict] = {}
    dim: Optional[int] = None
    seen_queries: set = set()
    for lineno, record in iter_jsonl(path):
        where = f"{path.name}:{lineno}"
        _keys(record, {"query", "memories"}, where, optional=RECORD_KEYS)
        source_field = record.get("source")
        if source_field is not None and (not isinstance(source_field, str) or not source_field):
            raise RecordError(f"{where}.source: must be a non-empty string or absent")
        name = f"cases:{stem}/{source_field}" if source_field else f"cases:{stem}"
        group_id = record.get("group_id")
        if group_id is not None and not isinstance(group_id, str):
            raise RecordError(f"{where}.group_id: must be a string")

        q = _keys(record["query"], QUERY_KEYS, f"{where}.query")
        qwhere = f"{where}.query"
        query_id = _string(q, "query_id", qwhere)
        if query_id in seen_queries:
            raise RecordError(f"{qwhere}.query_id: duplicate query id {query_id!r}")
        seen_queries.add(query_id)
        intent = q["intent"]
        if intent not in INTENTS:
            raise RecordError(f"{qwhere}.intent: must be one of {INTENTS}, got {intent!r}")
        purpose = q["policy_purpose"]
        if purpose not in PURPOSES:
            raise RecordError(f"{qwhere}.policy_purpose: must be one of {PURPOSES}, got {purpose!r}")
        q_vec = _embedding(q["embedding"], qwhere, dim)
        dim = len(q_vec)
        namespace = _string(q, "namespace", qwhere)
        context = QueryContext(
            query_id=query_id,
            text=_string(q, "text", qwhere),
            principal=None,
            namespaces=frozenset({namespace}),
            purpose=purpose,
            intent=intent,
            group_id=group_id or query_id,
        )

        memories_raw = record["memories"]
        if not isinstance(memories_raw, list) or not memories_raw:
            raise RecordError(f"{where}.memories: an empty candidate set cannot be evaluated")
        bucket = grouped.setdefault(
            name, {"memories": [], "vectors": [], "queries": [], "qvecs": [], "labels": {},
                   "anchors": {}, "pools": {}, "ids": set()}
        )
        local_ids: set = set()
        labels: dict = {}
        anchors = []
        pool = []
        for j, m in enumerate(memories_raw):
            mwhere = f"{where}.memories[{j}]"
            _keys(m, MEMORY_KEYS, mwhere)
            memory_id = _string(m, "memory_id", mwhere)
            if memory_id in local_ids:
                raise RecordError(f"{mwhere}.memory_id: duplicate id {memory_id!r} in this query")
            local_ids.add(memory_id)
            state = m["lifecycle_state"]
            if state not in LIFECYCLE_STATES:
                raise RecordError(
                    f"{mwhere}.lifecycle_state: must be one of {LIFECYCLE_STATES}, got {state!r}"
                )
            order = m["released_order"]
            if type(order) is not int:
                raise RecordError(f"{mwhere}.released_order: must be an integer, got {order!r}")
            released = _keys(m["released_policy"], POLICY_KEYS, f"{mwhere}.released_policy")
            allowed = _tristate_json(
                released[f"{purpose}_allowed"], f"{mwhere}.released_policy.{purpose}_allowed"
            )
            for key in POLICY_KEYS:
                _tristate_json(released[key], f"{mwhere}.released_policy.{key}")
            assessment = _keys(m["assessment"], ASSESSMENT_KEYS, f"{mwhere}.assessment")
            relevance = assessment["relevance"]
            if relevance not in RELEVANCE_LABELS:
                raise RecordError(
                    f"{mwhere}.assessment.relevance: must be one of {RELEVANCE_LABELS}, got {relevance!r}"
                )
            scope = _scope(assessment["scope"], f"{mwhere}.assessment")
            policy = _tristate_json(
                assessment["policy_allowed"], f"{mwhere}.assessment.policy_allowed"
            )
            internal_id = f"{query_id}/{memory_id}"
            if internal_id in bucket["ids"]:  # e.g. query "a/b" + memory "c" vs query "a" + "b/c"
                raise RecordError(
                    f"{mwhere}.memory_id: internal id {internal_id!r} (<query_id>/<memory_id>) "
                    "collides with an earlier record's; avoid '/' in ids"
                )
            bucket["ids"].add(internal_id)
            memory_ns = m["namespace"]
            if memory_ns is not None and not isinstance(memory_ns, str):
                raise RecordError(f"{mwhere}.namespace: must be a string or null")
            tags = None if allowed is None else (f"{purpose}:{'allowed' if allowed else 'denied'}",)
            bucket["memories"].append(
                MemoryRecord(
                    memory_id=internal_id,
                    text=_string(m, "text", mwhere),
                    namespace=memory_ns,
                    policy_tags=tags,
                    lifecycle_state=state,
                    released_order=order,
                    group_id=group_id or query_id,
                )
            )
            bucket["vectors"].append(_embedding(m["embedding"], mwhere, dim))
            labels[internal_id] = PairLabel(
                query_id=query_id,
                memory_id=internal_id,
                relevance=relevance,
                scope=scope,
                policy=policy,
                lifecycle=lifecycle_value(state, intent),
                policy_reasons=("purpose",) if policy is False else (),
            )
            if relevance == "required":
                anchors.append(frozenset({internal_id}))
            pool.append(internal_id)
        bucket["queries"].append(context)
        bucket["qvecs"].append(q_vec)
        bucket["labels"][query_id] = labels
        bucket["anchors"][query_id] = anchors
        bucket["pools"][query_id] = pool

    if not grouped:
        raise RecordError(f"{path}: no cases found")
    sources = []
    for name, bucket in sorted(grouped.items()):
        memories = bucket["memories"]
        index = {m.memory_id: i for i, m in enumerate(memories)}
        pools = {qid: np.array([index[mid] for mid in ids], dtype=np.int64)
                 for qid, ids in bucket["pools"].items()}
        source = EvalSource(
            name=name,
            memories=memories,
            queries=bucket["queries"],
            pools=pools,
            labels=bucket["labels"],
            anchor_groups=bucket["anchors"],
            policy_rules=case_policy_rules(),
            default_label=_no_default,
        )
        sources.append(CaseSource(source, np.stack(bucket["vectors"]), np.stack(bucket["qvecs"])))
    return sources


def _no_default(query: QueryContext, memory: MemoryRecord) -> PairLabel:
    raise KeyError(f"memory {memory.memory_id!r} is not a candidate of query {query.query_id!r}")
