"""MemGate: shapes, input checks, initial behaviour, precomputation and strict save/load."""

from __future__ import annotations

import hashlib
import json
import math
import pickle

import pytest
import torch
from safetensors.torch import load_file, save_file

from memgate.model.gate import FEATURE_SETS, MemGate, MemGateConfig, reference_score

D = 384


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def _roughen(gate: MemGate, std: float = 0.5) -> MemGate:
    """Give the last layer large weights so that the mask varies a lot across memories."""
    with torch.no_grad():
        gate.head.weight.normal_(0.0, std)
        gate.head.bias.normal_(0.0, 1.0)
    return gate


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


# -- config -------------------------------------------------------------------------------------


def test_config_defaults_and_round_trip():
    cfg = MemGateConfig()
    assert (cfg.dim, cfg.hidden, cfg.activation, cfg.dropout) == (384, 256, "gelu", 0.0)
    assert (cfg.init_bias, cfg.init_std, cfg.features, cfg.mask_kind) == (
        4.0, 1e-3, "qv_prod", "vector"
    )
    cfg2 = MemGateConfig(dim=16, hidden=8, encoder_id="enc", encoder_normalize=True)
    assert MemGateConfig.from_dict(cfg2.to_dict()) == cfg2
    assert all(isinstance(v, (int, float, str, bool, type(None))) for v in cfg2.to_dict().values())


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"dim": 0}, "dim"),
        ({"dim": True}, "dim"),
        ({"hidden": 2.5}, "hidden"),
        ({"n_layers": 0}, "n_layers"),
        ({"activation": "swish2"}, "activation"),
        ({"dropout": 1.0}, "dropout"),
        ({"init_std": 0.0}, "init_std"),
        ({"init_std": 0.1}, "init_std"),
        ({"init_bias": float("nan")}, "init_bias"),
        ({"features": "qv"}, "features"),
        ({"mask_kind": "matrix"}, "mask_kind"),
        ({"encoder_id": ""}, "encoder_id"),
        ({"encoder_normalize": 1}, "encoder_normalize"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        MemGateConfig(**kwargs)


def test_config_from_dict_rejects_unknown_keys():
    with pytest.raises(ValueError, match="hiddne"):
        MemGateConfig.from_dict({"dim": 8, "hiddne": 4})


def test_num_parameters_matches_hand_count():
    gate = MemGate()
    expected = (3 * D * 256 + 256) + (256 * 256 + 256) + (256 * D + D)
    assert gate.num_parameters() == expected


# -- initial behaviour --------------------------------------------------------------------------


def test_initial_gate_is_near_one_and_scores_like_cosine(gen):
    torch.manual_seed(0)
    gate = MemGate()
    assert float(gate.head.weight.detach().std()) <= 1.5e-3
    assert torch.allclose(gate.head.bias, torch.full((D,), 4.0))
    q, V = torch.randn(3, D, generator=gen), torch.randn(3, 50, D, generator=gen)
    with torch.no_grad():
        g = gate.mask(q, V)
        s = gate.score(q, V)
    assert float((g - torch.sigmoid(torch.tensor(4.0))).abs().max()) < 1e-2
    assert float((s - reference_score(q, V)).abs().max()) < 1e-3


def test_score_is_the_asymmetric_gated_cosine(gen):
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8)))
    q, V = torch.randn(16, generator=gen) * 3.0, torch.randn(7, 16, generator=gen) * 0.2
    with torch.no_grad():
        g, s = gate.mask(q, V), gate.score(q, V)
    qn, Vn = _unit(q), _unit(V)
    vg = Vn * g
    expected = (vg @ qn) / vg.norm(dim=-1)  # q is never gated
    assert torch.allclose(s, expected, atol=1e-6)
    assert float(g.min()) >= 0.0 and float(g.max()) <= 1.0
    assert float((s - reference_score(q, V)).abs().max()) > 1e-3  # the rough gate does something


def test_inputs_are_renormalised(gen):
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8)))
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    with torch.no_grad():
        assert torch.allclose(gate.score(q, V), gate.score(7.0 * q, 0.3 * V), atol=1e-6)
        assert torch.allclose(gate.mask(q, V), gate.mask(7.0 * q, 0.3 * V), atol=1e-6)


# -- shapes and input checks --------------------------------------------------------------------


def test_batched_and_unbatched_shapes_agree(gen):
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8)))
    Q, V = torch.randn(4, 16, generator=gen), torch.randn(4, 6, 16, generator=gen)
    with torch.no_grad():
        assert gate.mask(Q[0], V[0]).shape == (6, 16)
        assert gate.score(Q[0], V[0]).shape == (6,)
        assert gate.mask(Q, V).shape == (4, 6, 16)
        sb = gate.score(Q, V)
        assert sb.shape == (4, 6)
        for b in range(4):
            assert torch.allclose(sb[b], gate.score(Q[b], V[b]), atol=1e-6)
        shared = gate.score(Q, V[0])  # a batch of queries against one memory set
        assert shared.shape == (4, 6)
        assert torch.allclose(shared[2], gate.score(Q[2], V[0]), atol=1e-6)
        assert reference_score(Q, V).shape == (4, 6)
        assert reference_score(Q[0], V[0]).shape == (6,)


def test_numpy_input_accepted(gen):
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8)))
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    with torch.no_grad():
        s_np = gate.score(q.double().numpy(), V.numpy())
        g_np = gate.mask(q.numpy(), V.double().numpy())
        assert isinstance(s_np, torch.Tensor) and s_np.dtype == torch.float32
        assert torch.allclose(s_np, gate.score(q, V), atol=1e-6)
        assert torch.allclose(g_np, gate.mask(q, V), atol=1e-6)
    assert isinstance(reference_score(q.numpy(), V.numpy()), torch.Tensor)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_input_rejected(gen, bad):
    gate = MemGate(MemGateConfig(dim=16, hidden=8))
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    q_bad, V_bad = q.clone(), V.clone()
    q_bad[3], V_bad[1, 2] = bad, bad
    with pytest.raises(ValueError, match="q contains NaN"):
        gate.score(q_bad, V)
    with pytest.raises(ValueError, match="V contains NaN"):
        gate.mask(q, V_bad)
    with pytest.raises(ValueError, match="q contains NaN"):
        gate.score(q_bad.numpy(), V.numpy())


def test_wrong_shapes_rejected_naming_the_argument(gen):
    gate = MemGate(MemGateConfig(dim=16, hidden=8))
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    with pytest.raises(ValueError, match="q has last dimension 15"):
        gate.score(q[:15], V)
    with pytest.raises(ValueError, match="V has last dimension 15"):
        gate.score(q, V[:, :15])
    with pytest.raises(ValueError, match="q must have shape"):
        gate.score(q.reshape(1, 1, 16), V)
    with pytest.raises(ValueError, match="V must have shape"):
        gate.score(q, V[0])
    with pytest.raises(ValueError, match="batch sizes differ"):
        gate.score(torch.randn(2, 16), torch.randn(3, 5, 16))
    with pytest.raises(ValueError, match="q is a single query"):
        gate.score(q, torch.randn(3, 5, 16))
    with pytest.raises(TypeError, match="q"):
        gate.score(q.tolist(), V)
    with pytest.raises(TypeError, match="V"):
        gate.score(q, V.long())


def test_scalar_mask_is_broadcast_and_cancels_in_the_cosine(gen):
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8, mask_kind="scalar")))
    assert gate.head.out_features == 1
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    with torch.no_grad():
        g = gate.mask(q, V)
        assert g.shape == (5, 16)
        assert torch.allclose(g, g[:, :1].expand(5, 16))
        assert torch.allclose(gate.score(q, V), reference_score(q, V), atol=1e-6)


def test_binary_mask_is_hard_forward_and_straight_through_backward(gen):
    """mask_kind=binary: g in {0, 1} in the forward pass, the sigmoid's gradient in the backward
    pass (straight-through), and the identity (every g = 1, the plain cosine) at initialisation."""
    fresh = MemGate(MemGateConfig(dim=16, hidden=8, mask_kind="binary"))
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    with torch.no_grad():
        assert torch.equal(fresh.mask(q, V), torch.ones(5, 16))
        assert torch.allclose(fresh.score(q, V), reference_score(q, V), atol=1e-6)
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8, mask_kind="binary")))
    g = gate.mask(q, V)
    assert set(torch.unique(g.detach()).tolist()) == {0.0, 1.0}
    vector = MemGate(MemGateConfig(dim=16, hidden=8, mask_kind="vector"))  # the same MLP, soft mask
    vector.load_state_dict(gate.state_dict())
    g.sum().backward()
    grad_binary = [p.grad.clone() for p in gate.parameters()]
    vector.mask(q, V).sum().backward()
    for a, b in zip(grad_binary, (p.grad for p in vector.parameters())):
        assert torch.allclose(a, b, atol=1e-6)
    assert any(float(a.abs().sum()) > 0 for a in grad_binary)


# -- write-time precomputation ------------------------------------------------------------------


@pytest.mark.parametrize("features", FEATURE_SETS)
def test_precomputed_scores_equal_plain_scores(gen, features):
    torch.manual_seed(1)
    gate = _roughen(MemGate(MemGateConfig(features=features)))
    q, Q = torch.randn(D, generator=gen), torch.randn(3, D, generator=gen)
    V, VB = torch.randn(40, D, generator=gen), torch.randn(3, 40, D, generator=gen)
    with torch.no_grad():
        v_part = gate.precompute_memory(V)
        assert v_part.shape == (40, gate.config.hidden)
        s = gate.score(q, V)
        assert float((gate.score_precomputed(q, V, v_part) - s).abs().max()) < 1e-5
        shared = gate.score_precomputed(Q, V, v_part)
        assert float((shared - gate.score(Q, V)).abs().max()) < 1e-5
        vb_part = gate.precompute_memory(VB.numpy())
        assert vb_part.shape == (3, 40, gate.config.hidden)
        batched = gate.score_precomputed(Q, VB, vb_part)
        assert float((batched - gate.score(Q, VB)).abs().max()) < 1e-5
        assert float((s - reference_score(q, V)).abs().max()) > 1e-3  # non-trivial gate
        with pytest.raises(ValueError, match="v_part has shape"):
            gate.score_precomputed(q, V, v_part[:39])


@pytest.mark.parametrize("features", FEATURE_SETS)
def test_split_first_layer_is_the_linear_layer_on_the_concatenated_features(gen, features):
    """forward never builds [q ; v ; q*v]; it must still compute layers[0] of exactly that."""
    torch.manual_seed(3)
    gate = _roughen(MemGate(MemGateConfig(features=features)))
    q, V = torch.randn(3, D, generator=gen), torch.randn(3, 7, D, generator=gen)
    with torch.no_grad():
        expected = gate.layers[0](gate._features(q, V))
        assert float((gate._first_layer(q, V) - expected).abs().max()) < 1e-5


# -- save / load --------------------------------------------------------------------------------


def _saved(tmp_path, **cfg) -> tuple[MemGate, object]:
    torch.manual_seed(2)
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=8, **cfg)))
    out = tmp_path / "ckpt"
    gate.save_pretrained(out)
    return gate, out


def test_save_load_round_trip(tmp_path, gen):
    torch.manual_seed(3)
    gate = _roughen(MemGate(MemGateConfig(encoder_id="minilm", encoder_revision="abc")))
    extra = {"threshold": 0.42, "data_hash": "deadbeef", "steps": 10, "tags": ["a", None]}
    gate.save_pretrained(tmp_path / "g", extra_config=extra)
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["config.json", "model.safetensors"]
    raw = json.loads((tmp_path / "g" / "config.json").read_text())
    assert raw["format"] == "memgate-gate" and raw["format_version"] == 3
    assert raw["weights_sha256"] == hashlib.sha256((tmp_path / "g" / "model.safetensors").read_bytes()).hexdigest()
    assert raw["dim"] == D and raw["encoder_id"] == "minilm" and raw["export"] == extra

    loaded = MemGate.from_pretrained(tmp_path / "g", expected_encoder="minilm")
    assert loaded.config == gate.config and not loaded.training
    assert loaded.export_info == extra
    for key, value in gate.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[key]), key
    q, V = torch.randn(D, generator=gen), torch.randn(20, D, generator=gen)
    with torch.no_grad():
        assert torch.allclose(loaded.score(q, V), gate.score(q, V), atol=1e-7)

    loaded.save_pretrained(tmp_path / "g2", extra_config={"steps": 11})  # export info is kept
    again = MemGate.from_pretrained(tmp_path / "g2")
    assert again.export_info == {**extra, "steps": 11}


def test_extra_config_must_be_json(tmp_path):
    gate = MemGate(MemGateConfig(dim=16, hidden=8))
    with pytest.raises(ValueError, match="extra_config"):
        gate.save_pretrained(tmp_path / "x", extra_config={"s": {1, 2}})
    with pytest.raises(ValueError, match="extra_config"):
        gate.save_pretrained(tmp_path / "x", extra_config={"t": float("nan")})


def _edit_weights(path, fn):
    state = load_file(str(path / "model.safetensors"))
    fn(state)
    save_file(state, str(path / "model.safetensors"))


def _edit_config(path, fn):
    raw = json.loads((path / "config.json").read_text())
    fn(raw)
    (path / "config.json").write_text(json.dumps(raw))


def test_load_rejects_missing_key(tmp_path):
    _, out = _saved(tmp_path)
    _edit_weights(out, lambda s: s.pop("head.bias"))
    with pytest.raises(ValueError, match="missing tensor key.*head.bias"):
        MemGate.from_pretrained(out)


def test_load_rejects_unexpected_key(tmp_path):
    _, out = _saved(tmp_path)
    _edit_weights(out, lambda s: s.__setitem__("layers.9.weight", torch.zeros(2, 2)))
    with pytest.raises(ValueError, match="unexpected tensor key.*layers.9.weight"):
        MemGate.from_pretrained(out)


def test_load_rejects_wrong_shape(tmp_path):
    _, out = _saved(tmp_path)
    _edit_weights(out, lambda s: s.__setitem__("layers.1.weight", torch.zeros(8, 7)))
    with pytest.raises(ValueError, match=r"'layers.1.weight' has shape \(8, 7\)"):
        MemGate.from_pretrained(out)


def test_load_rejects_wrong_dim_in_config(tmp_path):
    _, out = _saved(tmp_path)
    _edit_config(out, lambda raw: raw.__setitem__("dim", 32))
    with pytest.raises(ValueError, match="layers.0.weight.*dim=32"):
        MemGate.from_pretrained(out)


def test_load_rejects_wrong_dtype(tmp_path):
    _, out = _saved(tmp_path)
    _edit_weights(out, lambda s: s.__setitem__("head.weight", s["head.weight"].double()))
    with pytest.raises(ValueError, match="'head.weight' has dtype torch.float64"):
        MemGate.from_pretrained(out)


def test_load_rejects_non_finite_weights(tmp_path):
    _, out = _saved(tmp_path)
    _edit_weights(out, lambda s: s["head.bias"].fill_(float("nan")))
    with pytest.raises(ValueError, match="head.bias.*NaN"):
        MemGate.from_pretrained(out)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda raw: raw.__setitem__("dropuot", 0.1), "unknown config key.*dropuot"),
        (lambda raw: raw.pop("hidden"), "missing config key.*hidden"),
        (lambda raw: raw.__setitem__("format", "pytorch"), "format"),
        (lambda raw: raw.__setitem__("format_version", 4), "format_version.*newer"),
        (lambda raw: raw.__setitem__("features", "qvx"), "features"),
        (lambda raw: raw.__setitem__("export", [1]), "export"),
    ],
)
def test_load_rejects_bad_config(tmp_path, edit, message):
    _, out = _saved(tmp_path)
    _edit_config(out, edit)
    with pytest.raises(ValueError, match=message):
        MemGate.from_pretrained(out)


def test_load_missing_files(tmp_path):
    _, out = _saved(tmp_path)
    (out / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        MemGate.from_pretrained(out)


def test_load_rejects_wrong_encoder(tmp_path):
    _, out = _saved(tmp_path, encoder_id="enc-a", encoder_revision="r1", encoder_normalize=True)
    MemGate.from_pretrained(out, expected_encoder="enc-a")
    MemGate.from_pretrained(out, expected_encoder={"id": "enc-a", "revision": "r1", "dim": 16})
    with pytest.raises(ValueError, match="trained on encoder.*enc-a.*in use is.*enc-b"):
        MemGate.from_pretrained(out, expected_encoder="enc-b")
    with pytest.raises(ValueError, match="revision"):
        MemGate.from_pretrained(out, expected_encoder={"id": "enc-a", "revision": "r2"})
    with pytest.raises(ValueError, match="normalize"):
        MemGate.from_pretrained(out, expected_encoder={"id": "enc-a", "normalize": False})
    with pytest.raises(ValueError, match="unknown key"):
        MemGate.from_pretrained(out, expected_encoder={"model": "enc-a"})


def test_load_without_recorded_encoder_refuses_an_expected_one(tmp_path):
    _, out = _saved(tmp_path)
    with pytest.raises(ValueError, match="encoder mismatch"):
        MemGate.from_pretrained(out, expected_encoder="enc-a")


def test_load_never_unpickles(tmp_path, monkeypatch):
    gate, out = _saved(tmp_path)

    def forbidden(*args, **kwargs):
        raise AssertionError("unpickling is forbidden when loading a gate")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    loaded = MemGate.from_pretrained(out)
    assert torch.equal(loaded.head.weight, gate.head.weight)


def test_dropout_only_in_train_mode(gen):
    gate = _roughen(MemGate(MemGateConfig(dim=16, hidden=32, dropout=0.5))).eval()
    q, V = torch.randn(16, generator=gen), torch.randn(5, 16, generator=gen)
    with torch.no_grad():
        assert torch.equal(gate.score(q, V), gate.score(q, V))
    assert math.isclose(gate.config.dropout, 0.5)
