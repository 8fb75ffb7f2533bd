"""The metadata corruption sweep (``evaluate.py --sweep``): point estimates, outside the default budget.

For every source of the run, every channel of ``memgate.eval.corruption`` and every rate, ``seeds``
corrupted copies of the source are ranked by the routes that read the corrupted field (a route
that does not read it returns exactly its clean ranking, so it is not re-run) and scored by the
clean scorer at K = 20, τ = 0.8. Embeddings, cosine scores and gate scores are reused: a
corruption never changes a text.

Per source, channel and route: the mean over seeds of ``l_rc@20`` at each tested rate (rate 0 is
the clean run: corruption at rate 0 is the identity). Baselines are clean: ``global_dense`` for the
namespace channels (what a store without namespaces gives), ``namespace_dense`` for the policy,
lifecycle and intent channels (what a namespace filter alone gives). The summary figure is the
**largest tested rate r such that the route's mean L_RC beats (is strictly below) the baseline's at
every tested rate ≤ r** — a grid point of the tested rates, not an estimated threshold; ``None``
when the route does not beat the baseline even on clean metadata.

Rows go to ``routes_sweep.jsonl`` (routes.jsonl fields, ``corruption`` =
``"<field>:<kind>@<rate>#<seed>"``); by default only seed 0 of every (channel, rate) writes rows
(``rows="all"`` writes every seed: on the default synthetic test split that is millions of rows,
gigabytes); rate-0 rows are the clean rows of routes.jsonl and are not repeated. The summary goes
to ``metrics.json`` under ``sweep``, with every seed's mean.

Speed: the clean pass memoises every (route, query) result; a corrupted run re-ranks only the
queries whose support can differ (a corrupted memory enters or leaves it, or the query's own
context changed), and ``RouteRunner.inclusion`` (``memgate.eval.candidate_support``) finds those queries for all
queries at once. Checked against a full re-run on the corrupted sources in tests/eval/test_corruption.py.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract import markdown as md
from memgate.contract.sources import EvalSource
from memgate.eval.corruption import CHANNELS, RATES, corrupt_source, corruption_rng, corruption_tag, field_of
from memgate.eval.evaluation import EvalSettings, PreparedSource
from memgate.eval.protocol import EPS, routes_row, score_query
from memgate.eval.routes import ROUTE_SPECS, GateScorer, RouteRunner, RouteSpec

log = logging.getLogger(__name__)

SWEEP_K = 20
# The routes whose support reads metadata (the baselines are run clean). post_filter_100 and
# post_filter_500 are left out for time: on stores whose namespaces hold fewer than D memories
# they rank exactly like kleene_gate.
SWEEP_ROUTES = (
    "namespace_dense", "current_only", "kleene_gate", "kleene_gate_fail_closed", "post_filter_20",
    "learned_gate_namespace", "learned_gate_namespace_drop", "hybrid",
)
BASELINE_OF_FIELD = {"namespace": "global_dense", "policy": "namespace_dense",
                     "lifecycle": "namespace_dense", "intent": "namespace_dense"}
SUMMARY_KEY = "largest_rate_beating_baseline"
DEFINITION = ("largest tested rate r such that the route's mean L_RC@20 over seeds is strictly below "
              "the clean baseline's at every tested rate <= r (a tested grid point, not a "
              "threshold); null when it is not below even at rate 0")


def reads_field(spec: RouteSpec, field: str) -> bool:
    """Does the route's candidate support read this route-visible field?"""
    if field == "namespace":
        return spec.namespace or spec.kleene is not None
    if field == "lifecycle":
        return spec.kleene is not None or spec.current_only
    if field in ("policy", "intent"):
        return spec.kleene is not None
    raise ValueError(f"unknown field {field!r}")


def largest_rate_beating(rates: Sequence[float], means: Sequence[Optional[float]],
                         baseline: Optional[float]) -> Optional[float]:
    """The largest rate r with means[rate] < baseline at every rate <= r (rates ascending)."""
    best = None
    if baseline is None:
        return None
    for rate, value in sorted(zip(rates, means)):
        if value is None or not value < baseline - 1e-12:
            break
        best = rate
    return best


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(float(x), 10)


class _Scorer:
    """Runs routes over (possibly corrupted) route views and scores them with the clean labels.

    The clean pass memoises every (route, query) result. A corrupted run re-ranks only the
    *affected* queries — those whose support may differ from the clean one — and reuses the clean
    result elsewhere: a route's ranking is a function of its support (texts, and so every score,
    never change under corruption).
    """

    def __init__(self, clean: EvalSource, settings: EvalSettings, write_row: Callable[[dict], None]):
        self.clean = clean
        self.settings = settings
        self.write_row = write_row
        self.groups = [clean.group_of(q.query_id) for q in clean.queries]
        self._labels: dict = {}
        self._clean: dict = {}  # (route, query index) -> (RouteResult, QueryOutcome)
        self._clean_support: dict = {}  # (route, query index) -> support positions
        self._anchors: dict = {}  # query id -> (number of anchor groups, memory id -> groups)

    def _label(self, qid: str, mid: str):
        key = (qid, mid)
        if key not in self._labels:
            label = self.clean.label(qid, mid)
            self._labels[key] = (label.admissible, label.reasons)
        return self._labels[key]

    def _score(self, qid: str, ranked: list):
        labels = [self._label(qid, mid) for mid in ranked]
        return score_query(
            ranked, self.clean.anchor_groups.get(qid, []),
            {mid: a for mid, (a, _) in zip(ranked, labels)},
            {mid: r for mid, (_, r) in zip(ranked, labels)},
            k_budget=SWEEP_K, tau=self.settings.tau, infeasible_cost=self.settings.infeasible_cost,
        )

    def _l_rc(self, qid: str, ranked: list) -> Optional[float]:
        """l_rc of one ranking, the short way (same rule as memgate.eval.protocol.score_query: the
        share of a != True in the prefix that reaches recall τ, else the infeasibility cost)."""
        if qid not in self._anchors:
            groups = self.clean.anchor_groups.get(qid, [])
            of: dict = {}
            for gi, g in enumerate(groups):
                for mid in g:
                    of.setdefault(mid, []).append(gi)
            self._anchors[qid] = (len(groups), of)
        n_groups, of = self._anchors[qid]
        if not n_groups:
            return None
        hit: set = set()
        not_true = 0
        for i, mid in enumerate(ranked):
            if self._label(qid, mid)[0] is not True:
                not_true += 1
            hit.update(of.get(mid, ()))
            if len(hit) / n_groups >= self.settings.tau - EPS:
                return not_true / (i + 1)
        return float(self.settings.infeasible_cost)

    def mean_l_rc(self, runner: RouteRunner, name: str, tag: Optional[str] = None,
                  affected: Optional[np.ndarray] = None, write: bool = True,
                  verify: bool = False) -> Optional[float]:
        """Mean l_rc@20 over evaluable queries. ``tag=None`` is the clean pass (memoised);
        otherwise only ``affected`` queries are re-ranked, and rows are written when ``write``.
        ``verify`` checks that every unaffected query's support is the clean one (tests)."""
        spec = ROUTE_SPECS[name]
        total, n = 0.0, 0
        for qi, query in enumerate(self.clean.queries):
            outcome = None
            if tag is None:
                routed = runner.run(qi, spec, SWEEP_K)
                outcome = self._score(query.query_id, routed.ranked_ids)
                self._clean[(name, qi)] = (routed, outcome)
                self._clean_support[(name, qi)] = runner.support(qi, spec)
            elif affected is not None and not affected[qi]:
                if verify and not np.array_equal(runner.support(qi, spec), self._clean_support[(name, qi)]):
                    raise AssertionError(f"{name}: query {query.query_id} marked unaffected but its support changed")
                routed, outcome = self._clean[(name, qi)]
            else:
                routed = runner.run(qi, spec, SWEEP_K)
                if write:
                    outcome = self._score(query.query_id, routed.ranked_ids)
            if outcome is None:
                value = self._l_rc(query.query_id, routed.ranked_ids)
            else:
                value = outcome.l_rc if outcome.evaluable else None
            if tag is not None and write:
                self.write_row(routes_row(
                    source=self.clean.name, group_id=self.groups[qi], query_id=query.query_id,
                    route=name, k_budget=SWEEP_K, tau=self.settings.tau, corruption=tag,
                    ranked_ids=routed.ranked_ids,
                    candidates_scored={"cosine": routed.candidates_scored_cosine,
                                       "gate": routed.candidates_scored_gate},
                    outcome=outcome,
                ))
            if value is not None:
                total += value
                n += 1
        return total / n if n else None


def _pool_members(source: EvalSource) -> tuple[np.ndarray, np.ndarray]:
    """(distinct pools x memories) membership table and each query's row in it."""
    rows: dict = {}
    table, of_query = [], []
    for q in source.queries:
        pool = source.pools[q.query_id]
        key = id(pool)
        if key not in rows:
            rows[key] = len(table)
            member = np.zeros(len(source.memories), dtype=bool)
            member[pool] = True
            table.append(member)
        of_query.append(rows[key])
    return np.stack(table), np.array(of_query, dtype=np.int64)


def _changed_queries(clean: EvalSource, corrupted: EvalSource, changed_memories: np.ndarray) -> np.ndarray:
    """Queries whose route-visible context changed in a way that can move an unchanged memory's
    verdict (adding a namespace that only corrupted memories carry does not)."""
    kept = np.ones(len(clean.memories), dtype=bool)
    kept[changed_memories] = False
    kept_ns = {m.namespace for m, k in zip(clean.memories, kept) if k}
    out = np.zeros(len(clean.queries), dtype=bool)
    for i, (a, b) in enumerate(zip(clean.queries, corrupted.queries)):
        if a is b:
            continue
        if (a.intent, a.purpose, a.subject, a.time) != (b.intent, b.purpose, b.subject, b.time):
            out[i] = True
        elif (a.namespaces is None) != (b.namespaces is None):
            out[i] = True
        elif a.namespaces is not None and (a.namespaces ^ b.namespaces) & kept_ns:
            out[i] = True
    return out


ROW_MODES = ("first_seed", "all", "none")


def sweep_source(
    prepared: PreparedSource,
    settings: EvalSettings,
    gate=None,
    seeds: int = 10,
    rates: Sequence[float] = RATES,
    channels: Sequence[str] = CHANNELS,
    routes: Optional[Sequence[str]] = None,
    write_row: Callable[[dict], None] = lambda row: None,
    rows: str = "first_seed",
    verify: bool = False,
) -> dict:
    """The sweep summary of one source (see the module docstring). ``rows``: which corrupted
    runs write routes_sweep.jsonl rows (``first_seed``: seed 0 of every channel and rate)."""
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    if rows not in ROW_MODES:
        raise ValueError(f"rows must be one of {ROW_MODES}, got {rows!r}")
    rates = sorted({0.0, *(float(r) for r in rates)})
    clean = prepared.source
    M, Q = prepared.memory_vectors, prepared.query_vectors
    gate_scorer = None
    if gate is not None and gate.config.dim == M.shape[1]:
        gate_scorer = GateScorer(gate, M, Q)

    def make_runner(source: EvalSource) -> RouteRunner:
        return RouteRunner(source.route_view(), M, Q, gate_scorer,
                           rerank_depth=settings.rerank_depth, drop_threshold=settings.drop_threshold)

    clean_runner = make_runner(clean)
    wanted = list(SWEEP_ROUTES if routes is None else routes)
    skipped, sweep_routes = {}, []
    for name in wanted:
        spec = ROUTE_SPECS.get(name)
        if spec is None:
            skipped[name] = "not a metadata route of memgate.eval.routes"
            continue
        reason = clean_runner.available(spec)
        if reason is not None:
            skipped[name] = reason
        elif not any(reads_field(spec, field_of(c)) for c in channels):
            skipped[name] = "reads none of the corrupted fields"
        else:
            sweep_routes.append(name)
    scorer = _Scorer(clean, settings, write_row)
    clean_l_rc = {}
    for name in sorted(set(sweep_routes) | {BASELINE_OF_FIELD[field_of(c)] for c in channels}):
        clean_l_rc[name] = scorer.mean_l_rc(clean_runner, name)
    pool_table, pool_of_query = _pool_members(clean)
    all_queries = np.arange(len(clean.queries))

    out: dict = {"clean_l_rc@20": {k: _round(v) for k, v in clean_l_rc.items()},
                 "routes": sweep_routes, "skipped": skipped, "channels": {}}
    for channel in channels:
        field = field_of(channel)
        readers = [r for r in sweep_routes if reads_field(ROUTE_SPECS[r], field)]
        baseline = BASELINE_OF_FIELD[field]
        per_route = {r: [[clean_l_rc[r]] * seeds] for r in readers}  # rate -> per-seed values
        changed, rescored = [0.0], [0.0]
        started = time.perf_counter()
        for rate in rates[1:]:
            for r in readers:
                per_route[r].append([])
            n_changed, n_rescored = [], []
            for s in range(seeds):
                tag = corruption_tag(channel, rate, s)
                corrupted = corrupt_source(clean, channel, rate,
                                           corruption_rng(settings.seed, channel, rate, s), tag)
                memories = np.array([i for i, (a, b) in enumerate(zip(clean.memories, corrupted.memories))
                                     if a is not b], dtype=np.int64)
                queries_changed = _changed_queries(clean, corrupted, memories)
                n_changed.append(len(memories) if field != "intent" else int(queries_changed.sum()))
                runner = make_runner(corrupted)
                runner._cos_cache = clean_runner._cos_cache  # same vectors and pools
                in_pool = pool_table[pool_of_query][:, memories]
                for r in readers:
                    spec = ROUTE_SPECS[r]
                    moved = (clean_runner.inclusion(spec, memories, all_queries)
                             != runner.inclusion(spec, memories, all_queries)) & in_pool
                    affected = queries_changed | moved.any(axis=1)
                    n_rescored.append(int(affected.sum()))
                    write = rows == "all" or (rows == "first_seed" and s == 0)
                    per_route[r][-1].append(scorer.mean_l_rc(runner, r, tag, affected, write, verify))
            changed.append(float(np.mean(n_changed)))
            rescored.append(float(np.mean(n_rescored)) if n_rescored else 0.0)
        log.info("sweep %s %s: %d routes x %d rates x %d seeds in %.1f s", clean.name, channel,
                 len(readers), len(rates) - 1, seeds, time.perf_counter() - started)
        routes_out = {}
        for r, by_rate in per_route.items():
            means = [None if any(v is None for v in vals) else float(np.mean(vals)) for vals in by_rate]
            routes_out[r] = {
                "l_rc@20": [_round(m) for m in means],
                "l_rc@20_min": [_round(min(v)) if None not in v else None for v in by_rate],
                "l_rc@20_max": [_round(max(v)) if None not in v else None for v in by_rate],
                "l_rc@20_by_seed": [[_round(x) for x in v] for v in by_rate],
                SUMMARY_KEY: largest_rate_beating(rates, means, clean_l_rc[baseline]),
            }
        out["channels"][channel] = {
            "baseline": baseline,
            "baseline_l_rc@20": _round(clean_l_rc[baseline]),
            "records_changed": changed,
            "queries_reranked_per_route": rescored,
            "routes": routes_out,
        }
    return out


def run_sweep(
    prepared: Sequence[PreparedSource],
    settings: EvalSettings,
    gate=None,
    out_path: Optional[Path] = None,
    seeds: int = 10,
    rates: Sequence[float] = RATES,
    channels: Sequence[str] = CHANNELS,
    routes: Optional[Sequence[str]] = None,
    rows: str = "first_seed",
) -> dict:
    """Sweep every source; stream the rows to ``out_path`` (routes_sweep.jsonl); return the summary."""
    if routes is None:
        routes = [r for r in SWEEP_ROUTES if r in settings.routes]
    rates = sorted({0.0, *(float(r) for r in rates)})
    summary: dict = {
        "k_budget": SWEEP_K, "tau": settings.tau, "rates": rates, "seeds": seeds,
        "channels": list(channels), "baselines": dict(BASELINE_OF_FIELD), "definition": DEFINITION,
        "estimate": "point (mean over seeds, no bootstrap)", "rows": rows, "sources": {},
    }
    handle = None
    if out_path is not None:
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        handle = Path(out_path).open("w", encoding="utf-8")

    def write_row(row: dict) -> None:
        if handle is not None:
            handle.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")

    try:
        for item in prepared:
            summary["sources"][item.source.name] = sweep_source(
                item, settings, gate, seeds=seeds, rates=rates, channels=channels, routes=routes,
                write_row=write_row, rows=rows)
    finally:
        if handle is not None:
            handle.close()
    return summary


def _cell(value: Optional[float], reads: bool) -> str:
    if not reads:
        return "n/a"
    return "none" if value is None else f"{value:g}"


def sweep_report_lines(sweep: dict) -> list[str]:
    """report.md section: per source, the largest tested rate beating the baseline per route and
    channel."""
    lines = [
        "## Metadata corruption sweep (point estimates)", "",
        f"Mean L_RC@20 over {sweep['seeds']} seeds per rate; rates {', '.join(f'{r:g}' for r in sweep['rates'])}. "
        f"Cell: the {sweep['definition']}. Baselines (clean): `global_dense` for namespace channels, "
        "`namespace_dense` for policy, lifecycle and intent channels. `n/a`: the route does not read "
        "that field (its ranking cannot change). Curves: `corruption_<source>.png`.", "",
    ]
    for source, result in sweep.get("sources", {}).items():
        channels = list(result["channels"])
        lines += [f"### {source}", ""]
        lines.append(md.row("route", "clean L_RC@20", *(f"`{c}`" for c in channels)))
        lines.append(md.rule(len(channels) + 2))
        for route in result["routes"]:
            clean = result["clean_l_rc@20"].get(route)
            cells = []
            for c in channels:
                entry = result["channels"][c]["routes"].get(route)
                cells.append(_cell(entry[SUMMARY_KEY] if entry else None, entry is not None))
            lines.append(md.row(f"`{route}`", "—" if clean is None else f"{clean:.3f}", *cells))
        base = ", ".join(f"`{r}` {v:.3f}" for r, v in result["clean_l_rc@20"].items()
                         if r in BASELINE_OF_FIELD.values() and v is not None)
        lines += ["", f"Clean baselines: {base}."]
        for route, reason in result.get("skipped", {}).items():
            lines.append(f"- `{route}` not swept: {reason}")
        lines.append("")
    return lines
