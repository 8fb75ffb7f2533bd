"""The action vocabulary, its permissiveness order and the checked inputs of a decision
(an exposed memory, the query, a conflict)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from memgate.contract.admissibility import INTENTS

ACTION_ORDER: tuple[str, ...] = (
    "answer",
    "answer_context",
    "warn",
    "verify_first",
    "archive_only",
    "block",
)
"""The six actions, most permissive first (the order of docs/design.md section 3)."""

EXPOSED_LIFECYCLE_STATES = ("current", "stale", "superseded", "unknown")
EPISTEMIC_STATUSES = ("verified", "summary", "inference", "unresolved", "contested")
SOURCE_TYPES = ("correction", "preference", "plan", "source_document", "draft", "summary")
ITEM_STATUSES = ("draft", "in_progress", "ready", "blocked", "done", "final", "published")
PRIORITIES = ("next", "later")
RISK_LEVELS = ("low", "medium", "high")
ASKS = ("fact", "status", "priority", "action")
PRESETS = ("strict", "balanced", "balanced_risk_adjusted")  # the presets the action suite records
AGENT_DEFAULT_PRESET = "agent_default"  # memgate.Memory's preset (missing risk counts as low)
USER_STATED = "user_stated"  # provenance: the authenticated user stated it about themselves

class ActionPolicyError(ValueError):
    """A malformed action input, query or policy file; the message names the field."""


class InadmissibleMemoryError(ValueError):
    """The memory is inadmissible for this query: it must be excluded, not given an action."""


# --------------------------------------------------------------------------- order


def permissiveness(action: str) -> int:
    """Rank of ``action``: 5 for ``answer`` down to 0 for ``block``."""
    if action not in ACTION_ORDER:
        raise ActionPolicyError(f"action must be one of {ACTION_ORDER}, got {action!r}")
    return len(ACTION_ORDER) - 1 - ACTION_ORDER.index(action)


def is_more_permissive(a: str, b: str) -> bool:
    """True iff action ``a`` is strictly more permissive than action ``b``."""
    return permissiveness(a) > permissiveness(b)


def least_permissive(actions: Iterable[str]) -> str:
    """The least permissive of ``actions`` (``answer`` for an empty iterable)."""
    result = "answer"
    for action in actions:
        if is_more_permissive(result, action):
            result = action
    return result


def compare(actual: str, expected: str) -> str:
    """``correct``, ``false_certainty`` (actual strictly more permissive) or ``overblock``."""
    if actual == expected:
        return "correct"
    return "false_certainty" if is_more_permissive(actual, expected) else "overblock"


# --------------------------------------------------------------------------- inputs


def _check_choice(value: Any, choices: Sequence[str], name: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or value not in choices:
        allowed = f"one of {tuple(choices)}" + (" or None" if optional else "")
        raise ActionPolicyError(f"field {name!r} must be {allowed}, got {value!r}")


def _check_slugs(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ActionPolicyError(f"field {name!r} must be a list of strings, got {value!r}")
    if not all(isinstance(v, str) and v for v in value):
        raise ActionPolicyError(f"field {name!r} must hold non-empty strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class Conflict:
    """A contradiction with another exposed memory; ``source_type`` None = authority unknown."""

    memory_id: str
    source_type: Optional[str] = None

    def __post_init__(self) -> None:
        if not isinstance(self.memory_id, str) or not self.memory_id:
            raise ActionPolicyError("field 'conflicts.memory_id' must be a non-empty string")
        _check_choice(self.source_type, SOURCE_TYPES, "conflicts.source_type", optional=True)


@dataclass(frozen=True)
class ActionInput:
    """The attributes of one exposed memory that the action policy reads.

    ``None`` means *missing* and is never imputed as a benign value: a missing epistemic status
    is gated like an unresolved one, a missing risk counts as ``high`` (the preset's
    ``missing_risk``; only ``agent_default`` sets it lower), a missing evidence
    strength as 0. ``status`` (where the item stands) and ``priority`` (whether it is next) are
    separate fields on purpose: a ``ready`` item is not necessarily ``next``. ``gate_risk`` /
    ``gate_risk_warn`` come from the retriever (the learned gate's calibrated risk of the memory
    for this query, and the checkpoint's warn threshold): at or above it the preset's
    ``gate_risk_flagged`` cap applies.
    """

    memory_id: str
    lifecycle_state: str
    epistemic_status: Optional[str]
    source_type: Optional[str]
    verification_required: bool = False
    status: Optional[str] = None
    priority: Optional[str] = None
    risk: Optional[str] = None
    evidence_strength: Optional[float] = None
    forbids: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    provenance: Optional[str] = None  # who stated it (trusted metadata); USER_STATED is read
    # the learned gate's calibrated risk sigmoid(r) of this memory for this query and the
    # checkpoint's risk_warn (both None: no gate, a gate without a risk head, or no risk_warn)
    gate_risk: Optional[float] = None
    gate_risk_warn: Optional[float] = None

    def __post_init__(self) -> None:
        if not isinstance(self.memory_id, str) or not self.memory_id:
            raise ActionPolicyError(
                f"field 'memory_id' must be a non-empty string, got {self.memory_id!r}"
            )
        if self.provenance is not None and (not isinstance(self.provenance, str) or not self.provenance):
            raise ActionPolicyError(f"memory {self.memory_id!r}: field 'provenance' must be a "
                                    f"non-empty string or None, got {self.provenance!r}")
        if self.lifecycle_state == "forgotten":
            raise InadmissibleMemoryError(
                f"memory {self.memory_id!r}: lifecycle_state 'forgotten' is inadmissible for every "
                "intent; it is excluded before allowed actions are computed"
            )
        where = f"memory {self.memory_id!r}: "
        try:
            _check_choice(self.lifecycle_state, EXPOSED_LIFECYCLE_STATES, "lifecycle_state")
            _check_choice(
                self.epistemic_status, EPISTEMIC_STATUSES, "epistemic_status", optional=True
            )
            _check_choice(self.source_type, SOURCE_TYPES, "source_type", optional=True)
            if type(self.verification_required) is not bool:
                raise ActionPolicyError(
                    "field 'verification_required' must be a bool, "
                    f"got {self.verification_required!r}"
                )
            _check_choice(self.status, ITEM_STATUSES, "status", optional=True)
            _check_choice(self.priority, PRIORITIES, "priority", optional=True)
            _check_choice(self.risk, RISK_LEVELS, "risk", optional=True)
            strength = self.evidence_strength
            if strength is not None:
                if type(strength) not in (int, float) or not 0.0 <= float(strength) <= 1.0:
                    raise ActionPolicyError(
                        "field 'evidence_strength' must be a number in [0, 1] or None, "
                        f"got {strength!r}"
                    )
                object.__setattr__(self, "evidence_strength", float(strength))
            for name in ("gate_risk", "gate_risk_warn"):
                value = getattr(self, name)
                if value is not None:
                    if type(value) not in (int, float) or not 0.0 <= float(value) <= 1.0:
                        raise ActionPolicyError(
                            f"field {name!r} must be a number in [0, 1] or None, got {value!r}")
                    object.__setattr__(self, name, float(value))
            object.__setattr__(self, "forbids", _check_slugs(self.forbids, "forbids"))
            if isinstance(self.conflicts, (str, bytes)) or not isinstance(
                self.conflicts, (list, tuple)
            ):
                raise ActionPolicyError(
                    f"field 'conflicts' must be a list of Conflict, got {self.conflicts!r}"
                )
            if not all(isinstance(c, Conflict) for c in self.conflicts):
                raise ActionPolicyError("field 'conflicts' must hold Conflict objects")
            object.__setattr__(self, "conflicts", tuple(self.conflicts))
        except ActionPolicyError as exc:
            raise ActionPolicyError(where + str(exc)) from None

    @property
    def gate_flagged(self) -> bool:
        """The learned gate flagged this memory: ``gate_risk >= gate_risk_warn`` (both given)."""
        return (self.gate_risk is not None and self.gate_risk_warn is not None
                and self.gate_risk >= self.gate_risk_warn)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], conflicts: Sequence[Conflict] = ()) -> ActionInput:
        """Build from a mapping (e.g. a scenario-suite memory); unknown keys raise.

        ``conflicts_with`` (a list of ids) is accepted and ignored here: ids are resolved to
        :class:`Conflict` objects by :func:`decide_actions`, which sees the other exposed memories.
        """
        if not isinstance(raw, Mapping):
            raise ActionPolicyError(f"an action input must be a mapping, got {type(raw).__name__}")
        known = {
            "id",
            "memory_id",
            "lifecycle_state",
            "epistemic_status",
            "source_type",
            "verification_required",
            "status",
            "priority",
            "risk",
            "evidence_strength",
            "forbids",
            "conflicts_with",
            "provenance",
            "gate_risk",
            "gate_risk_warn",
            # scenario-suite annotations the policy never reads
            "text",
            "expected_action",
            "rationale",
        }
        unknown = sorted(set(raw) - known)
        memory_id = raw.get("memory_id", raw.get("id"))
        if unknown:
            raise ActionPolicyError(f"memory {memory_id!r}: unknown field(s) {unknown}")
        if "lifecycle_state" not in raw:
            raise ActionPolicyError(f"memory {memory_id!r}: missing field 'lifecycle_state'")
        return cls(
            memory_id=memory_id,
            lifecycle_state=raw["lifecycle_state"],
            epistemic_status=raw.get("epistemic_status"),
            source_type=raw.get("source_type"),
            verification_required=raw.get("verification_required", False),
            status=raw.get("status"),
            priority=raw.get("priority"),
            risk=raw.get("risk"),
            evidence_strength=raw.get("evidence_strength"),
            forbids=() if raw.get("forbids") is None else raw["forbids"],
            conflicts=tuple(conflicts),
            provenance=raw.get("provenance"),
            gate_risk=raw.get("gate_risk"),
            gate_risk_warn=raw.get("gate_risk_warn"),
        )


@dataclass(frozen=True)
class ActionQuery:
    """The parts of the query context the policy reads.

    ``intent`` as in docs/design.md section 3; ``asks`` what the question is about (``fact``,
    ``status``, ``priority`` or ``action``); ``proposed_action`` the action the agent is about to
    take (required when ``asks == "action"``); ``risk`` the stakes of the whole request, combined
    with each memory's own risk by taking the higher.
    """

    intent: str = "unknown"
    asks: str = "fact"
    proposed_action: Optional[str] = None
    risk: Optional[str] = None

    def __post_init__(self) -> None:
        try:
            _check_choice(self.intent, INTENTS, "intent")
            _check_choice(self.asks, ASKS, "asks")
            _check_choice(self.risk, RISK_LEVELS, "risk", optional=True)
            if self.proposed_action is not None and (
                not isinstance(self.proposed_action, str) or not self.proposed_action
            ):
                raise ActionPolicyError(
                    "field 'proposed_action' must be a non-empty string or None, "
                    f"got {self.proposed_action!r}"
                )
            if self.asks == "action" and self.proposed_action is None:
                raise ActionPolicyError(
                    "fields 'asks' and 'proposed_action' clash: "
                    "asks='action' needs a proposed_action"
                )
        except ActionPolicyError as exc:
            raise ActionPolicyError("query: " + str(exc)) from None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ActionQuery:
        if not isinstance(raw, Mapping):
            raise ActionPolicyError(f"a query must be a mapping, got {type(raw).__name__}")
        unknown = sorted(set(raw) - {"intent", "asks", "proposed_action", "risk", "text"})
        if unknown:
            raise ActionPolicyError(f"query: unknown field(s) {unknown}")
        return cls(
            intent=raw.get("intent", "unknown"),
            asks=raw.get("asks", "fact"),
            proposed_action=raw.get("proposed_action"),
            risk=raw.get("risk"),
        )

