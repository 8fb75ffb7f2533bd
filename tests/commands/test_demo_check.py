"""``make demo-check`` (issue 46, item 5): the comparison of a demo's gate with the released one
(bit for bit, within 2e-5, or not reproduced), the embedding cache the demo warns about and
``make release`` empties, and the flag's wiring. The check itself runs a whole demo in a fresh clone
(~5 min): outside ``make test``, its figures in docs/benchmarks.md."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from memgate.commands import demo_check
from memgate.contract.config import REPO_ROOT
from memgate.model.encoder import EmbeddingCache
from memgate.model.gate import MemGate

RELEASE = REPO_ROOT / "checkpoints" / "memgate-minilm-l6"


def edited(tmp_path, name, delta=0.0, step=None):
    """A copy of the released gate, one weight moved by ``delta`` (and its step set to ``step``)."""
    gate = MemGate.from_pretrained(RELEASE)
    with torch.no_grad():
        gate.head.bias[0] += delta
    export = dict(gate.export_info)
    if step is not None:
        export["selection"] = {**export["selection"], "step": step}
    out = gate.save_pretrained(tmp_path / name, extra_config=export)
    shutil.copyfile(RELEASE / "headline.json", out / "headline.json")
    return out


def test_the_verdicts_and_their_bound(tmp_path):
    same = demo_check.compare_gates(edited(tmp_path, "same"), RELEASE)
    assert same["verdict"] == "bit for bit" and same["max_abs_diff"] == 0.0 and same["same_headline_table"]
    assert same["demo_sha256"] == same["release_sha256"] and same["steps"][0] == same["steps"][1]
    near = demo_check.compare_gates(edited(tmp_path, "near", delta=1.2e-5), RELEASE)  # the audit's difference
    assert near["verdict"] == "within 2e-05" and near["worst_tensor"] == "head.bias"
    assert near["max_abs_diff"] == pytest.approx(1.2e-5, rel=0.05)
    far = demo_check.compare_gates(edited(tmp_path, "far", delta=5e-5), RELEASE)
    assert far["verdict"] == "not reproduced"
    release_step = json.loads((RELEASE / "config.json").read_text())["export"]["selection"]["step"]
    other_step = demo_check.compare_gates(edited(tmp_path, "step", step=release_step + 1), RELEASE)
    assert other_step["verdict"] == "not reproduced"  # the same weights, another exported step
    lines = demo_check.report_lines(near)
    assert lines[-1] == "verdict: within 2e-05" and "head.bias" in lines[2]


def test_the_demo_names_a_warm_cache_and_make_release_empties_it(tmp_path):
    assert demo_check.warm_cache_note(tmp_path) is None and demo_check.cached_vectors(tmp_path) == 0
    cache = EmbeddingCache(tmp_path / demo_check.EMBED_CACHE)
    cache.put_many("enc", {f"h{i}": np.ones(4, dtype=np.float32) for i in range(3)})
    note = demo_check.warm_cache_note(tmp_path)
    assert note and "holds 3 vectors from earlier runs" in note and "make demo-check" in note
    assert demo_check.clear_embedding_cache(tmp_path) == 3
    assert not (tmp_path / demo_check.EMBED_CACHE).exists() and demo_check.warm_cache_note(tmp_path) is None


def test_check_release_runs_the_demo_in_a_clone_with_the_demos_options(monkeypatch):
    from memgate.commands import demo

    calls = []
    monkeypatch.setattr(demo, "check_release",
                        lambda root, release, args, keep: calls.append((root, release, args, keep)) or 0)
    assert demo.main(["--check-release", "--n-boot", "200", "optim.max_epochs=1"]) == 0
    (root, release, args, keep), = calls
    assert root == REPO_ROOT and release == RELEASE and not keep
    assert args == ["--n-boot=200", "--gate-threads=1", "optim.max_epochs=1"]
