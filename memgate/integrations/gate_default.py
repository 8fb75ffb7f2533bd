"""Whether ``memgate.Memory`` ranks with the released learned gate by default.

The rule (docs/design.md section 4, "release rule"): the gate is on by default **if and only if**
the released model card records

1. every selection guard of ``REQUIRED_GUARDS`` passed at the exported step, on the ``select``
   parts: ``locomo`` (LoCoMo recall), ``gatemem_routes`` (GateMem ``hybrid`` not worse than
   ``kleene_gate`` beyond the margins), ``gatemem`` (GateMem suppression AUC >= 0.5) and
   ``text_risk`` (every natural-phrasing source's suppression AUC >= 0.5);
2. a **trained** exported step (``selection.step`` > 0): a step-0 export is the near-identity gate,
   which ranks like the cosine (the fallback when no trained step passed), so there is nothing to
   switch on; and
3. a LoCoMo-report ``recall_required@20`` drop of at most ``MAX_REPORT_DROP`` (0.01).

Anything missing counts as not passed (never imputed), and every figure under the places the
rule reads must be plausible first (:mod:`memgate.integrations.card_figures`: a drop in
[-1, 1], an AUC or a recall in [0, 1], ``passed`` a bool, ...; a card that breaks it keeps the
gate off, naming the figure). Where the card records them:

- guards: ``config.json`` -> ``export.selection``: ``guard`` (one guard dict, or a mapping
  name -> guard dict, as the release writes it) and/or ``guards`` (a list of guard dicts, or a
  mapping name -> guard dict); a guard dict has ``passed`` (bool) and is named by its key in the
  mapping, else by its ``guard`` field, else by its data (``source``).
- the exported step: ``config.json`` -> ``export.selection.step`` (an integer).
- the report drop: ``headline.json`` -> ``locomo_report.drop`` (a number; also read from
  ``config.json`` -> ``export.locomo_report.drop``).

``gate_default(card_dir)`` returns a :class:`GateDecision` whose ``reason`` says in one
sentence why the gate is on or off.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, cast

from memgate.integrations.card_figures import implausible_figures
from memgate.model.pretrained import resolve_checkpoint

RELEASED_GATE = "memgate-minilm-l6"
REQUIRED_GUARDS = ("locomo", "gatemem_routes", "gatemem", "text_risk")
MAX_REPORT_DROP = 0.01


@dataclass(frozen=True)
class GateDecision:
    use: bool
    reason: str
    checkpoint: Optional[Path]


def released_gate_dir() -> Path:
    """The released checkpoint shipped with memgate: inside the wheel, or ``checkpoints/`` of the
    source checkout that holds the package, never the working directory or ``$MEMGATE_HOME``
    (:func:`memgate.model.pretrained.released_dir`); loading it checks its weights against the
    hash pinned in ``memgate/model/release_pin.py``."""
    return resolve_checkpoint(RELEASED_GATE)


def _read_json(path: Path) -> Optional[dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def recorded_guards(selection: Mapping[str, Any]) -> dict[str, bool]:
    """Guard name -> passed, from a card's ``export.selection`` (names lower-cased)."""
    found: list[tuple[str, Any]] = []
    one = selection.get("guard")
    if isinstance(one, Mapping) and ("source" in one or "guard" in one):  # one guard
        found.append((str(one.get("guard", one.get("source"))), one))
    elif isinstance(one, Mapping):  # name -> guard (the release format since the learned gate)
        found.extend((name, g) for name, g in one.items() if isinstance(g, Mapping))
    many = selection.get("guards")
    if isinstance(many, Mapping):
        found.extend((name, g) for name, g in many.items())
    elif isinstance(many, list):  # each names itself: "guard", else its data ("source")
        found.extend((str(g.get("guard", g.get("source", ""))), g) for g in many if isinstance(g, Mapping))
    out: dict[str, bool] = {}
    for name, guard in found:
        passed = isinstance(guard, Mapping) and guard.get("passed") is True
        key = name.lower()
        out[key] = out.get(key, True) and passed  # a guard recorded twice must pass twice
    return out


def recorded_step(selection: Mapping[str, Any]) -> Optional[int]:
    """The exported step a card's ``export.selection`` records, or None."""
    step = selection.get("step")
    return step if type(step) is int and step >= 0 else None


def recorded_report_drop(config: Mapping[str, Any], headline: Optional[Mapping[str, Any]]) -> Optional[float]:
    """The LoCoMo-report recall drop the card records, or None."""
    for holder in (headline or {}, config.get("export") or {}):
        report = holder.get("locomo_report") if isinstance(holder, Mapping) else None
        drop = report.get("drop") if isinstance(report, Mapping) else None
        if type(drop) in (int, float) and math.isfinite(cast(float, drop)):
            return float(cast(float, drop))
    return None


def gate_default(card_dir: Optional[str | Path] = None) -> GateDecision:
    """Apply the rule (module docstring) to the model card in ``card_dir`` (default: the
    released checkpoint)."""
    try:
        card = Path(card_dir) if card_dir is not None else released_gate_dir()
    except FileNotFoundError as exc:
        return GateDecision(False, f"no released gate found ({exc})", None)
    config = _read_json(card / "config.json")
    if config is None:
        return GateDecision(False, f"no readable model card at {card}", None)
    implausible = implausible_figures(config, _read_json(card / "headline.json"))  # before any is read
    if implausible:
        more = f" (and {len(implausible) - 1} more)" if len(implausible) > 1 else ""
        return GateDecision(False, f"the model card records an implausible figure: {implausible[0]}{more}", card)
    selection = (config.get("export") or {}).get("selection") or {}
    guards = recorded_guards(selection if isinstance(selection, Mapping) else {})
    missing = [g for g in REQUIRED_GUARDS if g not in guards]
    failed = [g for g in REQUIRED_GUARDS if guards.get(g) is False]
    if missing or failed:
        parts = []
        if missing:
            parts.append(f"records no {' / '.join(missing)} selection guard")
        if failed:
            parts.append(f"records the {' / '.join(failed)} guard as failed")
        return GateDecision(False, f"the model card {' and '.join(parts)} (all of "
                                   f"{', '.join(REQUIRED_GUARDS)} must pass)", card)
    step = recorded_step(selection if isinstance(selection, Mapping) else {})
    if step is None:
        return GateDecision(False, "the model card records no exported step", card)
    if step == 0:
        return GateDecision(False, "the model card's export is the step-0 gate (no trained step passed "
                                   "selection): it ranks like the cosine", card)
    drop = recorded_report_drop(config, _read_json(card / "headline.json"))
    if drop is None:
        return GateDecision(False, "the model card records no LoCoMo-report recall drop", card)
    if drop > MAX_REPORT_DROP:
        return GateDecision(False, f"the model card's LoCoMo-report recall drop {drop:.4f} exceeds "
                                   f"{MAX_REPORT_DROP}", card)
    return GateDecision(True, f"every selection guard passed at trained step {step} and the LoCoMo-report "
                              f"drop is {drop:.4f} <= {MAX_REPORT_DROP}", card)


__all__ = ["MAX_REPORT_DROP", "RELEASED_GATE", "REQUIRED_GUARDS", "GateDecision", "gate_default",
           "recorded_guards", "recorded_report_drop", "recorded_step", "released_gate_dir"]
