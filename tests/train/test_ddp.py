"""Two-process DDP on CPU (gloo) trains 2 steps and both ranks hold identical weights."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memgate.contract.config import REPO_ROOT
from memgate.datasets.datagen import generate

pytestmark = pytest.mark.slow


def test_ddp_two_processes_end_with_identical_weights(tmp_path: Path):
    data = tmp_path / "data"
    generate(REPO_ROOT / "configs/data/tiny.yaml", data)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable, "train.py", "--config", "configs/train/default.yaml",
        f"data.data_dir={data}", "data.use_mined=false", "data.sources=[template,mined,gatemem]", "data.source_shares=null", "data.list_sources=[gatemem]", "selection.locomo_guard=false", "selection.gatemem_guard=false", "selection.gatemem_routes_guard=false",
            "selection.text_risk_guard=false", "selection.metric=dev_pref_acc_gated",
        "trainer.strategy=ddp", "trainer.devices=2", "trainer.accelerator=cpu",
        "trainer.num_threads=1", "optim.max_steps=2", "optim.batch_size=32",
        "trainer.val_check_interval=2", "export.headline=false", "trainer.progress_bar=false",
        f"export.checkpoints_dir={tmp_path / 'ck'}", f"export.runs_dir={tmp_path / 'runs'}",
        "export.name=ddp",
    ]
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]  # rank 1 included: it must not crash
    run = tmp_path / "runs" / "ddp"
    digests = [(run / f"weights_final_rank{r}.sha256").read_text() for r in (0, 1)]
    assert digests[0] == digests[1]
    assert digests[0] != (run / "weights_initial_rank0.sha256").read_text()  # it did train
    assert (tmp_path / "ck" / "ddp" / "model.safetensors").exists()
