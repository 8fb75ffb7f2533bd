"""Training a gate with a risk head (issue 44): the calibration loss, the mask diagnostics, the
guard-aware calibration of the risk scale a, the risk head's ECE, and a tiny run end to end."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from itertools import islice

import numpy as np
import pytest
import torch

from memgate.contract.config import REPO_ROOT, ConfigError, load_config, resolve_path, to_dict
from memgate.eval.calibration_risk import plot_reliability, reliability_bins, risk_calibration
from memgate.eval.metrics import ece
from memgate.model.gate import MemGate, MemGateConfig
from memgate.train.config import ADDED_SINCE_RELEASE, NATURAL_SOURCES, PHRASING_SOURCES, TrainConfig
from memgate.train.objective import LossConfig, list_preservation_loss, mask_diagnostics, preference_loss
from memgate.train.risk_scale import calibrate_risk_scale, failed_guards

D = 16


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def _risk_gate(seed: int = 0) -> MemGate:
    torch.manual_seed(seed)
    gate = MemGate(MemGateConfig(dim=D, hidden=12, score_form="mask_risk"))
    with torch.no_grad():
        assert gate.risk_head is not None
        gate.risk_head.weight.normal_(0.0, 0.5)
    return gate


def test_the_calibration_loss_labels_negatives_1_and_positives_0():
    gate = _risk_gate()
    g = torch.Generator().manual_seed(1)
    q, vp, vn = (_unit(torch.randn(8, *s, generator=g)) for s in ((D,), (D,), (3, D)))
    base, diag0 = preference_loss(LossConfig(), gate, q, vp, vn)
    losses, diag = preference_loss(LossConfig(risk_weight=2.0), gate, q, vp, vn)
    out = gate(q, torch.cat([vp.unsqueeze(1), vn], dim=1))
    assert out.risk_logit is not None
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    expected = 0.5 * (bce(out.risk_logit[:, 0], torch.zeros(8), reduction="none")
                      + bce(out.risk_logit[:, 1:], torch.ones(8, 3), reduction="none").mean(dim=1))
    assert torch.allclose(losses - base, 2.0 * expected, atol=1e-6)
    assert "loss_risk_bce" in diag and "loss_risk_bce" not in diag0
    assert {"risk_pos_mean", "risk_neg_mean", "risk_scale"} <= set(diag)
    losses.mean().backward()  # the risk head and the scale get gradients
    assert gate.risk_head is not None and gate.risk_head.weight.grad is not None
    assert gate.risk_scale_raw is not None and gate.risk_scale_raw.grad is not None
    items = _unit(torch.randn(4, 5, D, generator=g))
    kept, _ = list_preservation_loss(LossConfig(), gate, q[:4], items)
    with_risk, list_diag = list_preservation_loss(LossConfig(risk_weight=1.0), gate, q[:4], items)
    logits = gate(q[:4], items).risk_logit
    assert logits is not None
    assert torch.allclose(with_risk - kept, bce(logits, torch.zeros(4, 5), reduction="none").mean(dim=1), atol=1e-6)
    assert "loss_list_risk_bce" in list_diag


def test_the_mask_diagnostics_read_the_uniform_share_and_the_alignment():
    g = torch.Generator().manual_seed(2)
    q, V = _unit(torch.randn(6, D, generator=g)), _unit(torch.randn(6, 3, D, generator=g))
    uniform = mask_diagnostics(q, V, torch.full((6, 3, D), 0.8))
    assert uniform["mask_uniform_share"] == pytest.approx(1.0)
    cos = (q.unsqueeze(1) * V).sum(-1, keepdim=True)
    contribution = q.unsqueeze(1) * V - cos * V.pow(2)
    aligned = mask_diagnostics(q, V, 0.9 - 0.1 * contribution)  # 1 - g = 0.1 + 0.1 c: correlation 1
    assert aligned["mask_alignment_pos"] == pytest.approx(1.0, abs=1e-5)
    assert aligned["mask_alignment_neg"] == pytest.approx(1.0, abs=1e-5)
    assert 0.0 < aligned["mask_uniform_share"] < 1.0
    opposed = mask_diagnostics(q, V, 0.9 + 0.1 * contribution)
    assert opposed["mask_alignment_neg"] == pytest.approx(-1.0, abs=1e-5)
    # padded negatives are left out
    pad = torch.tensor([[True, False]] * 6)
    part = mask_diagnostics(q, V, torch.cat([0.9 - 0.1 * contribution[:, :2], torch.full((6, 1, D), 0.8)], 1), pad)
    assert part["mask_alignment_neg"] == pytest.approx(1.0, abs=1e-5)


def test_the_risk_scale_is_the_largest_of_the_grid_at_which_every_guard_passes():
    gate = _risk_gate()
    learned = float(gate.risk_scale().detach())
    calls: list[float] = []

    def guard(g: MemGate) -> dict:  # the route guard binds above 0.4 of the learned a
        a = float(g.risk_scale().detach())
        calls.append(a)
        ok = a <= 0.4 * learned + 1e-9
        return {"passed": ok, "gatemem_routes": {"passed": ok}, "locomo": {"passed": True}}

    result, record = calibrate_risk_scale(gate, guard, (1.0, 0.75, 0.5, 0.25, 0.0))
    assert result["passed"] and record["multiplier"] == 0.25 and record["passed"]
    assert record["calibrated"] == pytest.approx(0.25 * learned)
    assert [t["multiplier"] for t in record["tried"]] == [1.0, 0.75, 0.5, 0.25]
    assert record["tried"][0]["failed"] == ["gatemem_routes"]
    assert float(gate.risk_scale().detach()) == pytest.approx(0.25 * learned)  # left at the chosen factor
    assert failed_guards({"passed": False, "a": {"passed": False}, "b": {"passed": True}}) == ["a"]
    # nothing passes: judged at the learned a
    _, none = calibrate_risk_scale(gate, lambda g: {"passed": False, "x": {"passed": False}}, (0.5, 0.25))
    assert none["multiplier"] == 1.0 and none["passed"] is False
    assert float(gate.risk_scale().detach()) == pytest.approx(learned)
    with pytest.raises(ValueError, match="risk head"):
        calibrate_risk_scale(MemGate(MemGateConfig(dim=D, hidden=4)), guard, (1.0,))


def test_the_risk_calibration_uses_the_one_ece_and_draws_the_reliability_plot(tmp_path):
    gate = _risk_gate(3)
    g = torch.Generator().manual_seed(4)
    q, v = _unit(torch.randn(300, D, generator=g)).numpy(), _unit(torch.randn(300, D, generator=g)).numpy()
    with torch.no_grad():
        risk = gate(torch.from_numpy(q), torch.from_numpy(v).unsqueeze(1)).risk
    assert risk is not None
    p = risk[:, 0].double().numpy()
    labels = np.random.default_rng(0).random(300) < p  # labels drawn from the risk: well calibrated
    out = risk_calibration(gate, {"drawn": (q, v, labels), "benign": (q[:50], v[:50], np.zeros(50, bool))})
    assert out["sets"]["drawn"]["ece"] == pytest.approx(ece(labels, p))
    assert out["sets"]["benign"]["ece"] == pytest.approx(float(p[:50].mean()))
    assert out["pooled"]["n"] == 350 and out["pooled"]["positives"] == int(labels.sum())
    bins = reliability_bins(labels, p)
    assert sum(b["n"] for b in bins) == 300 and len(bins) == 10
    assert plot_reliability(tmp_path / "r.png", out).stat().st_size > 5_000


def test_the_new_keys_keep_the_release_behaviour_and_clash_loudly():
    default = to_dict(load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml"))
    for dotted, keeps in ADDED_SINCE_RELEASE.items():
        section, key = dotted.split(".")
        assert default[section][key] == keeps, dotted
    assert default["gate"]["score_form"] == "mask_risk"  # issue 44's release
    assert set(default["selection"]["text_risk_sources"]) == set(PHRASING_SOURCES) | set(NATURAL_SOURCES)
    with pytest.raises(ConfigError, match="loss.risk_weight"):
        load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", ["gate.score_form=mask", "loss.risk_weight=0.5"])
    with pytest.raises(ConfigError, match="risk_scale_grid"):
        load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", ["selection.risk_scale_grid=[]"])
    with pytest.raises(ConfigError, match="gate.score_form"):
        load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", ["gate.score_form=risk"])


def test_a_tiny_mask_risk_run_exports_its_risk_head_and_records_the_diagnostics(tmp_path):
    from memgate.datasets.user_triples import load_triples
    from memgate.train.workbench import train_on_triples

    def head(name: str, n: int):
        src, dst = REPO_ROOT / "examples/triples" / name, tmp_path / name
        with open(src) as handle:
            dst.write_text("".join(islice(handle, n)))
        return load_triples(dst)

    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        f"export.runs_dir={tmp_path / 'runs'}", f"encoder.cache_dir={tmp_path / 'cache'}", "trainer.progress_bar=false",
        "trainer.logger=none", "gate.score_form=mask_risk", "gate.center_mask=true", "loss.risk_weight=0.5",
        "gate.hidden=32", "optim.batch_size=16", "optim.max_steps=6", "optim.warmup_steps=1", "optim.lr=0.01",
        "trainer.val_check_interval=1.0"])
    config = replace(config, optim=replace(config.optim, max_epochs=3))
    summary = train_on_triples(head("train.jsonl", 48), head("dev.jsonl", 24), tmp_path / "gate", config, guards="none")
    gate = MemGate.from_pretrained(tmp_path / "gate")
    raw = json.loads((tmp_path / "gate" / "config.json").read_text())
    assert raw["format_version"] == 3 and raw["score_form"] == "mask_risk" and raw["center_mask"] is True
    assert gate.has_risk and float(gate.risk_scale().detach()) > 0
    record = gate.export_info["risk_scale"]
    assert record["multiplier"] == 1.0 and "uncalibrated" in record["note"]
    assert math.isclose(record["calibrated"], float(gate.risk_scale().detach()), rel_tol=1e-5)
    assert summary["selection"]["step"] >= 0
    history = gate.export_info["selection_history"]
    assert all("dev_mask_uniform_share" in e and "dev_mask_alignment_neg" in e and "dev_activity" in e
               for e in history)
    assert all(0.0 <= e["dev_mask_uniform_share"] <= 1.0 for e in history)
    card = (tmp_path / "gate" / "README.md").read_text()
    assert "S' = S - a * sigmoid(r)" in card and "- risk scale a: learned" in card


def test_selection_keeps_each_point_at_its_calibrated_scale_and_trains_on_at_the_learned_one():
    """A point that fails at the learned a passes at a smaller one: it is kept with that a (in its
    weights and its history entry); the gate itself goes back to the learned a for training."""
    from types import SimpleNamespace

    from memgate.train.select_step import BestGateSelection

    gate = _risk_gate(5)
    learned = float(gate.risk_scale().detach())

    def guard(g: MemGate) -> dict:
        ok = float(g.risk_scale().detach()) <= 0.6 * learned
        return {"passed": ok, "gatemem_routes": {"passed": ok}}

    selection = BestGateSelection(guard, "dev_pref_acc_gated", (1.0, 0.5, 0.0))
    for step in (0, 10):
        trainer = SimpleNamespace(global_step=step, current_epoch=0, sanity_checking=False)
        dev = {"pref_acc_gated": 0.5 + step / 100, "pref_acc_reference": 0.5, "mask_uniform_share": 0.7}
        selection.on_validation_end(trainer, SimpleNamespace(last_dev=dev, gate=gate))
        assert float(gate.risk_scale().detach()) == pytest.approx(learned)
    best = selection.finalize()
    assert best["step"] == 10 and best["risk_scale"]["multiplier"] == 0.5
    assert best["dev_mask_uniform_share"] == 0.7
    assert float(selection.best_state["risk_scale_factor"]) == 0.5
    gate.load_state_dict(selection.best_state)
    assert float(gate.risk_scale().detach()) == pytest.approx(0.5 * learned)
