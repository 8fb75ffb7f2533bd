"""Metadata corruption (memgate.eval.corruption) and the sweep (memgate.eval.sweep): only route-visible
fields change, the scorer's truth never does, each channel changes its field at the requested
rate, rate 0 is the identity, draws are deterministic by seed; the sweep's clean figures are the
evaluation's and its summary follows its definition."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from memgate.contract.admissibility import PolicyRules, SupersessionScope
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext, route_verdict
from memgate.contract.sources import EvalSource, wrong_scope_or_error
from memgate.eval.corruption import (
    ALLOW_TAG,
    CHANNELS,
    DENY_TAG,
    SHARED_NAMESPACE,
    UNREADABLE_NAMESPACE,
    corrupt_source,
    corruption_rng,
    corruption_tag,
    eligible_indices,
    field_of,
)
from memgate.eval.evaluation import EvalSettings, PreparedSource, run_source
from memgate.eval.routes import ROUTE_SPECS, RouteRunner
from memgate.eval.sweep import largest_rate_beating, run_sweep

RULES = PolicyRules.from_dict({
    "ok": {},
    "deny_p": {"reason": "cross_domain", "deny": ["p"]},
    "only_p": {"reason": "purpose", "allow_only": ["p"]},
})
TAGS = (("ok",), ("deny_p",), ("only_p",), ("ok", "deny_p"), None, ("mystery",))
STATES = ("current", "current", "stale", "superseded", "forgotten", "unknown")
MEMORY_FIELDS = {"namespace": ("namespace",), "policy": ("policy_tags",),
                 "lifecycle": ("lifecycle_state", "supersession_scope"), "intent": ()}


def default_label(query: QueryContext, memory: MemoryRecord) -> PairLabel:
    """The generated data's rule (wrong scope), and unresolved for a query without an ACL."""
    if query.namespaces is None:
        return PairLabel(query.query_id, memory.memory_id, "unresolved", None, None, None)
    return wrong_scope_or_error(query, memory)


SCOPES = (SupersessionScope(subject="trip"), SupersessionScope(valid_from="2024-01", valid_to="2024-06"),
          SupersessionScope(subject="job", valid_from="2023-01"))


def synthetic_like(n_groups: int = 8, per_group: int = 40, queries_per_group: int = 6, seed: int = 0,
                   dim: int = 16) -> PreparedSource:
    """Personas with their own namespace, mixed tags and states (some scoped supersessions),
    explicit in-scope labels and the generated data's default rule (wrong scope) for the rest.
    Queries of odd groups search a smaller shared store; one query per group has no ACL."""
    rng = np.random.default_rng(seed)
    memories, queries, labels, anchors = [], [], {}, {}
    for g in range(n_groups):
        ns = f"persona{g}"
        mine = []
        for j in range(per_group):
            state = STATES[int(rng.integers(len(STATES)))]
            m = MemoryRecord(
                memory_id=f"g{g}m{j:03d}", text=f"persona {g} memory {j}",
                namespace=None if j % 17 == 16 else ns,
                policy_tags=TAGS[int(rng.integers(len(TAGS)))],
                lifecycle_state=state,
                supersession_scope=SCOPES[j % 3] if state == "superseded" and j % 2 else None,
                released_order=j, group_id=ns,
            )
            memories.append(m)
            mine.append(m)
        for k in range(queries_per_group):
            qid = f"g{g}q{k}"
            queries.append(QueryContext(
                query_id=qid, text=f"question {k} of persona {g}", principal=ns,
                namespaces=None if k == 5 else frozenset({ns}), purpose=("p", "r")[k % 2],
                intent=("current_state", "history", "unknown")[k % 3], group_id=ns,
                subject=("trip", "job", None)[k % 3], time=("2024-03", None, "2023-05", "2025-01")[k % 4],
            ))
            required = {m.memory_id for m in rng.choice(mine, size=2, replace=False)}
            labels[qid] = {}
            for m in mine:
                if m.namespace != ns:
                    continue
                req = m.memory_id in required
                labels[qid][m.memory_id] = PairLabel(
                    qid, m.memory_id, "required" if req else str(rng.choice(["supportive", "not_useful"])),
                    scope=True, policy=True if req else [True, False, None][int(rng.integers(3))],
                    lifecycle=True, policy_reasons=(),
                )
            anchors[qid] = [frozenset({mid}) for mid in sorted(required) if mid in labels[qid]]
    whole = np.arange(len(memories), dtype=np.int64)
    half = np.arange(0, len(memories), 2, dtype=np.int64)
    source = EvalSource(
        name="synthetic_like", memories=memories, queries=queries,
        pools={q.query_id: (half if int(q.query_id[1:].split("q")[0]) % 2 else whole) for q in queries},
        labels=labels, anchor_groups=anchors, policy_rules=RULES,
        default_label=default_label,
        query_meta={q.query_id: {"scenario": "x"} for q in queries},
    )
    M = rng.normal(size=(len(memories), dim)).astype(np.float32)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    Q = rng.normal(size=(len(queries), dim)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return PreparedSource(source, M, Q)


@pytest.fixture(scope="module")
def prepared() -> PreparedSource:
    return synthetic_like()


def corrupt(source: EvalSource, channel: str, rate: float, s: int = 0, seed: int = 0) -> EvalSource:
    return corrupt_source(source, channel, rate, corruption_rng(seed, channel, rate, s))


def _without(record, names) -> dict:
    d = dataclasses.asdict(record)
    for n in names:
        d.pop(n)
    return d


@pytest.mark.parametrize("channel", CHANNELS)
def test_only_route_visible_fields_change_and_the_truth_is_the_same(prepared, channel):
    clean = prepared.source
    bad = corrupt(clean, channel, 0.3)
    assert bad.labels is clean.labels
    assert bad.anchor_groups is clean.anchor_groups
    assert bad.query_meta is clean.query_meta
    assert bad.pools is clean.pools
    field = field_of(channel)
    names = MEMORY_FIELDS[field]
    for a, b in zip(clean.memories, bad.memories):
        assert _without(a, names) == _without(b, names)  # ids, texts, order, ... unchanged
    for a, b in zip(clean.queries, bad.queries):
        if channel == "namespace:false_allow":
            assert b.namespaces == (None if a.namespaces is None else a.namespaces | {SHARED_NAMESPACE})
            a, b = dataclasses.replace(a, namespaces=None), dataclasses.replace(b, namespaces=None)
        if field == "intent":
            a, b = dataclasses.replace(a, intent="unknown"), dataclasses.replace(b, intent="unknown")
        assert a == b
    # Every pair's scorer label (explicit or by the default rule) is the clean one.
    for q in clean.queries:
        for mid in (m.memory_id for m in clean.memories):
            assert bad.label(q.query_id, mid) == clean.label(q.query_id, mid)
    # And routes never see anything else: the view holds records only.
    assert not hasattr(bad.route_view(), "labels")


def _changed(clean: EvalSource, bad: EvalSource, field: str) -> list[int]:
    if field == "intent":
        return [i for i, (a, b) in enumerate(zip(clean.queries, bad.queries)) if a.intent != b.intent]
    names = MEMORY_FIELDS[field]
    return [i for i, (a, b) in enumerate(zip(clean.memories, bad.memories))
            if any(getattr(a, n) != getattr(b, n) for n in names)]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_each_channel_changes_its_field_at_the_requested_rate(prepared, channel, rate):
    clean = prepared.source
    field = field_of(channel)
    eligible = eligible_indices(clean, channel)
    assert len(eligible) >= 20, "the fixture must give every channel something to corrupt"
    changed = _changed(clean, corrupt(clean, channel, rate), field)
    assert set(changed) <= set(eligible)
    target = int(np.floor(rate * len(eligible) + 0.5))
    if channel.endswith(":swap"):
        # A chosen record keeps its value only when another chosen record had the same one.
        assert 0.5 * target <= len(changed) <= target
    else:
        assert len(changed) == target


def test_channels_do_what_their_names_say(prepared):
    clean = prepared.source
    purposes = {q.purpose for q in clean.queries}
    runner = lambda s: RouteRunner(s.route_view(), prepared.memory_vectors, prepared.query_vectors)  # noqa: E731

    deny = corrupt(clean, "namespace:false_deny", 1.0)
    assert {m.namespace for m in deny.memories} <= {UNREADABLE_NAMESPACE, None}
    assert all(runner(deny).run(qi, ROUTE_SPECS["namespace_dense"], 20).ranked_ids == []
               for qi in range(len(clean.queries)))
    allow = corrupt(clean, "namespace:false_allow", 1.0)
    r = runner(allow)
    for qi in range(3):  # every namespaced memory is readable by everyone: same as global minus None
        ns = r.run(qi, ROUTE_SPECS["namespace_dense"], 1000).ranked_ids
        glob = r.run(qi, ROUTE_SPECS["global_dense"], 1000).ranked_ids
        assert ns == [m for m in glob if allow.memories[allow.index_of[m]].namespace is not None]
    assert all(m.namespace is None for m in corrupt(clean, "namespace:missing", 1.0).memories)

    fa = corrupt(clean, "policy:false_allow", 1.0)
    for m in fa.memories:
        assert all(fa.policy_rules.evaluate(m.policy_tags, p)[0] is True for p in purposes)
    fd = corrupt(clean, "policy:false_deny", 1.0)
    for m in fd.memories:
        values = {fd.policy_rules.evaluate(m.policy_tags, p)[0] for p in purposes}
        assert values == {False} and DENY_TAG in m.policy_tags
    assert all(m.policy_tags is None for m in corrupt(clean, "policy:missing", 1.0).memories)
    assert ALLOW_TAG not in clean.policy_rules.rules  # the clean rules are not touched

    assert {m.lifecycle_state for m in corrupt(clean, "lifecycle:false_deny", 1.0).memories} \
        == {"superseded", "stale", "forgotten", "unknown"}
    assert {m.lifecycle_state for m in corrupt(clean, "lifecycle:false_allow", 1.0).memories} \
        == {"current", "unknown"}
    assert {m.lifecycle_state for m in corrupt(clean, "lifecycle:missing", 1.0).memories} == {"unknown"}
    flipped = corrupt(clean, "intent:flip", 1.0)
    flip = {"current_state": "history", "history": "current_state", "unknown": "unknown"}
    assert [q.intent for q in flipped.queries] == [flip[q.intent] for q in clean.queries]
    # A Kleene route sees the flip: the verdict of a superseded memory changes with the intent.
    sup = next(m for m in clean.memories if m.lifecycle_state == "superseded")
    q0 = next(i for i, q in enumerate(clean.queries) if q.intent == "current_state")
    assert route_verdict(sup, clean.queries[q0], RULES).lifecycle is False
    assert route_verdict(sup, flipped.queries[q0], RULES).lifecycle is True


@pytest.mark.parametrize("channel", CHANNELS)
def test_rate_zero_is_the_identity(prepared, channel):
    clean = prepared.source
    same = corrupt(clean, channel, 0.0)
    assert all(a is b for a, b in zip(clean.memories, same.memories))
    assert all(a is b for a, b in zip(clean.queries, same.queries))
    assert same.policy_rules is clean.policy_rules


@pytest.mark.parametrize("channel", ["namespace:swap", "policy:false_deny", "lifecycle:missing", "intent:flip"])
def test_deterministic_by_seed(prepared, channel):
    clean = prepared.source
    a, b = corrupt(clean, channel, 0.2, s=3), corrupt(clean, channel, 0.2, s=3)
    assert a.memories == b.memories and a.queries == b.queries
    c = corrupt(clean, channel, 0.2, s=4)
    assert (c.memories, c.queries) != (a.memories, a.queries)
    d = corrupt(clean, channel, 0.2, s=3, seed=1)  # the run seed enters too
    assert (d.memories, d.queries) != (a.memories, a.queries)


def test_corruption_tag_format():
    assert corruption_tag("policy:false_deny", 0.05, 3) == "policy:false_deny@0.05#3"
    assert corruption_tag("intent:flip", 0.1, 0) == "intent:flip@0.1#0"
    with pytest.raises(ValueError, match="unknown corruption channel"):
        field_of("policy:bogus")


# --------------------------------------------------------------------------- sweep


def test_largest_rate_beating_is_a_tested_grid_point():
    rates = [0.0, 0.1, 0.2, 0.3]
    assert largest_rate_beating(rates, [0.1, 0.2, 0.6, 0.3], 0.5) == 0.1  # stops at the first miss
    assert largest_rate_beating(rates, [0.1, 0.2, 0.3, 0.4], 0.5) == 0.3
    assert largest_rate_beating(rates, [0.5, 0.1, 0.1, 0.1], 0.5) is None  # a tie does not beat
    assert largest_rate_beating(rates, [0.1, None, 0.1, 0.1], 0.5) == 0.0


def test_sweep_clean_figures_match_the_evaluation_and_rows_are_tagged(prepared, tmp_path):
    small = synthetic_like(n_groups=4, per_group=20, queries_per_group=3, seed=1)
    routes = ["global_dense", "namespace_dense", "current_only", "kleene_gate", "kleene_gate_fail_closed"]
    settings = EvalSettings(routes=routes, budgets=(20,), n_boot=10)
    channels = ["namespace:false_deny", "policy:false_allow", "intent:flip"]
    out = tmp_path / "routes_sweep.jsonl"
    sweep = run_sweep([small], settings, None, out, seeds=2, rates=[0.1, 0.5], channels=channels)
    res = sweep["sources"]["synthetic_like"]
    clean = run_source(small, settings)
    for route in routes:
        values = [q["l_rc@20"] for q in clean.per_query[route] if q["l_rc@20"] is not None]
        assert res["clean_l_rc@20"][route] == pytest.approx(np.mean(values), abs=1e-9)
    assert sweep["rates"] == [0.0, 0.1, 0.5]
    ns = res["channels"]["namespace:false_deny"]
    assert ns["baseline"] == "global_dense"
    assert set(ns["routes"]) == {"namespace_dense", "current_only", "kleene_gate", "kleene_gate_fail_closed"}
    assert set(res["channels"]["policy:false_allow"]["routes"]) == {"kleene_gate", "kleene_gate_fail_closed"}
    assert res["channels"]["intent:flip"]["baseline"] == "namespace_dense"
    for _channel, entry in res["channels"].items():
        base = entry["baseline_l_rc@20"]
        for route, curve in entry["routes"].items():
            assert curve["l_rc@20"][0] == res["clean_l_rc@20"][route]
            assert curve["largest_rate_beating_baseline"] == largest_rate_beating(
                sweep["rates"], curve["l_rc@20"], base)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    n_q = len(small.source.queries)
    # namespace: 4 routes, policy and intent: 2 routes each; 2 rates x seed 0; one row per query.
    assert len(rows) == (4 + 2 + 2) * 2 * 1 * n_q
    tags = {r["corruption"] for r in rows}
    assert "namespace:false_deny@0.5#0" in tags and "intent:flip@0.1#0" in tags
    assert not any(t.endswith("#1") for t in tags)  # rows="first_seed" (the default)
    # Per (tag, route) the rows' mean l_rc is the seed value the summary averaged.
    sel = [r["l_rc"] for r in rows if r["corruption"] == "policy:false_allow@0.5#0"
           and r["route"] == "kleene_gate" and r["l_rc"] is not None]
    by_seed = res["channels"]["policy:false_allow"]["routes"]["kleene_gate"]["l_rc@20_by_seed"]
    assert np.mean(sel) == pytest.approx(by_seed[2][0])
    from memgate.eval.report.plots import plot_sweep

    assert plot_sweep(tmp_path, sweep) == [tmp_path / "corruption_synthetic_like.png"]
    assert (tmp_path / "corruption_synthetic_like.png").stat().st_size > 10_000


@pytest.mark.parametrize("channel", CHANNELS)
def test_sweep_equals_the_evaluation_on_corrupted_sources(channel):
    """The sweep's shortcuts (vectorised verdicts, re-ranking only affected queries) give exactly
    what run_source gives on each corrupted source."""
    small = synthetic_like(n_groups=4, per_group=24, queries_per_group=6, seed=2)
    routes = ["namespace_dense", "current_only", "kleene_gate", "kleene_gate_fail_closed", "post_filter_20"]
    settings = EvalSettings(routes=routes + ["global_dense"], budgets=(20,), n_boot=10, seed=5)
    rates = [0.1, 0.5]
    sweep = run_sweep([small], settings, None, None, seeds=2, rates=rates, channels=[channel],
                      routes=routes)
    entry = sweep["sources"]["synthetic_like"]["channels"][channel]
    assert entry["routes"], "some route must read every field"
    for ri, rate in enumerate(rates, start=1):
        for s in range(2):
            bad = corrupt_source(small.source, channel, rate, corruption_rng(5, channel, rate, s))
            result = run_source(PreparedSource(bad, small.memory_vectors, small.query_vectors),
                                dataclasses.replace(settings, routes=list(entry["routes"])))
            for route, curve in entry["routes"].items():
                values = [q["l_rc@20"] for q in result.per_query[route] if q["l_rc@20"] is not None]
                assert curve["l_rc@20_by_seed"][ri][s] == pytest.approx(np.mean(values), abs=1e-9), \
                    (route, rate, s)
    assert entry["records_changed"][2] > 0


def test_sweep_marks_every_changed_support_as_affected(prepared):
    from memgate.eval.sweep import sweep_source

    settings = EvalSettings(routes=["global_dense"], budgets=(20,))
    sweep_source(prepared, settings, None, seeds=1, rates=[0.05, 0.3], rows="none", verify=True,
                 routes=["namespace_dense", "current_only", "kleene_gate", "kleene_gate_fail_closed",
                         "post_filter_20"])


def _reference_support(view, qi: int, spec) -> np.ndarray:
    """The support rule written out pair by pair with ``route_verdict`` (what memgate.eval.candidate_support
    vectorises): namespace routes keep readable namespaces, current_only keeps current and
    unknown states, Kleene routes drop a = False (and a = None when fail-closed)."""
    query = view.queries[qi]
    keep = []
    for j, mi in enumerate(view.pools[query.query_id]):
        memory = view.memories[mi]
        if spec.namespace and (query.namespaces is None or memory.namespace not in query.namespaces):
            continue
        if spec.current_only and memory.lifecycle_state not in ("current", "unknown"):
            continue
        if spec.kleene:
            a = route_verdict(memory, query, view.policy_rules).admissible
            if a is False or (spec.kleene == "closed" and a is None):
                continue
        keep.append(j)
    return np.array(keep, dtype=np.int64)


@pytest.mark.parametrize("channel", [None, *CHANNELS])
def test_route_support_is_route_verdict_pair_by_pair(prepared, channel):
    """RouteRunner's vectorised support equals the per-pair route_verdict rule, on clean metadata
    and on every corruption channel (which makes much of the store readable or unresolved)."""
    source = prepared.source if channel is None else corrupt(prepared.source, channel, 0.3)
    runner = RouteRunner(source.route_view(), prepared.memory_vectors, prepared.query_vectors)
    specs = [s for s in ROUTE_SPECS.values() if s.namespace or s.kleene or s.current_only]
    for spec in specs:
        for qi in range(len(source.queries)):
            expected = _reference_support(source.route_view(), qi, spec)
            np.testing.assert_array_equal(runner.support(qi, spec), expected, err_msg=f"{spec.name} {qi}")


def test_the_sweep_report_table_names_each_channel_and_route():
    from memgate.eval.sweep import SUMMARY_KEY, sweep_report_lines

    sweep = {"seeds": 2, "rates": [0.0, 0.1], "definition": "largest rate", "sources": {"toy": {
        "channels": {"namespace": {"routes": {"learned_gate": {SUMMARY_KEY: 0.1}}},
                     "policy": {"routes": {"learned_gate": {SUMMARY_KEY: None}}}},
        "routes": ["learned_gate", "global_dense"],
        "clean_l_rc@20": {"learned_gate": 0.25, "global_dense": None}}}}
    lines = sweep_report_lines(sweep)
    i = lines.index("| route | clean L_RC@20 | `namespace` | `policy` |")
    assert lines[i + 1:i + 4] == ["|---|---|---|---|", "| `learned_gate` | 0.250 | 0.1 | none |",
                                  "| `global_dense` | — | n/a | n/a |"]
