"""Records every part shares: memories and query contexts (route-visible) and pair labels
(scorer-only), with validation and JSONL input/output whose errors name the line and the field.

On disk a split directory holds ``memories.jsonl`` and ``queries.jsonl`` (what routes may read),
``labels.jsonl`` (what only the scorer may read) and ``triples.jsonl`` (training preferences).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Optional, TypeVar

from memgate.contract.admissibility import (
    INTENTS,
    LIFECYCLE_STATES,
    POLICY_REASONS,
    RELEVANCE_LABELS,
    PolicyRules,
    SupersessionScope,
    TriState,
    Verdict,
    check_tristate,
    effective_state,
    lifecycle_value,
    scope_value,
)
from memgate.contract.jsonl import (
    RecordError,
    iter_jsonl,
    write_jsonl,  # noqa: F401  (its home before memgate.contract.jsonl)
)

ROUTE_VISIBLE_FILES = ("memories.jsonl", "queries.jsonl")
SCORER_ONLY_FILES = ("labels.jsonl",)


def _require(raw: dict, name: str, kinds: tuple, where: str, optional: bool = False) -> Any:
    if name not in raw:
        if optional:
            return None
        raise RecordError(f"{where}: missing field {name!r}")
    value = raw[name]
    if value is None and optional:
        return None
    if bool in kinds or type(value) is not bool:
        if isinstance(value, kinds):
            return value
    raise RecordError(
        f"{where}: field {name!r} must be {' or '.join(k.__name__ for k in kinds)}"
        f"{' or null' if optional else ''}, got {value!r}"
    )


def _reject_unknown(raw: dict, allowed: Iterable[str], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise RecordError(f"{where}: unknown field(s) {unknown}")


def _build(cls, where: str, **kwargs: Any):
    """Construct a record; errors from its own validation are prefixed with ``where`` (file:line)."""
    try:
        return cls(**kwargs)
    except RecordError as exc:
        raise RecordError(f"{where}: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"{where}: {exc}") from None


def _scope_from(raw: Optional[dict], where: str) -> Optional[SupersessionScope]:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RecordError(f"{where}: field 'supersession_scope' must be an object or null")
    _reject_unknown(raw, ("subject", "valid_from", "valid_to"), f"{where}.supersession_scope")
    return SupersessionScope(
        subject=_require(raw, "subject", (str,), where, optional=True),
        valid_from=_require(raw, "valid_from", (str,), where, optional=True),
        valid_to=_require(raw, "valid_to", (str,), where, optional=True),
    )


@dataclass(frozen=True)
class MemoryRecord:
    """A stored memory with its route-visible metadata (never its labels)."""

    memory_id: str
    text: str
    namespace: Optional[str] = None
    kind: Optional[str] = None
    domain: Optional[str] = None
    policy_tags: Optional[tuple[str, ...]] = None  # None = missing, never imputed
    lifecycle_state: str = "unknown"
    supersession_scope: Optional[SupersessionScope] = None
    released_order: int = 0
    created_at: Optional[str] = None
    observed_at: Optional[str] = None
    provenance: Optional[str] = None
    group_id: Optional[str] = None

    def __post_init__(self) -> None:
        where = f"memory {self.memory_id!r}"
        if not isinstance(self.memory_id, str) or not self.memory_id:
            raise RecordError(f"{where}: field 'memory_id' must be a non-empty string")
        if not isinstance(self.text, str):
            raise RecordError(f"{where}: field 'text' must be a string")
        if self.lifecycle_state not in LIFECYCLE_STATES:
            raise RecordError(
                f"{where}: field 'lifecycle_state' must be one of {LIFECYCLE_STATES}, "
                f"got {self.lifecycle_state!r}"
            )
        if type(self.released_order) is not int:
            raise RecordError(f"{where}: field 'released_order' must be an integer")

    @classmethod
    def from_dict(cls, raw: dict, where: str = "memory") -> MemoryRecord:
        if not isinstance(raw, dict):
            raise RecordError(f"{where}: a memory must be a JSON object")
        _reject_unknown(raw, [f.name for f in fields(cls)], where)
        tags = _require(raw, "policy_tags", (list,), where, optional=True)
        if tags is not None and not all(isinstance(t, str) for t in tags):
            raise RecordError(f"{where}: field 'policy_tags' must be a list of strings or null")
        return _build(
            cls,
            where,
            memory_id=_require(raw, "memory_id", (str,), where),
            text=_require(raw, "text", (str,), where),
            namespace=_require(raw, "namespace", (str,), where, optional=True),
            kind=_require(raw, "kind", (str,), where, optional=True),
            domain=_require(raw, "domain", (str,), where, optional=True),
            policy_tags=None if tags is None else tuple(tags),
            lifecycle_state=_require(raw, "lifecycle_state", (str,), where, optional=True) or "unknown",
            supersession_scope=_scope_from(raw.get("supersession_scope"), where),
            released_order=_require(raw, "released_order", (int,), where, optional=True) or 0,
            created_at=_require(raw, "created_at", (str,), where, optional=True),
            observed_at=_require(raw, "observed_at", (str,), where, optional=True),
            provenance=_require(raw, "provenance", (str,), where, optional=True),
            group_id=_require(raw, "group_id", (str,), where, optional=True),
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out["policy_tags"] = None if self.policy_tags is None else list(self.policy_tags)
        return out


@dataclass(frozen=True)
class QueryContext:
    """``z = (q, principal, namespaces, purpose, intent, time)`` plus the query's applicability."""

    query_id: str
    text: str
    principal: Optional[str]
    namespaces: Optional[frozenset] = None  # readable namespaces from a trusted ACL
    purpose: Optional[str] = None
    intent: str = "unknown"
    time: Optional[str] = None
    subject: Optional[str] = None
    group_id: Optional[str] = None

    def __post_init__(self) -> None:
        where = f"query {self.query_id!r}"
        if not isinstance(self.query_id, str) or not self.query_id:
            raise RecordError(f"{where}: field 'query_id' must be a non-empty string")
        if self.intent not in INTENTS:
            raise RecordError(f"{where}: field 'intent' must be one of {INTENTS}, got {self.intent!r}")
        if isinstance(self.namespaces, str):  # one namespace, as the stores read it (not its letters)
            object.__setattr__(self, "namespaces", frozenset({self.namespaces}))
        elif self.namespaces is not None and not isinstance(self.namespaces, frozenset):
            object.__setattr__(self, "namespaces", frozenset(self.namespaces))

    @classmethod
    def from_dict(cls, raw: dict, where: str = "query") -> QueryContext:
        if not isinstance(raw, dict):
            raise RecordError(f"{where}: a query must be a JSON object")
        _reject_unknown(raw, [f.name for f in fields(cls)], where)
        namespaces = _require(raw, "namespaces", (list,), where, optional=True)
        if namespaces is not None and not all(isinstance(n, str) for n in namespaces):
            raise RecordError(f"{where}: field 'namespaces' must be a list of strings or null")
        return _build(
            cls,
            where,
            query_id=_require(raw, "query_id", (str,), where),
            text=_require(raw, "text", (str,), where),
            principal=_require(raw, "principal", (str,), where, optional=True),
            namespaces=None if namespaces is None else frozenset(namespaces),
            purpose=_require(raw, "purpose", (str,), where, optional=True),
            intent=_require(raw, "intent", (str,), where, optional=True) or "unknown",
            time=_require(raw, "time", (str,), where, optional=True),
            subject=_require(raw, "subject", (str,), where, optional=True),
            group_id=_require(raw, "group_id", (str,), where, optional=True),
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out["namespaces"] = None if self.namespaces is None else sorted(self.namespaces)
        return out


@dataclass(frozen=True)
class PairLabel:
    """Scorer-only truth for one (query, memory) pair. Routes, gates and verifiers never read it."""

    query_id: str
    memory_id: str
    relevance: str
    scope: TriState
    policy: TriState
    lifecycle: TriState
    policy_reasons: tuple[str, ...] = ()
    text_visible: bool = False
    metadata_visible: bool = False
    scenario: Optional[str] = None

    def __post_init__(self) -> None:
        where = f"label ({self.query_id!r}, {self.memory_id!r})"
        if self.relevance not in RELEVANCE_LABELS:
            raise RecordError(
                f"{where}: field 'relevance' must be one of {RELEVANCE_LABELS}, got {self.relevance!r}"
            )
        for name in ("scope", "policy", "lifecycle"):
            try:
                check_tristate(getattr(self, name), name)
            except TypeError as exc:
                raise TypeError(f"{where}: {exc}") from None
        for name in ("text_visible", "metadata_visible"):
            if type(getattr(self, name)) is not bool:
                raise TypeError(f"{where}: field {name!r} must be a bool")
        bad = [r for r in self.policy_reasons if r not in POLICY_REASONS]
        if bad:
            raise RecordError(f"{where}: field 'policy_reasons' has unknown codes {bad}")

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.scope, self.policy, self.lifecycle, tuple(self.policy_reasons))

    @property
    def admissible(self) -> TriState:
        return self.verdict.admissible

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.verdict.exclusion_reasons

    @classmethod
    def from_dict(cls, raw: dict, where: str = "label") -> PairLabel:
        if not isinstance(raw, dict):
            raise RecordError(f"{where}: a label must be a JSON object")
        _reject_unknown(raw, [f.name for f in fields(cls)], where)
        for name in ("scope", "policy", "lifecycle"):
            if name not in raw:
                raise RecordError(f"{where}: missing field {name!r}")
            try:
                check_tristate(raw[name], name)
            except TypeError as exc:
                raise TypeError(f"{where}: {exc}") from None
        return _build(
            cls,
            where,
            query_id=_require(raw, "query_id", (str,), where),
            memory_id=_require(raw, "memory_id", (str,), where),
            relevance=_require(raw, "relevance", (str,), where),
            scope=raw["scope"],
            policy=raw["policy"],
            lifecycle=raw["lifecycle"],
            policy_reasons=tuple(_require(raw, "policy_reasons", (list,), where, optional=True) or ()),
            text_visible=_require(raw, "text_visible", (bool,), where, optional=True) or False,
            metadata_visible=_require(raw, "metadata_visible", (bool,), where, optional=True) or False,
            scenario=_require(raw, "scenario", (str,), where, optional=True),
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out["policy_reasons"] = list(self.policy_reasons)
        return out


def route_verdict(memory: MemoryRecord, context: QueryContext, rules: PolicyRules) -> Verdict:
    """The verdict a route may compute: route-visible metadata only (no labels)."""
    state = effective_state(
        memory.lifecycle_state, memory.supersession_scope, context.subject, context.time
    )
    policy, reasons = rules.evaluate(memory.policy_tags, context.purpose)
    return Verdict(
        scope=scope_value(memory.namespace, context.namespaces),
        policy=policy,
        lifecycle=lifecycle_value(state, context.intent),
        policy_reasons=reasons,
    )


# --------------------------------------------------------------------------- JSONL

R = TypeVar("R", MemoryRecord, QueryContext, PairLabel)


def read_records(path: Path, kind: type[R]) -> list[R]:
    records = []
    for lineno, raw in iter_jsonl(path):
        records.append(kind.from_dict(raw, where=f"{path}:{lineno}"))
    return records

