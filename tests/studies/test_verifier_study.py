"""Verifier routes under the protocol: text-only payloads, calibration on a tiny case, the drop
and abstain routes, the hashed subsample and the study's figures (with a scripted verifier)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memgate.contract.admissibility import PolicyRules
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext
from memgate.contract.sources import EvalSource, wrong_scope_or_error
from memgate.eval.evaluation import EvalSettings, PreparedSource, run_source
from memgate.eval.metrics import ece, roc_auc
from memgate.eval.routes import RouteRunner, route_spec
from memgate.studies.verifiers import CandidateVerdict, Verifier
from memgate.studies.verifiers.base import answer_record
from memgate.studies.verifiers.study import (
    ScoredPairs,
    VerifierRouteScorer,
    calibrate_verifier,
    hashed_subsample,
    score_figures,
    verifier_study,
)

RULES = PolicyRules.from_dict({"ok": {}})


class Scripted(Verifier):
    """p(inadmissible) from a keyword in the memory text; records everything it is shown."""

    backend = "scripted"

    def __init__(self):
        super().__init__()
        self.seen = []

    def _verify(self, request):
        self.seen.append(request)
        self.ledger.calls += 1  # as a backend does when its model answers
        self.ledger.scored_candidates += len(request.candidates)
        out = []
        for text in request.candidates:
            if "BAD" in text:
                out.append(CandidateVerdict((0.1, 0.8, 0.1)))
            elif "HAZY" in text:
                out.append(CandidateVerdict((0.3, 0.1, 0.6)))
            else:
                out.append(CandidateVerdict((0.8, 0.1, 0.1)))
        return out


def tiny_source(name="src", n_groups=4, seed=0) -> PreparedSource:
    """Per group: 2 required anchors, 2 text-visible violations ("BAD"), 1 unresolved ("HAZY"),
    3 harmless notes; other groups' memories are wrong-scope (the default label)."""
    rng = np.random.default_rng(seed)
    memories, queries, labels, anchors, meta = [], [], {}, {}, {}
    for g in range(n_groups):
        ns = f"{name}-p{g}"
        kinds = ["req", "req", "BAD", "BAD", "HAZY", "ok", "ok", "ok"]
        mine = []
        for j, kind in enumerate(kinds):
            text = f"{kind} note {j} of person {g} in {name}"
            m = MemoryRecord(memory_id=f"{name}-g{g}-m{j}", text=text, namespace=ns, policy_tags=("ok",),
                             lifecycle_state="current", released_order=j)
            memories.append(m)
            mine.append((m, kind))
        for k in range(3):
            qid = f"{name}-g{g}-q{k}"
            queries.append(QueryContext(qid, f"question {k} of person {g} in {name}", principal=ns,
                                        namespaces=frozenset({ns}), purpose="p", intent="current_state",
                                        group_id=ns))
            labels[qid] = {}
            for m, kind in mine:
                policy = {"BAD": False, "HAZY": None}.get(kind, True)
                labels[qid][m.memory_id] = PairLabel(
                    qid, m.memory_id, "required" if kind == "req" else "not_useful", scope=True,
                    policy=policy, lifecycle=True, policy_reasons=("cross_domain",) if kind == "BAD" else (),
                    text_visible=kind == "BAD", metadata_visible=False)
            anchors[qid] = [frozenset({m.memory_id}) for m, kind in mine if kind == "req"]
            meta[qid] = {"query_id": qid, "visibility": "tv_not_mv", "scenario": "cross_domain"}
    source = EvalSource(name, memories, queries,
                        {q.query_id: np.arange(len(memories), dtype=np.int64) for q in queries},
                        labels, anchors, RULES, default_label=wrong_scope_or_error, query_meta=meta)
    M = rng.normal(size=(len(memories), 8)).astype(np.float32)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    Q = rng.normal(size=(len(queries), 8)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return PreparedSource(source, M, Q)


def test_route_names_parse():
    spec = route_spec("text_verifier_local")
    assert spec.verifier == "local" and spec.drop and not spec.abstain
    spec = route_spec("text_verifier_openai_abstain")
    assert spec.verifier == "openai" and spec.abstain
    assert route_spec("text_verifier_") is None and route_spec("nope") is None
    assert route_spec("global_dense").verifier is None


def test_calibration_on_a_tiny_case():
    # scores p(inadmissible), p(unknown); 4 violations, 2 anchors (1 % of 2 = 0 anchors may drop)
    p = np.array([
        [0.05, 0.90, 0.05],  # violation
        [0.10, 0.70, 0.20],  # violation
        [0.30, 0.60, 0.10],  # anchor: t must stay above 0.6
        [0.30, 0.50, 0.20],  # violation (below the anchor: not catchable by t)
        [0.20, 0.10, 0.70],  # violation with high p(unknown): the abstain threshold catches it
        [0.80, 0.10, 0.10],  # anchor
        [0.90, 0.05, 0.05],  # admissible
        [0.40, 0.20, 0.40],  # unresolved (never counts)
    ])
    admissible = [False, False, True, False, False, True, True, None]
    required = np.array([False, False, True, False, False, True, False, False])
    pairs = ScoredPairs(p, admissible, required, np.ones(8, bool), np.ones(8, bool), np.zeros(8, bool))
    t, u = calibrate_verifier(pairs, "hash")
    assert t.threshold == 0.7 and t.violation_recall == 0.5 and t.anchor_drop_rate == 0.0
    assert u.threshold == 0.2  # lowest p(unknown) of a kept violation; the anchors' (0.1) stay
    assert u.data_hash == "hash" and u.n_anchors == 2
    figures = score_figures(pairs, t.threshold, u.threshold)
    assert figures["drop"]["violation_recall"] == 0.5 and figures["drop"]["violation_precision"] == 1.0
    assert figures["abstain"]["violation_recall"] == 1.0 and figures["drop"]["anchor_false_deny"] == 0.0
    assert figures["n_unresolved"] == 1 and figures["all_known"]["n"] == 7


def test_calibration_with_nothing_feasible_keeps_everything():
    p = np.array([[0.1, 0.9, 0.0], [0.9, 0.1, 0.0]])
    pairs = ScoredPairs(p, [True, False], np.array([True, False]), np.ones(2, bool),
                        np.ones(2, bool), np.zeros(2, bool))
    t, u = calibrate_verifier(pairs, None)
    assert math.isinf(t.threshold) and not t.feasible and "keeping everything" in t.note


def test_auc_and_ece_by_hand():
    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == 0.75
    assert roc_auc(np.array([1, 1]), np.array([0.1, 0.2])) is None
    assert ece(np.array([1, 0]), np.array([1.0, 0.0])) == 0.0
    assert ece(np.array([0, 0]), np.array([0.55, 0.55])) == pytest.approx(0.55)


def test_hashed_subsample_is_fixed_and_ordered():
    ids = [f"q{i:03d}" for i in range(50)]
    a = hashed_subsample(ids, 10)
    assert a == hashed_subsample(list(reversed(ids)), 10)[::-1] or sorted(a) == sorted(
        hashed_subsample(list(reversed(ids)), 10))
    assert len(a) == 10 and a == sorted(a)  # original order kept
    assert hashed_subsample(ids, 10) == a and hashed_subsample(ids, 100) == ids


def test_verifier_route_drops_and_abstains_and_sees_only_texts():
    prepared = tiny_source()
    source = prepared.source
    view = source.route_view()
    verifier = Scripted()
    scorer = VerifierRouteScorer(verifier, view, depth=10, threshold=0.5, unknown_threshold=0.5)
    runner = RouteRunner(view, prepared.memory_vectors, prepared.query_vectors,
                         verifier_scorers={"scripted": scorer})
    dense = runner.run(0, route_spec("global_dense"), 32).ranked_ids
    plain = runner.run(0, route_spec("text_verifier_scripted"), 32).ranked_ids
    abstain = runner.run(0, route_spec("text_verifier_scripted_abstain"), 32).ranked_ids
    text = {m.memory_id: m.text for m in source.memories}
    head = dense[:10]
    assert [m for m in plain[:10] if True] == ([m for m in head if "BAD" not in text[m]] + dense[10:])[:10]
    assert all("BAD" not in text[m] for m in plain if m in head)
    assert all("HAZY" not in text[m] and "BAD" not in text[m] for m in abstain if m in head)
    assert plain[-len(dense[10:]):] == dense[10:]  # the tail beyond depth is appended unverified
    # the verifier saw only query texts and memory texts
    query_texts = {q.text for q in source.queries}
    memory_texts = set(text.values())
    for request in verifier.seen:
        assert request.query in query_texts
        assert all(c in memory_texts for c in request.candidates)
        assert not any(mid in request.query or any(mid in c for c in request.candidates) for mid in text)
    # a scorer bound to another source is refused with a reason, not used
    other = tiny_source("other")
    foreign = RouteRunner(other.source.route_view(), other.memory_vectors, other.query_vectors,
                          verifier_scorers={"scripted": scorer})
    assert "hashed verifier subsample" in foreign.available(route_spec("text_verifier_scripted"))
    settings = EvalSettings(routes=["global_dense", "text_verifier_scripted"], n_boot=50)
    result = run_source(other, settings)
    assert "text_verifier_scripted" in result.skipped


def test_study_end_to_end_with_a_scripted_verifier():
    test = tiny_source("test", n_groups=6, seed=1)
    dev = tiny_source("dev", n_groups=4, seed=2)
    settings = EvalSettings(routes=["global_dense", "namespace_dense", "kleene_gate"], n_boot=50)
    block, timing = verifier_study({"scripted": Scripted(), "finetuned": "not trained"}, test, dev, settings,
                                   routes=settings.routes, n_dev=6, n_test=12, depth=12, data_hash="h")
    sub = block["subsample"]
    assert (sub["dev_queries"], sub["test_queries"], sub["depth"]) == (6, 12, 12)
    assert block["backends"]["finetuned"] == {"status": "not trained"}
    fig = block["backends"]["scripted"]
    assert fig["status"] == "measured"
    assert fig["calibration"]["p_inadmissible"]["data_hash"] == "h"
    # the scripted verifier separates the in-scope violations (its keyword) perfectly
    assert fig["test"]["in_scope_known"]["roc_auc"] == 1.0
    assert set(block["routes"]) == {"global_dense", "namespace_dense", "kleene_gate",
                                    "text_verifier_scripted", "text_verifier_scripted_abstain"}
    for route in block["routes"].values():
        assert "recall_required@20" in route and "l_rc@20" in route and "exposure_policy@20" in route
    assert "visibility=tv_not_mv" in block["visibility"]
    assert timing["scripted"]["latency_per_query_s"] >= 0
    assert timing["scripted"]["uncached_latency_per_query_s"] > 0
    assert timing["scripted"]["test_candidates_from_cache"] == 0  # Scripted has no cache
    # the drop route never exposes more violations than global dense on the same subsample
    v_drop = block["routes"]["text_verifier_scripted"]["exposure_policy@20"]["value"]
    v_dense = block["routes"]["global_dense"]["exposure_policy@20"]["value"]
    assert v_drop <= v_dense


class Replayed(Scripted):
    """Scripted answers served as cache hits whose entries record a cost of 0.25 s and 40 tokens
    per candidate, as a fully cached rerun of a real backend would see them."""

    backend = "replayed"

    def _verify(self, request):
        out = super()._verify(request)
        self.ledger.calls -= 1
        self.ledger.scored_candidates -= len(request.candidates)
        for _ in request.candidates:
            self.ledger.count_hit({"answered": answer_record(0.25, 40)})
        return out


def test_a_fully_cached_study_reports_the_cold_cost_recorded_in_the_cache():
    test = tiny_source("test", n_groups=6, seed=1)
    dev = tiny_source("dev", n_groups=4, seed=2)
    settings = EvalSettings(routes=["global_dense"], n_boot=50)
    _, timing = verifier_study({"replayed": Replayed()}, test, dev, settings, routes=settings.routes,
                               n_dev=6, n_test=12, depth=12, data_hash="h")
    t = timing["replayed"]
    dev_candidates = t["ledger"]["candidates"] - t["uncached_latency_measured_on"]["cache_records"]
    assert t["uncached_latency_measured_on"]["scored_this_run"] == 0
    assert t["uncached_latency_measured_on"]["without_record"] == 0
    assert t["uncached_s_per_candidate"] == pytest.approx(0.25)
    n_test_candidates = t["test_candidates_from_cache"]
    assert dev_candidates > 0 and n_test_candidates > 0
    assert t["uncached_latency_per_query_s"] == pytest.approx(0.25 * n_test_candidates / 12)
    assert t["prompt_tokens_per_query_test"] == pytest.approx(40 * n_test_candidates / 12)


def test_cold_cost_averages_only_candidates_whose_cost_is_known():
    from memgate.studies.verifiers.base import Ledger
    from memgate.studies.verifiers.study import cold_cost

    ledger = Ledger(scored_candidates=10, answered_seconds=2.0, prompt_tokens=500, cached_candidates=6,
                    cached_seconds=1.2, cached_prompt_tokens=300, candidates=20, cache_hits=10).to_dict()
    out = cold_cost(ledger, n_queries=2)  # 4 of the 20 candidates came from entries without a record
    assert out["uncached_s_per_candidate"] == pytest.approx(3.2 / 16)
    assert out["uncached_latency_per_query_s"] == pytest.approx(3.2 / 16 * 10)
    assert out["prompt_tokens_per_query_test"] == pytest.approx(800 / 16 * 10)
    assert out["uncached_latency_measured_on"] == {"scored_this_run": 10, "cache_records": 6, "without_record": 4}
    assert out["test_candidates_from_cache"] == 10
    empty = cold_cost(Ledger(candidates=5, cache_hits=5).to_dict(), 1)
    assert empty["uncached_latency_per_query_s"] is None and empty["prompt_tokens_per_query_test"] is None


@pytest.mark.slow
def test_auc_and_average_precision_match_sklearn_with_ties():
    from sklearn.metrics import average_precision_score, roc_auc_score

    from memgate.eval.metrics import average_precision

    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(2, 40))
        y = rng.integers(0, 2, n).astype(bool)
        s = rng.integers(0, 5, n) / 4  # many ties
        if y.all() or not y.any():
            continue
        assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)


def test_evaluate_hook_writes_the_verifier_report(tmp_path, monkeypatch):
    """run_from_evaluate (the evaluate.py --verifier hook): dev split read from the data
    directory, the synthetic test source from the prepared list, verifiers.md written."""
    import json

    from memgate.contract.records import write_jsonl
    from memgate.studies.verifiers import study

    dev = tiny_source("dev", n_groups=3, seed=3).source
    split = tmp_path / "data" / "dev"
    write_jsonl(split / "memories.jsonl", [m.to_dict() for m in dev.memories])
    write_jsonl(split / "queries.jsonl", [q.to_dict() for q in dev.queries])
    write_jsonl(split / "labels.jsonl", [lab.to_dict() for labels in dev.labels.values() for lab in labels.values()])
    (tmp_path / "data" / "meta.json").write_text(json.dumps({"data_hash": "tiny-hash", "policy_rules": {"ok": {}}}))

    class FakeEncoder:
        def encode(self, texts, desc=""):
            rng = np.random.default_rng(len(texts))
            v = rng.normal(size=(len(texts), 8)).astype(np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

    monkeypatch.setattr(study, "load_config", lambda backend, path=None: {"backend": backend})
    monkeypatch.setattr(study, "build_verifier", lambda backend, config, data_hash=None: Scripted())
    test = tiny_source("synthetic_test", n_groups=4, seed=4)
    settings = EvalSettings(routes=["global_dense"], n_boot=50)
    block, timing = study.run_from_evaluate(["scripted"], {"dev": 5, "test": 7, "depth": 9}, [test],
                                            tmp_path / "data", FakeEncoder(), settings, None,
                                            ["global_dense"], tmp_path)
    assert block["subsample"]["dev_queries"] == 5 and block["subsample"]["test_queries"] == 7
    assert block["backends"]["scripted"]["calibration"]["p_inadmissible"]["data_hash"] == "tiny-hash"
    report = (tmp_path / "verifiers.md").read_text()
    assert "**5 dev**" in report and "**7 test**" in report and "`text_verifier_scripted_abstain`" in report
    assert "latency_per_query_s" in timing["scripted"] and "ledger" in timing["scripted"]
    # without synthetic data (a cases file) the study is skipped with a reason
    skipped, _ = study.run_from_evaluate(["scripted"], {}, [], None, FakeEncoder(), settings, None, [], tmp_path)
    assert "skipped" in skipped
