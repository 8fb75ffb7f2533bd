"""Score forms (issue 44): ``mask`` (the masked cosine S) and ``mask_risk`` (S' = S - a sigmoid(r)),
checkpoint format 3, the released format-2 gate unchanged, and the scorers' risk output."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from memgate.contract.config import REPO_ROOT
from memgate.model.checkpoint_format import FORMAT3_KEYS
from memgate.model.gate import MemGate, MemGateConfig, gated_cosine, inverse_softplus
from memgate.model.scoring import FusedGateScorer, OnnxGateScorer, fast_gate_scorer

RELEASE = REPO_ROOT / "checkpoints" / "memgate-minilm-l6"


def _rough(gate: MemGate, seed: int = 0, scale: float = 0.3) -> MemGate:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in gate.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return gate.eval()


def _vectors(n: int = 41, d: int = 32, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(d).astype(np.float32) * 2, rng.standard_normal((n, d)).astype(np.float32)


def test_mask_risk_is_the_masked_cosine_minus_a_times_the_risk():
    gate = _rough(MemGate(MemGateConfig(dim=32, hidden=24, score_form="mask_risk")), 0)
    q, V = _vectors()
    with torch.no_grad():
        out = gate(q, V)
        qn = torch.nn.functional.normalize(torch.from_numpy(q), dim=-1).unsqueeze(0)
        Vn = torch.nn.functional.normalize(torch.from_numpy(V), dim=-1).unsqueeze(0)
        masked = gated_cosine(qn, Vn, out.mask.unsqueeze(0))[0]
        a = float(gate.risk_scale().detach())
        assert out.risk is not None and out.risk.shape == (41,)
        assert torch.allclose(out.score, masked - a * out.risk, atol=1e-6)
        assert float(out.score.min()) >= -1.0 - a and float(out.score.max()) <= 1.0  # S' in [-1 - a, 1]
        assert float((out.risk - out.risk.mean()).abs().max()) > 1e-2  # the risk varies per memory
        scores = gate.score_with_risk(q, V)
        assert torch.equal(scores.score, out.score) and scores.risk is not None


def test_the_risk_scale_starts_at_its_init_stays_non_negative_and_takes_a_calibration_factor():
    gate = MemGate(MemGateConfig(dim=16, hidden=8, score_form="mask_risk", risk_scale_init=0.1))
    assert float(gate.risk_scale().detach()) == pytest.approx(0.1, rel=1e-6)
    assert inverse_softplus(0.1) == pytest.approx(float(np.log(np.expm1(0.1))))
    with torch.no_grad():
        assert gate.risk_scale_raw is not None
        gate.risk_scale_raw.fill_(-30.0)
    assert float(gate.risk_scale().detach()) >= 0.0
    with torch.no_grad():
        gate.risk_scale_raw.fill_(inverse_softplus(0.4))
    gate.set_risk_scale_factor(0.5)
    assert float(gate.risk_scale().detach()) == pytest.approx(0.2, rel=1e-6)
    with pytest.raises(ValueError, match="factor"):
        gate.set_risk_scale_factor(-1.0)
    with pytest.raises(ValueError, match="no risk scale"):
        MemGate(MemGateConfig(dim=16, hidden=8)).risk_scale()


def test_at_step_zero_the_risk_form_ranks_like_the_cosine():
    """Tiny risk weights and bias 0: sigmoid(r) ~= 0.5 everywhere, a uniform shift of -a/2."""
    torch.manual_seed(0)
    gate = MemGate(MemGateConfig(dim=32, hidden=16, score_form="mask_risk")).eval()
    q, V = _vectors(200)
    with torch.no_grad():
        out = gate(q, V)
    assert out.risk is not None and float((out.risk - 0.5).abs().max()) < 1e-3
    assert torch.equal(torch.argsort(-out.score)[:20], torch.argsort(-out.reference)[:20])


def test_the_scalar_mask_with_the_risk_form_is_the_risk_term_alone():
    gate = _rough(MemGate(MemGateConfig(dim=32, hidden=16, mask_kind="scalar", score_form="mask_risk")), 2)
    q, V = _vectors()
    with torch.no_grad():
        out = gate(q, V)
    assert out.risk is not None
    assert torch.allclose(out.score, out.reference - gate.risk_scale() * out.risk, atol=1e-6)


def test_mean_centred_mask_logits_keep_the_mean_logit_at_the_init_bias():
    gate = _rough(MemGate(MemGateConfig(dim=32, hidden=16, center_mask=True, init_bias=2.0)), 3)
    q, V = _vectors()
    with torch.no_grad():
        g = gate.mask(q, V)
    logits = torch.log(g) - torch.log1p(-g)
    assert torch.allclose(logits.mean(dim=-1), torch.full((41,), 2.0), atol=1e-4)
    with pytest.raises(ValueError, match="center_mask"):
        MemGateConfig(dim=8, hidden=4, mask_kind="scalar", center_mask=True)


@pytest.mark.parametrize("variant", [
    {"score_form": "mask_risk"}, {"score_form": "mask_risk", "features": "prod_only"},
    {"score_form": "mask_risk", "mask_kind": "binary", "n_layers": 1},
    {"score_form": "mask_risk", "center_mask": True, "activation": "silu"},
    {"center_mask": True, "n_layers": 3}, {"score_form": "mask_risk", "mask_kind": "scalar"},
])
def test_the_fused_and_onnx_scorers_return_the_score_and_the_risk(variant):
    gate = _rough(MemGate(MemGateConfig(dim=32, hidden=24, **variant)), 4)
    q, V = _vectors(57)
    with torch.no_grad():
        ref = gate.score_with_risk(q, V)
    fused = FusedGateScorer(gate)
    onnx = OnnxGateScorer(gate, threads=1)
    part = fused.memory_part(V)
    for scorer in (fused, onnx):
        got = scorer.score_with_risk(q, V, part)
        assert float((got.score - ref.score).abs().max()) < 1e-5
        assert torch.equal(scorer.score(q, V, part), got.score)
        if ref.risk is None:
            assert got.risk is None
        else:
            assert got.risk is not None and float((got.risk - ref.risk).abs().max()) < 1e-5
    # a batch of queries (the torch path) gives the same
    Q = np.stack([q, -q]).astype(np.float32)
    batch = fused.score_with_risk(Q, np.stack([V, V]), torch.stack([part, part]))
    assert float((batch.score[0] - ref.score).abs().max()) < 1e-5
    assert (batch.risk is None) == (ref.risk is None)
    assert onnx.score_with_risk(q, V[:0], part[:0]).score.shape == (0,)


def test_the_memory_part_in_float16_scores_the_rounded_part():
    gate = _rough(MemGate(MemGateConfig(dim=32, hidden=24, score_form="mask_risk")), 5)
    q, V = _vectors(30)
    half = OnnxGateScorer(gate, threads=1, memory_fp16=True)
    part = half.memory_part(V)
    assert part.dtype == torch.float16
    got = half.score_with_risk(q, V, part)
    ref = FusedGateScorer(gate).score_with_risk(q, V, part.float())
    assert float((got.score - ref.score).abs().max()) < 1e-5
    assert got.risk is not None and ref.risk is not None and float((got.risk - ref.risk).abs().max()) < 1e-5


def test_a_mask_risk_gate_saves_as_format_3_and_loads_strictly(tmp_path):
    gate = _rough(MemGate(MemGateConfig(dim=16, hidden=8, score_form="mask_risk", risk_scale_init=0.2)), 6)
    gate.set_risk_scale_factor(0.75)
    out = gate.save_pretrained(tmp_path / "g")
    raw = json.loads((out / "config.json").read_text())
    assert raw["format_version"] == 3
    assert {k: raw[k] for k in FORMAT3_KEYS} == {"score_form": "mask_risk", "risk_scale_init": 0.2,
                                                  "center_mask": False}
    assert {"risk_head.weight", "risk_head.bias", "risk_scale_raw", "risk_scale_factor"} <= set(
        load_file(str(out / "model.safetensors")))
    loaded = MemGate.from_pretrained(out)
    q, V = _vectors(9, 16)
    with torch.no_grad():
        assert torch.equal(loaded.score(q, V), gate.score(q, V))
    assert float(loaded.risk_scale().detach()) == pytest.approx(float(gate.risk_scale().detach()))
    raw.pop("score_form")  # a format-3 file must name its score form
    (out / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="missing config key.*score_form"):
        MemGate.from_pretrained(out)


def test_format_3_keys_in_a_format_2_file_are_refused(tmp_path):
    out = MemGate(MemGateConfig(dim=16, hidden=8)).save_pretrained(tmp_path / "g")
    raw = json.loads((out / "config.json").read_text())
    raw["format_version"] = 2
    (out / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="format_version 3 keys"):
        MemGate.from_pretrained(out)
    for key in FORMAT3_KEYS:
        raw.pop(key)
    (out / "config.json").write_text(json.dumps(raw))
    assert MemGate.from_pretrained(out).config.score_form == "mask"


def test_a_format_2_gate_loads_strictly_and_scores_as_the_masked_cosine(tmp_path):
    """A format-2 checkpoint (the releases before 2026-12-03: no score form, no risk tensors) loads
    with score_form mask and no risk tensors, and its score is the masked cosine of its own tensors,
    bit for bit: the same function as before."""
    saved = _rough(MemGate(MemGateConfig(dim=384, hidden=32)), 3).save_pretrained(tmp_path / "format2")
    raw = json.loads((saved / "config.json").read_text())
    raw["format_version"] = 2
    for key in FORMAT3_KEYS:
        raw.pop(key)
    (saved / "config.json").write_text(json.dumps(raw))
    gate = MemGate.from_pretrained(saved).eval()
    assert gate.config.score_form == "mask" and not gate.has_risk and gate.config.center_mask is False
    assert set(gate.state_dict()) == set(load_file(str(saved / "model.safetensors")))
    q, V = _vectors(200, 384, seed=7)
    with torch.no_grad():
        out = gate(q, V)
        qn = torch.from_numpy(q) / torch.from_numpy(q).norm().clamp_min(1e-8)
        Vn = torch.from_numpy(V) / torch.from_numpy(V).norm(dim=-1, keepdim=True).clamp_min(1e-8)
        x = torch.cat([qn.expand_as(Vn), Vn, qn * Vn], dim=-1)
        h = gate.act(gate.first_layer(x))
        for layer in gate.hidden_layers:
            h = gate.act(layer(h))
        g = torch.sigmoid(gate.head(h))
    assert out.risk_logit is None
    assert torch.allclose(out.mask, g, atol=1e-6)
    assert torch.equal(out.score, gated_cosine(qn.unsqueeze(0), Vn.unsqueeze(0), out.mask.unsqueeze(0))[0])
    scorer = fast_gate_scorer(gate)
    got = scorer.score_with_risk(q, V, scorer.memory_part(V))
    assert got.risk is None and float((got.score - out.score).abs().max()) < 1e-5
