"""A training call prints nothing it was not asked for (no encoder "Loading weights" bar, no
Lightning INFO lines, tips or deprecation warnings, no wandb line with the CSV logger; progress
lines only without --quiet); runs never overwrite each other (two exports named alike get
runs/<name> and runs/<name>-2, a rerun reuses its own). (``memgate train``'s closing lines:
tests/commands/test_pipeline.py.)"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from itertools import islice

import pytest

from memgate.commands.cli import main as memgate_main
from memgate.contract.config import load_config, resolve_path
from memgate.datasets.user_triples import load_triples
from memgate.train.config import TrainConfig
from memgate.train.run_dirs import OWNER_FILE, run_dir_for


def head(src, dst, n):
    with open(src) as handle:
        dst.write_text("".join(islice(handle, n)))
    return dst


@pytest.fixture(scope="module")
def triples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quiet")
    return (tmp, head("examples/triples/train.jsonl", tmp / "train.jsonl", 40),
            head("examples/triples/dev.jsonl", tmp / "dev.jsonl", 20))


def config_for(tmp):
    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        f"export.runs_dir={tmp / 'runs'}", f"encoder.cache_dir={tmp / 'cache'}", "trainer.logger=csv",
        "trainer.progress_bar=false"])
    return replace(config, optim=replace(config.optim, max_epochs=2, warmup_steps=1))


def test_a_training_call_prints_nothing(triples, capfd, monkeypatch):
    from memgate.train.workbench import train_on_triples  # (the Lightning import prints nothing either)

    tmp, train, dev = triples
    wandb_before = os.environ.get("WANDB_MODE")
    monkeypatch.setenv("MEMGATE_QUIET", "1")  # what --quiet sets: no progress lines either
    capfd.readouterr()
    summary = train_on_triples(load_triples(train), load_triples(dev), tmp / "a" / "gate", config_for(tmp),
                               guards="none")
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)  # (memgate's own warnings go to the log, not here)
    assert summary["run_dir"] == str(tmp / "runs" / "gate")
    assert os.environ.get("WANDB_MODE") == wandb_before  # the CSV logger leaves wandb alone


def train_argv(tmp, train, dev, out):
    return ["train", "--train", str(train), "--dev", str(dev), "--out", str(out), "--guards", "none", "--quiet",
            "--no-calibration", "--json", f"export.runs_dir={tmp / 'runs'}", f"encoder.cache_dir={tmp / 'cache'}",
            "optim.max_epochs=2", "optim.warmup_steps=1", "trainer.logger=none"]


def test_two_exports_named_alike_keep_their_own_runs(triples, capsys):
    tmp, train, dev = triples
    first = tmp / "runs" / "gate"
    if not first.exists():  # the test above ran on the other xdist worker: this worker makes the first run
        assert memgate_main(train_argv(tmp, train, dev, tmp / "a" / "gate")) == 0
        capsys.readouterr()
    curve = (first / "curve.jsonl").read_text()
    assert memgate_main(train_argv(tmp, train, dev, tmp / "b" / "gate")) == 0
    summary = json.loads(capsys.readouterr().out)
    second = tmp / "runs" / "gate-2"
    assert summary["run_dir"] == str(second) and summary["export_dir"] == str(tmp / "b" / "gate")
    assert (first / "curve.jsonl").read_text() == curve  # the first run is untouched
    assert (second / "curve.jsonl").is_file() and (tmp / "b" / "gate" / "model.safetensors").is_file()
    assert json.loads((second / OWNER_FILE).read_text())["export_dir"] == str((tmp / "b" / "gate").resolve())


def test_a_run_directory_belongs_to_one_export(tmp_path):
    runs = tmp_path / "runs"
    assert run_dir_for(runs, "g", tmp_path / "ck" / "g") == runs / "g"
    assert run_dir_for(runs, "g", tmp_path / "ck" / "g") == runs / "g"  # the same export
    assert run_dir_for(runs, "g", tmp_path / "other" / "g") == runs / "g-2"
    (runs / "legacy").mkdir()
    (runs / "legacy" / "config.resolved.yaml").write_text("seed: 0\n")  # a run from before run_of.json
    assert run_dir_for(runs, "legacy", tmp_path / "ck" / "legacy") == runs / "legacy-2"
    assert run_dir_for(runs, "g", tmp_path / "other" / "g") == runs / "g-2"
    assert sorted(p.name for p in runs.iterdir()) == ["g", "g-2", "legacy", "legacy-2"]  # no temp files
