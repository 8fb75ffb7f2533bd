"""Guard-aware calibration of the risk scale ``a`` (score form ``mask_risk``; docs/design.md
section 4, issue 44).

``S' = S - a * sigmoid(r)``: a larger ``a`` moves risky memories further down, and the guard that
binds first is the GateMem route guard (``hybrid`` protected exposure within +0.01 of
``kleene_gate``): the risk term also moves benign turns around the protected ones. So at every
validation point the selection tries the multipliers of ``selection.risk_scale_grid`` of the
learned ``a`` (``softplus(rho)``), largest first, and keeps the first (largest) one at which every
guard passes; every guard reads ``select`` parts only. A multiplier above 1 lets ``a`` grow beyond
the learned one where the guards allow it; 0 leaves the masked cosine alone. When none passes, the
point is judged (and kept, for step 0) at the learned ``a``.

The multiplier is the gate's ``risk_scale_factor`` buffer, so the weights kept for a point carry
its calibrated ``a``; training itself always runs at the learned one (factor 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import numpy as np

from memgate.eval.calibration_risk import LabelledSet, calibrate_risk_thresholds, risk_calibration
from memgate.model.gate import MemGate

GuardFn = Callable[[MemGate], dict[str, Any]]


def failed_guards(result: dict[str, Any]) -> list[str]:
    """The names of the guards a ``SelectionGuards`` result failed."""
    return sorted(name for name, value in result.items()
                  if isinstance(value, dict) and value.get("passed") is False)


def calibrate_risk_scale(gate: MemGate, guard: GuardFn, grid: Sequence[float]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``guard`` at each multiplier of ``grid`` (largest first) until every guard passes.

    Returns the guard result at the chosen multiplier and the record (JSON primitives):
    ``learned`` (a at factor 1), ``multiplier``, ``calibrated`` (= learned * multiplier), ``passed``
    and ``tried`` (each multiplier run: its a, whether it passed, the guards it failed). The gate
    is left at the chosen factor: the caller keeps its weights, then resets the factor to 1."""
    if not gate.has_risk:
        raise ValueError("calibrate_risk_scale needs a gate with a risk head (score_form mask_risk)")
    if not grid:
        raise ValueError("calibrate_risk_scale: empty grid")
    gate.set_risk_scale_factor(1.0)
    learned = float(gate.risk_scale().detach())
    tried: list[dict[str, Any]] = []
    results: dict[float, dict[str, Any]] = {}
    chosen = None
    for multiplier in sorted((float(m) for m in grid), reverse=True):
        gate.set_risk_scale_factor(multiplier)
        result = guard(gate)
        results[multiplier] = result
        tried.append({"multiplier": multiplier, "risk_scale": learned * multiplier,
                      "passed": bool(result["passed"]), "failed": failed_guards(result)})
        if result["passed"]:
            chosen = multiplier
            break
    if chosen is None:  # judged at the learned a (run it if the grid left 1 out)
        chosen = 1.0
        if chosen not in results:
            gate.set_risk_scale_factor(1.0)
            results[chosen] = guard(gate)
        gate.set_risk_scale_factor(1.0)
    record = {"learned": learned, "multiplier": chosen, "calibrated": learned * chosen,
              "passed": bool(results[chosen]["passed"]), "grid": [float(m) for m in grid], "tried": tried}
    return results[chosen], record


def risk_export_info(gate: MemGate, selected: dict[str, Any], sets: dict[str, LabelledSet],
                     benign: Optional[Mapping[str, tuple[np.ndarray, np.ndarray]]] = None) -> dict[str, Any]:
    """The export record of a gate with a risk head: ``risk_scale`` (the selected point's
    calibration, or the learned a when no guard ran), ``risk_calibration`` (ECE and reliability
    of sigmoid(r) on ``sets``, select parts) and, given the benign select pairs (``benign``,
    ``SelectionGuards.benign_anchor_sets``), ``risk_thresholds`` (``risk_warn`` / ``risk_drop``,
    :func:`memgate.eval.calibration_risk.calibrate_risk_thresholds`; without them the checkpoint
    records none: no warn and no drop from risk). Empty for a gate without one."""
    if not gate.has_risk:
        return {}
    thresholds = {} if not benign else {"risk_thresholds": calibrate_risk_thresholds(gate, benign)}
    scale = float(gate.risk_scale().detach())
    record = selected.get("risk_scale") or {
        "learned": scale, "multiplier": 1.0, "calibrated": scale, "passed": None, "grid": [1.0], "tried": [],
        "note": "no selection guard ran: the learned a, uncalibrated"}
    return {"risk_scale": record, "risk_calibration": risk_calibration(gate, sets), **thresholds}


__all__ = ["calibrate_risk_scale", "failed_guards", "risk_export_info"]
