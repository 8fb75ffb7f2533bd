"""Ranking preservation on benign lists: the KL term's values, masking, gradients and wiring."""

from __future__ import annotations

import math

import pytest
import torch

from memgate.model.gate import MemGate, MemGateConfig
from memgate.train.loss import list_kl_loss
from memgate.train.objective import LossConfig, list_preservation_loss


def _gated_cosine(q: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    vg = v * g
    return (q.unsqueeze(1) * vg).sum(-1) / (q.norm(dim=-1, keepdim=True) * vg.norm(dim=-1))


def _cosine(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return _gated_cosine(q, v, torch.ones_like(v))


def test_zero_at_the_identity_and_for_any_uniform_mask():
    torch.manual_seed(0)
    q, v = torch.randn(5, 12, dtype=torch.float64), torch.randn(5, 7, 12, dtype=torch.float64)
    ref = _cosine(q, v)
    assert torch.allclose(list_kl_loss(ref, ref), torch.zeros(5, dtype=torch.float64), atol=1e-12)
    for c in (0.01, 0.3, 0.982):
        uniform = _gated_cosine(q, v, torch.full_like(v, c))
        assert float(list_kl_loss(uniform, ref, 0.05).abs().max()) < 1e-9
    skewed = torch.rand_like(v)  # a non-uniform mask reorders or re-spaces the list
    assert float(list_kl_loss(_gated_cosine(q, v, skewed), ref, 0.05).min()) > 1e-6


def test_analytic_value_when_two_items_swap():
    # p = softmax([5, 3]), q = softmax([3, 5]): KL = p1 * 2 + p2 * (-2) = 2 tanh(1)
    kl = list_kl_loss(torch.tensor([[0.3, 0.5]], dtype=torch.float64),
                      torch.tensor([[0.5, 0.3]], dtype=torch.float64), temperature=0.1)
    assert math.isclose(float(kl), 2 * math.tanh(1.0), rel_tol=1e-12)


def test_padding_is_masked_whatever_it_holds():
    s, ref = torch.tensor([[0.3, 0.5]]), torch.tensor([[0.5, 0.3]])
    expected = list_kl_loss(s, ref, 0.1)
    padded_s = torch.tensor([[0.3, 0.5, 9.0, float("nan")]])
    padded_ref = torch.tensor([[0.5, 0.3, -4.0, 1.0]])
    mask = torch.tensor([[True, True, False, False]])
    assert torch.allclose(list_kl_loss(padded_s, padded_ref, 0.1, mask), expected)
    one = list_kl_loss(torch.tensor([[0.2, 7.0]]), torch.tensor([[0.9, 1.0]]), 0.1, torch.tensor([[True, False]]))
    assert float(one) == 0.0  # a one-item list has no ranking to keep


def test_gradcheck_in_float64_with_padding():
    mask = torch.tensor([[True, True, True], [True, True, False]])
    s = (0.3 * torch.randn(2, 3, dtype=torch.float64)).requires_grad_()
    ref = (0.3 * torch.randn(2, 3, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: list_kl_loss(a, b, 0.2, mask), (s, ref))


def test_argument_checks_name_the_problem():
    with pytest.raises(ValueError, match="shape"):
        list_kl_loss(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="temperature"):
        list_kl_loss(torch.zeros(2, 3), torch.zeros(2, 3), temperature=0.0)
    with pytest.raises(TypeError, match="mask must be a torch.bool"):
        list_kl_loss(torch.zeros(2, 3), torch.zeros(2, 3), 0.1, torch.ones(2, 3))
    with pytest.raises(ValueError, match="at least one real candidate"):
        list_kl_loss(torch.zeros(1, 2), torch.zeros(1, 2), 0.1, torch.tensor([[False, False]]))
    with pytest.raises(ValueError, match="list_preservation_weight"):
        LossConfig(list_preservation_weight=-1.0)
    with pytest.raises(ValueError, match="list_temperature"):
        LossConfig(list_temperature=0.0)


def test_objective_term_is_weighted_and_near_zero_at_initialisation():
    torch.manual_seed(0)
    gate = MemGate(MemGateConfig(dim=16, hidden=8))
    q = torch.nn.functional.normalize(torch.randn(4, 16), dim=-1)
    items = torch.nn.functional.normalize(torch.randn(4, 6, 16), dim=-1)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1, 3:] = False
    losses, diag = list_preservation_loss(LossConfig(list_preservation_weight=20.0), gate, q, items, mask)
    assert losses.shape == (4,)
    assert diag["loss_list_kl"] < 1e-4 and diag["list_top1_kept"] == 1.0
    with torch.no_grad():
        for p in gate.parameters():
            p.add_(0.5 * torch.randn_like(p))
    weighted, diag = list_preservation_loss(LossConfig(list_preservation_weight=20.0), gate, q, items, mask)
    assert diag["loss_list_kl"] > 1e-4
    assert math.isclose(float(weighted.mean()), 20.0 * diag["loss_list_kl"], rel_tol=1e-5)


# -- wiring: a tiny real training run ------------------------------------------------------------


@pytest.mark.slow
def test_a_tiny_run_keeps_the_list_kl_down_while_dpo_trains(tmp_path):
    """Tiny data with real text (so benign lists exist), trained twice from the same seed: with
    w_list = 20 the benign lists' KL ends far below the w_list = 0 run's, while DPO still moves
    the gate (dev preference accuracy above the reference) and the CSV log carries loss_list_kl."""
    import csv
    import json

    import yaml

    from memgate.contract.config import REPO_ROOT, load_config, resolve_path
    from memgate.datasets.datagen import generate
    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.train.config import TrainConfig
    from memgate.train.run import train

    data_cfg = yaml.safe_load((REPO_ROOT / "configs/data/tiny.yaml").read_text())
    data_cfg["real_text"] = {"enabled": True}
    (tmp_path / "tiny_real.yaml").write_text(yaml.safe_dump(data_cfg))
    generate(tmp_path / "tiny_real.yaml", tmp_path / "data")
    lists = [json.loads(x) for x in (tmp_path / "data/train/benign_lists.jsonl").read_text().splitlines()]
    assert len(lists) > 100

    def run(weight: float):
        config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
            f"data.data_dir={tmp_path / 'data'}", "data.use_mined=false", "optim.max_steps=60", "optim.max_epochs=100",
            "data.sources=[template,mined,gatemem]", "data.source_shares=null", "data.list_sources=[gatemem]",  # no natural-phrasing sources in it
            "optim.warmup_steps=5", "optim.lr=3e-3", "optim.batch_size=64", "trainer.val_check_interval=1.0",
            "selection.locomo_guard=false", "selection.gatemem_guard=false", "selection.gatemem_routes_guard=false",
            "selection.text_risk_guard=false", "selection.metric=dev_pref_acc_gated", "export.headline=false",
            f"loss.list_preservation_weight={weight}", f"export.checkpoints_dir={tmp_path / 'ck'}",
            f"export.runs_dir={tmp_path / 'runs'}", f"export.name=w{int(weight)}",
            "trainer.progress_bar=false", "trainer.logger=csv"])
        summary = train(config, argv=["test"])
        return MemGate.from_pretrained(summary["export_dir"]), summary, Path(summary["run_dir"])

    from pathlib import Path

    encoder = Encoder(EncoderConfig())
    q = torch.from_numpy(encoder.encode([x["query_text"] for x in lists], progress=False))
    n = max(len(x["items"]) for x in lists)
    texts = sorted({i["text"] for x in lists for i in x["items"]})
    vec = dict(zip(texts, torch.from_numpy(encoder.encode(texts, progress=False))))
    items = torch.zeros(len(lists), n, q.shape[1])
    mask = torch.zeros(len(lists), n, dtype=torch.bool)
    for r, x in enumerate(lists):
        for c, item in enumerate(x["items"]):
            items[r, c], mask[r, c] = vec[item["text"]], True

    def list_kl(gate) -> float:
        with torch.no_grad():
            out = gate(q, items)
            return float(list_kl_loss(out.score, out.reference, 0.05, mask).mean())

    free, free_summary, _ = run(0.0)
    kept, kept_summary, run_dir = run(20.0)
    for summary in (free_summary, kept_summary):
        last = summary["selection"]
        assert last["step"] > 0 and last["dev_pref_acc_gated"] > last["dev_pref_acc_reference"]
    assert list_kl(kept) < 0.5 * list_kl(free)
    rows = list(csv.DictReader((run_dir / "csv" / "version_0" / "metrics.csv").open()))
    logged = [float(r["train/loss_list_kl"]) for r in rows if r.get("train/loss_list_kl")]
    assert logged and all(math.isfinite(v) for v in logged)
