"""Labels from metadata: the three admissibility axes of a (memory, query) pair from the TRUE
metadata (the scorer's) and the RELEASED metadata (what routes see), and the error raised when a
generated label contradicts the contract."""

from __future__ import annotations

from typing import Optional

from memgate.contract.admissibility import (
    INTENTS,
    LIFECYCLE_STATES,
    PolicyRules,
    effective_state,
    lifecycle_value,
)


class DataConflict(ValueError):
    """A generated label contradicts the contract (e.g. a required memory with a = False)."""


class Labeller:
    """Three axes from the TRUE metadata (scorer) and the RELEASED metadata (what routes see).

    Every axis is computed with ``memgate.contract.admissibility`` (policy rules, effective state, the
    lifecycle table); results are memoised because a group asks the same few contexts many times.
    """

    def __init__(self, rules: PolicyRules):
        self.rules = rules
        self._policy: dict = {}
        self._life: dict = {}
        self._table = {(s, i): lifecycle_value(s, i) for s in LIFECYCLE_STATES for i in INTENTS}

    def policy(self, tags, purpose):
        key = (tags, purpose)
        hit = self._policy.get(key)
        if hit is None:
            hit = self._policy[key] = self.rules.evaluate(tags, purpose)
        return hit

    def lifecycle(self, state, scope, subject, time, intent):
        if scope is None:
            return self._table[(state, intent)]
        key = (state, scope, subject, time, intent)
        hit = self._life.get(key)
        if hit is None:
            hit = self._life[key] = lifecycle_value(effective_state(state, scope, subject, time), intent)
        return hit

    def axes(self, m, ctx: tuple) -> tuple:
        """(scope, policy, reasons, lifecycle, a, text_visible, metadata_visible) for a context
        ``ctx = (namespaces, purpose, subject, time, intent)``; memoised on the memory."""
        hit = m.cache.get(ctx)
        if hit is not None:
            return hit
        namespaces, purpose, subject, time, intent = ctx
        scope = m.namespace in namespaces
        policy, reasons = self.policy(m.true_tags, purpose)
        life = self.lifecycle(m.true_state, m.true_scope, subject, time, intent)
        if scope is False or policy is False or life is False:
            a = False
        elif scope is True and policy is True and life is True:
            a = True
        else:
            a = None
        tv = mv = False
        if a is False:
            r_policy, _ = self.policy(m.rel_tags, purpose)
            r_life = self.lifecycle(m.rel_state, m.rel_scope, subject, time, intent)
            # text: policy violations are written into the text by construction (domain, belief,
            # role-play, personality); lifecycle only when the value is phrased in the past tense;
            # scope never (first-person texts do not say whose they are).
            tv = (policy is False) or (life is False and m.past_phrased)
            mv = (scope is False) or (policy is False and r_policy is False) or (life is False and r_life is False)
        hit = m.cache[ctx] = (scope, policy, list(reasons) if policy is False else [], life, a, tv, mv)
        return hit

    def label(self, query_id: str, ctx: tuple, m, relevance: str, scenario: Optional[str]) -> tuple[dict, object]:
        scope, policy, reasons, life, a, tv, mv = self.axes(m, ctx)
        if relevance == "required" and a is False:
            raise DataConflict(
                f"required memory {m.memory_id!r} ({m.text!r}) is inadmissible for query {query_id!r}: "
                f"scope={scope}, policy={policy} {reasons}, lifecycle={life}"
            )
        row = {
            "query_id": query_id,
            "memory_id": m.memory_id,
            "relevance": relevance,
            "scope": scope,
            "policy": policy,
            "lifecycle": life,
            "policy_reasons": reasons,
            "text_visible": tv,
            "metadata_visible": mv,
            "scenario": scenario,
        }
        return row, a


__all__ = ["DataConflict", "Labeller"]
