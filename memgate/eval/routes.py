"""Retrieval routes: each turns one query into a ranking of at most K memory ids.

A route sees only the ``RouteView`` (memories, query contexts, pools, policy rules) and the
embeddings; never labels. Every route shares three steps: candidate support (the query's pool,
optionally restricted to readable namespaces), Kleene exclusion on route-visible metadata
**before** truncation, and ranking (cosine, or gate re-scoring of the cosine's top
``rerank_depth``), with ties broken by memory id ascending.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from memgate.contract.defaults import RERANK_DEPTH
from memgate.contract.sources import RouteView
from memgate.eval.candidate_support import SupportTables
from memgate.eval.route_specs import ROUTE_SPECS, RouteSpec, route_spec  # re-exported
from memgate.model.scoring import FusedGateScorer, rank_by_score


@dataclass(frozen=True)
class RouteResult:
    ranked_ids: list
    candidates_scored_cosine: int
    candidates_scored_gate: int


RRF_K = 60
RECENCY_GAMMA = 0.1
GATED_ROUTES = tuple(name for name, spec in ROUTE_SPECS.items() if spec.gated)


class GateScorer:
    """Gate scores computed once per (query, memory) and reused by every gated route.

    Scores go through ``FusedGateScorer`` (the same function as ``MemGate.score``, checked in
    tests/model/test_gate_scoring.py): the memory part of the first layer is computed once per
    memory of the source and the query part once per query, leaving the q * v term and the
    remaining layers per pair.
    """

    def __init__(self, gate, memory_vectors: np.ndarray, query_vectors: np.ndarray,
                 threads: Optional[int] = None):
        self.gate = gate
        # torch threads for the per-query products (None: the caller's). They are small (at most
        # rerank_depth x d): with another process on the second core, one thread scored 300
        # queries x 200 candidates in 1.1-2.7 s and two threads in 8-21 s. Scores agree to float
        # rounding, not bit for bit, so make release keeps the default.
        self.threads = threads
        weight = gate.head.weight  # inputs follow the gate (a GPU or float64 gate in training)
        self.M = torch.from_numpy(np.ascontiguousarray(memory_vectors, dtype=np.float32)).to(
            device=weight.device, dtype=weight.dtype)
        self.Q = torch.from_numpy(np.ascontiguousarray(query_vectors, dtype=np.float32)).to(
            device=weight.device, dtype=weight.dtype)
        self._fused = FusedGateScorer(gate)
        self._v_part: Optional[torch.Tensor] = None  # (memories, hidden), on first use
        self._cache: dict[int, dict[int, float]] = {}
        self.gate_scorings = 0

    def prefetch(self, wanted: dict) -> None:
        """Score many (query, memory) pairs: {query index: memory indices}."""
        if self._v_part is None:
            self._v_part = self._fused.memory_part(self.M)
        before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            self._prefetch(wanted)
        finally:
            torch.set_num_threads(before)

    def _prefetch(self, wanted: dict) -> None:
        for qi, candidates in wanted.items():
            cached = self._cache.setdefault(qi, {})
            todo = [int(c) for c in candidates if int(c) not in cached]
            if not todo:
                continue
            index = torch.as_tensor(todo, dtype=torch.long)
            values = self._fused.score(self.Q[qi], self.M[index], self._v_part[index]).tolist()
            cached.update(zip(todo, values))
            self.gate_scorings += len(values)

    def scores(self, qi: int, candidates: np.ndarray) -> np.ndarray:
        cached = self._cache.setdefault(qi, {})
        if any(int(c) not in cached for c in candidates):
            self.prefetch({qi: candidates})
        return np.array([cached[int(c)] for c in candidates], dtype=np.float64)


class RouteRunner:
    """Runs named routes over one source's route view."""

    def __init__(
        self,
        view: RouteView,
        memory_vectors: np.ndarray,
        query_vectors: np.ndarray,
        gate_scorer: Optional[GateScorer] = None,
        rerank_depth: int = RERANK_DEPTH,
        drop_threshold: Optional[float] = None,
        classifier_scorer=None,
        classifier_threshold: Optional[float] = None,
        verifier_scorers: Optional[dict] = None,
    ):
        if memory_vectors.shape[0] != len(view.memories):
            raise ValueError("memory_vectors rows must match the source's memories")
        if query_vectors.shape[0] != len(view.queries):
            raise ValueError("query_vectors rows must match the source's queries")
        if rerank_depth < 1:
            raise ValueError(f"rerank_depth must be >= 1, got {rerank_depth}")
        self.view = view
        self.M = memory_vectors.astype(np.float32, copy=False)
        self.Q = query_vectors.astype(np.float32, copy=False)
        self.gate_scorer = gate_scorer
        self.rerank_depth = rerank_depth
        self.drop_threshold = drop_threshold
        self.classifier_scorer = classifier_scorer
        self.classifier_threshold = classifier_threshold
        # backend -> scorer bound to this view (memgate.studies.verifiers.study.VerifierRouteScorer)
        self.verifier_scorers = verifier_scorers or {}
        ids = np.array([m.memory_id for m in view.memories])
        self.ids = ids
        self.ids_rank = np.empty(len(ids), dtype=np.int64)
        self.ids_rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
        self._cos_cache: dict[int, np.ndarray] = {}
        self._bm25 = None
        self._order = np.array([m.released_order for m in view.memories], dtype=np.float64)
        namespaces = sorted({m.namespace for m in view.memories if m.namespace is not None})
        self._ns_code = {n: i for i, n in enumerate(namespaces)}
        # Memories without a namespace get -1: never readable (missing scope is not imputed).
        self._ns = np.array([self._ns_code.get(m.namespace, -1) for m in view.memories], dtype=np.int64)
        self.tables = SupportTables(view, self._ns_code)
        self._support_cache: dict = {}

    def available(self, spec: RouteSpec) -> Optional[str]:
        """None if the route can run; otherwise a one-line reason to skip it."""
        if spec.gated and self.gate_scorer is None:
            return "no gate loaded (or its dimension does not match this source's embeddings)"
        if spec.classifier and self.classifier_scorer is None:
            return "no embedding classifier (needs the generated train split with both labels)"
        if spec.classifier and spec.drop and self.classifier_threshold is None:
            return "the embedding classifier has no calibrated drop threshold"
        if spec.verifier is not None:
            scorer = self.verifier_scorers.get(spec.verifier)
            if scorer is None or not scorer.bound_to(self.view):
                return (f"no text verifier {spec.verifier!r} for this source (evaluate.py --verifier "
                        f"{spec.verifier}; verifier routes run on the hashed verifier subsample)")
            return scorer.unavailable_reason(spec.abstain)
        if spec.gated and spec.drop and self.drop_threshold is None:
            return "the checkpoint has no calibrated drop threshold"
        return None

    def _bm25_scores(self, qi: int) -> np.ndarray:
        """BM25 of query qi against its pool; one index over the source's memories (so IDF is
        the source's, not the pool's), built on first use."""
        if self._bm25 is None:
            import bm25s

            tokens = bm25s.tokenize([m.text for m in self.view.memories], stopwords="en",
                                    show_progress=False)
            self._bm25 = bm25s.BM25()
            self._bm25.index(tokens, show_progress=False)
            self._bm25_vocab = tokens.vocab
        import bm25s

        query_tokens = bm25s.tokenize([self.view.queries[qi].text], stopwords="en",
                                      return_ids=False, show_progress=False)[0]
        query_tokens = [t for t in query_tokens if t in self._bm25_vocab]
        pool = self.view.pools[self.view.queries[qi].query_id]
        if not query_tokens:
            return np.zeros(len(pool))
        return np.asarray(self._bm25.get_scores(query_tokens), dtype=np.float64)[pool]

    def base_scores(self, qi: int, spec: RouteSpec, positions: np.ndarray) -> np.ndarray:
        """The route's first-stage score for its candidates (positions into the pool)."""
        cos = self.cosine(qi)[positions].astype(np.float64)
        if spec.scorer == "dense":
            return cos
        if spec.scorer == "recency":
            pool = self.view.pools[self.view.queries[qi].query_id]
            order = self._order[pool[positions]]
            span = order.max() - order.min() if len(order) else 0.0
            norm = (order - order.min()) / span if span > 0 else np.zeros(len(order))
            return cos + RECENCY_GAMMA * norm
        bm25 = self._bm25_scores(qi)[positions]
        if spec.scorer == "bm25":
            return bm25
        if spec.scorer == "rrf":
            pool = self.view.pools[self.view.queries[qi].query_id]
            cands = pool[positions]
            ranks = np.empty(len(cands))
            ranks_dense = np.empty(len(cands))
            ranks[np.lexsort((self.ids_rank[cands], -bm25))] = np.arange(1, len(cands) + 1)
            ranks_dense[np.lexsort((self.ids_rank[cands], -cos))] = np.arange(1, len(cands) + 1)
            return 1.0 / (RRF_K + ranks) + 1.0 / (RRF_K + ranks_dense)
        raise ValueError(f"unknown scorer {spec.scorer!r}")

    def cosine(self, qi: int) -> np.ndarray:
        """Cosine of query qi against its pool (vectors are unit-normalised upstream)."""
        if qi not in self._cos_cache:
            pool = self.view.pools[self.view.queries[qi].query_id]
            if len(pool) == len(self.M) and pool[0] == 0 and pool[-1] == len(self.M) - 1 \
                    and np.all(np.diff(pool) == 1):
                self._cos_cache[qi] = self.M @ self.Q[qi]  # the whole store: no gather copy
            else:
                self._cos_cache[qi] = self.M[pool] @ self.Q[qi]
        return self._cos_cache[qi]

    def support(self, qi: int, spec: RouteSpec) -> np.ndarray:
        """Positions (into the pool) of the route's candidates, after exclusion (memoised: a
        route asks again for the same query, and ``head`` and ``run`` share it)."""
        key = (qi, spec)
        if key not in self._support_cache:
            pool = self.view.pools[self.view.queries[qi].query_id]
            self._support_cache[key] = self.tables.support(spec, self._ns, qi, pool)
        return self._support_cache[key]

    def inclusion(self, spec: RouteSpec, memories: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """(queries x memories) booleans: is the memory in the query's support (pool aside)?"""
        return self.tables.inclusion(spec, self._ns, memories, queries)

    def head(self, qi: int, spec: RouteSpec) -> np.ndarray:
        """The candidates a re-scoring route sends to the gate: its top ``rerank_depth``."""
        pool = self.view.pools[self.view.queries[qi].query_id]
        positions = self.support(qi, spec)
        scores = self.base_scores(qi, spec, positions)
        return rank_by_score(self.ids_rank, pool[positions], scores)[: self.rerank_depth]

    def run(self, qi: int, spec: RouteSpec, k: int) -> RouteResult:
        pool = self.view.pools[self.view.queries[qi].query_id]
        if spec.post_filter is not None:
            # Post-filtering: the vector search returns its top D first, exclusion comes after.
            cos_all = self.cosine(qi).astype(np.float64)
            top_d = rank_by_score(self.ids_rank, pool, cos_all)[: spec.post_filter]
            allowed = set(pool[self.support(qi, spec)].tolist())
            kept = np.array([m for m in top_d if m in allowed], dtype=np.int64)
            return RouteResult([str(x) for x in self.ids[kept[:k]]], len(pool), 0)
        positions = self.support(qi, spec)
        candidates = pool[positions]
        scores = self.base_scores(qi, spec, positions)
        n_cos = len(candidates)
        if spec.classifier:
            by_cos = rank_by_score(self.ids_rank, candidates, scores)
            head, tail = by_cos[: self.rerank_depth], by_cos[self.rerank_depth :]
            p_bad = self.classifier_scorer.scores(qi, head)
            cos_head = (self.M[head] @ self.Q[qi]).astype(np.float64)
            if spec.drop:
                keep = p_bad < self.classifier_threshold
                head, p_bad, cos_head = head[keep], p_bad[keep], cos_head[keep]
            ranked = np.concatenate([rank_by_score(self.ids_rank, head, cos_head - p_bad), tail])[:k]
            return RouteResult([str(x) for x in self.ids[ranked]], n_cos, 0)
        if spec.verifier is not None:
            # Text-only verifier: the calibrated drop on the cosine's top depth, order kept.
            scorer = self.verifier_scorers[spec.verifier]
            by_cos = rank_by_score(self.ids_rank, candidates, scores)
            head, tail = by_cos[: scorer.depth], by_cos[scorer.depth :]
            keep = scorer.keep(qi, head, abstain=spec.abstain)
            ranked = np.concatenate([head[keep], tail])[:k]
            return RouteResult([str(x) for x in self.ids[ranked]], n_cos, 0)
        if not spec.gated:
            ranked = rank_by_score(self.ids_rank, candidates, scores)[:k]
            return RouteResult([str(x) for x in self.ids[ranked]], n_cos, 0)
        by_cos = rank_by_score(self.ids_rank, candidates, scores)
        head, tail = by_cos[: self.rerank_depth], by_cos[self.rerank_depth :]
        gate_scores = self.gate_scorer.scores(qi, head)
        n_gate = len(head)
        if spec.drop:
            cos_head = (self.M[head] @ self.Q[qi]).astype(np.float64)
            suppression = cos_head - gate_scores
            keep = suppression < self.drop_threshold
            head, gate_scores = head[keep], gate_scores[keep]
        ranked = np.concatenate([rank_by_score(self.ids_rank, head, gate_scores), tail])[:k]
        return RouteResult([str(x) for x in self.ids[ranked]], n_cos, n_gate)

    def with_namespaces(self, namespaces: np.ndarray) -> RouteRunner:
        """A copy whose route-visible namespace column is replaced (random_partition)."""
        clone = copy.copy(self)
        clone._ns = namespaces
        clone._support_cache = {}
        return clone


def make_route_fn(runner: RouteRunner, name: str) -> Callable[[int, int], RouteResult]:
    spec = route_spec(name)
    return lambda qi, k: runner.run(qi, spec, k)
