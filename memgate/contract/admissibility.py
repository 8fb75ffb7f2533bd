"""Three-valued admissibility: scope, policy and lifecycle axes joined by strong Kleene AND.

Values are Python ``True``, ``False`` and ``None`` (unresolved). Numbers are never accepted in
their place, because ``0 == False`` in Python would silently turn "unknown" into "allowed".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Optional

TriState = Optional[bool]

INTENTS = ("current_state", "history", "unknown")
LIFECYCLE_STATES = ("current", "stale", "superseded", "forgotten", "unknown")
AXES = ("scope", "policy", "lifecycle")
POLICY_REASONS = ("purpose", "cross_domain", "sycophancy", "tool_drift", "jailbreak")
RELEVANCE_LABELS = ("required", "supportive", "not_useful", "unresolved")


def check_tristate(value: object, field_name: str) -> TriState:
    """Return ``value`` if it is True, False or None; raise TypeError naming the field otherwise."""
    if value is None or type(value) is bool:
        return value  # type: ignore[return-value]
    raise TypeError(
        f"{field_name} must be True, False or None (unresolved), got {value!r} of type "
        f"{type(value).__name__}; numeric 0/1 labels are rejected because 0 == False in Python"
    )


def and3(*values: TriState) -> TriState:
    """Strong Kleene AND: any False -> False; all True -> True; otherwise None."""
    for i, value in enumerate(values):
        check_tristate(value, f"and3 argument {i}")
    if any(v is False for v in values):
        return False
    if all(v is True for v in values):
        return True
    return None


def or3(*values: TriState) -> TriState:
    """Strong Kleene OR: any True -> True; all False -> False; otherwise None."""
    for i, value in enumerate(values):
        check_tristate(value, f"or3 argument {i}")
    if any(v is True for v in values):
        return True
    if all(v is False for v in values):
        return False
    return None


# --------------------------------------------------------------------------- scope


def scope_value(memory_namespace: Optional[str], readable_namespaces: Optional[Iterable[str]]) -> TriState:
    """Scope axis ``n``: is the memory's namespace one the principal may read? Missing -> None."""
    if memory_namespace is None or readable_namespaces is None:
        return None
    return memory_namespace in set(readable_namespaces)


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class PolicyRule:
    """What one policy tag allows.

    ``allow_only``: if set, the tag allows only these purposes; ``deny``: purposes it forbids.
    ``reason`` is the reason code reported when the rule denies (``purpose`` or a risk category).
    """

    reason: str = "purpose"
    allow_only: Optional[frozenset] = None
    deny: frozenset = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.reason not in POLICY_REASONS:
            raise ValueError(f"PolicyRule.reason must be one of {POLICY_REASONS}, got {self.reason!r}")

    def allows(self, purpose: Optional[str]) -> TriState:
        if purpose is None:
            # An unknown purpose is only decidable when the rule denies or allows everything
            # (allow_only within deny, e.g. empty, denies every purpose).
            if "*" in self.deny or (self.allow_only is not None and self.allow_only <= self.deny):
                return False
            if self.allow_only is None and not self.deny:
                return True
            return None
        if "*" in self.deny or purpose in self.deny:
            return False
        if self.allow_only is not None and purpose not in self.allow_only:
            return False
        return True


@dataclass(frozen=True)
class PolicyRules:
    """A mapping from policy tag to rule; unknown tags resolve to None (never imputed)."""

    rules: Mapping[str, PolicyRule]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Mapping]) -> PolicyRules:
        rules = {}
        for tag, spec in raw.items():
            unknown = set(spec) - {"reason", "allow_only", "deny"}
            if unknown:
                raise ValueError(f"policy rule {tag!r}: unknown keys {sorted(unknown)}")
            allow_only = spec.get("allow_only")
            for key in ("allow_only", "deny"):
                if isinstance(spec.get(key), str):
                    raise ValueError(f"policy rule {tag!r}: {key} must be a list of purposes, got a string")
            rules[tag] = PolicyRule(
                reason=spec.get("reason", "purpose"),
                allow_only=None if allow_only is None else frozenset(allow_only),
                deny=frozenset(spec.get("deny", ())),
            )
        return cls(rules)

    def to_dict(self) -> dict:
        return {
            tag: {
                "reason": rule.reason,
                **({"allow_only": sorted(rule.allow_only)} if rule.allow_only is not None else {}),
                **({"deny": sorted(rule.deny)} if rule.deny else {}),
            }
            for tag, rule in sorted(self.rules.items())
        }

    def evaluate(self, tags: Optional[Iterable[str]], purpose: Optional[str]) -> tuple[TriState, tuple[str, ...]]:
        """Policy axis ``g`` and the reason codes of every denying tag.

        Missing tags (None) or a tag without a rule -> None unless another tag denies.
        """
        if tags is None:
            return None, ()
        values: list[TriState] = []
        reasons: list[str] = []
        for tag in tags:
            rule = self.rules.get(tag)
            if rule is None:
                values.append(None)
                continue
            allowed = rule.allows(purpose)
            values.append(allowed)
            if allowed is False and rule.reason not in reasons:
                reasons.append(rule.reason)
        if not values:
            return None, ()
        return and3(*values), tuple(reasons)


# --------------------------------------------------------------------------- lifecycle


@dataclass(frozen=True)
class SupersessionScope:
    """Where a supersession applies: a subject and/or a half-open time window [valid_from, valid_to).

    ``None`` fields are unconstrained. Times are ISO-8601 strings (compared lexicographically,
    so use one format, e.g. ``YYYY-MM-DD``).
    """

    subject: Optional[str] = None
    valid_from: Optional[str] = None
    valid_to: Optional[str] = None

    def contains(self, subject: Optional[str], time: Optional[str]) -> TriState:
        """Does a query's applicability fall inside this scope? Missing applicability -> None."""
        checks: list[TriState] = []
        if self.subject is not None:
            checks.append(None if subject is None else subject == self.subject)
        if self.valid_from is not None or self.valid_to is not None:
            if time is None:
                checks.append(None)
            else:
                after = self.valid_from is None or time >= self.valid_from
                before = self.valid_to is None or time < self.valid_to
                checks.append(after and before)
        return and3(*checks) if checks else True


_LIFECYCLE_TABLE: dict[str, dict[str, TriState]] = {
    "current": {"current_state": True, "history": True, "unknown": True},
    "stale": {"current_state": False, "history": True, "unknown": None},
    "superseded": {"current_state": False, "history": True, "unknown": None},
    "forgotten": {"current_state": False, "history": False, "unknown": False},
    "unknown": {"current_state": None, "history": None, "unknown": None},
}


def effective_state(
    state: str,
    supersession_scope: Optional[SupersessionScope],
    query_subject: Optional[str],
    query_time: Optional[str],
) -> str:
    """Resolve scoped supersession: superseded only inside its scope, current outside it."""
    if state not in LIFECYCLE_STATES:
        raise ValueError(f"lifecycle_state must be one of {LIFECYCLE_STATES}, got {state!r}")
    if state != "superseded" or supersession_scope is None:
        return state
    inside = supersession_scope.contains(query_subject, query_time)
    if inside is None:
        return "unknown"
    return "superseded" if inside else "current"


def lifecycle_value(state: str, intent: str) -> TriState:
    """Lifecycle axis ``l`` for a (resolved) memory state and the query intent (docs/design.md table)."""
    if state not in LIFECYCLE_STATES:
        raise ValueError(f"lifecycle_state must be one of {LIFECYCLE_STATES}, got {state!r}")
    if intent not in INTENTS:
        raise ValueError(f"intent must be one of {INTENTS}, got {intent!r}")
    return _LIFECYCLE_TABLE[state][intent]


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """The three axes, their conjunction and the reasons for every False axis."""

    scope: TriState
    policy: TriState
    lifecycle: TriState
    policy_reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in AXES:
            check_tristate(getattr(self, name), name)

    @property
    def admissible(self) -> TriState:
        return and3(self.scope, self.policy, self.lifecycle)

    @property
    def exclusion_reasons(self) -> tuple[str, ...]:
        """Axes that are False, plus the policy reason codes when policy is False."""
        reasons = [axis for axis in AXES if getattr(self, axis) is False]
        if self.policy is False:
            reasons.extend(self.policy_reasons)
        return tuple(reasons)

    @property
    def unresolved_axes(self) -> tuple[str, ...]:
        return tuple(axis for axis in AXES if getattr(self, axis) is None)


def relevance_value(relevance: str) -> TriState:
    """``r``: True iff required or supportive, None iff unresolved."""
    if relevance not in RELEVANCE_LABELS:
        raise ValueError(f"relevance must be one of {RELEVANCE_LABELS}, got {relevance!r}")
    if relevance == "unresolved":
        return None
    return relevance in ("required", "supportive")


def usability(relevance: str, admissible: TriState) -> TriState:
    """``u = AND3(r, a)``."""
    return and3(relevance_value(relevance), check_tristate(admissible, "admissible"))
