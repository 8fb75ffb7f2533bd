"""The retriever's learned gate: none, a :class:`memgate.model.gate.MemGate` given as is, or a
checkpoint directory whose ``config.json`` is read at once (a missing checkpoint or a gate of
another encoder is refused when the retriever opens) and whose weights load at the first score
(or ``warm_up``): opening a store to list, read or forget imports no torch and reads no weights.

Also here: the gate's version (``<checkpoint>@<fingerprint>``), its calibrated drop rule (known
from the checkpoint's config before its weights load), the fused scorer the ranking step runs
(:func:`memgate.model.scoring.fast_gate_scorer`) and the retriever's route name.

The drop rule depends on the gate's score form (issue 44 item 7): ``mask`` drops a re-scored
candidate whose suppression ``cos - S`` reaches the checkpoint's ``export.calibration.threshold``
(``drop_rule == "suppression"``); ``mask_risk`` drops one whose calibrated risk ``sigmoid(r)``
(``gate_risk``) reaches the checkpoint's ``risk_drop`` (``drop_rule == "risk"``;
:mod:`memgate.model.risk_thresholds`), and its ``risk_warn`` caps the allowed action. A number
given as ``RetrieverConfig.drop_threshold`` is read on the same scale as the gate's rule.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from memgate.model.gate_config import check_encoder, read_checkpoint_config
from memgate.model.risk_thresholds import risk_thresholds_of
from memgate.retriever.config import RetrieverConfig
from memgate.retriever.errors import EncoderMismatchError

if TYPE_CHECKING:
    from memgate.model.gate import MemGate
    from memgate.model.scoring import FusedGateScorer, OnnxGateScorer


def gate_fingerprint(gate: MemGate) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(gate.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


class RetrieverGate:
    """The gate of one retriever (module docstring). ``on_install`` is called once a gate is
    installed (the query index computes the gate's memory part of the records it holds)."""

    def __init__(self, gate: MemGate | str | Path | None, config: RetrieverConfig,
                 encoder_identity: dict[str, Any]) -> None:
        self.config = config
        self.encoder_identity = encoder_identity
        self.loaded: Optional[MemGate] = None  # the gate, once installed
        self.scorer: Optional[FusedGateScorer | OnnxGateScorer] = None
        self.pending: Optional[Path] = None  # a checkpoint directory not loaded yet
        self.drop_threshold: Optional[float] = None  # known from the checkpoint's config
        self.drop_rule = "suppression"  # "risk" for a gate with a risk head (module docstring)
        self.has_risk = False  # the score form carries a risk head (mask_risk): gate_risk is known
        self.risk_warn: Optional[float] = None  # the checkpoint's risk_warn (mask_risk only)
        self.on_install: Callable[[], None] = lambda: None
        self._version: Optional[str] = None
        self._lock = threading.Lock()
        if isinstance(gate, (str, Path)):
            # the checkpoint's config.json is read now (no torch): a missing checkpoint or a gate
            # of another encoder is refused at open, as before the weights were deferred
            directory, gate_config, export, _ = read_checkpoint_config(gate)
            try:
                check_encoder(gate_config, self.encoder_identity)
            except ValueError as exc:
                raise EncoderMismatchError(str(exc)) from None
            self.pending = directory
            self._rule_of(gate_config.score_form == "mask_risk", export)
        elif gate is not None:
            self._install(gate, version=None)

    @property
    def route(self) -> str:
        if (self.loaded is not None or self.pending is not None) and self.config.use_gate:
            return "hybrid_drop" if self.drop_threshold is not None else "hybrid"
        return "namespace_kleene"

    @property
    def gate(self) -> Optional[MemGate]:
        """The learned gate (loaded from its checkpoint on first access), or None."""
        self.ensure()
        return self.loaded

    @property
    def version(self) -> Optional[str]:
        self.ensure()
        return self._version

    def _rule_of(self, has_risk: bool, export: dict[str, Any]) -> None:
        """The drop rule, its threshold and ``risk_warn`` of a gate (module docstring)."""
        self.has_risk = has_risk
        self.drop_rule = "risk" if has_risk else "suppression"
        warn, risk_drop = risk_thresholds_of(export)
        self.risk_warn = warn if has_risk else None
        t = self.config.drop_threshold
        if t == "checkpoint":
            t = risk_drop if has_risk else (export.get("calibration") or {}).get("threshold")
        self.drop_threshold = None if t is None else float(t)

    def ensure(self) -> None:
        """Load a pending checkpoint now (once, whichever thread asks first)."""
        if self.pending is None:
            return
        with self._lock:  # two threads asking at once load it once
            path = self.pending
            if path is None:
                return
            from memgate.model.gate import MemGate  # torch: imported with the first gate

            loaded = MemGate.from_pretrained(path, expected_encoder=self.encoder_identity)
            self._install(loaded, version=f"{path.name}@{gate_fingerprint(loaded)}")
            self.pending = None

    def _install(self, gate: Any, version: Optional[str]) -> None:
        from memgate.model.gate import MemGate  # torch (the gate is a torch module)
        from memgate.model.scoring import fast_gate_scorer

        if not isinstance(gate, MemGate):
            raise TypeError(f"gate must be a MemGate, a checkpoint directory or None, got {type(gate).__name__}")
        if version is None:
            try:
                check_encoder(gate.config, self.encoder_identity)
            except ValueError as exc:
                raise EncoderMismatchError(str(exc)) from None
            version = f"memgate@{gate_fingerprint(gate)}"
        self._version = version
        self.loaded = gate.eval()
        self.scorer = fast_gate_scorer(self.loaded) if self.config.precompute else None
        self._rule_of(bool(self.loaded.has_risk), gate.export_info)
        self.on_install()


__all__ = ["RetrieverGate", "gate_fingerprint"]
