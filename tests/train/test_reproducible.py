"""Training is reproducible bit for bit (issue 46, item 5): one seed, one config and one data set
give the same weights, in another process with another hash seed too. (Whether a fresh clone's
``make demo`` reproduces the released gate is ``make demo-check``, outside ``make test``:
docs/benchmarks.md.)"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from itertools import islice
from pathlib import Path

from memgate.contract.config import REPO_ROOT, load_config, resolve_path
from memgate.datasets.user_triples import load_triples
from memgate.train.config import TrainConfig
from memgate.train.workbench import train_on_triples

TRAIN = """
import sys
from dataclasses import replace
from pathlib import Path
from memgate.contract.config import load_config, resolve_path
from memgate.datasets.user_triples import load_triples
from memgate.train.config import TrainConfig
from memgate.train.workbench import train_on_triples
tmp = Path(sys.argv[1])
config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), sys.argv[3:])
config = replace(config, optim=replace(config.optim, batch_size=16, max_epochs=2, warmup_steps=2))
train_on_triples(load_triples(tmp / "train.jsonl"), load_triples(tmp / "dev.jsonl"), tmp / sys.argv[2], config,
                 guards="none", calibrate=False)
"""


def head(src: Path, dst: Path, n: int) -> Path:
    with open(src, encoding="utf-8") as handle:
        dst.write_text("".join(islice(handle, n)), encoding="utf-8")
    return dst


def weights_sha256(export: Path) -> str:
    return hashlib.sha256((export / "model.safetensors").read_bytes()).hexdigest()


def test_a_tiny_config_trains_to_the_same_weights_twice(tmp_path):
    """The workbench's training (the release's module, trainer and selection) on 64 real triples,
    twice: here, and in a fresh process with another PYTHONHASHSEED (set and dict order must not
    reach the weights). Both embed through one disk cache, so the inputs are the same vectors."""
    head(REPO_ROOT / "examples/triples/train.jsonl", tmp_path / "train.jsonl", 64)
    head(REPO_ROOT / "examples/triples/dev.jsonl", tmp_path / "dev.jsonl", 24)
    overrides = [f"export.runs_dir={tmp_path / 'runs'}", f"encoder.cache_dir={tmp_path / 'cache'}",
                 "trainer.progress_bar=false", "trainer.logger=none"]
    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), overrides)
    config = replace(config, optim=replace(config.optim, batch_size=16, max_epochs=2, warmup_steps=2))
    first = train_on_triples(load_triples(tmp_path / "train.jsonl"), load_triples(tmp_path / "dev.jsonl"),
                             tmp_path / "first", config, guards="none", calibrate=False)
    assert first["steps"] == 8
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYTHONHASHSEED": str(1 + int(os.environ.get("PYTHONHASHSEED", "0") or 0)), "MEMGATE_QUIET": "1"}
    subprocess.run([sys.executable, "-c", TRAIN, str(tmp_path), "second", *overrides], env=env, check=True,
                   cwd=tmp_path, timeout=300)
    assert weights_sha256(tmp_path / "first") == weights_sha256(tmp_path / "second")
    # every optimiser step's loss terms and learning rate, bit for bit (the exported step may be 0)
    curves = [(tmp_path / "runs" / name / "curve.jsonl").read_text() for name in ("first", "second")]
    assert curves[0] == curves[1]
    rows = [json.loads(line) for line in curves[0].splitlines()]
    assert len(rows) == 8 and rows[0]["loss"] != rows[-1]["loss"]  # it trained
