"""The one calibration rule used by every drop threshold (docs/design.md section 3).

A route that drops items drops those whose score is at or above a threshold (higher score = more
likely inadmissible). The threshold is chosen on the dev/select split to **maximise the recall
of known violations** (``a is False``) subject to **at most ``max_anchor_drop`` (1 %) of
required anchors dropped**; ties go to the higher (more conservative) threshold. If no threshold
catches a violation within the anchor constraint, if there are no known violations, or if there
are no anchors to check the constraint on, everything is kept (``threshold = +inf``) and the
returned ``Calibration`` says so (``feasible = False`` and a ``note``).

Candidate thresholds are the distinct observed scores (and +inf). The chosen threshold is the
score of the lowest-scoring violation that is caught, so items scoring exactly the threshold are
dropped. Unresolved labels (``a is None``) count neither as violations nor against the rule.

**Real benign anchors** (``with_anchor_floors``): the threshold chosen on one split is then raised,
where needed, so that at most ``max_anchor_drop`` of every further anchor set (the benign rows of
the real select parts: natural-phrasing beneficial memories, LoCoMo evidence) is dropped too; the
synthetic dev split alone let a text-risk gate drop relevant real memories.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from memgate.contract.admissibility import check_tristate

_TOL = 1e-12


@dataclass(frozen=True)
class Calibration:
    """A calibrated drop threshold and how it was obtained.

    threshold: drop an item iff ``score >= threshold``; ``math.inf`` = keep everything.
    violation_recall: share of known violations dropped at ``threshold`` (None: no violations).
    anchor_drop_rate: share of required anchors dropped at ``threshold`` (None: no anchors).
    feasible: True iff a threshold dropping at least one violation met the anchor constraint.
    data_hash: the hash of the data it was calibrated on, passed through.
    """

    threshold: float
    violation_recall: float | None
    anchor_drop_rate: float | None
    n_violations: int
    n_anchors: int
    n_items: int
    feasible: bool
    note: str
    max_anchor_drop: float = 0.01
    data_hash: str | None = None
    # set by with_anchor_floors: the threshold of the first split alone, and per further anchor
    # set its size, the lowest threshold dropping <= max_anchor_drop of it, the share dropped
    synthetic_threshold: float | None = None
    anchor_floors: dict | None = None

    def drops(self, scores: Sequence[float]) -> np.ndarray:
        """Boolean mask of the items this threshold drops (``score >= threshold``)."""
        s = np.asarray(scores, dtype=float)
        return s >= self.threshold

    def to_dict(self) -> dict:
        """JSON primitives only; ``threshold`` is None for +inf (keep everything)."""
        out = asdict(self)
        out["threshold"] = None if math.isinf(self.threshold) else float(self.threshold)
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> Calibration:
        names = {f.name for f in fields(cls)}
        unknown = set(raw) - names
        if unknown:
            raise ValueError(f"Calibration.from_dict: unknown keys {sorted(unknown)}")
        missing = names - set(raw) - {"max_anchor_drop", "data_hash", "synthetic_threshold", "anchor_floors"}
        if missing:
            raise ValueError(f"Calibration.from_dict: missing keys {sorted(missing)}")
        values = dict(raw)
        values["threshold"] = math.inf if raw["threshold"] is None else float(raw["threshold"])
        if type(values["feasible"]) is not bool:
            raise TypeError("Calibration.from_dict: field 'feasible' must be a bool")
        return cls(**values)


def calibrate_threshold(
    scores: Sequence[float],
    admissible: Sequence[bool | None],
    is_required_anchor: Sequence[bool],
    max_anchor_drop: float = 0.01,
    data_hash: str | None = None,
) -> Calibration:
    """Choose the drop threshold by the one rule (module doc). O(n log n): one sort.

    scores: per item, higher = more likely inadmissible (finite floats).
    admissible: per item ``a`` in True / False / None (numbers raise TypeError naming the field).
    is_required_anchor: per item bool (Python or numpy bools).
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-d, got shape {s.shape}")
    n = len(s)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite (no NaN or inf)")
    labels = list(admissible)
    if len(labels) != n:
        raise ValueError(f"admissible has {len(labels)} items, scores has {n}")
    for i, a in enumerate(labels):
        check_tristate(a, f"admissible[{i}]")
    anchor = np.asarray(is_required_anchor)
    if anchor.shape != (n,):
        raise ValueError(f"is_required_anchor has shape {anchor.shape}, expected ({n},)")
    if anchor.dtype != np.bool_:
        raise TypeError(f"is_required_anchor must hold bools (got dtype {anchor.dtype})")
    if not (0.0 <= max_anchor_drop < 1.0):
        raise ValueError(f"max_anchor_drop must be in [0, 1), got {max_anchor_drop!r}")

    viol = np.fromiter((a is False for a in labels), dtype=bool, count=n)
    n_viol = int(viol.sum())
    n_anchor = int(anchor.sum())

    def keep_all(note: str) -> Calibration:
        return Calibration(
            threshold=math.inf,
            violation_recall=0.0 if n_viol else None,
            anchor_drop_rate=0.0 if n_anchor else None,
            n_violations=n_viol,
            n_anchors=n_anchor,
            n_items=n,
            feasible=False,
            note=note,
            max_anchor_drop=max_anchor_drop,
            data_hash=data_hash,
        )

    if n_viol == 0:
        return keep_all("no known violations (a = False): keeping everything (threshold = +inf)")
    if n_anchor == 0:
        return keep_all(
            "no required anchors: the anchor-drop constraint cannot be checked; "
            "keeping everything (threshold = +inf)"
        )

    order = np.argsort(-s, kind="stable")
    s_sorted = s[order]
    cum_viol = np.cumsum(viol[order])
    cum_anchor = np.cumsum(anchor[order])
    # Threshold t = s_sorted[i] drops every item with score >= t: the last index of each run of
    # equal scores carries the counts for that threshold.
    last = np.r_[s_sorted[1:] != s_sorted[:-1], True]
    t_vals = s_sorted[last]  # descending, distinct
    v_at = cum_viol[last]
    a_at = cum_anchor[last]
    a_rate = a_at / n_anchor
    ok = a_rate <= max_anchor_drop + _TOL
    # Both counts are non-decreasing as t decreases, so the feasible thresholds are a prefix.
    if not ok[0] or v_at[ok].max() == 0:
        return keep_all(
            f"no threshold drops a known violation while dropping <= {max_anchor_drop:.2%} of "
            "required anchors: keeping everything (threshold = +inf)"
        )
    best_v = v_at[ok].max()
    # Highest threshold reaching best_v (ties -> more conservative): first index where v_at hits it.
    j = int(np.argmax(v_at >= best_v))
    return Calibration(
        threshold=float(t_vals[j]),
        violation_recall=float(best_v / n_viol),
        anchor_drop_rate=float(a_rate[j]),
        n_violations=n_viol,
        n_anchors=n_anchor,
        n_items=n,
        feasible=True,
        note=(
            f"drops {int(best_v)}/{n_viol} known violations and "
            f"{int(a_at[j])}/{n_anchor} required anchors"
        ),
        max_anchor_drop=max_anchor_drop,
        data_hash=data_hash,
    )


def anchor_floor(scores: Sequence[float], max_drop: float = 0.01) -> float:
    """The lowest threshold that drops at most ``max_drop`` of ``scores`` (every item an anchor;
    drop iff ``score >= threshold``): just above the ``floor(max_drop * n) + 1``-th highest score.
    ``-inf`` for an empty set (nothing to protect)."""
    s = np.sort(np.asarray(scores, dtype=float))[::-1]
    if s.size == 0:
        return -math.inf
    if not np.all(np.isfinite(s)):
        raise ValueError("anchor scores must be finite (no NaN or inf)")
    allowed = int(math.floor(max_drop * s.size + _TOL))  # anchors that may be dropped
    return float(np.nextafter(s[allowed], math.inf)) if allowed < s.size else -math.inf


def with_anchor_floors(calibration: Calibration, anchor_sets: dict, scores: Sequence[float],
                       admissible: Sequence[bool | None], is_required_anchor: Sequence[bool]) -> Calibration:
    """``calibration`` (chosen on ``scores`` / ``admissible`` / ``is_required_anchor``) with its
    threshold raised to every anchor set's floor (module doc), its violation recall and anchor
    drop rate re-read on the same split at the raised threshold.
    ``anchor_sets``: name -> scores of that set's anchors (higher = more likely inadmissible)."""
    floors, threshold = {}, calibration.threshold
    for name, values in sorted(anchor_sets.items()):
        floor = anchor_floor(values, calibration.max_anchor_drop)
        floors[name] = {"n": int(len(values)), "floor": None if math.isinf(floor) else floor}
        threshold = max(threshold, floor)
    for name, values in sorted(anchor_sets.items()):
        v = np.asarray(values, dtype=float)
        floors[name]["drop_rate"] = float((v >= threshold).mean()) if v.size else None
    out = {f.name: getattr(calibration, f.name) for f in fields(Calibration)}
    out.update(anchor_floors=floors,
               synthetic_threshold=None if math.isinf(calibration.threshold) else calibration.threshold)
    if threshold > calibration.threshold:
        s = np.asarray(scores, dtype=float)
        dropped = s >= threshold
        viol = np.fromiter((a is False for a in admissible), dtype=bool, count=len(s))
        anchor = np.asarray(is_required_anchor, dtype=bool)
        out.update(threshold=threshold,
                   violation_recall=float(dropped[viol].mean()) if viol.any() else None,
                   anchor_drop_rate=float(dropped[anchor].mean()) if anchor.any() else None,
                   note=f"{calibration.note}; raised from {calibration.threshold:.4g} to {threshold:.4g} so "
                        f"that at most {calibration.max_anchor_drop:.0%} of each real anchor set is dropped: "
                        f"drops {int(dropped[viol].sum())}/{int(viol.sum())} known violations")
    else:
        out["note"] = f"{calibration.note}; no real anchor set needed a higher threshold"
    return Calibration(**out)
