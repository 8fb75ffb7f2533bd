"""``RetrieverConfig``: how a :class:`memgate.retriever.GatedRetriever` gates and ranks (fail
mode, rerank depth, drop threshold, ACL, allowed-action preset), and the allowed-action module
the retriever uses when it is installed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from memgate.contract.admissibility import PolicyRules
from memgate.contract.defaults import RERANK_DEPTH

try:  # the allowed-actions module (docs/design.md section 3); the retriever works without it
    from memgate import actions as actions_module
except ImportError:  # pragma: no cover - exercised only in a tree without memgate.actions
    actions_module = None  # type: ignore[assignment]

FAIL_MODES = ("open", "closed")


@dataclass(frozen=True)
class RetrieverConfig:
    """How a :class:`GatedRetriever` gates and ranks.

    policy_rules: the policy axis (tags -> purposes), part of the policy version.
    fail_mode: ``open`` keeps unresolved candidates (flagged with their unresolved axes);
        ``closed`` excludes them with reason ``unresolved:<axes>``.
    rerank_depth: how many of the cosine's top candidates the gate re-scores (default ``memgate.contract.defaults.RERANK_DEPTH``, 200).
    use_gate: rank by the gate when one is loaded (False: plain cosine even with a gate).
    drop_threshold: ``"checkpoint"`` (the calibrated threshold recorded in the checkpoint, if
        any), ``None`` (never drop) or a number.
    precompute: compute the gate's memory part W_v v once per memory (write-time split).
    acl: principal -> readable namespaces (a trusted ACL). With an ACL, a context may only
        narrow its principal's namespaces and writes must target a readable namespace. Without
        one, the caller is trusted to set ``context.namespaces``; ``None`` there reads nothing.
    action_preset / action_policy: the allowed-action preset and an optional policy file.
    log_excluded_depth: Kleene-excluded ids are logged when they rank within this many of the
        unfiltered cosine ranking (default ``max(k, rerank_depth)``); all are counted by reason.
    exact_search: ask the store for exact search (default; every store then ranks alike);
        ``False`` lets a Qdrant server use its filter-aware HNSW index.
    """

    policy_rules: PolicyRules = field(default_factory=lambda: PolicyRules({}))
    fail_mode: str = "open"
    rerank_depth: int = RERANK_DEPTH
    use_gate: bool = True
    drop_threshold: Any = "checkpoint"
    precompute: bool = True
    acl: Optional[Mapping[str, Iterable[str]]] = None
    action_preset: str = "balanced"
    action_policy: Optional[str] = None
    log_excluded_depth: Optional[int] = None
    exact_search: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.policy_rules, PolicyRules):
            if isinstance(self.policy_rules, Mapping):
                object.__setattr__(self, "policy_rules", PolicyRules.from_dict(self.policy_rules))
            else:
                raise TypeError("RetrieverConfig.policy_rules must be PolicyRules or a mapping")
        if self.fail_mode not in FAIL_MODES:
            raise ValueError(f"RetrieverConfig.fail_mode must be one of {FAIL_MODES}, got {self.fail_mode!r}")
        if type(self.rerank_depth) is not int or self.rerank_depth < 1:
            raise ValueError(f"RetrieverConfig.rerank_depth must be an int >= 1, got {self.rerank_depth!r}")
        t = self.drop_threshold
        if not (t is None or t == "checkpoint" or (type(t) in (int, float) and np.isfinite(t))):
            raise ValueError(
                f"RetrieverConfig.drop_threshold must be 'checkpoint', None or a number, got {t!r}")
        if self.acl is not None:
            acl = {}
            for principal, namespaces in self.acl.items():
                if isinstance(namespaces, str):
                    raise TypeError(
                        f"RetrieverConfig.acl[{principal!r}] must be a collection of namespaces, "
                        "not one string")
                acl[principal] = frozenset(namespaces)
            object.__setattr__(self, "acl", acl)
        if type(self.exact_search) is not bool:
            raise TypeError(f"RetrieverConfig.exact_search must be a bool, got {self.exact_search!r}")
        if self.log_excluded_depth is not None and (
                type(self.log_excluded_depth) is not int or self.log_excluded_depth < 0):
            raise ValueError("RetrieverConfig.log_excluded_depth must be an int >= 0 or None")

    @property
    def policy_version(self) -> str:
        blob = json.dumps({"rules": self.policy_rules.to_dict(), "fail_mode": self.fail_mode},
                          sort_keys=True)
        return f"kleene-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


__all__ = ["FAIL_MODES", "RetrieverConfig", "actions_module"]
