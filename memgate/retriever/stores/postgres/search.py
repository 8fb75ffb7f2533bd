"""The PostgreSQL store's candidate search, over its back-end
(:class:`memgate.retriever.stores.postgres.backend.PostgresBackend`).

``search`` is one SQL query: the namespace restriction and the exclusions are its ``WHERE``, so
they apply before its ``LIMIT``::

    SELECT ... FROM records
    WHERE namespace = ANY(%s) AND embedding IS NOT NULL
      AND lifecycle_state <> ALL(%s)          -- 'forgotten' and exclude_states
      AND sig <> ALL(%s)                      -- exclude_signatures (the retriever's Kleene verdicts)
      AND NOT (memory_id = ANY(%s))           -- exclude_ids given as bare ids
      AND NOT EXISTS (... unnest(%s, %s) ...) -- exclude_ids given as (namespace, id) pairs
    ORDER BY embedding <=> %s LIMIT %s        -- exact=False; exact: cosine_distance(), id

The retriever sends a query's Kleene exclusions as lifecycle states and signature digests (one
verdict per signature, so a handful of values, not an id per excluded record); ids go only for
what no signature describes (a caller's ``only_ids`` filter).

``exact=True`` orders by ``cosine_distance(embedding, q)`` (pgvector's function, which no index
serves; the ``<=>`` operator would let PostgreSQL take the sort's prefix from the HNSW index, an
incremental sort over an approximate scan) then id: PostgreSQL evaluates the filter (through its
B-tree indexes when selective) and sorts exactly; the rows are then
re-ranked with float64 cosines of their stored vectors and ties by memory id (the one ranking
rule, :func:`memgate.retriever.vectors.top_by_score`), fetching further while a row beyond the
page could still tie. ``exact=False`` orders by distance alone, so the planner may use the HNSW
index, with pgvector's iterative scan on (``hnsw.iterative_scan = relaxed_order``: a filtered
scan goes on until it has ``k`` rows or ``hnsw.max_scan_tuples``), ``hnsw.ef_search`` =
``max(hnsw_ef or 40, k)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

import numpy as np

from memgate.retriever.stores.postgres.backend import PostgresBackend
from memgate.retriever.stores.postgres.connection import sql
from memgate.retriever.stores.postgres.tables import as_array, from_db, to_db
from memgate.retriever.vectors import exact_cosines, top_by_score

TIE_MARGIN = 1e-5  # float32 distances in SQL vs float64 cosines: rows this close may swap
_EF_SEARCH_DEFAULT = 40


def search(backend: PostgresBackend, q: np.ndarray, ns: list[str], k: int, *,
           exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
           exclude_signatures: Iterable[str] = (), exact: bool = True,
           hnsw_ef: Optional[int] = None) -> list[tuple[str, float, str]]:
    """Top ``k`` live records of ``ns`` (a checked, sorted namespace list) by cosine to ``q`` (a
    checked unit vector): the namespace restriction, ``exclude_ids``, ``exclude_states`` and
    ``exclude_signatures`` (digests of :func:`memgate.retriever.records.index.signature_key`)
    are the query's ``WHERE``, applied before its ``LIMIT``. Returns ``(memory_id, cosine,
    namespace)``, best first, ties by memory id."""
    where, params = filter_clause(ns, exclude_ids, exclude_states, exclude_signatures)
    with backend.lock:
        if exact:
            hits = _exact(backend, q, where, params, k)
        else:
            hits = _approximate(backend, q, where, params, k, hnsw_ef)
    readable = set(ns)
    for memory_id, _, namespace in hits:
        if namespace not in readable:  # defence in depth: never cross the filter
            raise AssertionError(f"PostgreSQL returned {memory_id!r} outside {ns}")
    return hits


def filter_clause(ns: list[str], exclude_ids: Iterable[Any], exclude_states: Iterable[str],
            exclude_signatures: Iterable[str]) -> tuple[str, list[Any]]:
    where = ["namespace = ANY(%s)", "embedding IS NOT NULL", "lifecycle_state <> ALL(%s)"]
    params: list[Any] = [[to_db(n) for n in ns], sorted({"forgotten", *exclude_states})]
    signatures = sorted(set(exclude_signatures))
    if any(not isinstance(s, str) for s in signatures):
        raise TypeError("exclude_signatures must be digest strings")
    if signatures:
        where.append("sig <> ALL(%s)")
        params.append(signatures)
    bare, pair_ns, pair_ids = [], [], []
    for item in exclude_ids:  # an id: in every readable namespace; a pair: one record
        if isinstance(item, str):
            bare.append(to_db(item))
        else:
            namespace, memory_id = item
            pair_ns.append(to_db(namespace))
            pair_ids.append(to_db(memory_id))
    if bare:
        where.append("NOT (memory_id = ANY(%s))")
        params.append(sorted(set(bare)))
    if pair_ids:
        where.append("NOT EXISTS (SELECT 1 FROM unnest(%s::text[], %s::text[]) AS x(ns, id) "
                     "WHERE x.ns = r.namespace AND x.id = r.memory_id)")
        params += [pair_ns, pair_ids]
    return " AND ".join(where), params


def _page(backend: PostgresBackend, q: np.ndarray, where: str, params: list[Any], limit: int) -> list[Any]:
    """One page of the exact search. The distance is pgvector's function, not its operator:
    an ORDER BY on ``<=>`` lets PostgreSQL serve the sort's prefix from the HNSW index (an
    incremental sort over an approximate scan); the function no index can serve."""
    template = (f"SELECT memory_id, namespace, embedding, cosine_distance(embedding, %s) "
                f"FROM {{s}}.records r WHERE {where} "
                "ORDER BY cosine_distance(embedding, %s), memory_id, namespace LIMIT %s")
    return backend._rows(template, [q, *params, q, limit], binary=True)


def _ranked(q: np.ndarray, rows: list[Any], k: int) -> list[tuple[Any, ...]]:
    if not rows:
        return []
    keys = [(from_db(m), from_db(n)) for m, n, _, _ in rows]
    matrix = np.stack([as_array(v) for _, _, v, _ in rows])
    positions = np.arange(len(rows))
    top, scores = top_by_score(keys, positions, exact_cosines(matrix, positions, q), k)
    return [(keys[p][0], float(c), keys[p][1]) for p, c in zip(top.tolist(), scores.tolist())]


def _exact(backend: PostgresBackend, q: np.ndarray, where: str, params: list[Any], k: int) -> list[tuple[Any, ...]]:
    limit = k + 16
    while True:
        rows = _page(backend, q, where, params, limit)
        hits = _ranked(q, rows, k)
        if len(rows) < limit:
            return hits  # every candidate was read
        # a row beyond the page has distance >= the last one's: done once none could tie
        if len(hits) == k and hits[-1][1] > 1.0 - float(rows[-1][3]) + TIE_MARGIN:
            return hits
        limit *= 4


def _approximate(backend: PostgresBackend, q: np.ndarray, where: str, params: list[Any], k: int,
                 hnsw_ef: Optional[int]) -> list[tuple[Any, ...]]:
    ef = max(int(hnsw_ef or _EF_SEARCH_DEFAULT), k)

    def run(conn: Any) -> list[Any]:
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(min(ef, 1000))))
            template = (f"SELECT memory_id, namespace, embedding, embedding <=> %s FROM {{s}}.records r "
                        f"WHERE {where} ORDER BY embedding <=> %s LIMIT %s")
            rows: list[Any] = conn.cursor(binary=True).execute(backend._q(template), [q, *params, q, k]).fetchall()
            return rows

    return _ranked(q, backend.db.read("searching", run), k)


__all__ = ["TIE_MARGIN", "filter_clause", "search"]
