"""memgate.eval.metrics: the one AUC / AP / ECE, against values computed by hand.

Before the study's and eval.transfer's own implementations were removed, a test checked that
these functions returned exactly their values on fixed inputs (tied, untied, weighted); sklearn
comparisons live in tests/eval/test_transfer.py and tests/studies/test_verifier_study.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memgate.eval.metrics import average_precision, ece, rank_auc, roc_auc


def test_auc_by_hand():
    # positives 0.35, 0.8; negatives 0.1, 0.4: 0.35 beats 0.1 only, 0.8 beats both -> 3 of 4 pairs
    assert rank_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    # a tie (0.4 vs 0.4) counts one half: (1 + 0.5 + 2) / 4
    assert rank_auc([0.1, 0.4, 0.4, 0.8], [0, 0, 1, 1]) == 0.875
    # weight 3 on the negative 0.4: (1*1 + 0*3 + 1*1 + 1*3) / (2 * 4) = 5 / 8
    assert rank_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], [1, 3, 1, 1]) == 0.625
    assert math.isnan(rank_auc([1, 2], [1, 1])) and roc_auc(np.array([1, 1]), np.array([1, 2])) is None
    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.4, 0.8])) == 0.875


def test_average_precision_and_ece_by_hand():
    # ranked 0.9 (pos), 0.8 (neg), 0.7 (pos): precision 1 at recall 1/2, 2/3 at recall 1
    assert average_precision(np.array([1, 0, 1]), np.array([0.9, 0.8, 0.7])) == pytest.approx(0.5 + 1 / 3)
    assert average_precision(np.array([0, 0]), np.array([0.1, 0.2])) is None
    # bins of 0.1: 0.9 -> bin 9 (|0.9 - 1| * 1/2), 0.2 -> bin 2 (|0.2 - 0| * 1/2)
    assert ece(np.array([1, 0]), np.array([0.9, 0.2])) == pytest.approx(0.15)
    assert ece(np.array([]), np.array([])) is None
