"""The decision: the least permissive cap of every rule that fires, for one memory or a query's exposed set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from memgate.actions.inputs import (
    RISK_LEVELS,
    USER_STATED,
    ActionInput,
    ActionPolicyError,
    ActionQuery,
    Conflict,
    InadmissibleMemoryError,
    least_permissive,
)
from memgate.actions.policy import ActionPolicy, load_policy
from memgate.actions.presets import Preset
from memgate.contract.admissibility import lifecycle_value

# --------------------------------------------------------------------------- decision


@dataclass(frozen=True)
class ActionReason:
    """One rule that fired: its code, the cap it imposed (None = informational) and why."""

    code: str
    cap: Optional[str]
    detail: str

    def to_dict(self) -> dict:
        return {"code": self.code, "cap": self.cap, "detail": self.detail}


@dataclass(frozen=True)
class ActionDecision:
    """The allowed action for one exposed memory under one query; computed, never stored."""

    memory_id: str
    action: str
    reasons: tuple[ActionReason, ...]
    policy_version: str
    preset: str

    @property
    def binding(self) -> tuple[str, ...]:
        """Codes of the rules whose cap equals the final action (what decided it)."""
        return tuple(r.code for r in self.reasons if r.cap == self.action)

    def to_dict(self) -> dict:
        return {
            "memory_id": self.memory_id,
            "action": self.action,
            "binding": list(self.binding),
            "reasons": [r.to_dict() for r in self.reasons],
            "policy_version": self.policy_version,
            "preset": self.preset,
        }


_RISK_RANK = {level: i for i, level in enumerate(RISK_LEVELS)}


def effective_risk(memory_risk: Optional[str], query_risk: Optional[str]) -> tuple[str, bool]:
    """The higher of the two risks; ``("high", True)`` when both are missing."""
    given = [r for r in (memory_risk, query_risk) if r is not None]
    if not given:
        return "high", True
    return max(given, key=_RISK_RANK.__getitem__), False


@dataclass(frozen=True)
class _Context:
    """What every rule reads: the memory, the query, the preset, the policy's rule caps and the
    effective risk."""

    memory: ActionInput
    query: ActionQuery
    preset: Preset
    rules: Mapping[str, str]
    authority: Mapping[str, int]
    risk: str


def _user_stated(c: _Context) -> bool:
    """The preset reads user_stated provenance and the memory has it."""
    return c.preset.user_stated is not None and c.memory.provenance == USER_STATED


def _lifecycle_rule(c: _Context) -> list[ActionReason]:
    """1. lifecycle against the query intent (inadmissible raises)."""
    memory, query = c.memory, c.query
    if lifecycle_value(memory.lifecycle_state, query.intent) is False:
        raise InadmissibleMemoryError(
            f"memory {memory.memory_id!r}: lifecycle_state {memory.lifecycle_state!r} is "
            "inadmissible "
            f"for intent {query.intent!r}; it is excluded before allowed actions are computed"
        )
    out = []
    archived = memory.lifecycle_state in ("stale", "superseded")
    if archived and query.intent == "unknown":
        out.append(ActionReason(
            "archive_under_unknown_intent", c.rules["archive_under_unknown_intent"],
            f"{memory.lifecycle_state} record under an unknown intent: preserved, not current truth"))
    elif archived and query.intent == "history":
        out.append(ActionReason("archive_answers_history", None,
                                f"{memory.lifecycle_state} record answering a history question"))
    if memory.lifecycle_state == "unknown":
        out.append(ActionReason("unknown_lifecycle", c.preset.unknown_lifecycle[c.risk],
                                f"currency of the record is unknown ({c.risk} risk)"))
    return out


def _prohibition_rule(c: _Context) -> list[ActionReason]:
    """2. the memory forbids the proposed action."""
    proposed = c.query.proposed_action
    if proposed is not None and proposed in c.memory.forbids:
        return [ActionReason("forbids_proposed_action", c.rules["forbids_proposed_action"],
                             f"the memory forbids the proposed action {proposed!r}")]
    return []


def _verification_rule(c: _Context) -> list[ActionReason]:
    """3. verification requirement."""
    if c.memory.verification_required:
        return [ActionReason("verification_required", c.rules["verification_required"],
                             "the record must be confirmed before use")]
    return []


def _epistemic_rule(c: _Context) -> list[ActionReason]:
    """4. epistemic status: unresolved, contested or missing; inference."""
    status = c.memory.epistemic_status
    if status is None and _user_stated(c):
        cap = c.preset.user_stated[c.risk]
        return [ActionReason("user_stated", None if cap == "answer" else cap,
                             f"no epistemic status; the user stated it about themselves ({c.risk} risk)")]
    if status in ("unresolved", "contested") or status is None:
        code = "epistemic_missing" if status is None else f"epistemic_{status}"
        return [ActionReason(code, c.preset.unresolved_or_contested[c.risk],
                             f"epistemic status {status or 'missing'} ({c.risk} risk): "
                             "the boundary must not be flattened")]
    if status == "inference":
        return [ActionReason("epistemic_inference", c.preset.inference[c.risk],
                             f"an inference, not an observation ({c.risk} risk)")]
    return []


def _conflict_rule(c: _Context) -> list[ActionReason]:
    """5. contradictions between exposed memories, by source authority."""
    source = c.memory.source_type
    own_rank = c.authority.get(source) if source else None
    out = []
    for conflict in c.memory.conflicts:
        other_rank = c.authority.get(conflict.source_type) if conflict.source_type else None
        if own_rank is not None and other_rank is not None and other_rank > own_rank:
            out.append(ActionReason(
                "conflict_outranked", c.rules["conflict_outranked"],
                f"contradicted by higher-authority {conflict.source_type} {conflict.memory_id!r}"))
        elif own_rank is not None and other_rank is not None and other_rank < own_rank:
            out.append(ActionReason(
                "conflict_outranks", None,
                f"contradicted by lower-authority {conflict.source_type} {conflict.memory_id!r}"))
        else:
            out.append(ActionReason(
                "conflict_unresolved", c.rules["conflict_unresolved"],
                f"contradicted by {conflict.source_type or 'unranked'} {conflict.memory_id!r} "
                "of equal or unknown authority"))
    return out


def _source_rule(c: _Context) -> list[ActionReason]:
    """6. source type: a draft; a preference (not binding at high risk)."""
    memory, risk = c.memory, c.risk
    if memory.source_type == "draft":
        label = f" labelled {memory.status!r}" if memory.status else ""
        return [ActionReason("source_draft", c.preset.draft[risk],
                             f"a draft{label} is not the adopted source ({risk} risk)")]
    if memory.source_type == "preference" and c.preset.preference[risk] != "answer":
        return [ActionReason("preference_not_binding", c.preset.preference[risk],
                             f"a preference is not a binding instruction at {risk} risk")]
    return []


def _priority_rule(c: _Context) -> list[ActionReason]:
    """7. status is not priority."""
    memory = c.memory
    if c.query.asks == "priority" and memory.priority != "next":
        return [ActionReason(
            "status_is_not_priority", c.rules["status_is_not_priority"],
            f"a what-next question and the item's priority is {memory.priority or 'unset'}"
            + (f" (status {memory.status})" if memory.status else ""))]
    return []


def _evidence_rule(c: _Context, earlier: Sequence[ActionReason]) -> list[ActionReason]:
    """8. certainty never exceeds evidence strength (settled low-risk items may lower the
    answer threshold; "settled" needs no negative evidence among the ``earlier`` reasons)."""
    memory, risk, chosen = c.memory, c.risk, c.preset
    out = []
    if memory.evidence_strength is None and _user_stated(c):
        cap = chosen.user_stated[risk]
        return [ActionReason("evidence_user_stated", None if cap == "answer" else cap,
                             f"no evidence strength; the user's own statement ({risk} risk)")]
    strength = memory.evidence_strength if memory.evidence_strength is not None else 0.0
    if memory.evidence_strength is None:
        out.append(ActionReason("evidence_missing", None, "no evidence strength; treated as 0"))
    negative = any(r.cap is not None for r in earlier)
    settled = (
        memory.lifecycle_state == "current"
        and memory.epistemic_status in ("verified", "summary")
        and memory.source_type not in (None, "draft")
        and not memory.conflicts
        and not negative
    )
    threshold = chosen.answer_threshold[risk]
    if settled and risk == "low" and chosen.settled_low_risk_threshold is not None:
        threshold = min(threshold, chosen.settled_low_risk_threshold)
        out.append(ActionReason("settled_low_risk", None, f"low-risk settled item: answer threshold {threshold:g}"))
    if strength < chosen.context_threshold:
        out.append(ActionReason("evidence_below_context_threshold", "verify_first" if risk == "high" else "warn",
                                f"evidence {strength:g} < context threshold {chosen.context_threshold:g}"))
    elif strength < threshold:
        out.append(ActionReason("evidence_below_answer_threshold", "answer_context",
                                f"evidence {strength:g} < answer threshold {threshold:g} ({risk} risk)"))
    return out


def _gate_risk_rule(c: _Context) -> list[ActionReason]:
    """7b. the learned gate flagged the memory (calibrated risk at or above risk_warn)."""
    memory = c.memory
    if memory.gate_flagged:
        return [ActionReason("gate_risk_flagged", c.preset.gate_risk_flagged,
                             f"the learned gate's risk {memory.gate_risk:.3f} >= risk_warn "
                             f"{memory.gate_risk_warn:.3f}")]
    return []


# Rules 1-7 in order, negative evidence first (7b: the gate's flag); rule 8 reads what they found.
_RULES = (_lifecycle_rule, _prohibition_rule, _verification_rule, _epistemic_rule, _conflict_rule,
          _source_rule, _priority_rule, _gate_risk_rule)


def decide_action(
    memory: Union[ActionInput, Mapping[str, Any]],
    query: Union[ActionQuery, Mapping[str, Any]],
    preset: Union[str, Preset] = "balanced",
    policy: Optional[ActionPolicy] = None,
) -> ActionDecision:
    """Allowed action for one exposed memory under one query context.

    Rules, negative evidence first; each fired rule adds a cap and the decision is the least
    permissive cap:

    1. lifecycle against intent: ``False`` raises :class:`InadmissibleMemoryError` (the memory
       must be excluded); stale/superseded under an unknown intent -> ``archive_only``; an
       unknown lifecycle -> the preset's ``unknown_lifecycle`` cap; stale/superseded under a
       history intent is an archive answering history (no cap).
    2. the memory forbids the proposed action -> ``block``.
    3. verification required -> ``verify_first``.
    4. epistemic status unresolved / contested (or missing) -> the preset's cap; inference -> the
       preset's ``inference`` cap.
    5. contradiction with another exposed memory: outranked -> ``warn``; equal or unknown
       authority -> ``verify_first``; the higher-authority side is not capped.
    6. source type: a draft (whatever its status says, ``final`` included) -> the preset's
       ``draft`` cap; a preference -> the preset's ``preference`` cap (not binding at high risk).
    7. status is not priority: a what-next question and ``priority != "next"`` ->
       ``answer_context``; 7b. the learned gate flagged it (``gate_risk >= gate_risk_warn``) ->
       the preset's ``gate_risk_flagged`` cap (``warn``; ``verify_first`` in ``strict``).
    8. certainty never exceeds evidence: below the answer threshold for the risk ->
       ``answer_context``; below the context threshold -> ``warn`` (``verify_first`` at high risk).
       ``balanced_risk_adjusted`` lowers the answer threshold for low-risk settled items.
    """
    policy = policy or load_policy()
    chosen = policy.preset(preset)
    if not isinstance(memory, ActionInput):
        memory = ActionInput.from_dict(memory)
    if not isinstance(query, ActionQuery):
        query = ActionQuery.from_dict(query)
    reasons: list[ActionReason] = []
    risk, risk_missing = effective_risk(memory.risk, query.risk)
    if risk_missing:
        risk = chosen.missing_risk
        reasons.append(ActionReason("risk_missing", None,
                                    f"no risk level on the memory or the query; treated as {risk}"))
    context = _Context(memory, query, chosen, policy.rules, policy.authority, risk)
    for rule in _RULES:
        reasons.extend(rule(context))
    reasons.extend(_evidence_rule(context, reasons))
    action = least_permissive(r.cap for r in reasons if r.cap is not None)
    return ActionDecision(
        memory_id=memory.memory_id,
        action=action,
        reasons=tuple(reasons),
        policy_version=policy.version,
        preset=chosen.name,
    )


def decide_actions(
    memories: Sequence[Mapping[str, Any]],
    query: Union[ActionQuery, Mapping[str, Any]],
    preset: Union[str, Preset] = "balanced",
    policy: Optional[ActionPolicy] = None,
) -> list[ActionDecision]:
    """Decisions for every exposed memory of one query, resolving ``conflicts_with`` ids.

    A contradiction only counts between exposed memories: an id that is not among ``memories``
    (an excluded or unretrieved record) is ignored here, because an inadmissible record cannot
    contradict the answer. Input order is kept.
    """
    by_id: dict[str, Mapping[str, Any]] = {}
    for raw in memories:
        if not isinstance(raw, Mapping):
            raise ActionPolicyError(
                f"an exposed memory must be a mapping, got {type(raw).__name__}"
            )
        memory_id = raw.get("memory_id", raw.get("id"))
        if memory_id in by_id:
            raise ActionPolicyError(
                f"field 'memory_id': duplicate id {memory_id!r} among exposed memories"
            )
        by_id[memory_id] = raw
    decisions = []
    for memory_id, raw in by_id.items():
        ids = raw.get("conflicts_with") or []
        if isinstance(ids, str) or not isinstance(ids, (list, tuple)):
            raise ActionPolicyError(
                f"memory {memory_id!r}: field 'conflicts_with' must be a list of ids"
            )
        conflicts = []
        for other in ids:
            if other == memory_id:
                raise ActionPolicyError(
                    f"memory {memory_id!r}: field 'conflicts_with' names itself"
                )
            if other in by_id:
                conflicts.append(Conflict(other, by_id[other].get("source_type")))
        memory = ActionInput.from_dict(raw, conflicts=conflicts)
        decisions.append(decide_action(memory, query, preset, policy))
    return decisions


