"""The allowed-actions step (:mod:`memgate.actions`, docs/design.md section 3): the policy and
preset a retriever was configured with, the action each returned memory allows for a request
(with the lifecycle resolved for the query and the contradictions among the returned memories),
and the check that a record's action attributes are valid before it is stored. Without
:mod:`memgate.actions` installed every item carries ``action=None``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from memgate.retriever.config import RetrieverConfig
from memgate.retriever.config import actions_module as _actions
from memgate.retriever.query.results import RetrievedItem
from memgate.retriever.records.memory import StoredMemory


class AllowedActions:
    """The action policy of ``config`` (``action_policy``, ``action_preset``), loaded at once
    (a bad preset fails when the retriever opens)."""

    def __init__(self, config: RetrieverConfig) -> None:
        self.config = config
        self.policy: Any = None
        self.version: Optional[str] = None
        if _actions is not None:
            self.policy = _actions.load_policy(config.action_policy)
            self.policy.preset(config.action_preset)  # fail fast on a bad preset
            self.version = f"{self.policy.version}/{config.action_preset}"

    def request(self, intent: str, asks: str, proposed_action: Optional[str],
                risk: Optional[str]) -> Any:
        """The request the policy decides for (:class:`memgate.actions.ActionQuery`), or None."""
        if self.policy is None or _actions is None:
            return None
        return _actions.ActionQuery(intent=intent, asks=asks, proposed_action=proposed_action, risk=risk)

    def check_fields(self, memory: StoredMemory) -> None:
        """Refuse a record whose action attributes the policy cannot read (``ValueError``)."""
        if _actions is None:
            return
        fields_ = memory.action_fields()
        fields_.pop("conflicts_with")
        if fields_["lifecycle_state"] not in _actions.EXPOSED_LIFECYCLE_STATES:
            fields_["lifecycle_state"] = "current"
        try:
            _actions.ActionInput.from_dict(fields_)
        except _actions.ActionPolicyError as exc:
            raise ValueError(f"memory {memory.memory_id!r}: {exc}") from None

    def decide(self, items: list[RetrievedItem], request: Any,
               risk_warn: Optional[float] = None) -> list[RetrievedItem]:
        """Allowed actions (memgate.actions) for the returned memories, with the lifecycle
        resolved for this query and contradictions among them; an item whose ``gate_risk`` reaches
        ``risk_warn`` (the gate's, None: none) gets the preset's ``gate_risk_flagged`` cap."""
        if request is None or not items or _actions is None:
            return items  # hook: without memgate.actions, items carry action=None
        # conflicts_with ids resolve among the exposed memories; when one id names records of
        # several namespaces (ids are scoped per namespace), each namespace is decided apart
        ids = [it.memory_id for it in items]
        groups = [items] if len(set(ids)) == len(ids) else [
            [it for it in items if it.namespace == ns] for ns in sorted({it.namespace for it in items})]
        decided: dict[tuple[str, str], Any] = {}
        for group in groups:
            rows = []
            for it in group:
                row = it.memory.action_fields()
                row["lifecycle_state"] = it.lifecycle
                if it.gate_risk is not None and risk_warn is not None:
                    row["gate_risk"], row["gate_risk_warn"] = min(1.0, max(0.0, it.gate_risk)), risk_warn
                rows.append(row)
            decisions = _actions.decide_actions(rows, request, self.config.action_preset, self.policy)
            decided.update(((it.namespace, it.memory_id), d) for it, d in zip(group, decisions))
        return [replace(it, action=decided[(it.namespace, it.memory_id)].action,
                        action_binding=decided[(it.namespace, it.memory_id)].binding) for it in items]


__all__ = ["AllowedActions"]
