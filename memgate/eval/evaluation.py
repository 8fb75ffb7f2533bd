"""Run routes over prepared sources and score them under the recall-constrained protocol.

Each route ranks once at the largest budget; every smaller K is the prefix of that ranking.
Per-query metric values feed a group bootstrap (groups = personas / conversations / episodes),
so every figure comes with a percentile CI, and paired differences share their resamples.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from memgate.contract.admissibility import relevance_value
from memgate.contract.defaults import RERANK_DEPTH
from memgate.contract.progress import progress
from memgate.contract.seeding import component_rng
from memgate.contract.sources import EvalSource
from memgate.eval.bootstrap import group_bootstrap_many, paired_bootstrap_ci, two_level_bootstrap_ci
from memgate.eval.embed_classifier import ClassifierScorer
from memgate.eval.protocol import mrr_required, query_metrics, routes_row, score_query
from memgate.eval.routes import ROUTE_SPECS, GateScorer, RouteResult, RouteRunner, route_spec

DEFAULT_BUDGETS = (10, 20, 50, 100)
ROW_BUDGET = 20


@dataclass
class PreparedSource:
    source: EvalSource
    memory_vectors: np.ndarray
    query_vectors: np.ndarray


@dataclass
class EvalSettings:
    routes: Sequence[str]
    budgets: Sequence[int] = DEFAULT_BUDGETS
    tau: float = 0.8
    infeasible_cost: float = 1.0
    rerank_depth: int = RERANK_DEPTH
    drop_threshold: Optional[float] = None
    n_boot: int = 10_000
    seed: int = 0
    classifier: Optional[object] = None  # EmbedClassifier for the embed_classifier routes
    classifier_threshold: Optional[float] = None
    verifiers: Optional[dict] = None  # backend -> VerifierRouteScorer (text_verifier_* routes)
    gate_threads: Optional[int] = None  # torch threads of the gated routes' scoring (None: the caller's)


@dataclass
class SourceResult:
    name: str
    rows: list = field(default_factory=list)  # routes.jsonl rows at ROW_BUDGET
    per_query: dict = field(default_factory=dict)  # route -> list of per-query metric dicts
    groups: list = field(default_factory=list)  # group id per query (source order)
    query_ids: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # route -> reason
    seconds: dict = field(default_factory=dict)  # route -> wall seconds
    candidates: dict = field(default_factory=dict)  # route -> (cosine, gate) totals
    rankings: dict = field(default_factory=dict)  # route -> list of ranked ids (max budget)
    # Routes run under several seeds (random_partition): route -> (metric keys, array of shape
    # (runs, queries, keys), NaN = None), for the bootstrap that resamples seeds too.
    run_values: dict = field(default_factory=dict)


def _label_maps(source: EvalSource, query_id: str, ranked: list, memo: dict):
    """Scorer labels of the ranked memories, memoised per (query, memory): the routes of one
    source rank largely the same memories, and a default label is rebuilt on every call."""
    admissible, reasons, relevance = {}, {}, {}
    for mid in ranked:
        key = (query_id, mid)
        if key not in memo:
            label = source.label(query_id, mid)
            memo[key] = (label.admissible, label.reasons, relevance_value(label.relevance))
        admissible[mid], reasons[mid], relevance[mid] = memo[key]
    return admissible, reasons, relevance


def run_source(prepared: PreparedSource, settings: EvalSettings, gate=None) -> SourceResult:
    source = prepared.source
    view = source.route_view()
    scorer = None
    if gate is not None and gate.config.dim == prepared.memory_vectors.shape[1]:
        scorer = GateScorer(gate, prepared.memory_vectors, prepared.query_vectors, threads=settings.gate_threads)
    classifier_scorer = None
    if settings.classifier is not None and settings.classifier.model.n_features_in_ == 3 * prepared.memory_vectors.shape[1]:
        classifier_scorer = ClassifierScorer(settings.classifier, prepared.memory_vectors,
                                             prepared.query_vectors)
    runner = RouteRunner(
        view, prepared.memory_vectors, prepared.query_vectors, scorer,
        rerank_depth=settings.rerank_depth, drop_threshold=settings.drop_threshold,
        classifier_scorer=classifier_scorer, classifier_threshold=settings.classifier_threshold,
        verifier_scorers=settings.verifiers,
    )
    result = SourceResult(name=source.name)
    result.query_ids = [q.query_id for q in source.queries]
    result.groups = [source.group_of(qid) for qid in result.query_ids]
    k_max = max(settings.budgets)
    label_memo: dict = {}
    outcome_memo: dict = {}
    for name in settings.routes:
        spec = route_spec(name)
        if spec is None and name != "oracle_required":
            raise ValueError(f"unknown route {name!r}; known: {sorted(ROUTE_SPECS) + ['oracle_required']}")
        reason = runner.available(spec) if spec is not None else None
        if reason is not None:
            result.skipped[name] = reason
            continue
        start = time.perf_counter()
        per_query, rankings, per_run = [], [], []
        n_cos = n_gate = 0
        route_fns = _route_functions(name, runner, source, settings)
        if spec is not None and spec.gated:
            # One batched pass over every (query, candidate) pair the route will re-score.
            scorer.prefetch({qi: runner.head(qi, spec) for qi in range(len(source.queries))})
        bar = progress(f"route {source.name}/{name}", total=len(source.queries), unit="query")
        for qi, query in enumerate(source.queries):
            bar.update()
            anchors = source.anchor_groups.get(query.query_id, [])
            runs = [fn(qi, k_max) for fn in route_fns]
            seed_metrics = []
            for run_index, routed in enumerate(runs):
                ranked = routed.ranked_ids
                admissible, reasons, relevance = _label_maps(source, query.query_id, ranked, label_memo)
                metrics: dict = {}
                for k in settings.budgets:
                    # Routes often agree on a query's top K (and every random_partition seed is
                    # scored too): score each distinct (query, top K) once.
                    key = (qi, k, tuple(ranked[:k]))
                    if key not in outcome_memo:
                        outcome = score_query(
                            ranked[:k], anchors, admissible, reasons, relevance,
                            k_budget=k, tau=settings.tau, infeasible_cost=settings.infeasible_cost,
                        )
                        values = query_metrics(outcome, k, settings.infeasible_cost)
                        values.pop("mrr_required", None)
                        outcome_memo[key] = (outcome, values)
                    outcome, values = outcome_memo[key]
                    metrics.update(values)
                    if k == ROW_BUDGET and run_index == 0:
                        result.rows.append(
                            routes_row(
                                source=source.name, group_id=result.groups[qi],
                                query_id=query.query_id, route=name, k_budget=k, tau=settings.tau,
                                corruption="clean", ranked_ids=ranked[:k],
                                candidates_scored={"cosine": routed.candidates_scored_cosine,
                                                   "gate": routed.candidates_scored_gate},
                                outcome=outcome,
                            )
                        )
                metrics["mrr_required"] = mrr_required(ranked, anchors) if anchors else None
                seed_metrics.append(metrics)
            # random_partition: the mean over its seeds, per query.
            metrics = _mean_over_runs(seed_metrics)
            if len(seed_metrics) > 1:
                per_run.append(seed_metrics)
            routed = runs[0]
            n_cos += routed.candidates_scored_cosine
            n_gate += routed.candidates_scored_gate
            rankings.append(routed.ranked_ids)
            metrics["candidates_scored_cosine"] = float(routed.candidates_scored_cosine)
            metrics["candidates_scored_gate"] = float(routed.candidates_scored_gate)
            per_query.append(metrics)
        bar.close()
        result.seconds[name] = time.perf_counter() - start
        result.per_query[name] = per_query
        if per_run:
            keys = list(per_run[0][0])
            values = np.array([[[np.nan if m[k] is None else m[k] for k in keys] for m in runs]
                               for runs in per_run], dtype=float)  # (queries, runs, keys)
            result.run_values[name] = (keys, values.transpose(1, 0, 2))
        result.rankings[name] = rankings
        result.candidates[name] = (n_cos, n_gate)
    return result


RANDOM_PARTITION_SEEDS = 10


def _route_functions(name: str, runner: RouteRunner, source: EvalSource, settings: EvalSettings):
    """One function per run of the route (random_partition has one per seed)."""
    if name == "oracle_required":
        return [_oracle(runner, source)]
    spec = route_spec(name)
    if name == "random_partition":
        fns = []
        for seed in range(RANDOM_PARTITION_SEEDS):
            rng = component_rng(settings.seed, f"random_partition/{seed}")
            shuffled = runner.with_namespaces(rng.permutation(runner._ns))
            fns.append(lambda qi, k, r=shuffled: r.run(qi, spec, k))
        return fns
    return [lambda qi, k: runner.run(qi, spec, k)]


def _oracle(runner: RouteRunner, source: EvalSource):
    """Non-deployable headroom: namespace_dense's ranking with every anchor moved to the front
    (reads scorer labels, which is why it lives here and not in memgate.eval.routes)."""
    spec = ROUTE_SPECS["namespace_dense"]

    def run(qi: int, k: int) -> RouteResult:
        query = source.queries[qi]
        full = runner.run(qi, spec, len(source.pools[query.query_id]))
        anchors = set().union(*source.anchor_groups.get(query.query_id, [])) if source.anchor_groups.get(query.query_id) else set()
        ranked = [m for m in full.ranked_ids if m in anchors] + [m for m in full.ranked_ids if m not in anchors]
        return RouteResult(ranked[:k], full.candidates_scored_cosine, 0)

    return run


def _mean_over_runs(runs: list[dict]) -> dict:
    if len(runs) == 1:
        return runs[0]
    out = {}
    for key in runs[0]:
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = sum(values) / len(values) if values else None
    return out


def summarize_route(
    per_query: list[dict], groups: list, settings: EvalSettings, select: Optional[np.ndarray] = None,
    runs: Optional[tuple] = None,
) -> dict:
    """Metric -> {"value", "ci"} over (selected) queries, with the group bootstrap.

    ``runs`` (``SourceResult.run_values[route]`` of a route run under several seeds): the value
    is the mean over seeds and the CI resamples seeds as well as groups (two levels)."""
    if runs is not None:
        return _summarize_runs(runs, groups, settings, select, keys=list(per_query[0]) if per_query else [])
    idx = range(len(per_query)) if select is None else np.flatnonzero(select)
    rows = [per_query[i] for i in idx]
    grp = [groups[i] for i in idx]
    if not rows:
        return {}
    keys = list(rows[0])
    if not keys:
        return {}
    try:  # one pass over the rows (they share their keys), transposed
        get = operator.itemgetter(*keys)
        columns = zip(*map(get, rows)) if len(keys) > 1 else [list(map(get, rows))]
        values = dict(zip(keys, map(list, columns)))
    except KeyError:
        values = {key: [r.get(key) for r in rows] for key in keys}
    cis = group_bootstrap_many(values, grp, seed=settings.seed, n_boot=settings.n_boot)
    return {key: {"value": _round(p), "ci": [_round(lo), _round(hi)]} for key, (p, lo, hi) in cis.items()}


def _summarize_runs(runs: tuple, groups: list, settings: EvalSettings,
                    select: Optional[np.ndarray], keys: list) -> dict:
    run_keys, values = runs
    idx = np.arange(values.shape[1]) if select is None else np.flatnonzero(select)
    if len(idx) == 0:
        return {}
    grp = [groups[i] for i in idx]
    column = {k: j for j, k in enumerate(run_keys)}
    out = {}
    for key in keys:
        if key not in column:  # not a seed-level metric (candidates scored): no value, like a
            out[key] = {"value": None, "ci": [None, None]}  # metric without any value
            continue
        by_seed = {s: values[s, idx, column[key]] for s in range(values.shape[0])}
        p, lo, hi = two_level_bootstrap_ci(by_seed, {s: grp for s in by_seed}, seed=settings.seed,
                                           n_boot=settings.n_boot)
        out[key] = {"value": _round(p), "ci": [_round(lo), _round(hi)]}
    return out


def paired_difference(
    a: list[dict], b: list[dict], groups: list, key: str, settings: EvalSettings
) -> dict:
    """Paired group-bootstrap CI of mean(a[key]) - mean(b[key]) over queries where both exist."""
    pairs = [(x.get(key), y.get(key), g) for x, y, g in zip(a, b, groups)]
    pairs = [(x, y, g) for x, y, g in pairs if x is not None and y is not None]
    if not pairs:
        return {"value": None, "ci": [None, None]}
    xs, ys, gs = zip(*pairs)
    point, lo, hi = paired_bootstrap_ci(list(xs), list(ys), list(gs), seed=settings.seed,
                                        n_boot=settings.n_boot)
    return {"value": _round(point), "ci": [_round(lo), _round(hi)]}


def _round(x):
    return None if x is None else round(float(x), 10)
