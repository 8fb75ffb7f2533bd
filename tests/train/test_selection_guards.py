"""The real-data selection guards (issue 33): the GateMem-select suppression guard and the
hybrid-vs-kleene_gate route guard on real rows, the natural-source text-risk guard and its exact
cluster-bootstrap AUC, the paired CI of the LoCoMo drop, and the selection rule (ties within the CI
to the earlier step, step 0 the fallback)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from memgate.model.gate import GateOutput, MemGate, MemGateConfig
from memgate.train.selection import SelectionGuards, route_guard, suppression_guard, two_level_paired_ci


class CosineFunctionGate(nn.Module):
    """A hand-built "gate" whose gated score is a fixed function of the cosine."""

    def __init__(self, score_of_cos):
        super().__init__()
        self.score_of_cos = score_of_cos

    def forward(self, q, V):
        ref = (nn.functional.normalize(q, dim=-1).unsqueeze(1) * nn.functional.normalize(V, dim=-1)).sum(-1)
        return GateOutput(score=self.score_of_cos(ref), mask=torch.ones_like(V), reference=ref)


@pytest.fixture(scope="module")
def gatemem_select():
    from memgate.datasets.real.gatemem import build_gatemem_source
    from memgate.datasets.real.splits import make_real_splits
    from memgate.datasets.real.testing import require_real_data
    from memgate.eval.engine import prepare
    from memgate.model.encoder import Encoder, EncoderConfig

    root = require_real_data()
    episodes = make_real_splits(root)["gatemem"]["select"][:2]
    source = build_gatemem_source(root, episodes, part="select", purpose="selection")
    return prepare(source, Encoder(EncoderConfig()))


class SuppressSomeGate(nn.Module):
    """A hand-built "gate": the plain cosine, minus 0.2 for the (query, memory) vector pairs it
    was given (a turn can be one checkpoint's anchor and another's protected turn)."""

    def __init__(self, q: np.ndarray, v: np.ndarray):
        super().__init__()
        self.targets = {a.tobytes() + b.tobytes() for a, b in zip(q, v)}

    def forward(self, q, V):
        ref = (nn.functional.normalize(q, dim=-1).unsqueeze(1) * nn.functional.normalize(V, dim=-1)).sum(-1)
        hit = torch.tensor([[q[i].numpy().tobytes() + v.numpy().tobytes() in self.targets for v in row]
                            for i, row in enumerate(V)])
        return GateOutput(score=ref - 0.2 * hit, mask=torch.ones_like(V), reference=ref)


def test_gatemem_guard_rejects_an_inverted_gate(gatemem_select):
    from memgate.eval.transfer import transfer_pairs

    rows = transfer_pairs(gatemem_select.source)
    q_index = {q.query_id: i for i, q in enumerate(gatemem_select.source.queries)}
    qv = gatemem_select.query_vectors[[q_index[x] for x in rows["query_ids"]]]
    mv = gatemem_select.memory_vectors[rows["memory_index"]]
    labels = np.asarray(rows["labels"])
    guard = suppression_guard(gatemem_select)
    # inverted: suppresses the anchors (what the query needs) and keeps the protected turns
    inverted = guard(SuppressSomeGate(qv[~labels], mv[~labels]))
    assert inverted["rows"] > 50 and 0 < labels.mean() < 1
    assert inverted["suppression_auc"] < 0.1 and inverted["passed"] is False
    # the right way round: suppresses the protected turns
    right = guard(SuppressSomeGate(qv[labels], mv[labels]))
    assert right["suppression_auc"] > 0.9 and right["passed"] is True
    # a gate that is a function of the cosine alone ranks its suppression like 1 - cos; the guard
    # compares with 0.5 (no inversion), the 1 - cos AUC is recorded beside it
    as_cos = guard(CosineFunctionGate(lambda c: c - 0.5 * (1 - c)))
    assert as_cos["suppression_auc"] == pytest.approx(as_cos["one_minus_cos_auc"], abs=1e-9)
    assert as_cos["passed"] is (as_cos["suppression_auc"] >= 0.5) and as_cos["threshold"] == 0.5


def test_selection_guards_pass_only_when_every_guard_passes():
    calls = []

    def make(name, passed):
        def guard(gate):
            calls.append(name)
            return {"passed": passed}
        return guard

    guards = SelectionGuards({"locomo": make("locomo", True), "gatemem": make("gatemem", False)})
    result = guards(object())
    assert calls == ["locomo", "gatemem"]  # every guard, once, at every validation point
    assert result["passed"] is False and result["locomo"] == {"guard": "locomo", "passed": True}
    assert guards.names == ("locomo", "gatemem") and not SelectionGuards({})


def anti_cosine_gate(dim: int) -> MemGate:
    """A real MemGate whose mask keeps only the dimensions where q_i v_i <= 0, so its gated score
    ranks the least similar memories first: what a gate that undoes the ranking looks like."""
    gate = MemGate(MemGateConfig(dim=dim, hidden=dim, n_layers=1, activation="relu"))
    with torch.no_grad():
        gate.layers[0].weight.zero_()
        gate.layers[0].weight[:, 2 * dim:] = 1000.0 * torch.eye(dim)  # h = relu(1000 q*v)
        gate.layers[0].bias.zero_()
        gate.head.weight.copy_(-1000.0 * torch.eye(dim))
        gate.head.bias.fill_(4.0)
    return gate.eval()


def test_route_guard_passes_the_near_identity_gate_and_fails_one_that_undoes_the_ranking(gatemem_select):
    guard = route_guard(gatemem_select, k=20, margin=0.01, rerank_depth=200, n_boot=200)
    dim = gatemem_select.memory_vectors.shape[1]
    near_identity = guard(MemGate(MemGateConfig(dim=dim)).eval())  # step 0: g ~ 0.98 everywhere
    assert near_identity["passed"] is True and near_identity["baseline"] == "kleene_gate"
    assert abs(near_identity["diff:recall_required@20"]["value"]) <= 0.01
    assert near_identity["diff:recall_required@20"]["ci"][0] is not None
    bad = guard(anti_cosine_gate(dim))
    assert bad["passed"] is False and bad["slack"] < 0
    assert bad["diff:recall_required@20"]["value"] < -0.01 and not bad["diff:recall_required@20"]["passed"]


# --------------------------------------------------------------------------- text risk


def _cells(rng, n_clusters=40, per=4):
    from memgate.eval.text_risk import Cell

    cells = []
    for source, category in (("phrasing_cross_domain", "cross_domain"), ("phrasing_sycophancy", "sycophancy"),
                             ("phrasing_sycophancy_bio", "sycophancy"), ("phrasing_tool_drift", "tool_drift"),
                             ("phrasing_jailbreak", "jailbreak")):
        for variant in ("natural", "matched"):
            n = n_clusters * per
            q = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(n, 8)).astype(np.float32)), dim=-1)
            v = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(n, 8)).astype(np.float32)), dim=-1)
            labels = np.tile([True, False], n // 2)
            cells.append(Cell(source, category, variant, q, v, (q * v).sum(-1).double().numpy(), labels,
                              np.repeat(np.arange(n_clusters), per), n_clusters))
    return cells


class LabelGate(nn.Module):
    """The cosine, minus ``push`` on the rows whose (q, v) are in ``targets``."""

    def __init__(self, targets, push):
        super().__init__()
        self.targets, self.push = targets, push

    def forward(self, q, V):
        ref = (nn.functional.normalize(q, dim=-1).unsqueeze(1) * nn.functional.normalize(V, dim=-1)).sum(-1)
        hit = torch.tensor([[q[i].numpy().tobytes() + v.numpy().tobytes() in self.targets for v in row]
                            for i, row in enumerate(V)])
        return GateOutput(score=ref - self.push * hit, mask=torch.ones_like(V), reference=ref)


def test_cluster_auc_is_the_pooled_auc_under_cluster_weights():
    from memgate.eval.metrics import rank_auc
    from memgate.eval.text_risk import ClusterAUC
    from memgate.eval.transfer import _EpisodeAUC

    rng = np.random.default_rng(1)
    scores = np.round(rng.normal(size=300), 1)  # ties count 1/2
    labels = rng.random(300) < 0.4
    cluster = rng.integers(0, 25, size=300)
    auc = ClusterAUC(scores, labels, cluster, 25)
    assert auc.value() == pytest.approx(rank_auc(scores, labels), abs=1e-12)
    w = rng.multinomial(25, np.full(25, 1 / 25), size=50).astype(float)
    assert np.allclose(auc(w), _EpisodeAUC(scores, labels, cluster, 25)(w), atol=1e-12)


def test_text_risk_guard_fails_an_inversion_and_passes_a_gate_that_reads_the_risk():
    from memgate.eval.text_risk import TextRiskPanel
    from memgate.train.selection import TextRiskGuard

    rng = np.random.default_rng(0)
    cells = _cells(rng)
    guard = TextRiskGuard(TextRiskPanel(cells, n_boot=300), min_auc=0.5)
    pairs = lambda keep: {a.numpy().tobytes() + b.numpy().tobytes()  # noqa: E731
                          for c in cells for a, b, y in zip(c.q, c.v, c.labels) if y == keep}
    reads = guard(LabelGate(pairs(True), 0.3))  # pushes the traps down
    assert reads["passed"] is True and reads["macro"]["value"] > 0.1 and reads["macro"]["ci"][0] > 0
    assert set(reads["categories"]) == {"cross_domain", "sycophancy", "tool_drift", "jailbreak"}
    assert reads["sources"]["phrasing_sycophancy"]["value"] == pytest.approx(
        np.mean([reads["cells"][f"phrasing_sycophancy/{v}"]["gated_minus_cos"]["value"] for v in ("natural", "matched")]))
    assert reads["macro"]["value"] == pytest.approx(np.mean([c["value"] for c in reads["categories"].values()]))
    inverted = guard(LabelGate(pairs(False), 0.3))  # pushes the controls down
    assert inverted["passed"] is False and inverted["min_suppression_auc"] < 0.5
    assert len(inverted["failed_cells"]) == 10 and inverted["macro"]["value"] < 0
    cosine = guard(CosineFunctionGate(lambda c: c))  # adds nothing
    assert cosine["macro"]["value"] == pytest.approx(0.0, abs=1e-12)


def test_benign_anchor_sets_hold_the_beneficial_rows_and_raise_the_drop_threshold():
    """The drop threshold's real anchors: each natural source's beneficial rows (natural variant);
    a gate that suppresses them harder than the synthetic dev split allows gets a higher threshold."""
    from memgate.eval.calibration import calibrate_threshold, with_anchor_floors
    from memgate.eval.drop_calibration import gate_suppression
    from memgate.eval.text_risk import TextRiskPanel
    from memgate.train.selection import TextRiskGuard

    cells = _cells(np.random.default_rng(1))
    sets = SelectionGuards({"text_risk": TextRiskGuard(TextRiskPanel(cells, n_boot=10))}).benign_anchor_sets()
    assert sorted(sets) == sorted(f"{c.source}/beneficial" for c in cells if c.variant == "natural")
    q, v = sets["phrasing_tool_drift/beneficial"]
    assert len(q) == len(v) == 80  # the 160 rows' controls
    gate = LabelGate({a.tobytes() + b.tobytes() for a, b in zip(q, v)}, 0.3)  # suppresses benign memories
    scores = {name: gate_suppression(gate)(*pair) for name, pair in sets.items()}
    dev = calibrate_threshold([0.2, 0.1, 0.0], [False, True, True], [False, True, True], max_anchor_drop=0.01)
    raised = with_anchor_floors(dev, scores, [0.2, 0.1, 0.0], [False, True, True], [False, True, True])
    assert dev.threshold == pytest.approx(0.2) and raised.threshold > 0.3 - 1e-6
    assert raised.anchor_floors["phrasing_tool_drift/beneficial"]["drop_rate"] <= 0.01


# --------------------------------------------------------------------------- the selection rule


def _drive(selection, points):
    """Feed ``selection`` validation points (step, macro, reps, passed), as Lightning would."""
    from types import SimpleNamespace

    gate = MemGate(MemGateConfig(dim=8))
    for step, macro, reps, passed in points:
        result = {"passed": passed, "text_risk": {"guard": "text_risk", "passed": passed,
                                                  "macro": {"value": macro, "ci": [macro - 0.01, macro + 0.01]},
                                                  "_macro_reps": reps}}
        selection.guard = lambda g, result=result: result
        trainer = SimpleNamespace(global_step=step, current_epoch=0, sanity_checking=False)
        module = SimpleNamespace(last_dev={"pref_acc_gated": 0.5 + step / 1000, "pref_acc_reference": 0.5}, gate=gate)
        selection.on_validation_end(trainer, module)
    return selection.finalize()


def test_selection_ties_within_the_ci_go_to_the_earlier_step_and_step_0_is_the_fallback():
    from memgate.train.select_step import BestGateSelection

    guards = SelectionGuards({"text_risk": lambda g: {"passed": True}})
    rng = np.random.default_rng(0)
    noise, other = rng.normal(0, 0.01, size=(2, 1000))
    # step 100 is best but within the paired CI of step 50; both beat step 0 beyond it
    best = _drive(BestGateSelection(guards, "text_risk_macro"),
                  [(0, 0.0, noise * 0.1, True), (50, 0.03, 0.03 + noise, True), (100, 0.035, 0.035 + other, True),
                   (150, 0.08, 0.08 + noise, False)])  # the best figure, but it fails a guard
    assert best["step"] == 50 and best["tie_with_best"]["best_step"] == 100 and not best["fallback"]
    # nothing beats step 0 beyond the CI: step 0 ships, not as a fallback
    sel = BestGateSelection(guards, "text_risk_macro")
    best = _drive(sel, [(0, 0.0, noise, True), (50, 0.005, 0.005 + other, True)])
    assert best["step"] == 0 and not best["fallback"] and not best["trained"]
    assert [e["selected"] for e in sel.history] == [True, False]  # only the exported point is marked
    # no point passes: the step-0 weights ship as the fallback
    sel = BestGateSelection(guards, "text_risk_macro")
    best = _drive(sel, [(0, 0.0, noise, False), (50, 0.05, 0.05 + noise, False)])
    assert best["step"] == 0 and best["fallback"] and sel.best_state is not None
    from memgate.train.run import step_zero_line

    assert "no trained validation point passed every selection guard" in step_zero_line(sel, guards)
    with pytest.raises(ValueError, match="text_risk guard"):
        BestGateSelection(SelectionGuards({"locomo": lambda g: {"passed": True}}), "text_risk_macro")


def test_two_level_paired_ci():
    groups = ["a"] * 30 + ["b"] * 30
    assert two_level_paired_ci(np.full(60, 0.02), groups) == pytest.approx([0.02, 0.02])
    rng = np.random.default_rng(0)
    diff = rng.normal(0.0, 0.1, size=60)
    lo, hi = two_level_paired_ci(diff, groups, n_boot=4000)
    assert lo < diff.mean() < hi and hi - lo < 0.2
    with_nan = np.concatenate([diff, [np.nan, np.nan]])
    assert two_level_paired_ci(with_nan, groups + ["c", "c"], n_boot=4000) == [lo, hi]


def test_the_text_risk_panel_reads_natural_select_parts_with_their_held_out_family():
    """A natural source enters the panel as one (matched-by-construction) variant whose rows hold
    the select part's held-out topic family, so the guard and the figure see an unseen topic."""
    from memgate.datasets.real.natural import eval_rows as natural_rows
    from memgate.eval.text_risk import CATEGORY, TextRiskPanel, build_cells
    from tests.fakes import HashEncoder

    cells = build_cells(HashEncoder(), "select", "selection", sources=("natural_tool_drift",))
    assert [(c.source, c.category, c.variant) for c in cells] == [("natural_tool_drift", "tool_drift", "natural")]
    rows = natural_rows("natural_tool_drift", "select", purpose="selection")
    assert len(cells[0].labels) == len(rows["labels"]) and sum(rows["heldout"]) >= 300
    assert CATEGORY["natural_injection"] == "jailbreak"
    panel = TextRiskPanel(cells, n_boot=20)
    traps = {a.numpy().tobytes() + b.numpy().tobytes() for a, b, y in zip(cells[0].q, cells[0].v, cells[0].labels) if y}
    figures = panel.figures(panel.scores(LabelGate(traps, 0.3)))
    assert set(figures["categories"]) == {"tool_drift"} and figures["macro"]["value"] > 0
    with pytest.raises(ValueError, match="natural_weather"):
        build_cells(HashEncoder(), "select", "selection", sources=("natural_weather",))
