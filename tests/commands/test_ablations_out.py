"""``memgate ablations`` writes its rows and table to a run directory and touches the committed
``reports/ablations/`` only with ``--update-reports`` (issue 46, item 5: `memgate ablations --only
width_256 --seeds 0` rewrote the committed table from the one row on disk, 1,769 lines deleted)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from memgate.commands import ablations
from memgate.contract.config import REPO_ROOT, config_hash

COMMITTED = REPO_ROOT / "reports" / "ablations"


def digests(folder: Path) -> dict:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in ("ablations.md", "ablations.json", "ablations.png")}


def finish(run: Path, name: str, seed: int) -> None:
    """A finished (row, seed) on disk, as a training run leaves it (no training here)."""
    overrides = ablations.load_rows("full", [name])[name]["overrides"]
    row_dir = run / name / f"seed{seed}"
    config = ablations.row_config(name, overrides, seed, row_dir)
    row_dir.mkdir(parents=True)
    (row_dir / "results.json").write_text(json.dumps({
        "row": name, "seed": seed, "config_hash": config_hash(config),
        "data_hash": ablations.data_hash_of(config), "figures": {"pref_acc_gated": 0.5, "top5_inadmissible_tv": 0.8},
        "ci": {}}))


def test_a_one_row_run_leaves_the_committed_table(tmp_path, capsys):
    before = digests(COMMITTED)
    run = tmp_path / "run"
    finish(run, "width_256", 0)
    assert ablations.main(["--only", "width_256", "--seeds", "0", "--table-only", "--out", str(run)]) == 0
    assert digests(COMMITTED) == before
    assert list(json.loads((run / "ablations.json").read_text())) == ["width_256"]
    assert (run / "ablations.png").exists() and "committed reports/ablations/ are untouched" in capsys.readouterr().out
    assert ablations.OUT_DIR == REPO_ROOT / "runs" / "ablations"  # the default run directory
    with pytest.raises(SystemExit) as refused:  # the committed folder as the run directory: only to update it
        ablations.main(["--table-only", "--out", str(COMMITTED)])
    assert refused.value.code == 2 and "--update-reports" in capsys.readouterr().err
    assert digests(COMMITTED) == before


def test_update_reports_writes_the_committed_table_naming_the_rows_it_drops(tmp_path, monkeypatch, capsys):
    reports = tmp_path / "reports" / "ablations"
    shutil.copytree(COMMITTED, reports, ignore=shutil.ignore_patterns("*-v*"))
    monkeypatch.setattr(ablations, "REPORTS_DIR", reports)
    had = sorted(json.loads((reports / "ablations.json").read_text()))
    run = tmp_path / "run"
    finish(run, "width_256", 0)
    assert ablations.main(["--table-only", "--out", str(run), "--update-reports"]) == 0
    assert digests(reports) == digests(run)
    err = capsys.readouterr().err
    dropped = [name for name in had if name != "width_256"]
    assert dropped and f"{len(dropped)} row(s) of the committed table are not finished in {run}" in err
