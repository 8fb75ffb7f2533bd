"""memgate.eval.metrics: the one AUC / AP / ECE; values equal the implementations it replaced."""

from __future__ import annotations

import numpy as np

from memgate.eval import metrics
from memgate.eval import transfer
from memgate.studies.verifiers import study


def _inputs():
    rng = np.random.default_rng(7)
    out = []
    for n in (2, 5, 40, 300):
        y = rng.integers(0, 2, n)
        y[0], y[-1] = 0, 1
        out.append((y, rng.random(n)))  # no ties
        out.append((y, np.round(rng.random(n), 1)))  # many ties
    return out


def test_the_unified_metrics_equal_the_old_implementations_exactly():
    for y, s in _inputs():
        assert metrics.rank_auc(s, y) == transfer.rank_auc(s, y)
        assert metrics.roc_auc(y, s) == study.roc_auc(y, s)
        assert metrics.rank_auc(s, y) == study.roc_auc(y, s)
        assert metrics.average_precision(y, s) == study.average_precision(y, s)
        assert metrics.ece(y, s) == study.ece(y, s)
        w = np.linspace(0.5, 2.0, len(s))
        assert metrics.rank_auc(s, y, w) == transfer.rank_auc(s, y, w)
