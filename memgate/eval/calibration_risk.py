"""How well the risk head's ``sigmoid(r)`` reads as a probability (score form ``mask_risk``; issue
44): expected calibration error per labelled set and pooled, the reliability bins behind it, and
the reliability plot of the model card (``risk_reliability.png``).

The sets are ``select`` parts only (``memgate.train.selection.SelectionGuards.risk_label_sets``):
every natural-phrasing cell (trap = 1, control = 0), GateMem select (protected turns = 1,
anchors = 0) and LoCoMo select's required evidence (benign, 0). The ECE is the project's one
(``memgate.eval.metrics.ece``, equal-width bins). Also here: the risk thresholds ``risk_warn`` /
``risk_drop`` picked on the benign select pairs (:func:`calibrate_risk_thresholds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from memgate.eval.metrics import ece
from memgate.model.risk_thresholds import MAX_DROPPED, MAX_FLAGGED, pick_thresholds

LabelledSet = tuple[np.ndarray, np.ndarray, np.ndarray]  # (queries (n, d), memories (n, d), labels (n,))


def reliability_bins(labels: np.ndarray, probs: np.ndarray, bins: int = 10) -> list[dict[str, Any]]:
    """Per equal-width bin of ``probs`` (the bins ``ece`` uses): its range, count, mean predicted
    probability and observed share of label 1 (None where the bin is empty)."""
    y = np.asarray(labels, dtype=float)
    p = np.asarray(probs, dtype=float)
    idx = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        sel = idx == b
        n = int(sel.sum())
        out.append({"low": b / bins, "high": (b + 1) / bins, "n": n,
                    "predicted": float(p[sel].mean()) if n else None,
                    "observed": float(y[sel].mean()) if n else None})
    return out


def _summary(labels: np.ndarray, probs: np.ndarray, bins: int) -> dict[str, Any]:
    return {"n": int(len(labels)), "positives": int(np.sum(labels)),
            "mean_risk": float(np.mean(probs)) if len(probs) else None,
            "ece": ece(labels, probs, bins), "bins": reliability_bins(labels, probs, bins)}


@torch.no_grad()
def gate_risk(gate: Any, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """sigmoid(r) of each (query, memory) row of a gate with a risk head."""
    weight = next(gate.parameters())
    qt = torch.as_tensor(np.ascontiguousarray(q, dtype=np.float32)).to(weight.device, weight.dtype)
    vt = torch.as_tensor(np.ascontiguousarray(v, dtype=np.float32)).to(weight.device, weight.dtype)
    risk = gate(qt, vt.unsqueeze(1)).risk
    if risk is None:
        raise ValueError("gate_risk needs a gate with a risk head (score_form mask_risk)")
    return np.asarray(risk[:, 0].double().cpu().numpy())


def risk_calibration(gate: Any, sets: Mapping[str, LabelledSet], bins: int = 10) -> dict[str, Any]:
    """ECE and reliability bins of ``sigmoid(r)`` per labelled set and pooled over all of them."""
    per_set: dict[str, Any] = {}
    pooled_y, pooled_p = [], []
    for name, (q, v, labels) in sorted(sets.items()):
        y = np.asarray(labels, dtype=bool)
        if not len(y):
            continue
        p = gate_risk(gate, q, v)
        per_set[name] = _summary(y, p, bins)
        pooled_y.append(y)
        pooled_p.append(p)
    if not per_set:
        return {"sets": {}, "pooled": None, "bins": bins}
    y_all, p_all = np.concatenate(pooled_y), np.concatenate(pooled_p)
    return {"sets": per_set, "pooled": _summary(y_all, p_all, bins), "bins": bins,
            "note": "select parts only; ECE with equal-width bins (memgate.eval.metrics.ece)"}


def calibrate_risk_thresholds(gate: Any, benign: Mapping[str, tuple[np.ndarray, np.ndarray]],
                              max_flagged: float = MAX_FLAGGED, max_dropped: float = MAX_DROPPED) -> dict[str, Any]:
    """``risk_warn`` / ``risk_drop`` of a gate with a risk head, picked on benign (query, memory)
    pairs per set name (select parts: ``SelectionGuards.benign_anchor_sets``): the
    ``export.risk_thresholds`` record of :func:`memgate.model.risk_thresholds.pick_thresholds`
    (<= ``max_flagged`` of the rows flagged, pooled; <= ``max_dropped`` of each set dropped).
    Write it into a checkpoint with :func:`memgate.model.risk_thresholds.write_risk_thresholds`."""
    if not getattr(gate, "has_risk", False):
        raise ValueError("calibrate_risk_thresholds needs a gate with a risk head (score_form mask_risk)")
    risks = {name: gate_risk(gate, q, v) for name, (q, v) in benign.items() if len(q)}
    return pick_thresholds(risks, max_flagged, max_dropped)


def plot_reliability(path: Path, calibration: Mapping[str, Any], title: str = "") -> Path:
    """Observed share of risky rows against the mean predicted sigmoid(r) per bin, one line per
    set (marker area ~ rows in the bin) and the pooled line; the diagonal is perfect calibration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 6))
    ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=1, label="perfect calibration")
    curves = [(name, entry) for name, entry in sorted((calibration.get("sets") or {}).items())]
    if calibration.get("pooled"):
        curves.append(("pooled", calibration["pooled"]))
    for i, (name, entry) in enumerate(curves):
        pts = [(b["predicted"], b["observed"], b["n"]) for b in entry["bins"] if b["n"]]
        if not pts:
            continue
        xs, ys, ns = zip(*pts)
        total = max(1, sum(ns))
        pooled = name == "pooled"
        ax.plot(xs, ys, color="black" if pooled else f"C{i % 10}", lw=2.2 if pooled else 1, alpha=1 if pooled else 0.7,
                label=f"{name} (ECE {entry['ece']:.3f}, n {entry['n']})")
        ax.scatter(xs, ys, s=[max(6.0, 300.0 * n / total) for n in ns], color="black" if pooled else f"C{i % 10}",
                   alpha=0.6)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("mean predicted risk sigmoid(r) in the bin")
    ax.set_ylabel("observed share of risky rows")
    ax.set_title(title or "risk head reliability (select parts)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


__all__ = ["LabelledSet", "calibrate_risk_thresholds", "gate_risk", "plot_reliability", "reliability_bins", "risk_calibration"]
