"""The one implementation of each ranking / calibration metric: AUC (rank-based, ties count
one half, optionally row-weighted), average precision (PR-AUC) and expected calibration error."""

from __future__ import annotations

from typing import Optional

import numpy as np


def rank_auc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None) -> float:
    """P(score of a positive > score of a negative) + 1/2 P(tie), optionally row-weighted.

    ``labels`` are 1/True for positives, 0/False for negatives. NaN when a class is empty.
    """
    scores = np.asarray(scores, dtype=float)
    y = np.asarray(labels).astype(bool)
    w = np.ones_like(scores) if weights is None else np.asarray(weights, dtype=float)
    _, inv = np.unique(scores, return_inverse=True)
    n_groups = int(inv.max()) + 1 if inv.size else 0
    pos = np.bincount(inv, weights=w * y, minlength=n_groups)
    neg = np.bincount(inv, weights=w * ~y, minlength=n_groups)
    total = pos.sum() * neg.sum()
    if total <= 0:
        return float("nan")
    below = np.cumsum(neg) - neg
    return float((pos * (below + 0.5 * neg)).sum() / total)


def roc_auc(y: np.ndarray, s: np.ndarray) -> Optional[float]:
    """:func:`rank_auc` of scores ``s`` for labels ``y``, ``None`` (not NaN) with one class."""
    auc = rank_auc(s, y)
    return None if np.isnan(auc) else auc


def average_precision(y: np.ndarray, s: np.ndarray) -> Optional[float]:
    """PR-AUC as average precision (sklearn's definition: one step per distinct score)."""
    y = np.asarray(y, dtype=bool)
    if y.sum() == 0:
        return None
    s = np.asarray(s, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    last = np.r_[s_sorted[1:] != s_sorted[:-1], True]
    tp = np.cumsum(y_sorted)[last]
    fp = np.cumsum(~y_sorted)[last]
    recall = tp / y.sum()
    precision = tp / (tp + fp)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def ece(y: np.ndarray, p: np.ndarray, bins: int = 10) -> Optional[float]:
    """Expected calibration error of probabilities ``p`` for outcomes ``y`` with ``bins``
    equal-width bins (``None`` when empty)."""
    if len(y) == 0:
        return None
    y = np.asarray(y, dtype=float)
    idx = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.mean() * abs(p[sel].mean() - y[sel].mean())
    return float(total)


__all__ = ["average_precision", "ece", "rank_auc", "roc_auc"]
