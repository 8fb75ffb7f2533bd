"""The stored record (``StoredMemory``) and its parts: docs/design.md section 3's route-visible fields plus the
record semantics an agent's memory path needs.

- ``observed_at`` (when the evidence was read) is distinct from ``created_at`` (first write) and
  ``updated_at`` (last write); the store sets the latter two, the caller supplies the first
  (missing stays ``None``: never imputed).
- ``applicability`` makes a claim conditional: about a ``subject``, within a free-form
  ``scope`` label, valid in ``[valid_from, valid_to)``. Outside its validity window a claim is
  not current (``stale`` for that query); with no query time the window cannot be checked and the
  state is ``unknown`` (never imputed).
- ``supersedes`` names the records this one replaces and the scope it replaces them in (docs/design.md's
  scoped supersession); the store records the scopes on the replaced record
  (``superseded_in``), which is then ``superseded`` only for queries inside one of them.
- ``derived_from`` links a record to its sources; retiring, correcting, superseding or
  forgetting a source flags every record derived from it (transitively) as ``needs_review``.
- ``revision`` increases on every write; updates are compare-and-set on it.
- the allowed-action attributes (``epistemic_status`` ... ``conflicts_with``) are read by
  :mod:`memgate.actions` at retrieval time; ``markers`` are literal protected targets a
  disclosure scan looks for in an answer.
- ``attributes`` is the caller's free-form metadata (a JSON object, at most
  ``MAX_ATTRIBUTES_BYTES`` serialised): stored with the record, never read by the semantics,
  never logged, erased on forget (``memgate.Memory`` calls it ``metadata``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Optional

from memgate.contract.admissibility import LIFECYCLE_STATES, SupersessionScope

FORGET_DIRECTIVE_KIND = "forget_directive"
MAX_ATTRIBUTES_BYTES = 16_384
MAX_ATTRIBUTES_DEPTH = 32  # nested objects / lists in a metadata value (a JSON encoder's recursion stays far off)

# Fields whose change alters what the record claims: derived records then need review.
CONTENT_FIELDS = ("text", "applicability")
# Fields a caller may change through ``update``; lifecycle moves to superseded/forgotten only
# through ``add(supersedes=...)`` and ``forget``.
UPDATABLE_FIELDS = (
    "text",
    "kind",
    "domain",
    "policy_tags",
    "lifecycle_state",
    "applicability",
    "observed_at",
    "provenance",
    "epistemic_status",
    "source_type",
    "verification_required",
    "status",
    "priority",
    "risk",
    "evidence_strength",
    "forbids",
    "conflicts_with",
    "markers",
    "attributes",
)


# The longest memory (and query) text a store or retriever accepts, in characters. Longer texts
# are refused, not truncated: the bundled encoder reads only the first 256 word pieces (about
# 1,000 characters of English) anyway, and the reliability audit saw a 1 MB text take 56 s and
# 741 MB to embed.
MAX_TEXT_CHARS = 8192


def check_text_size(text: Any, where: str) -> None:
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"{where}: field 'text' has {len(text):,} characters, beyond the limit of "
            f"{MAX_TEXT_CHARS:,} (memgate.retriever.MAX_TEXT_CHARS); split it into several memories")


def _opt_str(value: Any, name: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"field {name!r} must be a non-empty string or None, got {value!r}")


def _str_tuple(value: Any, name: str, optional: bool = False) -> Optional[tuple[Any, ...]]:
    if value is None and optional:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"field {name!r} must be a list of strings, got {value!r}")
    if not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"field {name!r} must hold non-empty strings, got {value!r}")
    return tuple(value)


def check_attributes(value: Any, name: str = "attributes") -> dict[str, Any]:
    """A copy of a free-form metadata object: string keys, JSON values, finite numbers, at most
    ``MAX_ATTRIBUTES_DEPTH`` levels of nesting and ``MAX_ATTRIBUTES_BYTES`` serialised (errors
    name the field and key)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"field {name!r} must be a JSON object (a mapping), got {type(value).__name__}")

    def check(item: Any, path: str, depth: int = 0) -> None:
        if isinstance(item, (Mapping, list, tuple)) and depth >= MAX_ATTRIBUTES_DEPTH:
            raise ValueError(f"field {path[:120]!r} nests deeper than {MAX_ATTRIBUTES_DEPTH} levels "
                             f"(MAX_ATTRIBUTES_DEPTH)")
        if isinstance(item, Mapping):
            for key, sub in item.items():
                if not isinstance(key, str) or not key:
                    raise ValueError(f"field {path!r}: keys must be non-empty strings, got {key!r}")
                check(sub, f"{path}.{key}", depth + 1)
        elif isinstance(item, (list, tuple)):
            for i, sub in enumerate(item):
                check(sub, f"{path}[{i}]", depth + 1)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"field {path!r} must be a finite number, got {item!r}")
        elif item is not None and not isinstance(item, (str, bool, int, float)):
            raise ValueError(f"field {path!r} must hold JSON values, got {type(item).__name__}")

    check(value, name)
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(blob.encode("utf-8")) > MAX_ATTRIBUTES_BYTES:
        raise ValueError(f"field {name!r} is {len(blob.encode('utf-8'))} bytes serialised; "
                         f"the limit is {MAX_ATTRIBUTES_BYTES}")
    checked: dict[str, Any] = json.loads(blob)
    return checked


def scope_to_dict(scope: Optional[SupersessionScope]) -> Optional[dict[str, Any]]:
    return None if scope is None else asdict(scope)


def scope_from_dict(raw: Optional[Mapping[str, Any]]) -> Optional[SupersessionScope]:
    if raw is None:
        return None
    if isinstance(raw, SupersessionScope):
        return raw
    unknown = sorted(set(raw) - {"subject", "valid_from", "valid_to"})
    if unknown:
        raise ValueError(f"supersession scope: unknown key(s) {unknown}")
    for key in ("subject", "valid_from", "valid_to"):
        _opt_str(raw.get(key), f"scope.{key}")
    return SupersessionScope(raw.get("subject"), raw.get("valid_from"), raw.get("valid_to"))


@dataclass(frozen=True)
class Applicability:
    """When and to what a claim applies. ``None`` fields are unconstrained.

    Times are ISO-8601 strings in one format (compared lexicographically, as in
    :class:`memgate.contract.admissibility.SupersessionScope`).
    """

    subject: Optional[str] = None
    scope: Optional[str] = None
    valid_from: Optional[str] = None
    valid_to: Optional[str] = None

    def __post_init__(self) -> None:
        for f in fields(self):
            _opt_str(getattr(self, f.name), f"applicability.{f.name}")
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError(
                f"fields 'applicability.valid_from' ({self.valid_from}) and "
                f"'applicability.valid_to' ({self.valid_to}) clash: the window is empty"
            )

    @property
    def window(self) -> Optional[SupersessionScope]:
        """The validity window as a time-only scope (None when unbounded)."""
        if self.valid_from is None and self.valid_to is None:
            return None
        return SupersessionScope(None, self.valid_from, self.valid_to)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Optional[Mapping[str, Any]]) -> Applicability:
        if raw is None:
            return cls()
        if isinstance(raw, Applicability):
            return raw
        unknown = sorted(set(raw) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"applicability: unknown key(s) {unknown}")
        return cls(**dict(raw))


@dataclass(frozen=True)
class Supersedes:
    """This record replaces ``memory_id`` within ``scope`` (None = everywhere).

    ``expected_revision``, when given, makes the supersession compare-and-set on the replaced
    record.
    """

    memory_id: str
    scope: Optional[SupersessionScope] = None
    expected_revision: Optional[int] = None

    def __post_init__(self) -> None:
        if not isinstance(self.memory_id, str) or not self.memory_id:
            raise ValueError("field 'supersedes.memory_id' must be a non-empty string")
        if self.expected_revision is not None and type(self.expected_revision) is not int:
            raise ValueError("field 'supersedes.expected_revision' must be an int or None")

    def to_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "scope": scope_to_dict(self.scope)}


@dataclass(frozen=True)
class SupersededIn:
    """On a replaced record: replaced by ``by`` within ``scope`` (None = everywhere)."""

    by: str
    scope: Optional[SupersessionScope] = None

    def to_dict(self) -> dict[str, Any]:
        return {"by": self.by, "scope": scope_to_dict(self.scope)}


@dataclass(frozen=True)
class StoredMemory:
    """One stored memory. Build new ones with ``StoredMemory(memory_id, namespace, text, ...)``;
    the store owns ``revision``, ``created_at``, ``updated_at``, ``superseded_in``,
    ``needs_review`` / ``review_reasons`` and ``forgotten_by``.
    """

    memory_id: str
    namespace: str
    text: Optional[str]  # None only on a forgotten tombstone
    kind: Optional[str] = None
    domain: Optional[str] = None
    policy_tags: Optional[tuple[Any, ...]] = None  # None = missing, never imputed
    lifecycle_state: str = "current"
    applicability: Applicability = field(default_factory=Applicability)
    supersedes: tuple[Any, ...] = ()  # of Supersedes
    derived_from: tuple[Any, ...] = ()  # of memory ids
    observed_at: Optional[str] = None
    provenance: Optional[str] = None
    principal: Optional[str] = None  # who wrote it (authenticated by the caller)
    # allowed-action attributes (memgate.actions.ActionInput)
    epistemic_status: Optional[str] = None
    source_type: Optional[str] = None
    verification_required: bool = False
    status: Optional[str] = None
    priority: Optional[str] = None
    risk: Optional[str] = None
    evidence_strength: Optional[float] = None
    forbids: tuple[Any, ...] = ()
    conflicts_with: tuple[Any, ...] = ()
    markers: tuple[Any, ...] = ()  # literal protected targets for disclosure scans (forgotten with the text)
    attributes: Mapping[str, Any] = field(default_factory=dict)  # caller metadata (JSON; erased on forget)
    forgets: Optional[str] = None  # on a forget directive: the id whose detail was forgotten
    # store-owned
    revision: int = 0
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    superseded_in: tuple[Any, ...] = ()  # of SupersededIn
    needs_review: bool = False
    review_reasons: tuple[Any, ...] = ()
    forgotten_by: Optional[str] = None

    def __post_init__(self) -> None:
        where = f"memory {self.memory_id!r}: "
        try:
            if not isinstance(self.memory_id, str) or not self.memory_id:
                raise ValueError("field 'memory_id' must be a non-empty string")
            if not isinstance(self.namespace, str) or not self.namespace:
                raise ValueError(
                    "field 'namespace' must be a non-empty string (the store's scope axis; "
                    "a record nobody may read is not stored)"
                )
            if self.text is not None and not isinstance(self.text, str):
                raise ValueError("field 'text' must be a string")
            if self.lifecycle_state not in LIFECYCLE_STATES:
                raise ValueError(
                    f"field 'lifecycle_state' must be one of {LIFECYCLE_STATES}, "
                    f"got {self.lifecycle_state!r}"
                )
            if self.text is None and self.lifecycle_state != "forgotten":
                raise ValueError("field 'text' is None but the record is not forgotten")
            for name in ("kind", "domain", "observed_at", "provenance", "principal", "forgets",
                         "created_at", "updated_at", "forgotten_by"):
                _opt_str(getattr(self, name), name)
            object.__setattr__(
                self, "policy_tags", _str_tuple(self.policy_tags, "policy_tags", optional=True)
            )
            if not isinstance(self.applicability, Applicability):
                object.__setattr__(self, "applicability", Applicability.from_dict(self.applicability))
            sup = tuple(
                s if isinstance(s, Supersedes) else Supersedes(
                    s["memory_id"], scope_from_dict(s.get("scope")), s.get("expected_revision"))
                for s in self.supersedes
            )
            if any(s.memory_id == self.memory_id for s in sup):
                raise ValueError("field 'supersedes' names the record itself")
            object.__setattr__(self, "supersedes", sup)
            derived = _str_tuple(self.derived_from, "derived_from")
            assert derived is not None  # (not optional: a tuple or an error)
            if self.memory_id in derived:
                raise ValueError("field 'derived_from' names the record itself")
            object.__setattr__(self, "derived_from", derived)
            for name in ("forbids", "conflicts_with", "markers", "review_reasons"):
                object.__setattr__(self, name, _str_tuple(getattr(self, name), name))
            object.__setattr__(self, "superseded_in", tuple(
                s if isinstance(s, SupersededIn) else SupersededIn(s["by"], scope_from_dict(s.get("scope")))
                for s in self.superseded_in
            ))
            object.__setattr__(self, "attributes", check_attributes(self.attributes))
            for name in ("verification_required", "needs_review"):
                if type(getattr(self, name)) is not bool:
                    raise ValueError(f"field {name!r} must be a bool")
            if type(self.revision) is not int or self.revision < 0:
                raise ValueError("field 'revision' must be an int >= 0")
            strength = self.evidence_strength
            if strength is not None:
                if type(strength) not in (int, float) or not math.isfinite(strength):
                    raise ValueError("field 'evidence_strength' must be a finite number or None")
                object.__setattr__(self, "evidence_strength", float(strength))
        except ValueError as exc:
            raise ValueError(where + str(exc)) from None

    # -- views ---------------------------------------------------------------------------------

    @property
    def forgotten(self) -> bool:
        return self.lifecycle_state == "forgotten"

    def action_fields(self) -> dict[str, Any]:
        """The mapping :func:`memgate.actions.decide_actions` reads (lifecycle set by caller)."""
        return {
            "memory_id": self.memory_id,
            "lifecycle_state": self.lifecycle_state,
            "epistemic_status": self.epistemic_status,
            "source_type": self.source_type,
            "verification_required": self.verification_required or self.needs_review,
            "status": self.status,
            "priority": self.priority,
            "risk": self.risk,
            "evidence_strength": self.evidence_strength,
            "forbids": list(self.forbids),
            "conflicts_with": list(self.conflicts_with),
            "provenance": self.provenance,
        }

    def metadata(self) -> dict[str, Any]:
        """Every field except ``text``, ``markers`` and ``attributes`` as JSON primitives."""
        out = self.to_dict()
        out.pop("text")
        out.pop("markers")
        out.pop("attributes")
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "applicability":
                value = value.to_dict()
            elif f.name in ("supersedes", "superseded_in"):
                value = [v.to_dict() for v in value]
            elif f.name == "attributes":
                value = json.loads(json.dumps(value))  # a copy: the record stays unchanged
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StoredMemory:
        if not isinstance(raw, Mapping):
            raise ValueError(f"a memory must be a mapping, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"memory {raw.get('memory_id')!r}: unknown field(s) {unknown}")
        values = dict(raw)
        values["applicability"] = Applicability.from_dict(values.get("applicability"))
        values["supersedes"] = tuple(
            Supersedes(s["memory_id"], scope_from_dict(s.get("scope")))
            for s in values.get("supersedes") or ()
        )
        values["superseded_in"] = tuple(
            SupersededIn(s["by"], scope_from_dict(s.get("scope")))
            for s in values.get("superseded_in") or ()
        )
        return cls(**values)

    def replace(self, **changes: Any) -> StoredMemory:
        return replace(self, **changes)


__all__ = [
    "CONTENT_FIELDS",
    "FORGET_DIRECTIVE_KIND",
    "MAX_ATTRIBUTES_BYTES",
    "MAX_ATTRIBUTES_DEPTH",
    "MAX_TEXT_CHARS",
    "UPDATABLE_FIELDS",
    "Applicability",
    "StoredMemory",
    "SupersededIn",
    "Supersedes",
    "check_attributes",
    "check_text_size",
    "renamed_memory",
    "scope_from_dict",
    "scope_to_dict",
]


def renamed_memory(module: str) -> type:
    """``StoredMemory`` under its old name ``Memory`` (until 0.2, one release; memgate.Memory is
    the agent facade), with a DeprecationWarning naming ``module``."""
    import warnings

    warnings.warn(f"{module}.Memory is now StoredMemory (memgate.Memory is the agent facade); the "
                  "old name goes in the next release", DeprecationWarning, stacklevel=3)
    return StoredMemory

