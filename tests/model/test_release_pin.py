"""The released gate cannot be shadowed (issue 46, item 1; audit finding R12 / G4).

A released gate resolves by name from the package's own location only (the wheel's bundled copy,
or the checkout's checkpoints/ found from the package file), never the working directory,
``$MEMGATE_HOME`` or a relative path; its weights must match the sha256 pinned in package code
(``memgate/model/release_pin.py``), so a copy whose config.json re-vouches for edited weights is
refused; a path load is a user checkpoint (verified against its own config.json, said at INFO);
training refuses the released name outside ``make release``, whose export rewrites the pin."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from memgate.contract.config import REPO_ROOT
from memgate.model import pretrained, release_pin
from memgate.model.gate import MemGate, MemGateConfig
from tests.fresh_process import run_fresh

RELEASED = "memgate-minilm-l6"
PACKAGED = REPO_ROOT / "checkpoints" / RELEASED


def tampered_copy(target: Path) -> Path:
    """A copy of the released gate with edited weights and a config.json that re-vouches for
    them (the recomputed sha256 the audit used): it loads as a path, as any self-consistent
    checkpoint does."""
    shutil.copytree(PACKAGED, target)
    state = load_file(str(target / "model.safetensors"))
    state["head.bias"] = state["head.bias"] - 8.0  # same keys, shapes, dtype: other values
    save_file(state, str(target / "model.safetensors"), metadata={"format": "pt"})
    raw = json.loads((target / "config.json").read_text())
    raw["weights_sha256"] = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    (target / "config.json").write_text(json.dumps(raw, indent=2))
    return target


def fake_package(root: Path, *, checkout: bool) -> Path:
    """A memgate package directory: a wheel's (site-packages/memgate) or a checkout's (beside
    pyproject.toml and configs/)."""
    package = root / "memgate"
    package.mkdir(parents=True)
    if checkout:
        (root / "pyproject.toml").write_text("[project]\nname = 'memgate'\n")
        (root / "configs").mkdir()
    return package


def use_package(monkeypatch, package: Path) -> None:
    """Make ``package`` the package's own location (``BUNDLED_DIR``: the same for the code before
    the change, which looked there first)."""
    monkeypatch.setattr(pretrained, "PACKAGE_DIR", package, raising=False)
    monkeypatch.setattr(pretrained, "BUNDLED_DIR", package / "checkpoints", raising=False)


def test_the_pin_is_the_committed_release():
    digest = hashlib.sha256((PACKAGED / "model.safetensors").read_bytes()).hexdigest()
    assert release_pin.RELEASED_WEIGHTS_SHA256[RELEASED] == digest


def test_a_fresh_process_beside_a_tampered_copy_gets_the_packaged_gate(tmp_path):
    """The audit's R12: a process started in a directory holding ``memgate-minilm-l6/`` loaded it
    as the released gate (the default of Memory, HTTP and MCP). The working directory holds a
    tampered copy, and so do ``checkpoints/`` there and ``$MEMGATE_HOME``."""
    work = tmp_path / "work"
    tampered_copy(work / RELEASED)
    tampered_copy(work / "checkpoints" / RELEASED)
    body = f"""
from memgate import MemGate
from memgate.integrations.gate_default import gate_default, released_gate_dir
g = MemGate.from_pretrained({RELEASED!r})
steps["by_name_bias"] = float(g.head.bias.detach().sum())
decision = gate_default()
steps["default"] = [decision.use, str(decision.checkpoint), str(released_gate_dir())]
steps["default_bias"] = float(MemGate.from_pretrained(decision.checkpoint).head.bias.detach().sum())
"""
    steps, _, _ = run_fresh(body, cwd=work, env={"MEMGATE_HOME": str(work)})
    packaged_bias = float(MemGate.from_pretrained(PACKAGED).head.bias.detach().sum())
    assert steps["by_name_bias"] == pytest.approx(packaged_bias, abs=1e-6)
    assert steps["default"][1] == steps["default"][2] == str(PACKAGED)  # whether or not the rule turns it on
    assert steps["default_bias"] == pytest.approx(packaged_bias, abs=1e-6)


def test_a_tampered_released_copy_is_refused_by_name(tmp_path, monkeypatch):
    """G4: the weights hash sat beside the weights it vouched for. A wheel's bundled copy with
    edited weights and a recomputed config.json sha256 is refused, by name and through the
    default gate's path, in one line naming the file and the fix."""
    package = fake_package(tmp_path / "site-packages", checkout=False)
    tampered_copy(package / "checkpoints" / RELEASED)
    use_package(monkeypatch, package)
    with pytest.raises(ValueError, match=r"model\.safetensors: sha256 [0-9a-f]{64} is not the released "
                                         r"memgate-minilm-l6's pinned .*reinstall memgate"):
        MemGate.from_pretrained(RELEASED)
    from memgate.integrations.gate_default import released_gate_dir

    with pytest.raises(ValueError, match="is not the released memgate-minilm-l6's pinned"):
        MemGate.from_pretrained(released_gate_dir())  # what Memory / HTTP / MCP load by default
    # in a checkout (an editable install) the fix names git and make release
    checkout = fake_package(tmp_path / "clone", checkout=True)
    tampered_copy(checkout.parent / "checkpoints" / RELEASED)
    use_package(monkeypatch, checkout)
    with pytest.raises(ValueError, match=r"git checkout -- checkpoints/memgate-minilm-l6\) or run make release"):
        MemGate.from_pretrained(RELEASED)


def test_the_resolver_looks_only_at_the_package_location(tmp_path, monkeypatch):
    """The wheel case (the tests build no wheel): a bundled copy in site-packages/memgate/checkpoints
    is found; the working directory's folder, its checkpoints/ and $MEMGATE_HOME's are not, even
    when the package has no copy at all."""
    work = tmp_path / "work"
    for where in (work / RELEASED, work / "checkpoints" / RELEASED, tmp_path / "home" / "checkpoints" / RELEASED):
        shutil.copytree(PACKAGED, where)
    monkeypatch.chdir(work)
    monkeypatch.setenv("MEMGATE_HOME", str(tmp_path / "home"))
    wheel = fake_package(tmp_path / "site-packages", checkout=False)
    use_package(monkeypatch, wheel)
    with pytest.raises(FileNotFoundError, match="memgate-minilm-l6"):  # no bundled copy: not the cwd's
        pretrained.resolve_checkpoint(RELEASED)
    shutil.copytree(PACKAGED, wheel / "checkpoints" / RELEASED)
    assert pretrained.resolve_checkpoint(RELEASED) == wheel / "checkpoints" / RELEASED
    assert pretrained.resolve_checkpoint(Path(RELEASED)) == wheel / "checkpoints" / RELEASED
    assert pretrained.released_roots() == [wheel / "checkpoints"]  # a wheel has no checkout
    clone = fake_package(tmp_path / "clone", checkout=True)  # an editable install: the checkout's
    shutil.copytree(PACKAGED, clone.parent / "checkpoints" / RELEASED)
    use_package(monkeypatch, clone)
    assert pretrained.resolve_checkpoint(RELEASED) == clone.parent / "checkpoints" / RELEASED
    # an explicit path is a path: the working directory's copy loads as a user checkpoint
    assert pretrained.resolve_checkpoint(f"./{RELEASED}") == Path(f"./{RELEASED}")


def test_a_path_load_is_a_user_checkpoint_verified_by_its_config(tmp_path, caplog):
    torch.manual_seed(0)
    out = MemGate(MemGateConfig(dim=16, hidden=8, encoder_id="enc", encoder_revision="1",
                                encoder_normalize=True)).save_pretrained(tmp_path / "mine")
    with caplog.at_level(logging.INFO, logger="memgate.model.pretrained"):
        MemGate.from_pretrained(out)
        MemGate.from_pretrained(RELEASED)
    said = [r.getMessage() for r in caplog.records if r.name == "memgate.model.pretrained"]
    assert said == [f"loading {out} as a user checkpoint (not a released gate): its weights are "
                    "verified against its own config.json"]
    data = bytearray((out / "model.safetensors").read_bytes())
    data[-1] ^= 0x01
    (out / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="recorded in config.json"):
        MemGate.from_pretrained(out)
    # the tampered copy the audit used loads as a path (it is self-consistent), said as a user's
    copy = tampered_copy(tmp_path / RELEASED)
    with caplog.at_level(logging.INFO, logger="memgate.model.pretrained"):
        MemGate.from_pretrained(copy)
    assert any(f"loading {copy} as a user checkpoint" in r.getMessage() for r in caplog.records)


def test_training_refuses_the_released_name(tmp_path):
    """Only make release exports under the released name: train() (the default config's export
    name is the released one), the workbench and `memgate train --out` refuse it before any work."""
    from memgate.commands import cli
    from memgate.contract.config import load_config
    from memgate.datasets.user_triples import load_triples
    from memgate.train.config import TrainConfig
    from memgate.train.run import train
    from memgate.train.workbench import train_on_triples

    config = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml",
                         [f"data.data_dir={tmp_path / 'no-data'}", "data.regenerate_if_missing=false"])
    with pytest.raises(ValueError, match="memgate-minilm-l6 is the released gate's name; only `make release`"):
        train(config, guard=None)
    with pytest.raises(ValueError, match="released gate's name"):
        train(config, guard=None, out_dir=tmp_path / "elsewhere" / RELEASED)
    with pytest.raises(ValueError, match="released gate's name"):
        train(config, guard=None, out_dir=PACKAGED)
    triples = load_triples(REPO_ROOT / "examples/triples/dev.jsonl")
    with pytest.raises(ValueError, match="released gate's name"):
        train_on_triples(triples, triples, tmp_path / RELEASED, config, guards="none")
    assert cli.main(["train", "--out", str(tmp_path / RELEASED),
                     f"data.data_dir={tmp_path / 'no-data'}", "data.regenerate_if_missing=false"]) == 1
    assert not (tmp_path / RELEASED).exists() and not (tmp_path / "elsewhere").exists()
    assert release_pin.RELEASED_WEIGHTS_SHA256[RELEASED] == hashlib.sha256(
        (PACKAGED / "model.safetensors").read_bytes()).hexdigest()


def test_make_releases_export_rewrites_the_pin(tmp_path, monkeypatch):
    """Inside releasing() (make release) the export into the checkout's checkpoints/ is allowed
    and pins its weights; the gate then loads by name; outside it the same export is refused."""
    from memgate.model.export import export_gate

    clone = fake_package(tmp_path / "clone", checkout=True)
    use_package(monkeypatch, clone)
    pin_file = tmp_path / "release_pin.py"
    shutil.copyfile(pretrained.PIN_FILE, pin_file)
    monkeypatch.setattr(pretrained, "PIN_FILE", pin_file)
    monkeypatch.setitem(release_pin.RELEASED_WEIGHTS_SHA256, RELEASED,
                        release_pin.RELEASED_WEIGHTS_SHA256[RELEASED])  # restored after the test
    torch.manual_seed(1)
    gate = MemGate(MemGateConfig(dim=16, hidden=8, encoder_id="enc", encoder_revision="1", encoder_normalize=True))
    target = clone.parent / "checkpoints" / RELEASED
    with pytest.raises(ValueError, match="only `make release` exports under it"):
        export_gate(gate, target, {})
    with pretrained.releasing(RELEASED) as where:
        assert where == target
        export_gate(gate, target, {})
    digest = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    assert f'"{RELEASED}": "{digest}",' in pin_file.read_text()
    assert release_pin.RELEASED_WEIGHTS_SHA256[RELEASED] == digest
    loaded = MemGate.from_pretrained(RELEASED)
    assert torch.equal(loaded.head.bias, gate.head.bias)
    with pytest.raises(ValueError, match="only `make release`"):  # releasing() is over
        export_gate(gate, target, {})
