"""A gate's config and its checkpoint's ``config.json``, without torch: :class:`MemGateConfig`
(architecture and encoder identity), the strict reader of a checkpoint's config and the encoder
check. ``memgate.model.gate`` (the torch module) re-exports them; the retriever reads a
checkpoint's config here at open time and loads the weights only at the first score."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from memgate.model.architecture import FORMAT3_DEFAULTS, GateArchitecture
from memgate.model.checkpoint_format import WEIGHTS_HASH_KEY, check_numbers, check_version
from memgate.model.pretrained import resolve_checkpoint

FORMAT_NAME = "memgate-gate"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"

_FEATURE_BLOCKS = {"qv_prod": 3, "no_prod": 2, "v_only": 1, "q_only": 1, "prod_only": 1}
_ENCODER_KEYS = ("id", "revision", "normalize", "dim")


@dataclass(frozen=True)
class MemGateConfig(GateArchitecture):
    """Architecture and identity of a gate. Every field is a JSON primitive.

    The architecture fields (hidden, n_layers, activation, dropout, init_bias, init_std,
    features, mask_kind, score_form, risk_scale_init, center_mask) are
    :class:`GateArchitecture`'s, documented there.
    dim: embedding dimension d of the frozen encoder.
    eps: guard for the norms in the cosines.
    encoder_id / encoder_revision / encoder_normalize: which embeddings the gate was trained on.
    """

    dim: int = 384
    eps: float = 1e-8
    encoder_id: str | None = None
    encoder_revision: str | None = None
    encoder_normalize: bool | None = None

    def __post_init__(self) -> None:
        if type(self.dim) is not int or self.dim < 1:
            raise ValueError(f"MemGateConfig.dim must be an int >= 1, got {self.dim!r}")
        self._check_architecture()
        if type(self.eps) not in (int, float) or not math.isfinite(self.eps):
            raise ValueError(f"MemGateConfig.eps must be a finite number, got {self.eps!r}")
        object.__setattr__(self, "eps", float(self.eps))
        if not 0.0 < self.eps < 1e-3:
            raise ValueError(f"MemGateConfig.eps must be in (0, 1e-3), got {self.eps!r}")
        for name in ("encoder_id", "encoder_revision"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(
                    f"MemGateConfig.{name} must be a non-empty string or None, got {value!r}"
                )
        if self.encoder_normalize is not None and type(self.encoder_normalize) is not bool:
            raise ValueError(
                f"MemGateConfig.encoder_normalize must be True, False or None, "
                f"got {self.encoder_normalize!r}"
            )

    @property
    def in_features(self) -> int:
        return self.dim * _FEATURE_BLOCKS[self.features]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MemGateConfig:
        """Build a config from a mapping; unknown keys raise, missing keys take defaults."""
        if not isinstance(d, Mapping):
            raise TypeError(f"MemGateConfig.from_dict expects a mapping, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(
                f"unknown MemGateConfig key(s) {unknown}; known keys are {sorted(known)}"
            )
        return cls(**dict(d))


def parse_config(raw: Any, path: Path) -> tuple[MemGateConfig, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(raw).__name__}")  # noqa: TRY004
    if raw.get("format") != FORMAT_NAME:
        raise ValueError(f"{path}: key 'format' must be {FORMAT_NAME!r}, got {raw.get('format')!r}")
    version = check_version(raw, path)
    check_numbers(raw, path)
    model_keys = [f.name for f in fields(MemGateConfig)]
    known = {"format", "format_version", "export", WEIGHTS_HASH_KEY, *model_keys}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(
            f"{path}: unknown config key(s) {unknown}; put extra information under 'export'"
        )
    # a format-1/2 file predates the format-3 keys (check_version refused them there): their
    # defaults are the masked cosine it was trained with
    implied = dict(FORMAT3_DEFAULTS) if version < 3 else {}
    missing = [k for k in model_keys if k not in raw and k not in implied]
    if missing:
        raise ValueError(f"{path}: missing config key(s) {missing}")
    export = raw.get("export", {})
    if not isinstance(export, dict):
        raise ValueError(  # noqa: TRY004 (a malformed file, not a wrong argument type)
            f"{path}: key 'export' must be a JSON object, got {type(export).__name__}"
        )
    try:
        config = MemGateConfig.from_dict({k: raw[k] if k in raw else implied[k] for k in model_keys})
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    return config, export


def check_encoder(config: MemGateConfig, expected: str | Mapping[str, Any]) -> None:
    """Raise ValueError when the encoder in use differs from the one the gate was trained on."""
    trained = {
        "id": config.encoder_id,
        "revision": config.encoder_revision,
        "normalize": config.encoder_normalize,
        "dim": config.dim,
    }
    if isinstance(expected, str):
        expected = {"id": expected}
    if not isinstance(expected, Mapping):
        raise TypeError(
            f"expected_encoder must be an encoder id or a mapping, got {type(expected).__name__}"
        )
    unknown = sorted(set(expected) - set(_ENCODER_KEYS))
    if unknown:
        raise ValueError(
            f"expected_encoder has unknown key(s) {unknown}; known: {list(_ENCODER_KEYS)}"
        )
    clashes = [
        k for k in _ENCODER_KEYS
        if expected.get(k) is not None and expected[k] != trained[k]
    ]
    if clashes:
        trained_s = ", ".join(f"{k}={trained[k]!r}" for k in _ENCODER_KEYS)
        in_use_s = ", ".join(f"{k}={expected[k]!r}" for k in _ENCODER_KEYS if k in expected)
        raise ValueError(
            f"encoder mismatch on {clashes}: the gate was trained on encoder ({trained_s}) but the "
            f"encoder in use is ({in_use_s}); retrain or load the matching gate"
        )


def read_checkpoint_config(directory: str | Path) -> tuple[Path, MemGateConfig, dict[str, Any], dict[str, Any]]:
    """(the directory, its config, its ``export`` section, the raw JSON) of a checkpoint that
    ``MemGate.from_pretrained`` would load: both files present, ``config.json`` strict."""
    directory = resolve_checkpoint(directory)
    config_path, weights_path = directory / CONFIG_FILE, directory / WEIGHTS_FILE
    for path in (config_path, weights_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: not a MemGate checkpoint directory")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{config_path} is not valid JSON: {err}") from err
    config, export = parse_config(raw, config_path)
    return directory, config, export, raw


__all__ = ["CONFIG_FILE", "FORMAT_NAME", "WEIGHTS_FILE", "MemGateConfig", "check_encoder",
           "parse_config", "read_checkpoint_config"]
