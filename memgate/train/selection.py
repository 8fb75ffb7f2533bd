"""Model selection guards on real data (docs/design.md section 4). A candidate gate is eligible
only if it passes every enabled guard:

- LoCoMo-select: ``recall_required@K`` of ``learned_gate_namespace`` at most ``max_recall_drop``
  below ``namespace_dense`` (point estimate; the paired two-level bootstrap CI of the drop, over
  conversations and the questions within them, is reported beside it);
- GateMem-select: the suppression ``S_ref - S`` separates protected turns from anchors at least as
  well as the plain ``1 - cos`` on the same rows (pooled AUC): a gate whose suppression is inverted
  on real text never ships.

Only the ``select`` parts are ever opened here. The GateMem figures are cheap (one gate pass over
a few thousand rows) and are logged at every validation point (``monitor``); the LoCoMo guard
runs only for a candidate that would be selected.
"""

from __future__ import annotations

import logging
from typing import Optional

import numpy as np
import torch

from memgate.datasets.real.gatemem import build_gatemem_source
from memgate.datasets.real.io_guard import no_report_access
from memgate.datasets.real.locomo import build_locomo_source
from memgate.datasets.real.paths import real_data_available, real_data_root
from memgate.eval.engine import prepare
from memgate.eval.evaluation import EvalSettings, run_source
from memgate.eval.metrics import rank_auc
from memgate.eval.transfer import transfer_pairs
from memgate.train.modules import Guard
from memgate.train.run import encoder_from

log = logging.getLogger(__name__)


def _recalls(per_query: list, k: int) -> np.ndarray:
    return np.array([np.nan if m[f"recall_required@{k}"] is None else m[f"recall_required@{k}"]
                     for m in per_query], dtype=float)


def two_level_paired_ci(diff: np.ndarray, groups: list, *, n_boot: int = 2_000, seed: int = 0,
                        alpha: float = 0.05) -> list:
    """Percentile CI of mean(diff) resampling groups, then items within each drawn group.

    ``diff`` holds one paired difference per item (NaN = not evaluable, left out). The sum of k
    independent within-group resamples of n items is one multinomial draw of k * n items, so a
    replicate costs one multinomial per group."""
    ok = np.isfinite(diff)
    diff, groups = diff[ok], [g for g, keep in zip(groups, ok) if keep]
    names = sorted(set(groups))
    if not names:
        return [None, None]
    members = [np.flatnonzero(np.array([g == name for g in groups])) for name in names]
    rng = np.random.default_rng(seed)
    picks = rng.multinomial(len(names), np.full(len(names), 1 / len(names)), size=n_boot)  # (B, G)
    total = np.zeros(n_boot)
    count = np.zeros(n_boot)
    for g, idx in enumerate(members):
        w = rng.multinomial(picks[:, g] * len(idx), np.full(len(idx), 1 / len(idx)))  # (B, n_g)
        total += w @ diff[idx]
        count += w.sum(axis=1)
    reps = total[count > 0] / count[count > 0]
    lo, hi = np.percentile(reps, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return [float(lo), float(hi)]


def recall_guard(prepared, k: int, max_drop: float, rerank_depth: int) -> Guard:
    """A guard over one prepared source; the baseline is computed once."""
    base_settings = EvalSettings(routes=["namespace_dense"], budgets=(k,), rerank_depth=rerank_depth)
    base_run = run_source(prepared, base_settings)
    base = _recalls(base_run.per_query["namespace_dense"], k)
    baseline = float(np.nanmean(base)) if np.isfinite(base).any() else float("nan")

    def guard(gate) -> dict:
        settings = EvalSettings(routes=["learned_gate_namespace"], budgets=(k,), rerank_depth=rerank_depth)
        gated = _recalls(run_source(prepared, settings, gate).per_query["learned_gate_namespace"], k)
        drop = baseline - float(np.nanmean(gated))
        return {"source": prepared.source.name, f"recall_required@{k}_namespace_dense": baseline,
                f"recall_required@{k}_learned_gate_namespace": baseline - drop, "drop": drop,
                "drop_ci": two_level_paired_ci(base - gated, base_run.groups),
                "passed": bool(drop <= max_drop + 1e-12)}

    return guard


def suppression_guard(prepared) -> Guard:
    """GateMem-select: pooled suppression AUC of the gate vs the ``1 - cos`` AUC on the same rows
    (protected turns that are not anchors = 1, anchors = 0; ``memgate.eval.transfer``)."""
    rows = transfer_pairs(prepared.source)
    q_index = {q.query_id: i for i, q in enumerate(prepared.source.queries)}
    q = torch.from_numpy(prepared.query_vectors[[q_index[x] for x in rows["query_ids"]]])
    v = torch.from_numpy(prepared.memory_vectors[np.asarray(rows["memory_index"], dtype=np.int64)]).unsqueeze(1)
    labels = np.asarray(rows["labels"])
    cos = (torch.nn.functional.normalize(q, dim=-1) * torch.nn.functional.normalize(v[:, 0], dim=-1)).sum(-1)
    baseline = rank_auc(1.0 - cos.double().numpy(), labels)

    def guard(gate) -> dict:
        out = gate(q, v)
        suppression = (out.reference[:, 0] - out.score[:, 0]).double().cpu().numpy()
        auc = rank_auc(suppression, labels)
        return {"source": prepared.source.name, "rows": int(len(labels)), "suppression_auc": auc,
                "one_minus_cos_auc": baseline, "passed": bool(auc >= baseline)}

    return guard


class SelectionGuards:
    """The enabled guards by name. ``monitor(gate)`` runs the cheap ones (every validation
    point); calling the object runs all of them and passes when every one passes."""

    def __init__(self, guards: dict, cheap: tuple = ("gatemem",)):
        self.guards = dict(guards)
        self.cheap = tuple(name for name in cheap if name in self.guards)

    def __bool__(self) -> bool:
        return bool(self.guards)

    def monitor(self, gate) -> dict:
        return {name: self.guards[name](gate) for name in self.cheap}

    def __call__(self, gate, monitored: Optional[dict] = None) -> dict:
        results = dict(monitored or {})
        for name, guard in self.guards.items():
            if name not in results:
                results[name] = guard(gate)
        return {"passed": all(r["passed"] for r in results.values()), **results}


def _require_real_data(config, key: str):
    root = real_data_root(config.real_data_root)
    if not real_data_available(root):
        raise FileNotFoundError(
            f"selection.{key}: real data not found at {root} (no SHA256SUMS); the repository "
            f"ships it under data/real (set MEMGATE_DATA or real_data_root to another copy), or pass "
            f"selection.{key}=false to select without it")
    return root


@no_report_access
def gatemem_guard_for(config) -> Optional[Guard]:
    """The GateMem-select suppression guard, or None when ``selection.gatemem_guard`` is off."""
    if not config.selection.gatemem_guard:
        log.warning("selection.gatemem_guard=false: no GateMem-select suppression guard")
        return None
    root = _require_real_data(config, "gatemem_guard")
    source = build_gatemem_source(root, part="select", purpose="selection")
    return suppression_guard(prepare(source, encoder_from(config)))


def selection_guards_for(config) -> SelectionGuards:
    """Every guard the config enables (``selection.locomo_guard``, ``selection.gatemem_guard``)."""
    guards = {"locomo": locomo_guard_for(config), "gatemem": gatemem_guard_for(config)}
    return SelectionGuards({name: g for name, g in guards.items() if g is not None})


@no_report_access
def locomo_guard_for(config) -> Optional[Guard]:
    """The LoCoMo-select guard for a training config, or None when the config disables it.

    The guard is an explicit choice, never a side effect of a missing folder: with
    ``selection.locomo_guard`` on and no real data at the resolved root, this raises."""
    if not config.selection.locomo_guard:
        log.warning("selection.locomo_guard=false: selecting on synthetic dev only")
        return None
    root = _require_real_data(config, "locomo_guard")
    source = build_locomo_source(root, part="select", purpose="selection")
    prepared = prepare(source, encoder_from(config))
    return recall_guard(prepared, config.selection.guard_k, config.selection.max_recall_drop,
                        config.selection.guard_rerank_depth)
