"""Every shipped config composes, and bad configs fail loudly naming the key."""

import re
from pathlib import Path

import pytest

from memgate.contract.config import REPO_ROOT, ConfigError, load_config, parse_overrides
from memgate.train.config import TrainConfig

TRAIN_CONFIGS = sorted((REPO_ROOT / "configs" / "train").glob("*.yaml"))


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=lambda p: p.name)
def test_every_train_config_composes(path: Path):
    config = load_config(TrainConfig, path)
    assert config.gate.hidden > 0 and config.optim.lr > 0


def test_overrides_are_typed_and_nested():
    config = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml",
                         ["optim.lr=3e-4", "gate.hidden=256", "trainer.logger=none"])
    assert config.optim.lr == pytest.approx(3e-4)
    assert config.gate.hidden == 256 and config.trainer.logger == "none"
    assert parse_overrides(["a.b=1", "c=x"]) == {"a": {"b": 1}, "c": "x"}


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lrr=1", "optim.lrr"),
        ("gate.hidden=1.5", "gate.hidden"),
        ("optim.lr=fast", "optim.lr"),
        ("loss.kind=listwise", "group_negatives"),
        ("trainer.logger=mlflow", "trainer.logger"),
        ("seed=abc", "seed"),
        ("nonsense", "key=value"),
        ("data.sources=[real]", "data.sources"),
        ("data.sources=[]", "data.sources"),
    ],
)
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", [override])


def test_label_permutation_refuses_grouped_negatives():
    """Swapping m+ with one m- of a group would leave the other negatives' true labels in place."""
    with pytest.raises(ConfigError, match="data.shuffle_labels"):
        load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml",
                    ["data.shuffle_labels=true", "data.group_negatives=true"])


ABLATIONS = sorted((REPO_ROOT / "configs" / "ablations").glob("*.yaml"))


@pytest.mark.parametrize("path", ABLATIONS, ids=lambda p: p.stem)
def test_every_ablation_overlay_composes(path: Path, tmp_path: Path):
    from memgate.commands.ablations import load_rows, row_config

    text = path.read_text()
    assert text.startswith("# ") and "# Run: python -m memgate.commands.ablations" in text
    rows = load_rows("full", [path.stem])
    config = row_config(path.stem, rows[path.stem]["overrides"], seed=1, row_dir=tmp_path)
    assert config.seed == 1


def test_small_grid_has_the_twelve_rows():
    from memgate.commands.ablations import load_rows

    assert len(load_rows("small", None)) == 12


def test_data_sources_select_training_triples_by_origin(tmp_path: Path):
    """data.sources keeps only triples whose "source" is listed (the data-source ablations)."""
    import json

    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.train.run import training_triples

    rows = [{"query_text": f"q{i}", "pos_text": f"p{i}", "neg_text": f"n{i}", "text_visible": True,
             "source": source} for i, source in enumerate(["template", "gatemem", "mined", "gatemem"])]
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "triples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    encoder = Encoder(EncoderConfig(), repo_root=REPO_ROOT)
    config = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml",
                         ["data.use_mined=false", "data.sources=[gatemem]", "data.source_shares=null"])
    _, kept = training_triples(config, tmp_path, encoder)
    assert [r["query_text"] for r in kept] == ["q1", "q3"]
    config = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", ["data.use_mined=false"])
    assert len(training_triples(config, tmp_path, encoder)[1]) == 4  # the default takes every origin


def test_a_row_with_source_shares_is_checked_for_stale_triples(tmp_path: Path):
    """data.source_shares is a dict: the memo of current_triples_hash must not hash config.data
    (the textrisk_share_* rows' table rebuild raised "unhashable type: 'dict'")."""
    import json

    from memgate.commands.ablations import current_triples_hash
    from memgate.train.run import triples_hash

    rows = [{"query_text": f"q{i}", "pos_text": f"p{i}", "neg_text": f"n{i}", "text_visible": True,
             "source": source} for i, source in enumerate(["template", "gatemem", "gatemem"])]
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "triples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "meta.json").write_text("{}")
    config = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", [
        f"data.data_dir={tmp_path}", "data.use_mined=false", "data.sources=[template,gatemem]",
        "data.source_shares={template: 0.25, gatemem: 0.75}"])
    assert current_triples_hash(config) == triples_hash(rows)


def test_ablation_table_is_rebuilt_from_finished_rows_only(tmp_path: Path, monkeypatch):
    """--table-only trains nothing: it reads the rows whose config hash and data hash still match
    and skips the stale ones (a row whose overlay changed since it ran, or that ran on other data)."""
    import json

    from memgate.commands import ablations
    from memgate.contract.config import config_hash

    monkeypatch.setattr(ablations, "OUT_DIR", tmp_path)
    rows = ablations.load_rows("full", ["baseline", "no_product", "q_only"])
    for name, seed, config_fresh, data_fresh, triples in (
            ("baseline", 0, True, True, None), ("baseline", 1, True, True, None),
            ("baseline", 2, True, False, None), ("baseline", 3, True, True, "re-mined-since"),
            ("no_product", 0, False, True, None), ("q_only", 0, True, True, None)):
        row_dir = tmp_path / name / f"seed{seed}"
        config = ablations.row_config(name, rows[name]["overrides"], seed, row_dir)
        row_dir.mkdir(parents=True)
        (row_dir / "results.json").write_text(json.dumps({
            "row": name, "seed": seed, "config_hash": config_hash(config) if config_fresh else "stale",
            "data_hash": ablations.data_hash_of(config) if data_fresh else "regenerated-since",
            "train_triples_hash": triples, "figures": {"pref_acc_gated": 0.5 + seed / 10},
            "ci": {"l_rc@20": [0.1, 0.2 + seed]}}))
    assert ablations.finished_row("no_product", rows["no_product"]["overrides"], 0) is None
    assert ablations.finished_row("baseline", rows["baseline"]["overrides"], 2) is None
    assert ablations.finished_row("baseline", rows["baseline"]["overrides"], 3) is None
    # These rows have no real-data figures (as after --no-real): a run that evaluates real data
    # reruns them, while the table keeps them.
    assert ablations.finished_row("baseline", rows["baseline"]["overrides"], 0) is not None
    assert ablations.finished_row("baseline", rows["baseline"]["overrides"], 0, need_real=True) is None
    ablations.main(["--only", "baseline,no_product", "--seeds", "0,1,2", "--table-only"])
    table = json.loads((tmp_path / "ablations.json").read_text())
    assert list(table) == ["baseline", "q_only"]  # a small-grid call keeps the full grid's finished rows
    assert table["baseline"]["pref_acc_gated"] == {"mean": 0.55, "min": 0.5, "max": 0.6, "n_seeds": 2}
    markdown = (tmp_path / "ablations.md").read_text()
    assert "| `baseline` | 0,1 | 0.550 [0.500, 0.600] |" in markdown  # the seeds behind each mean
    assert "| `baseline` | 1 | [0.100, 1.200] |" in markdown  # the per-seed group CI table


@pytest.mark.parametrize("override, key", [
    ("loss.kind=foo", "loss.kind"), ("gate.features=foo", "gate.features"),
    ("gate.activation=foo", "gate.activation"), ("gate.init_std=0.1", "gate.init_std"),
    ("gate.dropout=2", "gate.dropout"), ("gate.hidden=0", "gate.hidden"),
    ("gate.mask_kind=matrix", "gate.mask_kind"), ("loss.temperature=0", "loss.temperature"),
    ("optim.lr=-1", "optim.lr"), ("optim.max_epochs=0", "optim.max_epochs"),
    ("trainer.precision=foo", "trainer.precision"), ("selection.max_recall_drop=5", "selection.max_recall_drop"),
    ("optim.max_steps=0", "optim.max_steps"), ("data.max_negatives=0", "data.max_negatives"),
    ("selection.metric=dev_loss", "selection.metric"),
    ("selection.text_risk_sources=[natural_weather]", "selection.text_risk_sources"),
])
def test_bad_training_values_fail_at_load_naming_the_key(override, key):
    """Values the gate, the loss or the trainer would reject fail when the config loads (before any
    run directory, data or encoder), with the dotted key the user wrote."""
    with pytest.raises(ConfigError, match=re.escape(key)):
        load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", [override])


def test_selection_figures_read_the_selection_history():
    from memgate.commands.ablations import selection_figures

    macro = lambda v: {"value": v, "ci": [v - 0.01, v + 0.01]}  # noqa: E731
    history = [{"step": 0, "dev_pref_acc_gated": 0.47, "guard": {"passed": True}, "text_risk_macro": macro(0.0)},
               {"step": 45, "dev_pref_acc_gated": 0.49, "guard": {"passed": True}, "text_risk_macro": macro(0.03)},
               {"step": 90, "dev_pref_acc_gated": 0.62, "guard": {"passed": False}, "text_risk_macro": macro(0.05)}]
    chosen = {**history[1], "guard": {"passed": True, "text_risk": {"categories": {"jailbreak": {"value": 0.04}}}},
              "passed": True}
    figures = selection_figures({"selection": chosen, "selection_history": history})
    assert figures == {"selected_step": 45, "selected_dev_acc": 0.49, "best_trained_dev_acc": 0.62,
                       "trained_points_passing_guard": 1, "selected_text_risk_macro": 0.03,
                       "best_trained_text_risk_macro": 0.05, "best_passing_text_risk_macro": 0.03,
                       "exported_passes_guards": True, "selected_text_risk_jailbreak": 0.04}
    step0 = selection_figures({"selection": {**history[0], "passed": True}, "selection_history": history})
    assert step0["exported_passes_guards"] is False  # a step-0 export is never a release candidate


def test_excluded_sources_are_named_in_a_warning(tmp_path: Path, caplog):
    """Triples of a source that data.sources leaves out (a real-phrasing source with the default
    data.sources) do not train, and training says so: logged and returned for the export."""
    import json
    import logging

    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.train.run import training_triples, training_triples_checked

    sources = ["template", "phrasing_sycophancy", "mined", "phrasing_sycophancy", "gatemem"]
    rows = [{"query_text": f"q{i}", "pos_text": f"p{i}", "neg_text": f"n{i}", "text_visible": True,
             "source": source} for i, source in enumerate(sources)]
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "triples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    encoder = Encoder(EncoderConfig(), repo_root=REPO_ROOT)
    default = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml", [  # the pre-issue-33 default
        "data.use_mined=false", "data.sources=[template,mined,gatemem]", "data.source_shares=null"])
    assert default.data.sources == ("template", "mined", "gatemem")
    with caplog.at_level(logging.WARNING, logger="memgate.train.run"):
        _, kept, warning = training_triples_checked(default, tmp_path, encoder)
    assert [r["query_text"] for r in kept] == ["q0", "q2", "q4"]
    assert "phrasing_sycophancy (2 triples)" in warning and "excludes" in warning
    assert warning in caplog.text
    with_it = load_config(TrainConfig, REPO_ROOT / "configs/train/default.yaml",
                          ["data.use_mined=false", "data.sources=[template,mined,gatemem,phrasing_sycophancy]",
                           "data.source_shares=null"])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memgate.train.run"):
        path, kept = training_triples(with_it, tmp_path, encoder)
    assert len(kept) == 5 and "excludes" not in caplog.text


PHRASING_ROWS = sorted((REPO_ROOT / "configs" / "ablations").glob("phrasing_*.yaml"))


@pytest.mark.parametrize("path", PHRASING_ROWS, ids=lambda p: p.stem)
def test_phrasing_rows_train_on_their_own_data_config(path: Path, tmp_path: Path):
    """Each real-phrasing row trains on a data config that is default.yaml with exactly its
    sources on, in its own data dir, and lists those sources in data.sources."""
    import yaml

    from memgate.commands.ablations import load_rows, row_config
    from memgate.train.config import DEFAULT_SOURCES, PHRASING_SOURCES

    config = row_config(path.stem, load_rows("full", [path.stem])[path.stem]["overrides"], 0, tmp_path)
    data_config = REPO_ROOT / config.data.data_config
    spec = yaml.safe_load(data_config.read_text())
    on = [name for name, flag in spec["real_phrasing"]["sources"].items() if flag]
    short = path.stem.removeprefix("phrasing_")
    assert on == (list(PHRASING_SOURCES) if short == "all" else [f"phrasing_{short}"])
    assert config.data.sources == DEFAULT_SOURCES + tuple(on)
    assert config.data.data_dir == f"data/{path.stem}" and data_config.stem == path.stem
    default = yaml.safe_load((REPO_ROOT / "configs/data/default.yaml").read_text())
    assert {k: v for k, v in spec.items() if k != "real_phrasing"} == \
        {k: v for k, v in default.items() if k != "real_phrasing"}
