"""Vector maths and search arguments shared by the stores and the query path: the readable
namespaces of a search (there is no unfiltered one), ``k``, the matrix-vector product (in torch's
thread pool), exact float64 cosines, and the one ranking rule (``top_by_score``: score descending,
ties by memory id ascending)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from memgate.model.ordering import rank_by_score


def readable_namespace_list(namespaces: Any) -> list[str]:
    """The readable namespaces of a search as a sorted list; there is no unfiltered search, so
    an empty or missing set is a ``PermissionError``. A plain string is one namespace (as in
    :class:`memgate.contract.records.QueryContext`), never its characters."""
    if isinstance(namespaces, str):
        namespaces = [namespaces]
    ns = sorted(set(namespaces or ()))
    if not ns:
        raise PermissionError("search needs the readable namespaces; there is no unfiltered search")
    bad = [n for n in ns if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"namespaces must be non-empty strings, got {bad!r}")
    return ns


def check_k(k: Any) -> int:
    if type(k) is not int or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return k


def matvec(M: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``M @ q`` in torch: the gate already runs in torch's thread pool, and a second pool (the
    BLAS behind numpy) spinning beside it on a few cores slows both down several times.
    (torch is imported here, at the first search, not when the retriever is imported.)"""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        Mt = torch.from_numpy(np.asarray(M))  # the read-only memory map is only read
    product: np.ndarray = torch.mv(Mt, torch.from_numpy(q)).numpy()
    return product


def top_by_score(ids: Sequence[Any], positions: np.ndarray, scores: np.ndarray, n: int,
                 exact: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best ``positions`` by score, ties broken by memory id (``ids[position]``) ascending.

    ``exact`` recomputes the scores of the shortlist row by row: a blocked matrix-vector
    product can round identical rows differently, which would break true ties by slot
    instead of by id. The shortlist keeps every score within ``1e-5`` of the n-th.
    """
    if len(positions) == 0 or n <= 0:
        return positions[:0], scores[:0]
    if len(positions) > n:
        threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
        sel = scores >= threshold - (1e-5 if exact is not None else 0.0)
        positions, scores = positions[sel], scores[sel]
    if exact is not None:
        scores = exact(positions)
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order]
    if not (ranked[1:] == ranked[:-1]).any() and not np.isnan(ranked).any():
        return positions[order][:n], ranked[:n]  # no tie to break: no id is read
    names = [ids[p] for p in positions.tolist()]  # ids or (memory_id, namespace) keys
    id_rank = np.empty(len(names), dtype=np.int64)
    id_rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    order = rank_by_score(id_rank, np.arange(len(positions)), scores)
    return positions[order][:n], scores[order][:n]


def exact_cosines(matrix: np.ndarray, slots: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cosines of unit rows ``matrix[slots]`` with unit ``q``, row by row in float64."""
    rows = np.asarray(matrix[slots], dtype=np.float32)
    cosines: np.ndarray = (rows * q).sum(axis=1, dtype=np.float64)
    return cosines


__all__ = ["check_k", "exact_cosines", "matvec", "readable_namespace_list", "top_by_score"]
