"""The one calibration rule: max known-violation recall s.t. <= 1 % of required anchors dropped."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memgate.eval.calibration import Calibration, calibrate_threshold


def test_tiny_case_hand_computed():
    # score  a      anchor
    # 0.9    False  no
    # 0.8    True   yes
    # 0.7    False  no
    # 0.6    None   no
    # 0.5    False  no
    # 0.4    True   yes
    # 3 violations, 2 anchors. With max_anchor_drop = 0.5 one anchor may go:
    # t=0.9: v 1, anchors 0/2 | t=0.8: v 1, 1/2 | t=0.7: v 2, 1/2 | t=0.6: v 2, 1/2
    # t=0.5: v 3, 1/2 (ok)    | t=0.4: v 3, 2/2 (too many)
    # -> best recall 3/3 at t = 0.5, anchor drop 1/2
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    a = [False, True, False, None, False, True]
    anchor = [False, True, False, False, False, True]
    cal = calibrate_threshold(scores, a, anchor, max_anchor_drop=0.5)
    assert cal.feasible
    assert cal.threshold == 0.5
    assert cal.violation_recall == 1.0
    assert cal.anchor_drop_rate == 0.5
    assert (cal.n_violations, cal.n_anchors, cal.n_items) == (3, 2, 6)
    assert cal.drops(scores).tolist() == [True, True, True, True, True, False]
    # With the default 1 %: no anchor may go; only t = 0.9 is feasible -> recall 1/3
    cal = calibrate_threshold(scores, a, anchor)
    assert cal.threshold == 0.9
    assert cal.violation_recall == pytest.approx(1 / 3)
    assert cal.anchor_drop_rate == 0.0


def test_ties_go_to_the_higher_threshold():
    # violation at 0.9; 0.85 (None) and 0.8 (True) also feasible with the same recall 1/1;
    # the anchor at 0.3 is never dropped within 1 %. Highest threshold with max recall: 0.9.
    cal = calibrate_threshold([0.9, 0.85, 0.8, 0.3], [False, None, True, True], [False, False, False, True])
    assert cal.threshold == 0.9
    assert cal.violation_recall == 1.0


def test_one_percent_boundary():
    # 100 anchors; one anchor scores 0.95 (between the violations at 0.97 and 0.9), the
    # other 99 score 0.0..0.49. t=0.9 drops 2/2 violations and 1/100 = 1 % anchors (allowed);
    # the next threshold down (0.49) drops 2 % -> t = 0.9.
    scores = [0.97, 0.95, 0.9] + [i / 200 for i in range(99)]
    a = [False, True, False] + [True] * 99
    anchor = [False, True, False] + [True] * 99
    cal = calibrate_threshold(scores, a, anchor)
    assert cal.threshold == 0.9
    assert cal.violation_recall == 1.0
    assert cal.anchor_drop_rate == pytest.approx(0.01)


def test_equal_scores_are_dropped_together():
    # violation and the only anchor share the score 0.7: dropping one drops both -> infeasible
    cal = calibrate_threshold([0.7, 0.7, 0.1], [False, True, True], [False, True, False])
    assert not cal.feasible
    assert math.isinf(cal.threshold)


def test_infeasible_keeps_everything():
    # the only anchor has the highest score: every threshold drops it (100 % > 1 %)
    cal = calibrate_threshold([0.9, 0.5], [True, False], [True, False])
    assert cal.feasible is False
    assert cal.threshold == math.inf
    assert cal.violation_recall == 0.0 and cal.anchor_drop_rate == 0.0
    assert "keeping everything" in cal.note
    assert not cal.drops([0.9, 0.5, 1e9]).any()


def test_no_violations_or_no_anchors_keeps_everything():
    cal = calibrate_threshold([0.9, 0.5], [True, None], [True, False])
    assert cal.threshold == math.inf and not cal.feasible
    assert cal.violation_recall is None
    assert "no known violations" in cal.note
    cal = calibrate_threshold([0.9, 0.5], [False, True], [False, False])
    assert cal.threshold == math.inf and not cal.feasible
    assert cal.anchor_drop_rate is None
    assert "no required anchors" in cal.note


def test_numeric_labels_rejected():
    with pytest.raises(TypeError, match=r"admissible\[1\]"):
        calibrate_threshold([0.9, 0.5], [True, 0], [True, False])
    with pytest.raises(TypeError, match="is_required_anchor"):
        calibrate_threshold([0.9, 0.5], [True, False], [1, 0])
    with pytest.raises(ValueError, match="finite"):
        calibrate_threshold([0.9, float("nan")], [True, False], [True, False])


def test_round_trip():
    cal = calibrate_threshold([0.9, 0.5, 0.1], [False, None, True], [False, False, True], data_hash="abc")
    raw = json.loads(json.dumps(cal.to_dict()))
    assert Calibration.from_dict(raw) == cal
    assert raw["data_hash"] == "abc" and raw["threshold"] == 0.9
    keep = calibrate_threshold([0.9], [True], [True])
    raw = json.loads(json.dumps(keep.to_dict()))
    assert raw["threshold"] is None  # +inf is stored as null
    assert Calibration.from_dict(raw).threshold == math.inf
    with pytest.raises(ValueError, match="unknown keys"):
        Calibration.from_dict({**raw, "extra": 1})


def _brute_force(scores, a, anchor, max_drop):
    """O(n^2) reference: try every distinct score, best recall, ties -> highest threshold."""
    n_v = sum(x is False for x in a)
    n_a = sum(anchor)
    best = (0, math.inf)
    for t in sorted(set(scores), reverse=True):
        dropped = [s >= t for s in scores]
        v = sum(d and x is False for d, x in zip(dropped, a))
        k = sum(d and y for d, y in zip(dropped, anchor))
        if k / n_a <= max_drop + 1e-12 and v > best[0]:
            best = (v, t)
    return best[1] if n_v and n_a else math.inf


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 300
    scores = np.round(rng.random(n), 2).tolist()  # coarse -> many ties
    a = [(None, True, False)[i] for i in rng.integers(0, 3, n)]
    anchor = (rng.random(n) < 0.3).tolist()
    for max_drop in (0.01, 0.05, 0.2):
        cal = calibrate_threshold(scores, a, anchor, max_anchor_drop=max_drop)
        assert cal.threshold == _brute_force(scores, a, anchor, max_drop)


def test_anchor_floor_drops_at_most_the_share():
    from memgate.eval.calibration import anchor_floor

    scores = np.linspace(0.0, 1.0, 201)  # 201 anchors: 1 % may go -> 2 of them (0.995, 1.0)
    t = anchor_floor(scores, 0.01)
    assert int((scores >= t).sum()) == 2
    assert anchor_floor(scores, 0.0) > 1.0  # none may go: just above the highest
    assert anchor_floor([], 0.01) == -math.inf
    with pytest.raises(ValueError, match="finite"):
        anchor_floor([0.1, float("nan")])


def test_real_anchor_floors_raise_the_threshold_and_reread_the_split():
    from memgate.eval.calibration import with_anchor_floors

    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    a = [False, True, False, None, False, True]
    anchor = [False, True, False, False, False, True]
    cal = calibrate_threshold(scores, a, anchor, max_anchor_drop=0.5)  # t = 0.5 (test above)
    # a benign real set scoring 0.75 and 0.3: at most half may go -> the floor lies just above 0.3,
    # below 0.5: nothing changes
    same = with_anchor_floors(cal, {"real": [0.75, 0.3]}, scores, a, anchor)
    assert same.threshold == cal.threshold and same.synthetic_threshold == 0.5
    assert same.anchor_floors["real"]["drop_rate"] == 0.5
    # a set whose anchors score 0.85 and 0.82: one may go, so the threshold rises above 0.82
    raised = with_anchor_floors(cal, {"real": [0.85, 0.82]}, scores, a, anchor)
    assert 0.82 < raised.threshold <= 0.85 and raised.synthetic_threshold == 0.5
    assert raised.violation_recall == pytest.approx(1 / 3)  # only the 0.9 violation is still dropped
    assert raised.anchor_drop_rate == 0.0 and "raised from 0.5" in raised.note
    assert Calibration.from_dict(json.loads(json.dumps(raised.to_dict()))) == raised
    # a checkpoint written before the anchor floors still loads
    old = {k: v for k, v in cal.to_dict().items() if k not in ("synthetic_threshold", "anchor_floors")}
    assert Calibration.from_dict(old) == cal
