"""A gate's architecture (:class:`GateArchitecture`): the ``gate`` section of a training config
and the architecture fields of ``memgate.model.gate.MemGateConfig``, declared once."""

from __future__ import annotations

import math
from dataclasses import dataclass

FEATURE_SETS = ("qv_prod", "no_prod", "v_only", "q_only", "prod_only")
MASK_KINDS = ("vector", "scalar", "binary")
ACTIVATIONS = ("gelu", "relu", "silu", "tanh")
SCORE_FORMS = ("mask", "mask_risk")
# The architecture fields that checkpoint format 3 added (memgate.model.checkpoint_format): a
# format-1 or -2 config.json has none of them and loads with these values, today's behaviour.
FORMAT3_DEFAULTS: dict[str, object] = {"score_form": "mask", "risk_scale_init": 0.1, "center_mask": False}


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
    features: qv_prod ([q; v; q*v]), no_prod ([q; v]), v_only ([v]), q_only ([q]), prod_only
        ([q*v]: the product alone, whose logistic probes transferred best to held-out natural
        data, issue 44).
    mask_kind: vector (one gate value per dimension), scalar (one value per memory, broadcast
        over d) or binary (per dimension, hard 0/1: ``g > 0.5`` forward, the sigmoid's gradient
        backward, a straight-through estimator; at initialisation every g is 1, the identity). A
        scalar mask cancels in the gated cosine, so it never changes a score: it is a null
        ablation that isolates what the per-dimension mask buys.
    score_form: mask (the masked cosine S) or mask_risk (S' = S - a * sigmoid(r(x)): a scalar
        risk head r on the shared first hidden layer and one learned scale a >= 0; docs/design.md
        section 4). Orthogonal to mask_kind: mask_risk with mask_kind scalar is the risk term alone.
    risk_scale_init: the initial a of mask_risk (a = softplus(rho), so it stays >= 0 and may grow
        beyond its init); unused by mask.
    center_mask: mean-centre the mask logits over the d dimensions around init_bias (z <- z -
        mean_d z + b0), so the mask's mean logit stays b0 and the MLP cannot spend its change on a
        uniform scale, which cancels in the cosine. Not with mask_kind scalar (it would pin g).
    """

    hidden: int = 256
    n_layers: int = 2
    activation: str = "gelu"
    dropout: float = 0.0
    init_bias: float = 4.0
    init_std: float = 1e-3
    features: str = "qv_prod"
    mask_kind: str = "vector"
    score_form: str = "mask"
    risk_scale_init: float = 0.1
    center_mask: bool = False

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
        if self.score_form not in SCORE_FORMS:
            raise ValueError(
                f"{owner}.score_form must be one of {list(SCORE_FORMS)}, got {self.score_form!r}"
            )
        scale = self.risk_scale_init
        if type(scale) not in (int, float) or not math.isfinite(scale) or not 0.0 < scale <= 10.0:
            raise ValueError(f"{owner}.risk_scale_init must be a number in (0, 10], got {scale!r}")
        object.__setattr__(self, "risk_scale_init", float(scale))
        if type(self.center_mask) is not bool:
            raise ValueError(f"{owner}.center_mask must be true or false, got {self.center_mask!r}")
        if self.center_mask and self.mask_kind == "scalar":
            raise ValueError(
                f"{owner}.center_mask=true clashes with mask_kind='scalar': centring one logit "
                "pins the mask to sigmoid(init_bias); centre a vector or binary mask"
            )


__all__ = ["ACTIVATIONS", "FEATURE_SETS", "FORMAT3_DEFAULTS", "MASK_KINDS", "SCORE_FORMS", "GateArchitecture"]
