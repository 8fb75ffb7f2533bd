"""train.py checks its data before any work (issue 18): the split files must match meta.json's
data_hash (recomputed), mined triples their recorded sha256, before encoding and before the run
directory is written."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from memgate.contract.config import REPO_ROOT, load_config, resolve_path
from memgate.datasets.data_check import DataIntegrityError, file_sha256, recompute_data_hash, verify_data_dir
from memgate.datasets.datagen import generate
from memgate.train import run as train_run
from memgate.train.config import TrainConfig


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "data"
    generate(REPO_ROOT / "configs/data/tiny.yaml", out)
    return out


@pytest.fixture
def data(generated, tmp_path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(generated, copy)
    return copy


def config_for(tmp: Path, data: Path, *extra: str) -> TrainConfig:
    return load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        f"data.data_dir={data}", "data.use_mined=false", "selection.locomo_guard=false",
        "data.sources=[template,mined,gatemem]", "data.source_shares=null", "data.list_sources=[gatemem]",  # no natural-phrasing sources in it
        f"export.checkpoints_dir={tmp / 'checkpoints'}", f"export.runs_dir={tmp / 'runs'}",
        "export.name=check", "trainer.progress_bar=false", "trainer.logger=none", *extra])


@pytest.fixture
def no_encoding(monkeypatch):
    """Encoding is the first heavy step: reaching it means the data was not refused first."""
    def refuse(*args, **kwargs):
        raise AssertionError("training reached encoding with data that does not match its data_hash")
    monkeypatch.setattr(train_run, "PreferenceDataModule", refuse)


def test_the_recomputed_hash_is_the_generators(data):
    meta = json.loads((data / "meta.json").read_text())
    assert recompute_data_hash(data, meta["data_files"]) == meta["data_hash"]
    assert verify_data_dir(data)["data_hash"] == meta["data_hash"]


def _edit_one_triple(data: Path) -> None:
    path = data / "train" / "triples.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[3])
    row["pos_text"] = row["neg_text"]  # still valid JSON, still a triple: only the hash can tell
    lines[3] = json.dumps(row, sort_keys=True)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("damage", ["edited triple", "malformed line", "missing file"])
def test_train_refuses_changed_data_before_encoding_and_before_the_run_dir(tmp_path, data, no_encoding, damage):
    if damage == "edited triple":
        _edit_one_triple(data)
        pattern = r"hash to [0-9a-f]{64}, but meta\.json records data_hash [0-9a-f]{64}"
    elif damage == "malformed line":
        with (data / "dev" / "triples.jsonl").open("a") as handle:
            handle.write('{"query_text": \n')
        pattern = "records data_hash"
    else:
        (data / "test" / "labels.jsonl").unlink()
        pattern = r"test/labels\.jsonl: listed in .*meta\.json \(data_files\) but missing"
    started = time.perf_counter()
    with pytest.raises(DataIntegrityError, match=pattern):
        train_run.train(config_for(tmp_path, data), argv=["test"])
    assert time.perf_counter() - started < 20  # hashing only, no model, no encoding
    assert not (tmp_path / "runs").exists() and not (tmp_path / "checkpoints").exists()


def test_mined_triples_are_checked_against_their_recorded_sha256(data):
    key = "some-encoder-key"
    mined = data / "mined" / key / "triples.jsonl"
    mined.parent.mkdir(parents=True)
    shutil.copy(data / "train" / "triples.jsonl", mined)
    meta = json.loads((data / "meta.json").read_text())
    meta["hardness"] = {key: {"mined": {"sha256": file_sha256(mined)}}}
    (data / "meta.json").write_text(json.dumps(meta))
    verify_data_dir(data, mined_key=key)
    with mined.open("a") as handle:
        handle.write(mined.read_text().splitlines()[0] + "\n")  # one duplicated triple
    with pytest.raises(DataIntegrityError, match=r"mined/some-encoder-key/triples\.jsonl: sha256 .* re-mine"):
        verify_data_dir(data, mined_key=key)
    verify_data_dir(data)  # the split files are untouched


def test_a_bad_recorded_hash_is_refused_naming_the_field(data):
    meta = json.loads((data / "meta.json").read_text())
    meta["data_hash"] = 12
    (data / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataIntegrityError, match="field 'data_hash' must be a 64-digit"):
        verify_data_dir(data)
    meta["data_hash"], meta["data_files"] = "0" * 64, ["../outside.jsonl"]
    (data / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataIntegrityError, match="inside the directory"):
        verify_data_dir(data)


def test_memgate_train_refuses_changed_data_in_one_line(tmp_path, data, no_encoding, capsys):
    from memgate.commands.cli import main

    _edit_one_triple(data)
    status = main(["train", f"data.data_dir={data}", "data.use_mined=false", "selection.locomo_guard=false",
                   "selection.gatemem_guard=false", "selection.gatemem_routes_guard=false",
            "selection.text_risk_guard=false", "selection.metric=dev_pref_acc_gated", f"export.checkpoints_dir={tmp_path / 'checkpoints'}",
                   f"export.runs_dir={tmp_path / 'runs'}", "export.name=check", "trainer.progress_bar=false",
                   "trainer.logger=none"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("memgate train: error:")]
    assert status == 1 and len(errors) == 1, err
    assert errors[0].startswith("memgate train: error: DataIntegrityError:") and "records data_hash" in errors[0], err
    assert not (tmp_path / "runs").exists()
