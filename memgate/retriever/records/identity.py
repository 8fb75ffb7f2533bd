"""The encoder a store was built with, and the vectors it accepts: an encoder identity as
``{id, revision, normalize, dim}``, the check that a vector, store, query or gate comes from the
store's encoder, and a vector as the stores keep it (finite, non-zero, the store's dim,
unit-normalised little-endian float32)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from memgate.retriever.errors import EncoderMismatchError

ENCODER_KEYS = ("id", "revision", "normalize", "dim")
UNIT_KEEP = 1e-6  # a vector whose float32 norm is within this of 1 is unit already (kept as given)


def normalize_identity(identity: Any) -> dict[str, Any]:
    """An encoder identity as ``{id, revision, normalize, dim}``; anything else is an error."""
    if hasattr(identity, "identity") and not isinstance(identity, Mapping):
        identity = identity.identity  # an Encoder
    if not isinstance(identity, Mapping):
        raise TypeError(
            f"an encoder identity must be a mapping with keys {ENCODER_KEYS} or an Encoder, "
            f"got {type(identity).__name__}"
        )
    missing = [k for k in ENCODER_KEYS if identity.get(k) is None]
    if missing:
        raise ValueError(f"encoder identity is missing {missing}: {dict(identity)!r}")
    return {k: identity[k] for k in ENCODER_KEYS}


def check_encoder(identity: Any, stored: Mapping[str, Any], where: str, action: str = "use") -> None:
    """Raise :class:`EncoderMismatchError` unless ``identity`` is ``stored`` (the identity of the
    store described by ``where``)."""
    try:
        given = normalize_identity(identity)
    except (TypeError, ValueError) as exc:
        raise EncoderMismatchError(f"cannot {action}: {exc}") from None
    clashes = [k for k in ENCODER_KEYS if given[k] != stored[k]]
    if clashes:
        raise EncoderMismatchError(
            f"cannot {action} with encoder {given!r}: {where} was built with "
            f"encoder {dict(stored)!r} (differs on {clashes}); re-embed into a new "
            "store or use the store's encoder")


def check_vector(vector: Any, dim: int) -> np.ndarray:
    """A finite, non-zero float vector of ``dim`` values, unit-normalised little-endian f4."""
    if hasattr(vector, "detach"):
        vector = vector.detach().cpu().numpy()
    v = np.asarray(vector)
    if not np.issubdtype(v.dtype, np.floating):
        raise TypeError(f"vector must be a float array, got dtype {v.dtype}")
    v = v.astype(np.float32)
    if v.ndim == 2 and v.shape[0] == 1:
        v = v[0]
    if v.shape != (dim,):
        raise ValueError(f"vector has shape {v.shape}, the store's encoder has dim {dim}")
    if not np.isfinite(v).all():
        raise ValueError("vector contains NaN or inf")
    norm = float(np.linalg.norm(v))
    if norm < 1e-8:
        raise ValueError("vector is zero; it has no direction to rank by")
    if abs(norm - 1.0) <= UNIT_KEEP:  # already unit: kept bit for bit (dividing again by a norm
        return v.astype("<f4")        # of 1 +- 1 ulp moves bits), so a copy (export, import) is exact
    return (v / norm).astype("<f4")


__all__ = ["ENCODER_KEYS", "UNIT_KEEP", "check_encoder", "check_vector", "normalize_identity"]
