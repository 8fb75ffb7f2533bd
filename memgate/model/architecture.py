"""A gate's architecture (:class:`GateArchitecture`): the ``gate`` section of a training config
and the architecture fields of ``memgate.model.gate.MemGateConfig``, declared once."""

from __future__ import annotations

import math
from dataclasses import dataclass

FEATURE_SETS = ("qv_prod", "no_prod", "v_only", "q_only")
MASK_KINDS = ("vector", "scalar", "binary")
ACTIVATIONS = ("gelu", "relu", "silu", "tanh")


@dataclass(frozen=True)
class GateArchitecture:
    """The trainable part of a gate's shape: the ``gate`` section of a training config and the
    first fields of :class:`MemGateConfig` (one owner for each default).

    hidden: width of each hidden layer.
    n_layers: number of hidden layers (>= 1). Two layers of 256 (the default) give 0.46 M
        parameters at d = 384; two of 512 give ~1.0 M at d = 384 and ~8.7 M (35 MB) at d = 4096,
        the paper's scale.
    activation: one of gelu, relu, silu, tanh.
    dropout: dropout after each hidden activation (only active in train mode).
    init_bias: b0, the initial bias of the last layer; sigmoid(4) ~= 0.982.
    init_std: std of the normal init of the last layer's weights; (0, 1e-3] per docs/design.md section 4.
    features: qv_prod ([q; v; q*v]), no_prod ([q; v]), v_only ([v]), q_only ([q]).
    mask_kind: vector (one gate value per dimension), scalar (one value per memory, broadcast
        over d) or binary (per dimension, hard 0/1: ``g > 0.5`` forward, the sigmoid's gradient
        backward, a straight-through estimator; at initialisation every g is 1, the identity). A
        scalar mask cancels in the gated cosine, so it never changes a score: it is a null
        ablation that isolates what the per-dimension mask buys.
    """

    hidden: int = 256
    n_layers: int = 2
    activation: str = "gelu"
    dropout: float = 0.0
    init_bias: float = 4.0
    init_std: float = 1e-3
    features: str = "qv_prod"
    mask_kind: str = "vector"

    def __post_init__(self) -> None:
        self._check_architecture()

    def _check_architecture(self) -> None:
        """Check the architecture fields; messages name ``<ClassName>.<field>`` (the config
        loader renames that to the dotted key, e.g. ``gate.hidden``)."""
        owner = type(self).__name__
        for name in ("hidden", "n_layers"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{owner}.{name} must be an int >= 1, got {value!r}")
        for name in ("dropout", "init_bias", "init_std"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value):
                raise ValueError(f"{owner}.{name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{owner}.dropout must be in [0, 1), got {self.dropout!r}")
        if not 0.0 < self.init_std <= 1e-3:
            raise ValueError(
                f"{owner}.init_std must be in (0, 1e-3] (small but non-zero so that g ~= 1 "
                f"at step 0 and gradients reach every layer), got {self.init_std!r}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"{owner}.activation must be one of {sorted(ACTIVATIONS)}, "
                f"got {self.activation!r}"
            )
        if self.features not in FEATURE_SETS:
            raise ValueError(
                f"{owner}.features must be one of {list(FEATURE_SETS)}, got {self.features!r}"
            )
        if self.mask_kind not in MASK_KINDS:
            raise ValueError(
                f"{owner}.mask_kind must be one of {list(MASK_KINDS)}, "
                f"got {self.mask_kind!r}"
            )


__all__ = ["ACTIVATIONS", "FEATURE_SETS", "MASK_KINDS", "GateArchitecture"]
