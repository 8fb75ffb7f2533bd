"""One preset of the versioned action policy: thresholds and risk tables, checked on load."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from memgate.actions.inputs import ACTION_ORDER, RISK_LEVELS, ActionPolicyError, _check_choice

_RISK_TABLE_KEYS = (
    "unresolved_or_contested",
    "unknown_lifecycle",
    "inference",
    "draft",
    "preference",
)
_PRESET_KEYS = (
    "description",
    "answer_threshold",
    "settled_low_risk_threshold",
    "context_threshold",
) + _RISK_TABLE_KEYS
# missing_risk: the risk level used when neither the memory nor the query states one (default
# high: a missing risk is never imputed as benign unless a preset says so).
# user_stated: the cap, per risk, for a memory whose provenance is user_stated (the user said it
# about themselves) and that carries no epistemic status or evidence strength: it stands in for
# the epistemic_missing and evidence-threshold caps, and only for those (default: no such table,
# the missing labels gate as before). No label is imputed: provenance is the evidence read.
# gate_risk_flagged: the cap for a memory the learned gate flagged (its calibrated risk sigmoid(r)
# at or above the checkpoint's risk_warn; actions-v3). Default warn.
_OPTIONAL_PRESET_KEYS = ("missing_risk", "user_stated", "gate_risk_flagged")



# --------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class Preset:
    """One preset of the versioned policy (values from the policy data file)."""

    name: str
    description: str
    answer_threshold: Mapping[str, float]
    settled_low_risk_threshold: Optional[float]
    context_threshold: float
    unresolved_or_contested: Mapping[str, str]
    unknown_lifecycle: Mapping[str, str]
    inference: Mapping[str, str]
    draft: Mapping[str, str]
    preference: Mapping[str, str]
    missing_risk: str = "high"  # the risk when neither the memory nor the query states one
    user_stated: Optional[Mapping[str, str]] = None  # caps for an unlabelled user_stated memory
    gate_risk_flagged: str = "warn"  # the cap when the learned gate's risk reaches risk_warn

    def with_overrides(self, name: Optional[str] = None, **changes: Any) -> Preset:
        """A copy with some values replaced (used by threshold sweeps; validated again)."""
        values = {k: getattr(self, k) for k in self.__dataclass_fields__}
        unknown = sorted(set(changes) - set(values))
        if unknown:
            raise ActionPolicyError(f"preset {self.name!r}: unknown override(s) {unknown}")
        values.update(changes)
        values["name"] = name or self.name
        raw = {k: v for k, v in values.items() if k != "name"}
        return _preset_from_dict(values["name"], raw)


def _threshold(value: Any, name: str) -> float:
    if type(value) not in (int, float) or not 0.0 <= float(value) <= 1.0:
        raise ActionPolicyError(f"field {name!r} must be a number in [0, 1], got {value!r}")
    return float(value)


def _risk_table(raw: Any, name: str, kind: str) -> dict:
    if not isinstance(raw, Mapping) or set(raw) != set(RISK_LEVELS):
        raise ActionPolicyError(
            f"field {name!r} must map exactly {RISK_LEVELS} to values, got {raw!r}"
        )
    out = {}
    for level in RISK_LEVELS:
        if kind == "action":
            _check_choice(raw[level], ACTION_ORDER, f"{name}.{level}")
            out[level] = raw[level]
        else:
            out[level] = _threshold(raw[level], f"{name}.{level}")
    return out


def _preset_from_dict(name: str, raw: Mapping[str, Any]) -> Preset:
    where = f"preset {name!r}: "
    try:
        if not isinstance(raw, Mapping):
            raise ActionPolicyError("a preset must be a mapping")
        missing = [k for k in _PRESET_KEYS if k not in raw]
        unknown = sorted(set(raw) - set(_PRESET_KEYS) - set(_OPTIONAL_PRESET_KEYS))
        if missing:
            raise ActionPolicyError(f"missing field(s) {missing}")
        if unknown:
            raise ActionPolicyError(f"unknown field(s) {unknown}")
        settled = raw["settled_low_risk_threshold"]
        missing_risk = raw.get("missing_risk", "high")
        _check_choice(missing_risk, RISK_LEVELS, "missing_risk")
        user_stated = raw.get("user_stated")
        flagged = raw.get("gate_risk_flagged", "warn")
        _check_choice(flagged, ACTION_ORDER, "gate_risk_flagged")
        return Preset(
            gate_risk_flagged=flagged,
            missing_risk=missing_risk,
            user_stated=None if user_stated is None else _risk_table(user_stated, "user_stated", "action"),
            name=name,
            description=str(raw["description"]).strip(),
            answer_threshold=_risk_table(raw["answer_threshold"], "answer_threshold", "number"),
            settled_low_risk_threshold=None
            if settled is None
            else _threshold(settled, "settled_low_risk_threshold"),
            context_threshold=_threshold(raw["context_threshold"], "context_threshold"),
            **{k: _risk_table(raw[k], k, "action") for k in _RISK_TABLE_KEYS},
        )
    except ActionPolicyError as exc:
        raise ActionPolicyError(where + str(exc)) from None


