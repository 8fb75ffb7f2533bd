"""The released gate is not stale: it was trained on what the default configs produce today."""

import json

import pytest

from memgate.contract.config import REPO_ROOT, load_config, to_dict
from memgate.train.config import TrainConfig

RELEASE = REPO_ROOT / "checkpoints" / "memgate-minilm-l6"
REPORT = REPO_ROOT / "reports" / "memgate-minilm-l6"


def released_info() -> dict:
    if not (RELEASE / "config.json").exists():
        pytest.fail("no released gate: run `make release` and commit checkpoints/memgate-minilm-l6")
    return json.loads((RELEASE / "config.json").read_text())["export"]


def test_release_files_are_committed():
    for name in ("config.json", "model.safetensors", "headline.json", "README.md"):
        assert (RELEASE / name).exists(), name
    for name in ("report.md", "metrics.json", "timings.json"):
        assert (REPORT / name).exists(), name


def test_release_was_trained_with_the_default_train_config():
    from memgate.train.config import ADDED_SINCE_RELEASE

    default = to_dict(load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml"))
    recorded = released_info()["train_config"]
    for dotted, keeps in ADDED_SINCE_RELEASE.items():  # a key the release predates must hold the
        section, key = dotted.split(".")  # value that keeps the behaviour it was trained with
        if key not in recorded.get(section, {}):
            assert default[section].pop(key) == keeps, f"{dotted} changed since the release: run `make release`"
    assert recorded == default, "configs/train/default.yaml changed since the release: run `make release`"


def test_release_data_hash_matches_the_default_data_config(tmp_path):
    """Regenerate the release's data (the default train config's data.data_config; text only, no
    audit) and compare the data hash."""
    from data_gen.generate import generate_from_config

    data_config = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml").data.data_config
    meta = generate_from_config(REPO_ROOT / data_config, tmp_path / "data", audit=False)
    assert meta["data_hash"] == released_info()["data_hash"], (
        "the default data config (or the generator) changed since the release: run `make release`"
    )


def test_release_loads_strictly_with_its_encoder():
    from memgate import MemGate
    from memgate.model.encoder import Encoder, EncoderConfig

    identity = Encoder(EncoderConfig(cache_dir=None)).identity
    gate = MemGate.from_pretrained(RELEASE, expected_encoder=identity)
    assert gate.config.dim == identity["dim"]
    headline = json.loads((RELEASE / "headline.json").read_text())
    assert {"pref_acc_gated", "pref_acc_reference", "routes"} <= set(headline)


def test_readme_tables_print_from_the_released_report():
    from memgate.eval.report.tables import tables

    metrics = json.loads((REPORT / "metrics.json").read_text())
    cubic = metrics["transfer"]["gatemem"]["cubic_check"]
    text = tables(REPORT)
    assert "| `learned_gate_namespace` |" in text
    assert f"AUC {cubic['auc_a']:.3f} -> {cubic['auc_b']:.3f}" in text
    assert f"credit: {'yes' if cubic['credit'] else 'no'}." in text


def test_release_help_prints_usage_and_releases_nothing(monkeypatch, capsys):
    """``--help`` used to start a full release (regenerating data/default): now it only prints."""
    from memgate.commands import pipeline, release

    def ran(*args, **kwargs):
        raise AssertionError("--help started the release")

    monkeypatch.setattr(pipeline, "run_pipeline", ran)
    with pytest.raises(SystemExit) as exit_:
        release.main(["--help"])
    assert exit_.value.code == 0 and "make release" in capsys.readouterr().out
