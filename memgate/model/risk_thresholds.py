"""The gate's risk thresholds ``risk_warn`` and ``risk_drop`` (score form ``mask_risk``; issue 44
item 7, docs/design.md section 4): where a checkpoint records them, how they are picked from the
calibrated risk ``sigmoid(r)`` of benign select pairs, and how they are written into its
``config.json``. Torch-free: the retriever reads them before the gate's weights load.

Where: ``config.json`` -> ``export.risk_thresholds`` = ``{"risk_warn": float | null,
"risk_drop": float | null, "max_flagged", "max_dropped", "flagged", "dropped", "n", "sets",
"note"}``. Absent (every checkpoint of score form ``mask``, and a ``mask_risk`` one nobody
calibrated) -> no warn and no drop from risk. A ``mask`` checkpoint's thresholds are ignored.

How (:func:`pick_thresholds`, budgets from the issue: <= 1 % flagged, <= 1 % dropped):

- ``risk_warn``: the smallest threshold (on a 1e-6 grid) at which at most ``max_flagged`` of all
  benign rows, pooled over the sets, have ``sigmoid(r) >= risk_warn``;
- ``risk_drop``: the smallest threshold at which at most ``max_dropped`` of *each* benign set has
  ``sigmoid(r) >= risk_drop`` (the anchor-floor rule of the cos - S drop threshold,
  ``memgate.eval.calibration.with_anchor_floors``: no benign source loses more than 1 %).
  Per set is the stricter rule, so ``risk_drop >= risk_warn``: a dropped hit was always flagged.

A budget that no threshold in [0, 1] meets (a set whose risks reach 1.0) gives ``null``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import numpy as np

RISK_THRESHOLDS_KEY = "risk_thresholds"  # under config.json's "export"
MAX_FLAGGED = 0.01  # share of benign rows that may reach risk_warn (pooled)
MAX_DROPPED = 0.01  # share of each benign set that may reach risk_drop
GRID = 1e-6  # thresholds are multiples of this (readable in config.json and the card)


def risk_thresholds_of(export: Optional[Mapping[str, Any]]) -> tuple[Optional[float], Optional[float]]:
    """``(risk_warn, risk_drop)`` recorded in a checkpoint's ``export`` section, each None when
    absent (no warn / no drop from risk)."""
    record = (export or {}).get(RISK_THRESHOLDS_KEY) or {}
    warn, drop = record.get("risk_warn"), record.get("risk_drop")
    return (None if warn is None else float(warn)), (None if drop is None else float(drop))


def threshold_for(risks: np.ndarray, budget: float) -> Optional[float]:
    """The smallest multiple of ``GRID`` at which at most ``budget`` of ``risks`` are >= it
    (None when no threshold in [0, 1] does: too many risks of 1.0)."""
    if not 0.0 <= budget < 1.0:
        raise ValueError(f"field 'budget' must be in [0, 1), got {budget!r}")
    r = np.sort(np.asarray(risks, dtype=np.float64))[::-1]
    if not len(r):
        raise ValueError("threshold_for: no risks")
    allowed = int(math.floor(budget * len(r) + 1e-9))  # rows that may reach the threshold
    if allowed >= len(r):
        return 0.0
    first_kept = float(r[allowed])  # the largest risk that must stay below the threshold
    t = (math.floor(first_kept / GRID) + 1) * GRID
    while t <= first_kept:  # (float rounding)
        t += GRID
    t = round(t, 6)
    return t if t <= 1.0 else None


def share_at(risks: np.ndarray, threshold: Optional[float]) -> float:
    """The share of ``risks`` at or above ``threshold`` (0 for None: nothing reaches it)."""
    r = np.asarray(risks, dtype=np.float64)
    return 0.0 if threshold is None or not len(r) else float(np.mean(r >= threshold))


def pick_thresholds(benign: Mapping[str, np.ndarray], max_flagged: float = MAX_FLAGGED,
                    max_dropped: float = MAX_DROPPED) -> dict[str, Any]:
    """The ``export.risk_thresholds`` record for the risks ``sigmoid(r)`` of benign pairs, per set
    name (module docstring). Empty sets are left out; no rows at all gives null thresholds."""
    sets = {name: np.asarray(r, dtype=np.float64) for name, r in sorted(benign.items()) if len(r)}
    record: dict[str, Any] = {"risk_warn": None, "risk_drop": None, "max_flagged": float(max_flagged),
                              "max_dropped": float(max_dropped), "flagged": 0.0, "dropped": 0.0,
                              "n": int(sum(len(r) for r in sets.values())), "sets": {}}
    if not sets:
        record["note"] = "no benign select rows: no warn and no drop from risk"
        return record
    pooled = np.concatenate(list(sets.values()))
    warn = threshold_for(pooled, max_flagged)
    per_set = [threshold_for(r, max_dropped) for r in sets.values()]
    drop = None if any(t is None for t in per_set) else max(t for t in per_set if t is not None)
    if drop is not None and warn is not None:
        drop = max(drop, warn)
    record.update(risk_warn=warn, risk_drop=drop, flagged=share_at(pooled, warn),
                  dropped=max(share_at(r, drop) for r in sets.values()),
                  sets={name: {"n": int(len(r)), "flagged": share_at(r, warn), "dropped": share_at(r, drop),
                               "max_risk": float(r.max())} for name, r in sets.items()},
                  note=(f"benign select pairs only: risk_warn flags <= {max_flagged:.0%} of them pooled, "
                        f"risk_drop drops <= {max_dropped:.0%} of each set"))
    return record


def write_risk_thresholds(checkpoint_dir: str | Path, record: Mapping[str, Any]) -> Path:
    """Write ``record`` into ``checkpoint_dir/config.json`` as ``export.risk_thresholds`` (the
    rest of the file, and the weights it vouches for, unchanged); returns the file."""
    path = Path(checkpoint_dir) / "config.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw.get("export"), dict):
        raw["export"] = {}
    raw["export"][RISK_THRESHOLDS_KEY] = dict(record)
    path.write_text(json.dumps(raw, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    return path


__all__ = ["GRID", "MAX_DROPPED", "MAX_FLAGGED", "RISK_THRESHOLDS_KEY", "pick_thresholds",
           "risk_thresholds_of", "share_at", "threshold_for", "write_risk_thresholds"]
