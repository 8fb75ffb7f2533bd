"""``memgate.rerank(query, candidates)``: the learned gate alone, after another library's
retrieval (Mem0, LlamaIndex, a vector database): re-scores the candidates with the gated cosine
and returns them best first.

    import memgate
    hits = mem0.search(query, user_id="alice", limit=50)["results"]
    order = memgate.rerank(query, [h["memory"] for h in hits])
    top = [hits[r["index"]] for r in order[:5]]

``candidates`` are texts, mappings holding a text (``text``, ``memory``, ``content`` or
``page_content``), or a ``(N, d)`` array of unit vectors from the gate's encoder (then ``query``
may be a vector too). Each result is ``{"index", "score", "cosine", "suppression", "gate_risk"}``
(``gate_risk``: the gate's calibrated risk sigmoid(r), None for a gate of score form ``mask``, the
released one, or no gate); a checkpoint's calibrated drop rule (``drop_threshold="checkpoint"``,
as in the retriever) leaves out the candidates whose suppression ``cos - S`` reaches its threshold
(``mask``) or whose ``gate_risk`` reaches its ``risk_drop`` (``mask_risk``; a number given is read
on the same scale); ``keep_dropped=True`` keeps them, flagged ``"dropped": True``, after the others.

This is the gate only: no namespace support, no Kleene exclusion, no allowed actions. Those need
trusted metadata, which an outside retriever's hits do not carry: use ``memgate.Memory`` or
``GatedRetriever`` for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import numpy as np

from memgate.integrations.gate_default import gate_default, released_gate_dir
from memgate.integrations.opening import default_encoder, say_once
from memgate.model.gate_config import check_encoder
from memgate.model.risk_thresholds import risk_thresholds_of

TEXT_KEYS = ("text", "memory", "content", "page_content")


@lru_cache(maxsize=8)
def _load_gate(directory: str) -> Any:
    from memgate.model.gate import MemGate  # torch: imported at the first rerank

    return MemGate.from_pretrained(directory).eval()


def _gate(gate: Any) -> Any:
    """The gate ``gate`` names (``None``: no gate). ``"released"`` (the default) and ``"auto"``
    are the released gate; ``"auto"`` follows the default-on rule as ``memgate.Memory`` does
    (the released gate when the rule allows it, else no gate, said once)."""
    if gate is None:
        return None
    if isinstance(gate, str) and gate == "auto":
        decision = gate_default()
        if not decision.use:
            say_once("rerank-gate-off", f"memgate.rerank: the learned gate is off by default because "
                                        f"{decision.reason}; ranking by cosine (gate='released' uses it anyway)")
            return None
        gate = "released"
    from memgate.model.gate import MemGate  # torch: imported at the first rerank

    if isinstance(gate, str) and gate == "released":
        gate = released_gate_dir()
    if isinstance(gate, MemGate):
        return gate.eval()
    return _load_gate(str(Path(gate).resolve()))


def _text_of(candidate: Any, i: int) -> str:
    if isinstance(candidate, str):
        return candidate
    if isinstance(candidate, dict):
        for key in TEXT_KEYS:
            text = candidate.get(key)
            if isinstance(text, str):
                return text
    for attr in TEXT_KEYS:
        found = getattr(candidate, attr, None)
        if isinstance(found, str):
            return found
    raise ValueError(f"candidates[{i}] has no text (a string, or a mapping with one of {TEXT_KEYS})")


def _unit(x: np.ndarray, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        raise ValueError(f"{what} holds NaN or inf")
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f"{what} holds a zero vector")
    unit: np.ndarray = x / norms
    return unit


def rerank(query: Any, candidates: Any, *, gate: Any = "released", encoder: Any = None,
           top_k: Optional[int] = None, drop_threshold: Any = "checkpoint",
           keep_dropped: bool = False) -> list[dict[str, Any]]:
    """Re-score ``candidates`` for ``query`` with the learned gate (module docstring).

    ``gate``: ``"released"`` (default: the released gate), ``"auto"`` (the released gate when the
    default-on rule allows it, as in ``memgate.Memory``), a checkpoint directory or ``MemGate``,
    or ``None``: no learned gate, the candidates ordered by cosine (the meaning ``gate=None`` has
    in ``memgate.Memory``; ``score`` is then the cosine and nothing is dropped). ``encoder``
    embeds texts (default: the bundled encoder; its identity must be the gate's).
    """
    model = _gate(gate)
    enc_for_dim: Any = None
    if model is None:
        enc_for_dim = encoder or default_encoder()
    dim = model.config.dim if model is not None else int(enc_for_dim.identity["dim"])
    as_vectors = isinstance(candidates, np.ndarray) or (
        hasattr(candidates, "shape") and not isinstance(candidates, (list, tuple)))
    if as_vectors:
        V = _unit(np.asarray(candidates), "candidates")
        if V.ndim != 2 or V.shape[1] != dim:
            raise ValueError(f"candidates must be a (N, {dim}) array, got {V.shape}")
    else:
        items: Sequence[Any] = list(candidates)
        texts = [_text_of(c, i) for i, c in enumerate(items)]
    if isinstance(query, str):
        enc = encoder or default_encoder()
        try:
            if model is not None:
                check_encoder(model.config, enc.identity)
        except ValueError as exc:
            raise ValueError(f"rerank: {exc}") from None
        q = enc.encode([query], progress=False)[0]
        if not as_vectors:
            V = enc.encode(texts, progress=False) if texts else np.zeros((0, dim), np.float32)
    else:
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (dim,):
            raise ValueError(f"query must be a string or a ({dim},) vector, got shape {q.shape}")
        if not as_vectors:
            enc = encoder or default_encoder()
            V = enc.encode(texts, progress=False) if texts else np.zeros((0, dim), np.float32)
    q = _unit(q, "query")
    if top_k is not None and (type(top_k) is not int or top_k < 1):
        raise ValueError(f"top_k must be an int >= 1 or None, got {top_k!r}")
    if len(V) == 0:
        return []
    cos = V.astype(np.float64) @ q.astype(np.float64)
    risk: Optional[np.ndarray] = None
    if model is None:  # no learned gate: the cosine order, nothing dropped
        scores, threshold = cos.copy(), None
    else:
        import torch  # loaded with the gate

        with torch.no_grad():
            scored = model.score_with_risk(torch.from_numpy(q), torch.from_numpy(np.ascontiguousarray(V)))
        scores = scored.score.numpy()
        risk = None if scored.risk is None else scored.risk.numpy().astype(np.float64)
        threshold = drop_threshold
        if threshold == "checkpoint":  # the retriever's rule: risk_drop for mask_risk, else cos - S
            threshold = (risk_thresholds_of(model.export_info)[1] if risk is not None
                         else (model.export_info.get("calibration") or {}).get("threshold"))
    suppression = cos - scores.astype(np.float64)
    measure = suppression if risk is None else risk
    order = sorted(range(len(V)), key=lambda i: (-float(scores[i]), i))
    kept, dropped = [], []
    for i in order:
        row = {"index": i, "score": float(scores[i]), "cosine": float(cos[i]),
               "suppression": float(suppression[i]), "gate_risk": None if risk is None else float(risk[i])}
        if threshold is not None and measure[i] >= float(threshold):
            row["dropped"] = True
            dropped.append(row)
        else:
            kept.append(row)
    out = kept + (dropped if keep_dropped else [])
    return out[:top_k] if top_k is not None else out


__all__ = ["TEXT_KEYS", "rerank"]
