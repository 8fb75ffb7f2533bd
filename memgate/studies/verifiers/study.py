"""Text-only verifiers under the protocol: hashed subsample, calibration, routes and figures.

``evaluate.py --verifier <backend>`` runs this after the main evaluation:

1. a fixed **hashed subsample** of queries (default 96 dev + 288 synthetic test): the queries
   with the smallest SHA-256 of ``salt + query_id``; its size and the hash of its id list are
   recorded in the report;
2. each verifier scores the candidates its route would verify: the ungated cosine's top
   ``depth`` (default 30) over the query's pool (the global candidate set, like the other
   text-only routes), memory texts truncated to the byte budget;
3. **calibration** on the dev subsample with the one rule of ``memgate.eval.calibration``: the drop
   threshold ``t`` on p(inadmissible) over every scored dev pair (labels from the scorer, the
   wrong-scope default included); the abstaining variant adds a threshold ``u`` on p(unknown),
   calibrated by the same rule on the pairs ``t`` keeps, with the anchor budget that ``t`` left
   (so the two together still drop at most 1 % of required anchors);
4. routes ``text_verifier_<backend>`` (drop ``p_inad >= t``) and ``text_verifier_<backend>_abstain``
   (also drop ``p_unk >= u``; the calibration module drops at or above a threshold, so "keep iff
   p(unknown) < u") on the test subsample, beside **every other requested route on the same
   subsample**;
5. figures per backend: ROC-AUC and PR-AUC of p(inadmissible) on known labels, Brier, ECE-10,
   violation precision and recall at the chosen threshold, required-anchor false-deny rate, the
   routes under the protocol (recall, feasible rate, L_RC, typed exposure, the visibility grid),
   latency per query and tokens (wall-clock figures go to timings.json only).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from memgate.contract import markdown as md
from memgate.contract.defaults import VERIFIER_DEPTH, VERIFIER_DEV, VERIFIER_TEST
from memgate.contract.sources import EvalSource, RouteView
from memgate.datasets.synthetic import load_split, read_meta
from memgate.eval.calibration import Calibration, calibrate_threshold
from memgate.eval.engine import breakdowns, prepare
from memgate.eval.evaluation import PreparedSource, run_source, summarize_route
from memgate.eval.metrics import average_precision, ece, roc_auc
from memgate.model.scoring import rank_by_score
from memgate.studies.verifiers.base import Verifier
from memgate.studies.verifiers.factory import build_verifier, load_config

log = logging.getLogger(__name__)

SUBSAMPLE_SALT = "memgate-verifier-subsample-v1"
DEFAULT_DEV = VERIFIER_DEV
DEFAULT_TEST = VERIFIER_TEST
DEFAULT_DEPTH = VERIFIER_DEPTH


# --------------------------------------------------------------------------- subsample

def hashed_subsample(query_ids: Sequence[str], n: int, salt: str = SUBSAMPLE_SALT) -> list[str]:
    """The ``n`` ids with the smallest SHA-256 of ``salt + id``, in their original order."""
    if n >= len(query_ids):
        return list(query_ids)
    keyed = sorted(query_ids, key=lambda q: hashlib.sha256((salt + q).encode("utf-8")).hexdigest())
    chosen = set(keyed[:n])
    return [q for q in query_ids if q in chosen]


def ids_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:16]


def subsample_source(source: EvalSource, query_ids: Sequence[str]) -> tuple[EvalSource, np.ndarray]:
    """The source restricted to ``query_ids`` (same store), and the kept query indices."""
    wanted = set(query_ids)
    index = [i for i, q in enumerate(source.queries) if q.query_id in wanted]
    queries = [source.queries[i] for i in index]
    sub = EvalSource(
        name=source.name, memories=source.memories, queries=queries,
        pools={q.query_id: source.pools[q.query_id] for q in queries},
        labels={q.query_id: source.labels.get(q.query_id, {}) for q in queries},
        anchor_groups={q.query_id: source.anchor_groups.get(q.query_id, []) for q in queries},
        policy_rules=source.policy_rules, default_label=source.default_label,
        query_meta={q.query_id: source.query_meta[q.query_id] for q in queries if q.query_id in source.query_meta},
        notes=list(source.notes),
    )
    return sub, np.asarray(index, dtype=np.int64)


# --------------------------------------------------------------------------- scorer

@dataclass
class VerifierRouteScorer:
    """A verifier bound to one source's route view: per (query, memory) probabilities, cached,
    plus the route's depth and calibrated thresholds. It hands the verifier texts only."""

    verifier: Verifier
    view: RouteView
    depth: int = DEFAULT_DEPTH
    threshold: Optional[float] = None  # t on p(inadmissible); inf = keep everything
    unknown_threshold: Optional[float] = None  # u on p(unknown) for the abstaining route
    note: str = ""
    probs: dict = field(default_factory=dict)  # (qi, mi) -> (p_adm, p_inad, p_unk)
    seconds: dict = field(default_factory=dict)  # qi -> verifier wall seconds

    def bound_to(self, view: RouteView) -> bool:
        return view.memories is self.view.memories and view.queries is self.view.queries

    def unavailable_reason(self, abstain: bool) -> Optional[str]:
        if self.threshold is None:
            return self.note or "the verifier has no calibrated drop threshold"
        if abstain and self.unknown_threshold is None:
            return self.note or "the verifier has no calibrated p(unknown) threshold"
        return None

    def ensure(self, qi: int, memory_indices: Sequence[int]) -> None:
        missing = [int(m) for m in memory_indices if (qi, int(m)) not in self.probs]
        if not missing:
            return
        start = time.perf_counter()
        verdicts = self.verifier.verify(self.view.queries[qi].text,
                                        [self.view.memories[m].text for m in missing])
        self.seconds[qi] = self.seconds.get(qi, 0.0) + time.perf_counter() - start
        for m, v in zip(missing, verdicts):
            self.probs[(qi, m)] = v.probs

    def scores(self, qi: int, memory_indices: Sequence[int]) -> np.ndarray:
        """(n, 3) probabilities over (admissible, inadmissible, unknown)."""
        self.ensure(qi, memory_indices)
        return np.array([self.probs[(qi, int(m))] for m in memory_indices], dtype=np.float64).reshape(-1, 3)

    def keep(self, qi: int, head: np.ndarray, abstain: bool = False) -> np.ndarray:
        p = self.scores(qi, head)
        keep = p[:, 1] < self.threshold
        if abstain:
            keep &= p[:, 2] < self.unknown_threshold
        return keep

    def head(self, qi: int, memory_vectors: np.ndarray, query_vectors: np.ndarray,
             ids_rank: np.ndarray) -> np.ndarray:
        """The memory indices the verifier route scores for query qi: the cosine's top depth."""
        pool = self.view.pools[self.view.queries[qi].query_id]
        cos = (memory_vectors[pool] @ query_vectors[qi]).astype(np.float64)
        return rank_by_score(ids_rank, pool, cos)[: self.depth]


def ids_rank_of(source: EvalSource) -> np.ndarray:
    ids = np.array([m.memory_id for m in source.memories])
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    return rank


@dataclass
class ScoredPairs:
    """Every pair a verifier scored on a source, with its scorer label."""

    p: np.ndarray  # (n, 3)
    admissible: list  # True / False / None
    required: np.ndarray  # bool
    explicit: np.ndarray  # bool: the pair has an explicit label (in scope), not the default rule
    tv: np.ndarray  # text_visible
    mv: np.ndarray  # metadata_visible


def score_heads(scorer: VerifierRouteScorer, source: EvalSource, memory_vectors: np.ndarray,
                query_vectors: np.ndarray) -> ScoredPairs:
    """Score every query's route head (the cosine top depth) and collect the labels."""
    rank = ids_rank_of(source)
    rows, admissible, required, explicit, tv, mv = [], [], [], [], [], []
    start = time.perf_counter()
    for qi, query in enumerate(source.queries):
        head = scorer.head(qi, memory_vectors, query_vectors, rank)
        p = scorer.scores(qi, head)
        if (qi + 1) % 8 == 0 or qi + 1 == len(source.queries):
            log.info("%s %s: %d/%d queries scored (%.0f s)", scorer.verifier.backend, source.name, qi + 1,
                     len(source.queries), time.perf_counter() - start)
        for m, row in zip(head, p):
            mid = source.memories[int(m)].memory_id
            label = source.label(query.query_id, mid)
            rows.append(row)
            admissible.append(label.admissible)
            required.append(label.relevance == "required")
            explicit.append(mid in source.labels.get(query.query_id, {}))
            tv.append(label.text_visible)
            mv.append(label.metadata_visible)
    return ScoredPairs(np.array(rows, dtype=np.float64).reshape(-1, 3), admissible,
                       np.array(required, dtype=bool), np.array(explicit, dtype=bool),
                       np.array(tv, dtype=bool), np.array(mv, dtype=bool))


# --------------------------------------------------------------------------- calibration

def calibrate_verifier(pairs: ScoredPairs, data_hash: Optional[str], max_anchor_drop: float = 0.01
                       ) -> tuple[Calibration, Optional[Calibration]]:
    """``t`` on p(inadmissible) by the one rule; then ``u`` on p(unknown) over the pairs ``t``
    keeps, with the anchor budget ``t`` left (a zero budget when ``t`` used it all up: ``u`` then
    drops no anchor). ``u`` is None only when the dev pairs hold no required anchor. A pair is
    dropped when p >= threshold, i.e. kept when p(inadmissible) < t and p(unknown) < u."""
    first = calibrate_threshold(pairs.p[:, 1].tolist(), pairs.admissible, pairs.required,
                                max_anchor_drop=max_anchor_drop, data_hash=data_hash)
    kept = ~first.drops(pairs.p[:, 1])
    n_anchor = int(pairs.required.sum())
    if n_anchor == 0:
        return first, None
    dropped_anchor = int((pairs.required & ~kept).sum())
    budget = math.floor(max_anchor_drop * n_anchor + 1e-9) - dropped_anchor
    remaining = int((pairs.required & kept).sum())
    fraction = 0.0 if remaining == 0 or budget <= 0 else min(budget / remaining, 0.999999)
    second = calibrate_threshold(pairs.p[kept, 2].tolist(), [a for a, k in zip(pairs.admissible, kept) if k],
                                 pairs.required[kept], max_anchor_drop=fraction, data_hash=data_hash)
    return first, second


# --------------------------------------------------------------------------- figures

def score_figures(pairs: ScoredPairs, threshold: float, unknown_threshold: Optional[float]) -> dict:
    """Classification figures of p(inadmissible) on pairs with a known label."""
    known = np.array([a is not None for a in pairs.admissible], dtype=bool)
    viol = np.array([a is False for a in pairs.admissible], dtype=bool)
    p_inad = pairs.p[:, 1]
    out: dict = {"n_pairs": int(len(known)), "n_known": int(known.sum()),
                 "n_violations": int(viol.sum()), "n_unresolved": int((~known).sum()),
                 "n_required": int(pairs.required.sum())}

    def block(sel: np.ndarray) -> dict:
        y, s = viol[sel], p_inad[sel]
        return {"n": int(sel.sum()), "n_violations": int(y.sum()),
                "roc_auc": _r(roc_auc(y, s)), "pr_auc": _r(average_precision(y, s)),
                "brier": _r(float(np.mean((s - y) ** 2)) if len(y) else None),
                "ece10": _r(ece(y, s))}

    out["all_known"] = block(known)
    out["in_scope_known"] = block(known & pairs.explicit)  # explicit labels: the wrong-scope default excluded
    out["text_visible_known"] = block(known & pairs.tv)
    for name, drop in (("drop", p_inad >= threshold),
                       ("abstain", (p_inad >= threshold) | (pairs.p[:, 2] >= (unknown_threshold
                                                                           if unknown_threshold is not None
                                                                           else math.inf)))):
        caught = int((drop & viol).sum())
        out[name] = {
            "violation_precision": _r(caught / int((drop & known).sum()) if (drop & known).any() else None),
            "violation_recall": _r(caught / int(viol.sum()) if viol.any() else None),
            "anchor_false_deny": _r(float((drop & pairs.required).sum() / pairs.required.sum())
                                    if pairs.required.any() else None),
            "dropped_share": _r(float(drop.mean()) if len(drop) else None),
        }
    out["mean_probs"] = [_r(float(x)) for x in pairs.p.mean(axis=0)] if len(pairs.p) else None
    return out


def _r(x):
    return None if x is None else round(float(x), 6)


def cold_cost(ledger: dict, n_queries: int) -> dict:
    """What a query costs with nothing cached, from one ledger's counts (``Ledger.to_dict``): model
    seconds, tokens and USD per candidate over the candidates whose cost is known (scored in this
    run, or served by a cache entry that records its cost), times the candidates per query. A
    cache entry written before records existed counts in ``without_record`` and in no average."""
    scored, recorded = ledger["scored_candidates"], ledger["cached_candidates"]
    known, n_queries = scored + recorded, max(1, n_queries)
    per_query = ledger["candidates"] / n_queries

    def per_q(this_run: str, cached: str):
        return None if not known else (ledger[this_run] + ledger[cached]) / known * per_query

    return {
        "uncached_s_per_candidate": (ledger["answered_seconds"] + ledger["cached_seconds"]) / known if known else None,
        "uncached_latency_per_query_s": per_q("answered_seconds", "cached_seconds"),
        "prompt_tokens_per_query_test": per_q("prompt_tokens", "cached_prompt_tokens"),
        "completion_tokens_per_query_test": per_q("completion_tokens", "cached_completion_tokens"),
        "cost_usd_per_query_test": per_q("cost_usd", "cached_cost_usd"),
        "uncached_latency_measured_on": {"scored_this_run": scored, "cache_records": recorded,
                                         "without_record": ledger["candidates"] - known},
        "test_candidates_from_cache": ledger["candidates"] - scored,
        "test_ledger": ledger,
    }


# --------------------------------------------------------------------------- the study

ROUTE_KEYS = ("recall_required@20", "feasible_rate@20", "l_rc@20", "l_rc_infeasible@20",
              "l_rc_feasible@20", "risk_upper@20", "violation_any@20", "exposure_scope@20",
              "exposure_policy@20", "exposure_lifecycle@20", "exposure_cross_domain@20",
              "exposure_sycophancy@20", "exposure_tool_drift@20", "exposure_jailbreak@20")


def verifier_study(
    backends: dict,  # backend name -> Verifier, or a str saying why it is not available
    test: PreparedSource,  # noqa: F821
    dev: PreparedSource,  # noqa: F821
    settings,
    gate=None,
    routes: Sequence[str] = (),
    n_dev: int = DEFAULT_DEV,
    n_test: int = DEFAULT_TEST,
    depth: int = DEFAULT_DEPTH,
    data_hash: Optional[str] = None,
) -> tuple[dict, dict]:
    """Run the verifier study; return (metrics block, timings block)."""
    dev_ids = hashed_subsample([q.query_id for q in dev.source.queries], n_dev)
    test_ids = hashed_subsample([q.query_id for q in test.source.queries], n_test)
    dev_src, dev_idx = subsample_source(dev.source, dev_ids)
    test_src, test_idx = subsample_source(test.source, test_ids)
    dev_prep = PreparedSource(dev_src, dev.memory_vectors, dev.query_vectors[dev_idx])
    test_prep = PreparedSource(test_src, test.memory_vectors, test.query_vectors[test_idx])
    block: dict = {
        "subsample": {"dev_queries": len(dev_ids), "test_queries": len(test_ids), "salt": SUBSAMPLE_SALT,
                      "dev_ids_sha256": ids_digest(dev_ids), "test_ids_sha256": ids_digest(test_ids),
                      "depth": depth, "source": test.source.name},
        "backends": {},
    }
    timing: dict = {}
    scorers = {}
    test_view = test_src.route_view()
    for backend, verifier in backends.items():
        if isinstance(verifier, str):  # e.g. the fine-tuned backend without a full training run
            block["backends"][backend] = {"status": verifier}
            continue
        t0 = time.perf_counter()
        dev_scorer = VerifierRouteScorer(verifier, dev_src.route_view(), depth=depth)
        dev_pairs = score_heads(dev_scorer, dev_src, dev_prep.memory_vectors, dev_prep.query_vectors)
        cal_t, cal_u = calibrate_verifier(dev_pairs, data_hash)
        dev_seconds = time.perf_counter() - t0
        dev_ledger = verifier.ledger.to_dict()
        scorer = VerifierRouteScorer(verifier, test_view, depth=depth, threshold=cal_t.threshold,
                                     unknown_threshold=None if cal_u is None else cal_u.threshold)
        t0 = time.perf_counter()
        test_pairs = score_heads(scorer, test_src, test_prep.memory_vectors, test_prep.query_vectors)
        test_seconds = time.perf_counter() - t0
        scorers[backend] = scorer
        total = verifier.ledger.to_dict()
        block["backends"][backend] = {
            "status": "measured",
            "model": verifier.model_id,
            "max_bytes": verifier.max_bytes,
            "calibration": {"p_inadmissible": cal_t.to_dict(),
                            "p_unknown": None if cal_u is None else cal_u.to_dict()},
            "dev": score_figures(dev_pairs, cal_t.threshold, scorer.unknown_threshold),
            "test": score_figures(test_pairs, cal_t.threshold, scorer.unknown_threshold),
        }
        # Ledger figures depend on the cache state (a rerun is all cache hits), so they go to
        # timings.json with the wall-clock figures; metrics.json stays byte-reproducible.
        test_ledger = {k: v - dev_ledger[k] for k, v in total.items() if isinstance(v, (int, float))}
        timing[backend] = {"dev_seconds": dev_seconds, "test_seconds": test_seconds,
                           # wall time per test query as this run saw it (cache hits make it cheaper)
                           "latency_per_query_s": test_seconds / max(1, len(test_ids)),
                           **cold_cost(test_ledger, len(test_ids)), "ledger": total}
    route_names = [r for r in routes if not r.startswith("text_verifier_")]
    for backend in scorers:
        route_names += [f"text_verifier_{backend}", f"text_verifier_{backend}_abstain"]
    sub_settings = replace(settings, routes=route_names, verifiers=scorers)
    t0 = time.perf_counter()
    result = run_source(test_prep, sub_settings, gate)
    timing["routes_seconds"] = result.seconds
    block["routes"] = {r: {k: v for k, v in summarize_route(pq, result.groups, sub_settings).items()
                           if k in ROUTE_KEYS or k.startswith("exposure_")}
                       for r, pq in result.per_query.items()}
    grid = breakdowns(test_src, result, sub_settings)
    block["visibility"] = {name: {r: {k: m[k] for k in ("recall_required@20", "l_rc@20", "violation_any@20")
                                      if k in m} for r, m in per_route.items()}
                           for name, per_route in grid.items() if name.startswith("visibility=")}
    block["skipped"] = result.skipped
    timing["subsample_routes_total"] = time.perf_counter() - t0
    return block, timing


# --------------------------------------------------------------------------- evaluate.py hook

def run_from_evaluate(backends: Sequence[str], options: dict, prepared: Sequence, data_dir, encoder,
                      settings, gate, routes: Sequence[str], out_dir) -> tuple[dict, dict]:
    """``evaluate.py --verifier b1,b2``: build the verifiers, run the study on the synthetic test
    and dev subsamples, write ``verifiers.md``; return (metrics block, timings block).

    options: ``dev`` / ``test`` (subsample sizes), ``depth``, ``configs`` (backend -> yaml path).
    """
    from pathlib import Path

    test = next((p for p in prepared if p.source.name == "synthetic_test"), None)
    if test is None or data_dir is None:
        return {"skipped": "verifier routes need the synthetic data (dev split for calibration)"}, {}
    dev = prepare(load_split(data_dir, "dev", name="synthetic_dev"), encoder)
    verifiers = {}
    data_hash = read_meta(data_dir).get("data_hash")
    t0 = time.perf_counter()
    for backend in backends:
        config = load_config(backend, (options.get("configs") or {}).get(backend))
        verifiers[backend] = build_verifier(backend, config, data_hash=data_hash)
    load_seconds = time.perf_counter() - t0
    block, timing = verifier_study(
        verifiers, test, dev, settings, gate=gate, routes=routes,
        n_dev=int(options.get("dev", DEFAULT_DEV)), n_test=int(options.get("test", DEFAULT_TEST)),
        depth=int(options.get("depth", DEFAULT_DEPTH)), data_hash=data_hash,
    )
    timing["load_seconds"] = load_seconds
    write_verifier_report(Path(out_dir) / "verifiers.md", block, timing)
    return block, timing


def _cell(m: Optional[dict]) -> str:
    if not isinstance(m, dict) or m.get("value") is None:
        return "—"
    lo, hi = (m.get("ci") or [None, None])[:2]
    return f"{m['value']:.3f}" if lo is None else f"{m['value']:.3f} [{lo:.3f}, {hi:.3f}]"


def _num(x, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def write_verifier_report(path, block: dict, timing: dict) -> None:
    """verifiers.md: the subsample, per-backend figures, and every route on the same subsample."""
    sub = block["subsample"]
    lines = [
        "# Text-only verifiers", "",
        f"Hashed subsample (salt `{sub['salt']}`): **{sub['dev_queries']} dev** queries (calibration, "
        f"ids sha256 `{sub['dev_ids_sha256']}`) and **{sub['test_queries']} test** queries (ids sha256 "
        f"`{sub['test_ids_sha256']}`) of `{sub['source']}`. A verifier scores the ungated cosine's top "
        f"{sub['depth']} candidates per query and sees only the query text and the memory texts. "
        "Thresholds: the one calibration rule (max violation recall, <= 1 % of required anchors "
        "dropped) on the dev subsample; the abstaining variant also drops p(unknown) >= u.", "",
        "## Per backend (test subsample; p(inadmissible) on pairs with a known label)", "",
        "| backend | model | AUC (all) | PR-AUC (all) | AUC (in scope) | Brier | ECE-10 | prompt tokens / query "
        "| completion tokens / query | USD / query | s / query (uncached) |",
        md.rule(11),
    ]
    measured = {b: f for b, f in block["backends"].items() if f.get("status") == "measured"}
    for backend, fig in block["backends"].items():
        if backend not in measured:
            lines.append(f"| `{backend}` | {fig.get('status')} |" + " — |" * 9)
            continue
        test, tm = fig["test"], timing.get(backend, {})
        lines.append(
            f"| `{backend}` | {fig['model']} | {_num(test['all_known']['roc_auc'])} | "
            f"{_num(test['all_known']['pr_auc'])} | {_num(test['in_scope_known']['roc_auc'])} | "
            f"{_num(test['all_known']['brier'])} | {_num(test['all_known']['ece10'])} | "
            f"{_num(tm.get('prompt_tokens_per_query_test'), 0)} | "
            f"{_num(tm.get('completion_tokens_per_query_test'), 0)} | {_num(tm.get('cost_usd_per_query_test'), 5)} | "
            f"{_num(tm.get('uncached_latency_per_query_s'), 2)} |")
    if measured:
        lines += ["", "Decisions at the thresholds calibrated on dev (test subsample; a violation is a "
                  "pair with a = False, an anchor a required memory):", "",
                  "| backend | rule | threshold | violation precision | violation recall | anchor false-deny "
                  "| pairs dropped |", md.rule(7)]
        for backend, fig in measured.items():
            cal = fig["calibration"]
            t = cal["p_inadmissible"]["threshold"]
            u = (cal["p_unknown"] or {}).get("threshold")
            for rule, name, thr in (("drop", "drop: p_inad >= t", f"t = {'inf' if t is None else _num(t, 4)}"),
                                    ("abstain", "abstain: also p_unk >= u",
                                     f"u = {'inf' if u is None else _num(u, 4)}")):
                d = fig["test"][rule]
                lines.append(f"| `{backend}` | {name} | {thr} | {_num(d['violation_precision'])} | "
                             f"{_num(d['violation_recall'])} | {_num(d['anchor_false_deny'])} | "
                             f"{_num(d['dropped_share'])} |")
    for backend, fig in block["backends"].items():
        if fig.get("status") == "measured":
            lines += ["", f"`{backend}` calibration: {fig['calibration']['p_inadmissible']['note']}; "
                      f"mean (p_adm, p_inad, p_unk) on test pairs: {fig['test']['mean_probs']}."]
    keys = ("recall_required@20", "feasible_rate@20", "l_rc@20", "violation_any@20", "exposure_scope@20",
            "exposure_policy@20", "exposure_lifecycle@20")
    lines += ["", "## Routes on the same subsample (K = 20, τ = 0.8)", "",
              *md.table(["route", *keys], ([f"`{route}`", *(_cell(m.get(k)) for k in keys)]
                                            for route, m in block.get("routes", {}).items()))]
    if block.get("skipped"):
        lines += [""] + [f"- `{r}` skipped: {why}" for r, why in block["skipped"].items()]
    lines += ["", "## Visibility grid (l_rc@20)", ""]
    cells = sorted(block.get("visibility", {}))
    if cells:
        routes = list(block.get("routes", {}))
        lines += md.table(["route", *(c.split("=", 1)[1] for c in cells)],
                          ([f"`{route}`", *(_cell(block["visibility"][c].get(route, {}).get("l_rc@20"))
                                            for c in cells)] for route in routes))
    from pathlib import Path

    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


