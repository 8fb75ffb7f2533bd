"""Checkpoint integrity (issue 18): the weights' sha256 is recorded at export and verified on load,
a checkpoint without one loads with a warning, and format versions are read or refused clearly."""

from __future__ import annotations

import hashlib
import json
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file

from memgate.contract.config import REPO_ROOT
from memgate.model.checkpoint_format import FORMAT3_KEYS, FORMAT_VERSION, UnverifiedCheckpointWarning
from memgate.model.gate import MemGate, MemGateConfig

RELEASE = REPO_ROOT / "checkpoints" / "memgate-minilm-l6"


def saved(tmp_path, **export):
    torch.manual_seed(0)
    gate = MemGate(MemGateConfig(dim=16, hidden=8, encoder_id="enc", encoder_revision="1",
                                 encoder_normalize=True))
    out = gate.save_pretrained(tmp_path / "ckpt", extra_config=export or None)
    return gate, out


def edit_config(path, fn):
    raw = json.loads((path / "config.json").read_text())
    fn(raw)
    (path / "config.json").write_text(json.dumps(raw))


def test_export_records_the_weights_sha256(tmp_path):
    _, out = saved(tmp_path)
    raw = json.loads((out / "config.json").read_text())
    assert raw["format_version"] == FORMAT_VERSION == 3
    assert raw["weights_sha256"] == hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a hashed checkpoint loads without any warning
        MemGate.from_pretrained(out)


def test_tampered_weights_are_refused_naming_the_file(tmp_path):
    _, out = saved(tmp_path)
    state = load_file(str(out / "model.safetensors"))
    state["head.bias"] = state["head.bias"] - 8.0  # same keys, shapes, dtype: only the values differ
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model\.safetensors: sha256 .* differs .*weights_sha256"):
        MemGate.from_pretrained(out)
    # one flipped byte in the header-free tail too
    _, out2 = saved(tmp_path / "b")
    data = bytearray((out2 / "model.safetensors").read_bytes())
    data[-1] ^= 0x01
    (out2 / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="model.safetensors"):
        MemGate.from_pretrained(out2)


@pytest.mark.parametrize("version", [1, 2])
def test_checkpoint_without_a_hash_loads_with_a_warning(tmp_path, version):
    gate, out = saved(tmp_path)
    edit_config(out, lambda raw: (raw.pop("weights_sha256"), raw.__setitem__("format_version", version),
                                  [raw.pop(key) for key in FORMAT3_KEYS]))
    with pytest.warns(UnverifiedCheckpointWarning, match="not verified"):
        loaded = MemGate.from_pretrained(out)
    assert torch.equal(loaded.head.weight, gate.head.weight)


def test_a_malformed_recorded_hash_is_refused_naming_the_field(tmp_path):
    _, out = saved(tmp_path)
    edit_config(out, lambda raw: raw.__setitem__("weights_sha256", "abc"))
    with pytest.raises(ValueError, match="weights_sha256.*64-digit"):
        MemGate.from_pretrained(out)
    edit_config(out, lambda raw: raw.__setitem__("format_version", 1))
    with pytest.raises(ValueError, match="weights_sha256.*format_version 2 key"):
        MemGate.from_pretrained(out)


def test_a_newer_format_version_is_refused_with_the_fix(tmp_path):
    _, out = saved(tmp_path)
    edit_config(out, lambda raw: raw.__setitem__("format_version", 7))
    with pytest.raises(ValueError, match="format_version.*got 7.*newer.*upgrade memgate"):
        MemGate.from_pretrained(out)
    edit_config(out, lambda raw: raw.__setitem__("format_version", "2"))
    with pytest.raises(ValueError, match="format_version.*'2'"):
        MemGate.from_pretrained(out)


def test_the_released_checkpoint_still_loads():
    """The committed release predates weights hashes (format_version 1): it loads with the
    warning; once re-released with a hash it must load verified and silently."""
    raw = json.loads((RELEASE / "config.json").read_text())
    if "weights_sha256" in raw:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            MemGate.from_pretrained(RELEASE)
        assert raw["weights_sha256"] == hashlib.sha256((RELEASE / "model.safetensors").read_bytes()).hexdigest()
    else:
        assert raw["format_version"] == 1
        with pytest.warns(UnverifiedCheckpointWarning, match="memgate-minilm-l6/model.safetensors"):
            gate = MemGate.from_pretrained(RELEASE)
        assert gate.export_info["calibration"]["threshold"] == raw["export"]["calibration"]["threshold"]
