"""Model selection guards on real data (docs/design.md section 4). The split: namespace support
and the Kleene gate decide scope, principal, lifecycle and policy from trusted metadata; the
learned gate decides text-visible risk. A validation point is eligible only if it passes every
enabled guard, each on a ``select`` part (never a ``report`` part):

- ``locomo`` (recall): ``recall_required@K`` of ``learned_gate_namespace`` at most
  ``max_recall_drop`` below ``namespace_dense`` on LoCoMo select (point estimate; the paired
  two-level bootstrap CI over conversations and questions is recorded beside it);
- ``gatemem_routes`` (route-level non-inferiority: the text gate must never undo what metadata
  protects): on GateMem select, ``hybrid`` against ``kleene_gate``: ``violation_any@K`` and
  ``protected_exposure@K`` at most ``route_margin`` above, ``recall_required@K`` at most
  ``route_margin`` below (point estimates; paired episode-bootstrap CIs recorded);
- ``gatemem`` (direction on GateMem): the pooled suppression AUC (``S_ref - S``, protected turns
  vs anchors) at least ``min_suppression_auc`` (0.5); the ``1 - cos`` AUC of the same rows is
  recorded beside it, no longer a threshold;
- ``text_risk`` (no inversion on natural text): on every natural-phrasing source's select part,
  natural and matched variants, the suppression AUC of ``cos - S`` at least
  ``min_suppression_auc``. The same panel gives the selection figure, the macro AUC(1 - S) -
  AUC(1 - cos) (``memgate.eval.text_risk``).

Every guard is cheap (each source prepared, the baselines run and the texts embedded once, the
gated routes scored on one torch thread): all of them run at every validation point
(``memgate.train.select_step``) and the model card shows each.
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
from memgate.eval.drop_calibration import labelled_pairs
from memgate.eval.engine import prepare
from memgate.eval.evaluation import EvalSettings, paired_difference, run_source
from memgate.eval.metrics import rank_auc
from memgate.eval.text_risk import TextRiskPanel, build_cells
from memgate.eval.transfer import transfer_pairs
from memgate.train.modules import Guard
from memgate.train.run import encoder_from

log = logging.getLogger(__name__)
GUARD_THREADS = 1  # the gated routes' per-query products: one thread (a busy second core made two ~10x slower)
GUARD_NAMES = ("locomo", "gatemem_routes", "gatemem", "text_risk")


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


def _settings(route: str, k: int, rerank_depth: int, n_boot: int = 1000) -> EvalSettings:
    return EvalSettings(routes=[route], budgets=(k,), rerank_depth=rerank_depth, n_boot=n_boot,
                        gate_threads=GUARD_THREADS)


def recall_guard(prepared, k: int, max_drop: float, rerank_depth: int) -> Guard:
    """LoCoMo-select recall: a guard over one prepared source; the baseline is computed once."""
    base_run = run_source(prepared, _settings("namespace_dense", k, rerank_depth))
    base = _recalls(base_run.per_query["namespace_dense"], k)
    baseline = float(np.nanmean(base)) if np.isfinite(base).any() else float("nan")

    def guard(gate) -> dict:
        gated = _recalls(run_source(prepared, _settings("learned_gate_namespace", k, rerank_depth), gate)
                         .per_query["learned_gate_namespace"], k)
        drop = baseline - float(np.nanmean(gated))
        return {"source": prepared.source.name, f"recall_required@{k}_namespace_dense": baseline,
                f"recall_required@{k}_learned_gate_namespace": baseline - drop, "drop": drop,
                "drop_ci": two_level_paired_ci(base - gated, base_run.groups),
                "threshold": max_drop, "slack": max_drop - drop,
                "passed": bool(drop <= max_drop + 1e-12)}

    guard.prepared = prepared  # its benign pairs also calibrate the drop threshold (benign_anchor_sets)
    return guard


def _exposure_rows(source, query_ids: list, rankings: list, k: int) -> list[dict]:
    """Per query: {"protected_exposure@k": 0/1} where the checkpoint has protected turns, else {}."""
    rows = []
    for qid, ranked in zip(query_ids, rankings):
        protected = set(source.query_meta.get(qid, {}).get("protected_ids") or ())
        rows.append({f"protected_exposure@{k}": 1.0 if protected & set(ranked[:k]) else 0.0} if protected else {})
    return rows


def route_guard(prepared, k: int, margin: float, rerank_depth: int, n_boot: int = 1000) -> Guard:
    """GateMem-select route non-inferiority: ``hybrid`` (metadata, then the text gate) against
    ``kleene_gate`` (metadata alone), paired per checkpoint; ``kleene_gate`` runs once."""
    base_run = run_source(prepared, _settings("kleene_gate", k, rerank_depth, n_boot))
    base = {"per_query": base_run.per_query["kleene_gate"],
            "exposure": _exposure_rows(prepared.source, base_run.query_ids, base_run.rankings["kleene_gate"], k)}
    limits = {f"violation_any@{k}": margin, f"protected_exposure@{k}": margin, f"recall_required@{k}": -margin}

    def guard(gate) -> dict:
        settings = _settings("hybrid", k, rerank_depth, n_boot)
        run = run_source(prepared, settings, gate)
        hybrid = {"per_query": run.per_query["hybrid"],
                  "exposure": _exposure_rows(prepared.source, run.query_ids, run.rankings["hybrid"], k)}
        out: dict = {"source": prepared.source.name, "route": "hybrid", "baseline": "kleene_gate", "margin": margin}
        slack = []
        for key, limit in limits.items():
            rows = "exposure" if key.startswith("protected") else "per_query"
            diff = paired_difference(hybrid[rows], base[rows], run.groups, key, settings)
            value = diff["value"]
            ok = value is not None and (value <= limit + 1e-12 if limit > 0 else value >= limit - 1e-12)
            out[f"diff:{key}"] = {**diff, "limit": limit, "passed": bool(ok)}
            slack.append(None if value is None else (limit - value if limit > 0 else value - limit))
        out["slack"] = None if None in slack else min(slack)
        out["passed"] = all(out[f"diff:{key}"]["passed"] for key in limits)
        return out

    return guard


def suppression_guard(prepared, min_auc: float = 0.5) -> Guard:
    """GateMem-select: pooled suppression AUC of the gate >= ``min_auc`` (protected turns that are
    not anchors = 1, anchors = 0; ``memgate.eval.transfer``); the ``1 - cos`` AUC of the same
    rows is recorded beside it."""
    rows = transfer_pairs(prepared.source)
    q_index = {q.query_id: i for i, q in enumerate(prepared.source.queries)}
    q = torch.from_numpy(prepared.query_vectors[[q_index[x] for x in rows["query_ids"]]])
    v = torch.from_numpy(prepared.memory_vectors[np.asarray(rows["memory_index"], dtype=np.int64)]).unsqueeze(1)
    labels = np.asarray(rows["labels"])
    cos = (torch.nn.functional.normalize(q, dim=-1) * torch.nn.functional.normalize(v[:, 0], dim=-1)).sum(-1)
    baseline = rank_auc(1.0 - cos.double().numpy(), labels)

    def guard(gate) -> dict:
        weight = next(gate.parameters(), None)
        qq, vv = (q, v) if weight is None else (q.to(weight.device, weight.dtype), v.to(weight.device, weight.dtype))
        out = gate(qq, vv)
        suppression = (out.reference[:, 0] - out.score[:, 0]).double().cpu().numpy()
        auc = rank_auc(suppression, labels)
        return {"source": prepared.source.name, "rows": int(len(labels)), "suppression_auc": auc,
                "one_minus_cos_auc": baseline, "threshold": min_auc, "slack": auc - min_auc,
                "passed": bool(auc >= min_auc)}

    guard.rows = (q.numpy(), v[:, 0].numpy(), labels.astype(bool))  # the risk head's calibration set
    return guard


class TextRiskGuard:
    """Natural sources, select parts: every cell's suppression AUC >= ``min_auc``; the result
    carries the panel's figures (``macro`` is the selection figure) and, under ``_macro_reps``,
    the macro's bootstrap replicates for paired comparisons between validation points."""

    def __init__(self, panel: TextRiskPanel, min_auc: float = 0.5):
        self.panel = panel
        self.min_auc = min_auc

    def __call__(self, gate) -> dict:
        figures = self.panel.figures(self.panel.scores(gate))
        cells = figures["cells"]
        worst = min(cells, key=lambda key: cells[key]["suppression_auc"]["value"])
        low = cells[worst]["suppression_auc"]["value"]
        return {"source": "text_risk", **figures, "threshold": self.min_auc, "min_suppression_cell": worst,
                "min_suppression_auc": low, "slack": low - self.min_auc,
                "failed_cells": sorted(k for k, c in cells.items() if c["suppression_auc"]["value"] < self.min_auc),
                "passed": bool(low >= self.min_auc)}


class SelectionGuards:
    """The enabled guards by name; calling the object runs every one and passes when all pass.
    ``text_risk`` (when enabled) also gives the selection figure."""

    def __init__(self, guards: dict):
        self.guards = dict(guards)

    def __bool__(self) -> bool:
        return bool(self.guards)

    @property
    def names(self) -> tuple:
        return tuple(self.guards)

    def __call__(self, gate) -> dict:
        results = {name: {"guard": name, **guard(gate)} for name, guard in self.guards.items()}
        return {"passed": all(r["passed"] for r in results.values()), **results}

    def benign_anchor_sets(self) -> dict:
        """name -> (query vectors, memory vectors) of the benign real pairs the guards hold, select
        parts only: LoCoMo select's (question, evidence) pairs and every natural source's
        beneficial rows (natural variant). The drop threshold may drop at most 1 % of each
        (``memgate.eval.calibration.with_anchor_floors``)."""
        out = {}
        prepared = getattr(self.guards.get("locomo"), "prepared", None)
        if prepared is not None:
            qi, mi, admissible, required = labelled_pairs(prepared.source)
            keep = np.array([r and a is True for a, r in zip(admissible, required)], dtype=bool)
            out[f"{prepared.source.name}/required"] = (prepared.query_vectors[qi[keep]],
                                                       prepared.memory_vectors[mi[keep]])
        text_risk = self.guards.get("text_risk")
        for cell in (text_risk.panel.cells if text_risk is not None else ()):
            if cell.variant == "natural":
                benign = ~cell.labels
                out[f"{cell.source}/beneficial"] = (cell.q.numpy()[benign], cell.v.numpy()[benign])
        return out

    def risk_label_sets(self) -> dict:
        """name -> (query vectors, memory vectors, labels) on which the risk head's calibration is
        read (``memgate.eval.calibration_risk``), select parts only: every natural cell (trap = 1),
        GateMem select (protected = 1, anchors = 0) and LoCoMo select's required evidence (0)."""
        out = {}
        text_risk = self.guards.get("text_risk")
        for cell in (text_risk.panel.cells if text_risk is not None else ()):
            out[cell.key] = (cell.q.numpy(), cell.v.numpy(), np.asarray(cell.labels, dtype=bool))
        rows = getattr(self.guards.get("gatemem"), "rows", None)
        if rows is not None:
            out["gatemem/protected"] = rows
        for name, (q, v) in self.benign_anchor_sets().items():
            if not name.endswith("/beneficial"):  # the natural cells hold those rows already
                out[name] = (q, v, np.zeros(len(q), dtype=bool))
        return out


def _require_real_data(config, key: str):
    root = real_data_root(config.real_data_root)
    if not real_data_available(root):
        raise FileNotFoundError(
            f"selection.{key}: real data not found at {root} (no SHA256SUMS); the repository "
            f"ships it under data/real (set MEMGATE_DATA or real_data_root to another copy), or pass "
            f"selection.{key}=false to select without it")
    return root


@no_report_access
def locomo_guard_for(config) -> Optional[Guard]:
    """The LoCoMo-select guard for a training config, or None when the config disables it.

    The guard is an explicit choice, never a side effect of a missing folder: with
    ``selection.locomo_guard`` on and no real data at the resolved root, this raises."""
    if not config.selection.locomo_guard:
        log.warning("selection.locomo_guard=false: no LoCoMo-select recall guard")
        return None
    root = _require_real_data(config, "locomo_guard")
    source = build_locomo_source(root, part="select", purpose="selection")
    prepared = prepare(source, encoder_from(config))
    return recall_guard(prepared, config.selection.guard_k, config.selection.max_recall_drop,
                        config.selection.guard_rerank_depth)


@no_report_access
def gatemem_guards_for(config) -> dict:
    """The GateMem-select guards the config enables: ``gatemem_routes`` and ``gatemem``
    (suppression), sharing one prepared source."""
    sel = config.selection
    out: dict = {}
    for key in ("gatemem_routes_guard", "gatemem_guard"):
        if not getattr(sel, key):
            log.warning("selection.%s=false: no GateMem-select %s guard", key,
                        "route" if key == "gatemem_routes_guard" else "suppression")
    if not (sel.gatemem_routes_guard or sel.gatemem_guard):
        return out
    root = _require_real_data(config, "gatemem_routes_guard" if sel.gatemem_routes_guard else "gatemem_guard")
    prepared = prepare(build_gatemem_source(root, part="select", purpose="selection"), encoder_from(config))
    if sel.gatemem_routes_guard:
        out["gatemem_routes"] = route_guard(prepared, sel.guard_k, sel.route_margin, sel.guard_rerank_depth,
                                            sel.guard_n_boot)
    if sel.gatemem_guard:
        out["gatemem"] = suppression_guard(prepared, sel.min_suppression_auc)
    return out


@no_report_access
def text_risk_guard_for(config) -> Optional[TextRiskGuard]:
    """The natural-source select guard (and the selection figure), or None when off."""
    if not config.selection.text_risk_guard:
        log.warning("selection.text_risk_guard=false: no natural-phrasing guard")
        return None
    root = _require_real_data(config, "text_risk_guard")
    cells = build_cells(encoder_from(config), "select", "selection", root=root,
                        sources=config.selection.text_risk_sources)
    return TextRiskGuard(TextRiskPanel(cells, n_boot=config.selection.guard_n_boot, seed=0),
                         config.selection.min_suppression_auc)


def selection_guards_for(config) -> SelectionGuards:
    """Every guard the config enables (``selection.locomo_guard``, ``gatemem_routes_guard``,
    ``gatemem_guard``, ``text_risk_guard``), in that order."""
    guards = {"locomo": locomo_guard_for(config), **gatemem_guards_for(config),
              "text_risk": text_risk_guard_for(config)}
    return SelectionGuards({name: g for name, g in guards.items() if g is not None})
