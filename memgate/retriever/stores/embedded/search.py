"""The embedded store's candidate search, over its search index (a
:class:`memgate.retriever.records.index.SupportIndex` fed by ``changes_since``) and the vector
file: the namespace restriction and the exclusions select the candidates before truncation to
``k``; exact by default, or per namespace through an HNSW graph
(:mod:`memgate.retriever.stores.embedded.ann`) where one is built; cosines exact either way, ties
by memory id, and every returned row checked against its CRC."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from memgate.retriever.records.index import SupportIndex
from memgate.retriever.stores.embedded.ann import AnnIndex
from memgate.retriever.vectors import exact_cosines, matvec, top_by_score

if TYPE_CHECKING:
    from memgate.retriever.stores.embedded.backend import EmbeddedBackend

Hits = tuple[np.ndarray, np.ndarray]  # (index positions, cosines), best first


class Scan:
    """One query's pass over the whole vector file, computed at most once per search call (a
    filtered search and its unfiltered twin scan the same rows)."""

    def __init__(self, matrix: np.ndarray, q: np.ndarray) -> None:
        self.matrix, self.q = matrix, q
        self._cos: Optional[np.ndarray] = None

    def all_rows(self) -> np.ndarray:
        if self._cos is None:
            self._cos = matvec(self.matrix, self.q)
        return self._cos


def searched(backend: EmbeddedBackend, q: np.ndarray, ns: list[str], k: int, exclude_ids: Iterable[Any],
              exclude_states: Iterable[str], exclude_signatures: Iterable[str], exact: bool,
              unfiltered_k: int, index: SupportIndex) -> tuple[Hits, Optional[Hits]]:
    """The filtered top ``k`` (index positions, exact cosines) and, with ``unfiltered_k``,
    the namespace-only top ``unfiltered_k``; every returned row checked against its CRC."""
    matrix = backend.vector_matrix()
    scan = Scan(matrix, q)
    plain = None
    try:
        sig_mask = index.signature_mask(exclude_signatures) if exclude_signatures else None
        if not exact and backend.ann is not None:
            found = ann_search(backend.ann, q, ns, {"forgotten", *exclude_states}, exclude_ids, k,
                                     index, matrix, sig_mask, scan)
            if unfiltered_k:
                plain = ann_search(backend.ann, q, ns, {"forgotten"}, (), unfiltered_k, index, matrix, None, scan)
        else:
            support = index.support(ns, {"forgotten", *exclude_states}, exclude_ids)
            if sig_mask is not None:
                support = support[~sig_mask[index.sig[support]]]
            found = exact_search(q, support, k, index, matrix, scan)
            if unfiltered_k:
                plain = exact_search(q, index.support(ns, {"forgotten"}), unfiltered_k, index,
                                           matrix, scan)
    except IndexError:  # a slot beyond the file: it was cut short while open
        raise backend.vectors.damaged(backend.vector_file_problem() or "a record's slot lies beyond the "
                            "vector file") from None
    returned = found[0] if plain is None else np.union1d(found[0], plain[0])  # (mostly the same rows)
    readable_codes = np.asarray([index.ns_code[n] for n in ns if n in index.ns_code], dtype=np.int32)
    if not np.isin(index.ns[returned], readable_codes).all():  # defence in depth
        raise AssertionError(f"search returned a record outside {ns}")
    backend.vectors.check_returned(returned, index, matrix)  # (a damaged row is refused, not returned)
    return found, plain


def exact_search(q: np.ndarray, support: np.ndarray, k: int, index: SupportIndex,
                  matrix: np.ndarray, scan: Optional[Scan] = None) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``k`` of ``support``: index positions and cosines."""
    slots = index.slot[support]
    if len(support) > 0.25 * matrix.shape[0]:
        # one pass over the file beats a gather (and serves every search of this call)
        cos = (scan or Scan(matrix, q)).all_rows()[slots]
    else:
        cos = matvec(matrix[slots], q)
    return top_by_score(index.keys, support, cos.astype(np.float64), k,
                        lambda pos: exact_cosines(matrix, index.slot[pos], q))


def ann_search(ann: AnnIndex, q: np.ndarray, ns: list[str], exclude_states: set[Any], exclude_ids: Iterable[Any],
                k: int, index: SupportIndex, matrix: np.ndarray,
                sig_mask: Optional[np.ndarray], scan: Optional[Scan] = None) -> tuple[np.ndarray, np.ndarray]:
    """search(exact=False): per namespace, the graph's filtered top k or every allowed record
    (:meth:`memgate.retriever.stores.embedded.ann.AnnIndex.search`); the exactly searched records ranked in
    one float32 pass (rechecked row by row near the k-th), then exact cosines and the one
    ranking rule over the union."""
    states = [index.state_code[s] for s in sorted(exclude_states) if s in index.state_code]
    named = index.positions_of(exclude_ids)
    codes = [index.ns_code[name] for name in ns if name in index.ns_code]
    graphs, pools = ann.search(q, codes, k, index, matrix, states, named, sig_mask)
    if pools:
        pool = np.concatenate(pools)
        if len(pool) > k:
            pool, _ = exact_search(q, pool, k, index, matrix, scan)
        graphs.append(pool)
    pos = np.unique(np.concatenate(graphs)) if graphs else np.zeros(0, dtype=np.int64)
    # defence in depth: the graph's filter, checked again on the candidates only
    ok = index.alive[pos] & np.isin(index.ns[pos], np.asarray(codes, dtype=np.int32))
    if states:
        ok &= ~np.isin(index.state[pos], np.asarray(states, dtype=np.int32))
    if sig_mask is not None:
        ok &= ~sig_mask[index.sig[pos]]
    if named:
        ok &= ~np.isin(pos, np.asarray(named, dtype=np.int64))
    pos = pos[ok]
    return top_by_score(index.keys, pos, exact_cosines(matrix, index.slot[pos], q), k)


__all__ = ["Scan", "ann_search", "exact_search", "searched"]
