"""The loss section of a training config (:class:`LossConfig`), without torch: the config loader
and ``memgate train``'s usage errors read it before the trainer is imported."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

LOSS_KINDS = ("dpo", "listwise", "margin", "dpo+margin")


@dataclass(frozen=True)
class LossConfig:
    """kind: dpo (pairwise, averaged over negatives), listwise, margin (reference-free) or
    dpo+margin (dpo + margin_weight * margin).

    beta / temperature: rho = (beta / T)(S - S_ref). Cosine differences are O(0.01-0.3), so the
    DPO default beta = 0.1 with T = 1 would leave the logits near 0 and the loss flat at ln 2;
    beta = 1, T = 0.05 puts a 0.1 cosine shift at 2 nats.
    margin_weight: weight of the margin term in dpo+margin.
    preservation_weight: lambda of the preservation penalty on g+ (keeps admissible masks ~ 1;
        the gated cosine alone is blind to a uniform scaling of g).
    preserve_negatives: also penalise (1 - g-)^2 (ablation; default off, g- is free).
    list_preservation_weight: w_list of the ranking-preservation term
        w_list * KL(softmax(S_ref / T_l) || softmax(S / T_l)) over benign real candidate lists
        (0 switches it off). The mask penalty alone does not protect rankings: the gated cosine
        ignores a uniform scaling of g and reorders under any non-uniform one.
    list_temperature: T_l of that term.
    risk_weight: weight of the auxiliary binary cross-entropy on the risk head's sigmoid(r)
        (score form mask_risk; docs/design.md section 4): m- labelled 1, m+ and benign-list items
        0, so sigmoid(r) reads as a calibrated probability of risk. 0 (the default) switches it
        off.
    """

    kind: str = "dpo"
    beta: float = 1.0
    temperature: float = 0.05
    margin_weight: float = 0.5
    preservation_weight: float = 0.1
    preserve_negatives: bool = False
    list_preservation_weight: float = 20.0
    list_temperature: float = 0.05
    risk_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in LOSS_KINDS:
            raise ValueError(f"LossConfig.kind must be one of {list(LOSS_KINDS)}, got {self.kind!r}")
        for name in ("beta", "temperature", "margin_weight", "preservation_weight",
                     "list_preservation_weight", "list_temperature", "risk_weight"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value):
                raise ValueError(f"LossConfig.{name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("beta", "temperature", "list_temperature"):
            if getattr(self, name) <= 0:
                raise ValueError(f"LossConfig.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("margin_weight", "preservation_weight", "list_preservation_weight", "risk_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"LossConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.kind == "dpo+margin" and self.margin_weight == 0:
            raise ValueError(
                "LossConfig.kind='dpo+margin' clashes with margin_weight=0; use kind='dpo'"
            )
        if type(self.preserve_negatives) is not bool:
            raise ValueError(
                f"LossConfig.preserve_negatives must be a bool, got {self.preserve_negatives!r}"
            )
        if self.preserve_negatives and self.preservation_weight == 0:
            raise ValueError(
                "LossConfig.preserve_negatives=True clashes with preservation_weight=0"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LossConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown LossConfig key(s) {unknown}; known keys are {sorted(known)}")
        return cls(**dict(d))


__all__ = ["LOSS_KINDS", "LossConfig"]
