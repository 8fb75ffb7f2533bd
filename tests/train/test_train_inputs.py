"""``memgate train`` / ``train.py`` validate every input before any work (issue 34): with a missing
data directory and ``data.regenerate_if_missing=false`` the audit's run encoded the LoCoMo-select
guard for about 3 minutes before its one-line error. Encoding is the first heavy step of both the
guards and training: reaching it means an input was not checked first."""

from __future__ import annotations

import pytest

from memgate.train import run as train_run
from memgate.train import selection


@pytest.fixture
def no_encoding(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("reached encoding before the inputs were checked")
    monkeypatch.setattr(selection, "prepare", refuse)  # the guards' encoding of the real select parts
    monkeypatch.setattr(train_run, "PreferenceDataModule", refuse)  # training's
    monkeypatch.setattr(train_run, "generate", refuse)  # (regenerating is work too)


@pytest.mark.parametrize("setting, field", [
    (["data.regenerate_if_missing=false"], "data.data_dir"),
    (["data.regenerate_if_missing=true", "data.data_config=configs/data/no-such.yaml"], "data.data_config"),
], ids=["missing-data-dir", "missing-data-config"])
def test_memgate_train_refuses_a_missing_input_in_one_line_before_any_encoding(tmp_path, no_encoding, capsys,
                                                                                 setting, field):
    from memgate.commands.cli import main

    status = main(["train", f"data.data_dir={tmp_path / 'missing'}", *setting,  # both guards on (the default)
                   f"export.checkpoints_dir={tmp_path / 'checkpoints'}", f"export.runs_dir={tmp_path / 'runs'}",
                   "export.name=check", "trainer.progress_bar=false", "trainer.logger=none"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("memgate train: error:")]
    assert status == 1 and len(errors) == 1, err
    assert errors[0].startswith(f"memgate train: error: {field}: ") and "reached encoding" not in err, errors[0]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "checkpoints").exists()
