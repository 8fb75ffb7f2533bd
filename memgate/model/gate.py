"""MemGate: a small query-conditioned MLP that masks memory embeddings (docs/design.md section 4).

Given a unit query embedding ``q`` and memory embeddings ``v`` (frozen encoder, dim ``d``), the
gate computes a mask ``g = sigmoid(MLP(x)) in [0, 1]^d`` from features ``x`` (default
``[q ; v ; q * v]``) and scores memories with the asymmetric gated cosine

    S(q, v) = q . (v * g) / (|q| |v * g|)          (q is never gated)

The reference score is the plain cosine ``cos(q, v)``. The last layer starts with tiny weights and
bias ``b0 = 4`` so that ``g ~= sigmoid(4) ~= 0.98`` almost uniformly at step 0: the initial gate
ranks exactly like the plain cosine (a uniform mask cancels in the cosine) while gradients still
reach every layer.

With ``score_form = "mask_risk"`` the score is ``S' = S - a * sigmoid(r(x))``: a scalar risk head
``r`` reads the first hidden layer (shared with the mask, so the write-time split still holds) and
``a = softplus(rho) * c >= 0`` is one learned scale (``rho`` starts at softplus^-1(risk_scale_init))
times a calibration factor ``c`` (a buffer, 1 until ``set_risk_scale_factor``). The risk head
starts with tiny weights and bias 0, so ``sigmoid(r) ~= 0.5`` everywhere at step 0: a uniform
shift of ``-a / 2`` that ranks like the cosine. ``S'`` lies in ``[-1 - a, 1]``.

Checkpoints are a directory with ``config.json`` (primitives only) and ``model.safetensors``;
loading is strict and never unpickles anything.

Shapes: ``q`` is ``(d,)`` or ``(B, d)``; ``V`` is ``(N, d)`` or ``(B, N, d)``. A batch of queries
``(B, d)`` may also share one memory set ``(N, d)``. Outputs are ``(N, d)`` / ``(N,)`` for a single
query and ``(B, N, d)`` / ``(B, N)`` for a batch.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, cast

import numpy as np
import torch
from torch import nn

from memgate.model.architecture import ACTIVATIONS, FEATURE_SETS, MASK_KINDS, GateArchitecture
from memgate.model.checkpoint_format import FORMAT_VERSION, WEIGHTS_HASH_KEY, sha256_hex, verify_weights
from memgate.model.gate_config import (  # re-exported: the config is torch-free (gate_config.py)
    CONFIG_FILE,
    FORMAT_NAME,
    WEIGHTS_FILE,
    MemGateConfig,
    check_encoder,
    read_checkpoint_config,
)
from memgate.model.pretrained import verify_pin

_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh}
assert tuple(_ACTIVATIONS) == ACTIVATIONS

ArrayLike = torch.Tensor | np.ndarray


class GateOutput(NamedTuple):
    """score: the gate's score (N,) / (B, N): the gated cosine S, or S' = S - a sigmoid(r) for
    score_form mask_risk; mask: g (N, d) / (B, N, d); reference: plain cosine; risk_logit: r
    (N,) / (B, N) for mask_risk, else None (``risk`` is sigmoid(r))."""

    score: torch.Tensor
    mask: torch.Tensor
    reference: torch.Tensor
    risk_logit: Optional[torch.Tensor] = None

    @property
    def risk(self) -> Optional[torch.Tensor]:
        """sigmoid(r) in (0, 1) per memory, or None when the score form has no risk head."""
        return None if self.risk_logit is None else torch.sigmoid(self.risk_logit)


class GateScores(NamedTuple):
    """What a scorer returns per candidate (the retriever's ``gate_risk`` API): ``score`` is the
    score it ranks by (S or S'), ``risk`` the calibrated-risk probability sigmoid(r) or None when
    the gate's score form has no risk head (``mask``)."""

    score: torch.Tensor
    risk: Optional[torch.Tensor]


def inverse_softplus(value: float) -> float:
    """rho with softplus(rho) = value (> 0): the raw parameter of the risk scale a."""
    return float(value + math.log(-math.expm1(-value)))


# -----------------------------------------------------------------------------
# input handling and the two cosines


def _as_tensor(x: Any, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Convert a float torch tensor or numpy array to ``dtype`` on ``device``; reject NaN/inf."""
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"{name}: expected a float array, got numpy dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    elif isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            raise TypeError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}")
    else:
        raise TypeError(
            f"{name}: expected a torch.Tensor or numpy.ndarray, got {type(x).__name__}"
        )
    out: torch.Tensor = x.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"{name} contains NaN or inf values")
    return out


def _check_shapes(q: torch.Tensor, V: torch.Tensor, dim: int | None) -> None:
    if q.ndim not in (1, 2):
        raise ValueError(f"q must have shape (d,) or (B, d), got {tuple(q.shape)}")
    if V.ndim not in (2, 3):
        raise ValueError(f"V must have shape (N, d) or (B, N, d), got {tuple(V.shape)}")
    if dim is not None and q.shape[-1] != dim:
        raise ValueError(f"q has last dimension {q.shape[-1]}, the gate expects d = {dim}")
    if dim is not None and V.shape[-1] != dim:
        raise ValueError(f"V has last dimension {V.shape[-1]}, the gate expects d = {dim}")
    if q.shape[-1] != V.shape[-1]:
        raise ValueError(
            f"q and V disagree on d: q has shape {tuple(q.shape)}, V has shape {tuple(V.shape)}"
        )
    if V.ndim == 3 and q.ndim == 1:
        raise ValueError(
            f"V is batched with shape {tuple(V.shape)} but q is a single query of shape "
            f"{tuple(q.shape)}; pass q as (B, d)"
        )
    if V.ndim == 3 and q.shape[0] != V.shape[0]:
        raise ValueError(
            f"batch sizes differ: q has shape {tuple(q.shape)}, V has shape {tuple(V.shape)}"
        )


def _normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    out: torch.Tensor = x / x.norm(dim=-1, keepdim=True).clamp_min(eps)
    return out


def _batch(q: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Return q as (B, d), V as (B, N, d) and whether the caller passed a single query."""
    single = q.ndim == 1
    qb = q.unsqueeze(0) if single else q
    Vb = V.unsqueeze(0).expand(qb.shape[0], *V.shape) if V.ndim == 2 else V
    return qb, Vb, single


def _cosine(q: torch.Tensor, V: torch.Tensor, eps: float) -> torch.Tensor:
    """cos(q, v) for q (B, d), V (B, N, d) -> (B, N)."""
    num = (q.unsqueeze(-2) * V).sum(-1)
    den = q.norm(dim=-1, keepdim=True).clamp_min(eps) * V.norm(dim=-1).clamp_min(eps)
    out: torch.Tensor = num / den
    return out


def gated_cosine(
    q: torch.Tensor, V: torch.Tensor, g: torch.Tensor, eps: float = 1e-8
) -> torch.Tensor:
    """Asymmetric gated cosine q.(v*g) / (|q| |v*g|) for q (B, d), V and g (B, N, d) -> (B, N)."""
    return _cosine(q, V * g, eps)


def reference_score(q: ArrayLike, V: ArrayLike, eps: float = 1e-8) -> torch.Tensor:
    """Plain (ungated) cosine S_ref(q, v) with the same shapes and checks as ``MemGate.score``."""
    if isinstance(q, torch.Tensor) and q.is_floating_point():
        dtype, device = q.dtype, q.device
    else:
        dtype, device = torch.float32, torch.device("cpu")
    q = _as_tensor(q, "q", dtype, device)
    V = _as_tensor(V, "V", dtype, device)
    _check_shapes(q, V, None)
    qb, Vb, single = _batch(q, V)
    s = _cosine(qb, Vb, eps)
    return s[0] if single else s


# -----------------------------------------------------------------------------
# the gate


def straight_through(g: torch.Tensor) -> torch.Tensor:
    """Hard mask ``1[g > 0.5]`` in the forward pass with the gradient of ``g`` (straight-through)."""
    hard = (g > 0.5).to(g.dtype)
    return hard + (g - g.detach())


class MemGate(nn.Module):
    """MLP over features of (q, v) -> sigmoid -> mask g in [0, 1]^d; scores by gated cosine."""

    def __init__(self, config: MemGateConfig | None = None):
        super().__init__()
        config = MemGateConfig() if config is None else config
        if not isinstance(config, MemGateConfig):
            raise TypeError(f"config must be a MemGateConfig, got {type(config).__name__}")
        self.config = config
        widths = [config.in_features] + [config.hidden] * config.n_layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.act = _ACTIVATIONS[config.activation]()
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.hidden, 1 if config.mask_kind == "scalar" else config.dim)
        # score_form mask_risk: the risk head on the first hidden layer and the scale a; the mask
        # form creates none of them (its tensors and random draws are the format-2 gate's)
        self.risk_head: Optional[nn.Linear] = None
        self.risk_scale_raw: Optional[nn.Parameter] = None
        if config.score_form == "mask_risk":
            self.risk_head = nn.Linear(config.hidden, 1)
            self.risk_scale_raw = nn.Parameter(torch.full((1,), inverse_softplus(config.risk_scale_init)))
            self.register_buffer("risk_scale_factor", torch.ones(1))
        # extra JSON saved under "export" in config.json (training info, calibrated threshold)
        self.export_info: dict[str, Any] = {}
        self.reset_head()

    def reset_head(self) -> None:
        """Last layer: weights ~ N(0, init_std^2), bias b0, so g ~= sigmoid(b0) at step 0; the
        risk head (mask_risk): weights ~ N(0, init_std^2), bias 0, so sigmoid(r) ~= 0.5."""
        nn.init.normal_(self.head.weight, mean=0.0, std=self.config.init_std)
        nn.init.constant_(self.head.bias, self.config.init_bias)
        if self.risk_head is not None:
            nn.init.normal_(self.risk_head.weight, mean=0.0, std=self.config.init_std)
            nn.init.zeros_(self.risk_head.bias)

    @property
    def has_risk(self) -> bool:
        """Whether the score form carries a risk head (``mask_risk``)."""
        return self.risk_head is not None

    def risk_scale(self) -> torch.Tensor:
        """a = softplus(rho) * c, shape (1,): the weight of sigmoid(r) in S' (mask_risk only)."""
        if self.risk_scale_raw is None:
            raise ValueError(f"score_form {self.config.score_form!r} has no risk scale")
        factor = self.get_buffer("risk_scale_factor")
        return nn.functional.softplus(self.risk_scale_raw) * factor

    def set_risk_scale_factor(self, factor: float) -> None:
        """Set the calibration factor c of a = softplus(rho) * c (>= 0; 1 = the learned a)."""
        if self.risk_scale_raw is None:
            raise ValueError(f"score_form {self.config.score_form!r} has no risk scale")
        if type(factor) not in (int, float) or not math.isfinite(factor) or factor < 0:
            raise ValueError(f"risk scale factor must be a finite number >= 0, got {factor!r}")
        self.get_buffer("risk_scale_factor").fill_(float(factor))

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # -- core ---------------------------------------------------------------------------------

    @property
    def first_layer(self) -> nn.Linear:
        """The first layer (its weight splits into the q, v and q*v blocks)."""
        return cast(nn.Linear, self.layers[0])

    @property
    def hidden_layers(self) -> list[nn.Linear]:
        """The layers after the first one (hidden -> hidden)."""
        return [cast(nn.Linear, layer) for layer in self.layers[1:]]

    def _prepare(self, q: ArrayLike, V: ArrayLike) -> tuple[torch.Tensor, torch.Tensor, bool]:
        p = self.head.weight
        qt = _as_tensor(q, "q", p.dtype, p.device)
        Vt = _as_tensor(V, "V", p.dtype, p.device)
        _check_shapes(qt, Vt, self.config.dim)
        eps = self.config.eps
        return _batch(_normalize(qt, eps), _normalize(Vt, eps))

    def _features(self, q: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """q (B, d), V (B, N, d) -> x (B, N, in_features)."""
        qe = q.unsqueeze(-2).expand_as(V)
        kind = self.config.features
        if kind == "qv_prod":
            return torch.cat([qe, V, qe * V], dim=-1)
        if kind == "no_prod":
            return torch.cat([qe, V], dim=-1)
        if kind == "v_only":
            return V
        if kind == "prod_only":
            return qe * V
        return qe  # q_only

    def _heads_from_first(self, h: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Finish the MLP from the first layer's pre-activation h (B, N, hidden) -> g (B, N, d)
        and the risk logit r (B, N) read from the first hidden layer (None for score_form mask)."""
        h = self.drop(self.act(h))
        risk_logit = None if self.risk_head is None else self.risk_head(h).squeeze(-1)
        for layer in self.layers[1:]:
            h = self.drop(self.act(layer(h)))
        logits = self.head(h)
        if self.config.center_mask:  # the mean logit pinned at b0: no uniform scale to spend on
            logits = logits - logits.mean(dim=-1, keepdim=True) + self.config.init_bias
        g = torch.sigmoid(logits)
        if self.config.mask_kind == "scalar":
            g = g.expand(*g.shape[:-1], self.config.dim)
        elif self.config.mask_kind == "binary":
            g = straight_through(g)
        return g, risk_logit

    def _output(self, q: torch.Tensor, V: torch.Tensor, g: torch.Tensor, single: bool,
                risk_logit: Optional[torch.Tensor] = None) -> GateOutput:
        eps = self.config.eps
        score = gated_cosine(q, V, g, eps)
        if risk_logit is not None:  # S' = S - a sigmoid(r)
            score = score - self.risk_scale() * torch.sigmoid(risk_logit)
        out = GateOutput(score, g, _cosine(q, V, eps), risk_logit)
        if not single:
            return out
        return GateOutput(out.score[0], out.mask[0], out.reference[0],
                          None if risk_logit is None else risk_logit[0])

    def forward(self, q: ArrayLike, V: ArrayLike) -> GateOutput:
        """Score, mask, reference cosine (and risk logit) of every memory in V for the query q."""
        qb, Vb, single = self._prepare(q, V)
        g, risk_logit = self._heads_from_first(self._first_layer(qb, Vb))
        return self._output(qb, Vb, g, single, risk_logit)

    def _first_layer(self, q: torch.Tensor, V: torch.Tensor,
                     v_part: torch.Tensor | None = None) -> torch.Tensor:
        """The first layer on [q ; v ; q*v] without building the concatenation: W_q q once per
        query, W_v v and W_qv (q * v) per memory (the same function as ``layers[0]`` on
        ``_features``, a third fewer multiplications, no (B, N, 3d) copy). ``v_part``: W_v v
        precomputed (``precompute_memory``)."""
        blocks, b = self._first_layer_blocks(), self.first_layer.bias
        if v_part is None:
            v_part = V @ blocks["v"].T if "v" in blocks else V.new_zeros(*V.shape[:-1], self.config.hidden)
        h = v_part + b
        if "q" in blocks:
            h = h + (q @ blocks["q"].T).unsqueeze(-2)
        if "qv" in blocks:
            h = h + (q.unsqueeze(-2) * V) @ blocks["qv"].T
        return h.expand(*V.shape[:-1], self.config.hidden)

    if TYPE_CHECKING:  # nn.Module.__call__ runs forward: its type, for the checker only
        def __call__(self, q: ArrayLike, V: ArrayLike) -> GateOutput: ...

    def mask(self, q: ArrayLike, V: ArrayLike) -> torch.Tensor:
        """g in [0, 1]^d for each memory: (N, d) or (B, N, d)."""
        return self(q, V).mask

    def score(self, q: ArrayLike, V: ArrayLike) -> torch.Tensor:
        """The gate's score: the asymmetric gated cosine S(q, v), or S' for mask_risk: (N,) or (B, N)."""
        return self(q, V).score

    def score_with_risk(self, q: ArrayLike, V: ArrayLike) -> GateScores:
        """The score and sigmoid(r) per memory (risk None for score_form mask)."""
        out = self(q, V)
        return GateScores(out.score, out.risk)

    # -- write-time precomputation ------------------------------------------------------------
    # The first layer splits as W_q q + W_v v + W_qv (q * v) + b, so W_v v can be computed once
    # per memory when it is written and reused for every query.

    def _first_layer_blocks(self) -> dict[str, torch.Tensor]:
        W, d = self.first_layer.weight, self.config.dim
        kind = self.config.features
        if kind == "qv_prod":
            return {"q": W[:, :d], "v": W[:, d : 2 * d], "qv": W[:, 2 * d :]}
        if kind == "no_prod":
            return {"q": W[:, :d], "v": W[:, d:]}
        if kind == "v_only":
            return {"v": W}
        if kind == "prod_only":
            return {"qv": W}
        return {"q": W}

    def precompute_memory(self, V: ArrayLike) -> torch.Tensor:
        """The memory part W_v v of the first layer: (N, hidden) or (B, N, hidden).

        With ``features = "q_only"`` or ``"prod_only"`` the memory part is identically zero
        (returned as zeros so that callers need no special case).
        """
        p = self.head.weight
        Vt = _as_tensor(V, "V", p.dtype, p.device)
        if Vt.ndim not in (2, 3) or Vt.shape[-1] != self.config.dim:
            raise ValueError(
                f"V must have shape (N, {self.config.dim}) or (B, N, {self.config.dim}), "
                f"got {tuple(Vt.shape)}"
            )
        W_v = self._first_layer_blocks().get("v")
        if W_v is None:
            return Vt.new_zeros(*Vt.shape[:-1], self.config.hidden)
        return _normalize(Vt, self.config.eps) @ W_v.T

    def forward_precomputed(self, q: ArrayLike, V: ArrayLike, v_part: ArrayLike) -> GateOutput:
        """Same as ``forward`` but reuses ``v_part = precompute_memory(V)``."""
        p = self.head.weight
        part = _as_tensor(v_part, "v_part", p.dtype, p.device)
        V_shape = tuple(getattr(V, "shape", ()))
        qb, Vb, single = self._prepare(q, V)
        expected = V_shape[:-1] + (self.config.hidden,)
        if tuple(part.shape) != expected:
            raise ValueError(
                f"v_part has shape {tuple(part.shape)}, expected {expected} "
                f"(precompute_memory(V) for V of shape {V_shape})"
            )
        if part.ndim == 2:
            part = part.unsqueeze(0)
        g, risk_logit = self._heads_from_first(self._first_layer(qb, Vb, part))
        return self._output(qb, Vb, g, single, risk_logit)

    def score_precomputed(self, q: ArrayLike, V: ArrayLike, v_part: ArrayLike) -> torch.Tensor:
        """The score using precomputed memory parts; equals ``score(q, V)``."""
        return self.forward_precomputed(q, V, v_part).score

    # -- save / load --------------------------------------------------------------------------

    def save_pretrained(self, directory: str | Path, extra_config: Mapping[str, Any] | None = None) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory``.

        ``extra_config`` (JSON primitives) is merged over ``self.export_info`` and stored under
        the ``"export"`` key of config.json (training info, calibrated threshold, ...).
        """
        from safetensors.torch import save_file

        if extra_config is not None and not isinstance(extra_config, Mapping):
            raise TypeError(
                f"extra_config must be a dict or None, got {type(extra_config).__name__}"
            )
        export = {**self.export_info, **(extra_config or {})}
        config: dict[str, Any] = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION}
        config.update(self.config.to_dict())
        if export:
            config["export"] = export
        try:
            text = json.dumps(config, indent=2, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"extra_config must hold JSON primitives only: {err}") from err
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # The format is float32 whatever precision the gate trained in (bf16-true, 64-true, ...).
        tensors = {k: v.detach().to("cpu", torch.float32).contiguous()
                   for k, v in self.state_dict().items()}
        save_file(tensors, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
        # the hash of the bytes on disk, verified on load (memgate.model.checkpoint_format)
        config[WEIGHTS_HASH_KEY] = sha256_hex((directory / WEIGHTS_FILE).read_bytes())
        text = json.dumps(config, indent=2, sort_keys=True, allow_nan=False)
        (directory / CONFIG_FILE).write_text(text + "\n", encoding="utf-8")
        return directory

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        expected_encoder: None | str | Mapping[str, Any] = None,
        device: str | torch.device = "cpu",
    ) -> MemGate:
        """Strictly load a gate saved by ``save_pretrained`` (no pickle anywhere).

        ``directory`` is a checkpoint directory, a released gate's name (``"memgate-minilm-l6"``,
        shipped inside the package, loaded from the package's own location only and checked
        against its pinned hash) or a hub id ``"owner/name"`` (``memgate.model.pretrained``).

        ``expected_encoder`` is the encoder id in use, or a mapping with any of the keys
        ``id``, ``revision``, ``normalize``, ``dim``; a mismatch with the recorded encoder raises.
        """
        from safetensors import SafetensorError
        from safetensors.torch import load

        directory, config, export, raw = read_checkpoint_config(directory)
        weights_path = directory / WEIGHTS_FILE
        if expected_encoder is not None:
            check_encoder(config, expected_encoder)

        data = weights_path.read_bytes()  # one read: the bytes hashed are the bytes loaded
        try:
            state = load(data)
        except (SafetensorError, OSError) as err:
            raise ValueError(f"{weights_path} is not a readable safetensors file: {err}") from err
        model = cls(config)
        _check_state(model.state_dict(), state, weights_path, config)
        verify_pin(data, directory, weights_path)  # a released gate: its pinned hash; else a user checkpoint
        verify_weights(data, raw, weights_path)
        model.load_state_dict(state, strict=True)
        model.export_info = export
        return model.to(device).eval()


# -----------------------------------------------------------------------------
# strict-load helpers


def _check_state(expected: Mapping[str, torch.Tensor], got: Mapping[str, torch.Tensor],
                 path: Path, config: MemGateConfig) -> None:
    missing = sorted(set(expected) - set(got))
    if missing:
        raise ValueError(f"{path}: missing tensor key(s) {missing}")
    unexpected = sorted(set(got) - set(expected))
    if unexpected:
        raise ValueError(f"{path}: unexpected tensor key(s) {unexpected}")
    for key, ref in expected.items():
        t = got[key]
        if t.dtype != torch.float32:
            raise ValueError(f"{path}: tensor {key!r} has dtype {t.dtype}, expected torch.float32")
        if tuple(t.shape) != tuple(ref.shape):
            raise ValueError(
                f"{path}: tensor {key!r} has shape {tuple(t.shape)}, expected {tuple(ref.shape)} "
                f"from config.json (dim={config.dim}, hidden={config.hidden}, "
                f"n_layers={config.n_layers}, features={config.features!r}, "
                f"mask_kind={config.mask_kind!r}, score_form={config.score_form!r})"
            )
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{path}: tensor {key!r} contains NaN or inf")


__all__ = [
    "FEATURE_SETS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "GateArchitecture",
    "MASK_KINDS",
    "straight_through",
    "GateOutput",
    "GateScores",
    "MemGate",
    "MemGateConfig",
    "check_encoder",
    "gated_cosine",
    "reference_score",
]
