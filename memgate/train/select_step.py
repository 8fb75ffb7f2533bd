"""Which validation point ships (docs/design.md section 4): the ``BestGateSelection`` callback.

At every validation point (step 0, the near-identity gate, included: ``trainer.validate`` runs
before the fit) the callback records the dev figures and runs every enabled guard
(``memgate.train.selection.SelectionGuards``); the weights of each point that passes them all,
and of step 0, are kept. After the fit, ``finalize()`` chooses:

- ``metric="text_risk_macro"`` (the default): among passing points, the best macro AUC(1 - S) -
  AUC(1 - cos) over the natural sources' select parts; then the **earliest** passing point whose
  paired bootstrap interval of (best - it) contains 0 (ties within the CI go to the earlier step,
  so a trained step ships only when it beats step 0 beyond the CI, or step 0 does not pass);
- ``metric="dev_pref_acc_gated"``: among passing points, the best dev preference accuracy, ties
  to the earlier step.

When no point passes every guard, step 0 ships as the **fallback** (``selection["fallback"]``):
it ranks like the cosine, and the run says so loudly (``memgate.train.run``). Only the chosen
entry of the history is marked ``selected``.

A gate with a risk head (score form ``mask_risk``) is judged at the largest multiplier of its
learned risk scale in ``risk_scale_grid`` at which every guard passes (``memgate.train.risk_scale``):
the entry records it under ``risk_scale`` and the weights kept for the point carry it. Every entry
also records the dev mask diagnostics (uniform share, alignment) and the dev activity |cos - S|.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Optional

import lightning as L
import numpy as np
import torch

from memgate.train.modules import Guard
from memgate.train.risk_scale import calibrate_risk_scale

log = logging.getLogger(__name__)

REPS_KEY = "_macro_reps"
# dev diagnostics recorded per validation point (memgate.train.objective)
DEV_DIAGNOSTICS = ("mask_uniform_share", "mask_alignment_pos", "mask_alignment_neg", "activity",
                   "risk_pos_mean", "risk_neg_mean", "risk_scale")


def _strip(result: Optional[dict]):
    """A guard result without the bootstrap replicates (JSON-able); (result, replicates)."""
    if not result:
        return result, None
    text = result.get("text_risk")
    if isinstance(text, dict) and REPS_KEY in text:
        reps = np.asarray(text[REPS_KEY], dtype=float)
        return {**result, "text_risk": {k: v for k, v in text.items() if k != REPS_KEY}}, reps
    return result, None


class BestGateSelection(L.Callback):
    """Records every validation point with its guards; ``finalize()`` picks the one to export."""

    def __init__(self, guard: Optional[Guard] = None, metric: str = "dev_pref_acc_gated",
                 risk_scale_grid: tuple = (1.0,)):
        self.guard = guard if (guard is None or bool(guard)) else None  # an empty guard set = none
        self.metric = metric
        self.risk_scale_grid = tuple(risk_scale_grid)
        if metric == "text_risk_macro" and "text_risk" not in getattr(self.guard, "names", ()):
            raise ValueError("selection.metric=text_risk_macro needs the text_risk guard "
                             "(selection.text_risk_guard=true)")
        self.best_state: Optional[dict] = None
        self.best: Optional[dict] = None
        self.history: list[dict] = []
        self._states: dict[int, dict] = {}
        self._reps: dict[int, np.ndarray] = {}

    def on_validation_end(self, trainer: L.Trainer, pl_module) -> None:
        # on_validation_end, not on_validation_epoch_end: Lightning calls callbacks' epoch-end
        # hooks before the module's, which would pair these weights with the previous metrics.
        if trainer.sanity_checking or not pl_module.last_dev:
            return
        dev = pl_module.last_dev
        entry = {
            "step": int(trainer.global_step),
            "epoch": int(trainer.current_epoch),
            "dev_pref_acc_gated": dev["pref_acc_gated"],
            "dev_pref_acc_reference": dev["pref_acc_reference"],
            "dev_cos_v_vg_pos": dev.get("cos_v_vg_pos"),
            **{f"dev_{k}": dev[k] for k in DEV_DIAGNOSTICS if k in dev},
            "guard": None,
            "passed": True,
            "selected": False,
        }
        gate = pl_module.gate
        if self.guard is not None:
            was_training = gate.training
            gate.eval()
            with torch.no_grad():
                if gate.has_risk:
                    raw, entry["risk_scale"] = calibrate_risk_scale(gate, self.guard, self.risk_scale_grid)
                else:
                    raw = self.guard(gate)
                result, reps = _strip(raw)
            gate.train(was_training)
            entry["guard"], entry["passed"] = result, bool(result["passed"])
            if reps is not None:
                entry["text_risk_macro"] = result["text_risk"]["macro"]
                self._reps[entry["step"]] = reps
        if entry["passed"] or entry["step"] == 0:
            self._states[entry["step"]] = copy.deepcopy(gate.state_dict())
        if gate.has_risk:
            gate.set_risk_scale_factor(1.0)  # training goes on at the learned a
        self.history.append(entry)
        log.info("selection: %s", json.dumps(entry))

    def _figure(self, entry: dict) -> float:
        if self.metric == "text_risk_macro":
            return entry["text_risk_macro"]["value"]
        return entry["dev_pref_acc_gated"]

    def finalize(self) -> dict:
        """Choose the point to export (module doc); sets ``best`` / ``best_state``."""
        if not self.history:
            raise RuntimeError("no validation point was recorded; nothing to export")
        passing = [e for e in self.history if e["passed"]]
        rule = self.metric
        tie = None
        if not passing:
            chosen = next((e for e in self.history if e["step"] == 0), None)
            if chosen is None or chosen["step"] not in self._states:
                raise RuntimeError("no validation point passed the selection guards and no step-0 gate was "
                                   f"recorded; nothing to export (history: {json.dumps(self.history)})")
            fallback = True
        else:
            fallback = False
            best = passing[0]
            for e in passing[1:]:  # strictly better only: ties go to the earlier step
                if self._figure(e) > self._figure(best):
                    best = e
            chosen = best
            if self.metric == "text_risk_macro":
                for e in passing:
                    if e["step"] > best["step"]:
                        break
                    diff = self._reps[best["step"]] - self._reps[e["step"]]
                    lo = float(np.quantile(diff, 0.025))
                    if e is best or lo <= 0:
                        tie = {"best_step": best["step"], "difference": self._figure(best) - self._figure(e),
                               "ci": [lo, float(np.quantile(diff, 0.975))]}
                        chosen = e
                        break
        for e in self.history:
            e["selected"] = e is chosen
        self.best = {**chosen, "fallback": fallback, "rule": rule, "trained": chosen["step"] > 0}
        if tie is not None:
            self.best["tie_with_best"] = tie
        self.best_state = self._states[chosen["step"]]
        return self.best
