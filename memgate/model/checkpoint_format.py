"""What a gate checkpoint's ``config.json`` must hold beyond the architecture: its format version,
the sha256 of its weights and finite, in-range numbers (used by ``MemGate.from_pretrained``).

Format versions (key ``format_version``):

- 1: architecture keys and ``export`` (checkpoints released before weights were hashed). Loads
  with an :class:`UnverifiedCheckpointWarning`: nothing proves the weights are the exported ones.
- 2: adds ``weights_sha256``, the sha256 of ``model.safetensors`` as written by
  ``save_pretrained``. A mismatch is refused naming the file; a version-2 file without the key
  loads with the same warning as version 1.
- 3: adds the architecture keys ``score_form``, ``risk_scale_init`` and ``center_mask``
  (``memgate.model.architecture.FORMAT3_DEFAULTS``) and, for ``score_form: mask_risk``, the risk
  head's tensors. A version-1 or -2 file must not hold them: it loads with their defaults, the
  masked cosine it was trained with (the same tensors, the same function, bit for bit).

Numbers: every number anywhere in ``config.json`` must be finite (JSON ``NaN`` / ``Infinity``
are refused naming the field, e.g. ``export.calibration.threshold``), and the fields memgate
reads back (:data:`EXPORT_NUMBERS`) must have their type and range.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

from memgate.model.architecture import FORMAT3_DEFAULTS

FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
FORMAT3_KEYS = tuple(FORMAT3_DEFAULTS)
WEIGHTS_HASH_KEY = "weights_sha256"

# field (dotted, under "export"; "*" = every element of a list) -> (kind, low, high, nullable)
#   kind: "int" or "number" (ints and floats, never bools); bounds inclusive (None = open).
Rule = tuple[str, Optional[float], Optional[float], bool]
_UNIT: Rule = ("number", 0.0, 1.0, True)
_SELECTION: dict[str, Rule] = {
    "step": ("int", 0, None, False),
    "epoch": ("int", 0, None, False),
    "dev_pref_acc_gated": _UNIT,
    "dev_pref_acc_reference": _UNIT,
    "dev_cos_v_vg_pos": ("number", -1.0, 1.0, True),
    "guard.drop": ("number", -1.0, 1.0, True),
}
EXPORT_NUMBERS: dict[str, Rule] = {
    # the drop threshold on suppression cos - S (both cosines in [-1, 1]); null = keep everything
    "calibration.threshold": ("number", -2.0, 2.0, True),
    "calibration.violation_recall": _UNIT,
    "calibration.anchor_drop_rate": _UNIT,
    "calibration.max_anchor_drop": ("number", 0.0, 1.0, False),
    "calibration.n_violations": ("int", 0, None, False),
    "calibration.n_anchors": ("int", 0, None, False),
    "calibration.n_items": ("int", 0, None, False),
    "parameters": ("int", 1, None, False),
    "n_train_examples": ("int", 0, None, False),
    "num_threads": ("int", 1, None, False),
    "seed": ("int", None, None, False),
    # the risk scale a of score_form mask_risk: learned, calibrated against the guards (>= 0)
    "risk_scale.learned": ("number", 0.0, None, False),
    "risk_scale.calibrated": ("number", 0.0, None, False),
    "risk_scale.multiplier": ("number", 0.0, None, False),
    "risk_calibration.pooled.ece": _UNIT,
    # the risk thresholds on sigmoid(r) (memgate.model.risk_thresholds); null = none
    "risk_thresholds.risk_warn": _UNIT,
    "risk_thresholds.risk_drop": _UNIT,
    "risk_thresholds.max_flagged": _UNIT,
    "risk_thresholds.max_dropped": _UNIT,
    "risk_thresholds.flagged": _UNIT,
    "risk_thresholds.dropped": _UNIT,
    "risk_thresholds.n": ("int", 0, None, False),
    **{f"selection.{k}": v for k, v in _SELECTION.items()},
    **{f"selection_history.*.{k}": v for k, v in _SELECTION.items()},
}
EXPORT_BOOLS = ("calibration.feasible",)


class UnverifiedCheckpointWarning(UserWarning):
    """A checkpoint loaded without a recorded weights hash: its weights are not verified."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_version(raw: Mapping[str, Any], path: Path) -> int:
    version = raw.get("format_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        newer = type(version) is int and version > FORMAT_VERSION
        hint = ("; it is newer than this memgate reads: upgrade memgate" if newer else
                f"; this memgate reads versions {list(READABLE_VERSIONS)}")
        raise ValueError(f"{path}: key 'format_version' must be one of {list(READABLE_VERSIONS)}, "
                         f"got {version!r}{hint}")
    if version < 2 and WEIGHTS_HASH_KEY in raw:
        raise ValueError(f"{path}: key {WEIGHTS_HASH_KEY!r} is a format_version 2 key, the file "
                         f"says format_version {version}")
    added = [key for key in FORMAT3_KEYS if key in raw]
    if version < 3 and added:
        raise ValueError(f"{path}: key(s) {added} are format_version 3 keys, the file says "
                         f"format_version {version}")
    return version


def check_numbers(raw: Mapping[str, Any], path: Path) -> None:
    """Refuse a non-finite number anywhere and a read-back field of the wrong type or range,
    naming the field (``export.calibration.threshold``)."""
    _finite(raw, "", path)
    export = raw.get("export")
    if not isinstance(export, Mapping):
        return
    for name, rule in EXPORT_NUMBERS.items():
        for where, value in _lookup(export, name.split("."), "export"):
            _check_field(value, where, rule, path)
    for name in EXPORT_BOOLS:
        for where, value in _lookup(export, name.split("."), "export"):
            if type(value) is not bool:
                raise ValueError(f"{path}: field {where!r} must be true or false, got {value!r}")


def _finite(value: Any, where: str, path: Path) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path}: field {where or '(top level)'!r} must be a finite number, "
                         f"got {value!r}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _finite(item, f"{where}.{key}" if where else str(key), path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _finite(item, f"{where}[{i}]", path)


def _lookup(obj: Any, parts: list[str], where: str) -> Iterator[tuple[str, Any]]:
    """(dotted location, value) of every present value at ``parts`` ('*' = each list item)."""
    if not parts:
        yield where, obj
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        if isinstance(obj, list):
            for i, item in enumerate(obj):
                yield from _lookup(item, rest, f"{where}[{i}]")
        return
    if isinstance(obj, Mapping) and head in obj:
        yield from _lookup(obj[head], rest, f"{where}.{head}")


def _check_field(value: Any, where: str, rule: Rule, path: Path) -> None:
    kind, low, high, nullable = rule
    if value is None and nullable:
        return
    ok_type = type(value) is int if kind == "int" else type(value) in (int, float)
    if not ok_type:
        expected = "an integer" if kind == "int" else "a number"
        raise ValueError(f"{path}: field {where!r} must be {expected}"
                         f"{' or null' if nullable else ''}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "+inf" if high is None else high
        raise ValueError(f"{path}: field {where!r} must be in [{lo}, {hi}], got {value!r}")


def verify_weights(data: bytes, raw: Mapping[str, Any], weights_path: Path) -> None:
    """Refuse weights whose sha256 differs from the recorded one; warn when none is recorded."""
    recorded = raw.get(WEIGHTS_HASH_KEY)
    if recorded is None:
        warnings.warn(
            f"{weights_path}: config.json records no {WEIGHTS_HASH_KEY} (checkpoint "
            f"format_version {raw.get('format_version')}): the weights are not verified; "
            "re-export the gate (MemGate.save_pretrained) to record one",
            UnverifiedCheckpointWarning, stacklevel=3)
        return
    if not isinstance(recorded, str) or len(recorded) != 64 or not all(
            c in "0123456789abcdef" for c in recorded):
        raise ValueError(f"{weights_path.parent / 'config.json'}: field {WEIGHTS_HASH_KEY!r} must be "
                         f"a 64-digit lowercase hex sha256, got {recorded!r}")
    actual = sha256_hex(data)
    if actual != recorded:
        raise ValueError(
            f"{weights_path}: sha256 {actual} differs from the {WEIGHTS_HASH_KEY} {recorded} "
            "recorded in config.json: the weights were changed after export (refusing to load)")


__all__ = ["EXPORT_NUMBERS", "FORMAT3_KEYS", "FORMAT_VERSION", "READABLE_VERSIONS", "WEIGHTS_HASH_KEY",
           "UnverifiedCheckpointWarning", "check_numbers", "check_version", "sha256_hex",
           "verify_weights"]
