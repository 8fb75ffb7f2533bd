"""End to end on a tiny configuration: generate -> train -> export -> evaluate, for real."""

import json
from pathlib import Path

import pytest
import torch

from memgate.contract.config import REPO_ROOT, load_config, resolve_path
from memgate.datasets.datagen import generate
from memgate.model.gate import MemGate
from memgate.train.config import TrainConfig
from memgate.train.run import train

pytestmark = pytest.mark.slow


def tiny_config(tmp: Path, *extra: str) -> TrainConfig:
    return load_config(
        TrainConfig,
        resolve_path("configs/train/default.yaml"),
        [
            f"data.data_dir={tmp / 'data'}",
            "data.data_config=configs/data/tiny.yaml",
            # tiny data has no natural-phrasing sources: the pre-issue-33 mix
            "data.sources=[template,mined,gatemem]", "data.source_shares=null", "data.list_sources=[gatemem]",
            "data.use_mined=false",
            "optim.max_epochs=20",
            "optim.warmup_steps=5",
            "optim.lr=3e-3",
            "optim.batch_size=64",
            "selection.locomo_guard=false", "selection.gatemem_guard=false", "selection.gatemem_routes_guard=false",
            "selection.text_risk_guard=false", "selection.metric=dev_pref_acc_gated",
            f"export.checkpoints_dir={tmp / 'checkpoints'}",
            f"export.runs_dir={tmp / 'runs'}",
            "export.name=tiny",
            "trainer.progress_bar=false",
            "trainer.logger=csv",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    generate(REPO_ROOT / "configs/data/tiny.yaml", tmp / "data")
    summary = train(tiny_config(tmp), argv=["test"])
    return tmp, summary


def test_export_has_the_contract_files(trained):
    tmp, summary = trained
    export = Path(summary["export_dir"])
    for name in ("config.json", "model.safetensors", "headline.json", "README.md"):
        assert (export / name).exists(), name
    config = json.loads((export / "config.json").read_text())
    info = config["export"]
    assert info["data_hash"] == json.loads((tmp / "data" / "meta.json").read_text())["data_hash"]
    assert info["encoder"]["dim"] == 384 and info["seed"] == 0
    assert "git_sha" in info and "num_threads" in info and "calibration" in info
    assert (tmp / "runs" / "tiny" / "config.resolved.yaml").exists()
    # the hash of the triples actually trained on: recomputable from the data directory
    from memgate.train.run import encoder_from, training_triples, triples_hash

    cfg = tiny_config(tmp)
    rows = training_triples(cfg, tmp / "data", encoder_from(cfg))[1]
    assert info["train_triples_hash"] == triples_hash(rows) and len(info["train_triples_hash"]) == 64


def test_memgate_train_ends_with_a_few_lines_and_json_behind_a_flag(trained):
    from memgate.commands.train import report
    from memgate.train.run_dirs import OWNER_FILE

    tmp, summary = trained
    lines = report(summary, "tiny").splitlines()
    assert len(lines) <= 4 and lines[0].startswith(f"trained {summary['steps']} steps on ")
    assert lines[1] == f"exported {summary['export_dir']} (MemGate.from_pretrained); headline.json beside it"
    assert lines[2].startswith(f"run {tmp / 'runs' / 'tiny'} (resolved config")
    as_json = json.loads(report(summary, "tiny", as_json=True))
    assert as_json["export_dir"] == summary["export_dir"] and as_json["run_dir"] == str(tmp / "runs" / "tiny")
    assert as_json["steps"] == summary["steps"] and "seconds" in as_json
    owner = json.loads((tmp / "runs" / "tiny" / OWNER_FILE).read_text())["export_dir"]
    assert owner == str(Path(summary["export_dir"]).resolve())  # the run names its export


def test_fit_throughput_counts_every_triple_of_every_epoch(trained):
    """20 epochs over ungrouped triples: the fit consumed 20 x the training triples."""
    _, summary = trained
    consumed = summary["fit_triples_per_s"] * summary["seconds"]["train"]
    assert consumed == pytest.approx(20 * summary["train_examples"], rel=1e-9)


def test_training_beats_the_reference_on_test_triples(trained):
    _, summary = trained
    headline = summary["headline"]
    assert headline["pref_acc_gated"] > headline["pref_acc_reference"]


def test_evaluating_the_export_reproduces_its_headline(trained):
    from memgate.commands.evaluate_run import evaluate

    tmp, summary = trained
    export = Path(summary["export_dir"])
    metrics = evaluate(export, tmp / "data", tmp / "report", real_sources=(), n_boot=200)
    recorded = json.loads((export / "headline.json").read_text())
    fresh = metrics["headline"]
    assert abs(fresh["pref_acc_gated"] - recorded["pref_acc_gated"]) <= 1e-6
    for route, figures in recorded["routes"].items():
        for key, value in figures.items():
            if value is not None:
                assert abs(fresh["routes"][route][key] - value) <= 1e-6, (route, key)
    for name in ("report.md", "metrics.json", "routes.jsonl", "timings.json", "frontier.png"):
        assert (tmp / "report" / name).exists(), name


def test_evaluation_refuses_data_the_gate_did_not_train_on(trained, tmp_path, monkeypatch):
    import yaml

    from memgate.commands.evaluate_run import ensure_eval_data

    tmp, summary = trained
    export = Path(summary["export_dir"])
    ensure_eval_data(export, tmp / "data")  # its own data passes
    generate(REPO_ROOT / "configs/data/tiny.yaml", tmp_path / "other_seed", seed=1)
    with pytest.raises(ValueError, match="data hash mismatch") as plain:
        ensure_eval_data(export, tmp_path / "other_seed")
    assert "without the real data" not in str(plain.value)
    # Real text asked for but not found: the error names the likely cause.
    monkeypatch.delenv("MEMGATE_DATA", raising=False)
    config = yaml.safe_load((REPO_ROOT / "configs/data/tiny.yaml").read_text())
    config["real_text"] = {"enabled": True, "real_data_root": str(tmp_path / "nowhere")}
    (tmp_path / "no_real.yaml").write_text(yaml.safe_dump(config))
    generate(tmp_path / "no_real.yaml", tmp_path / "no_real", seed=1)
    with pytest.raises(ValueError, match="without the real data"):
        ensure_eval_data(export, tmp_path / "no_real")


def test_kleene_gate_never_exposes_a_metadata_visible_violation(trained):
    """With clean metadata the Kleene gate cannot expose an item whose violated axis the
    route-visible metadata reveals (a structural control)."""
    from memgate.datasets.synthetic import load_split
    from memgate.eval.engine import prepare
    from memgate.eval.evaluation import EvalSettings, run_source
    from memgate.train.run import encoder_from

    tmp, _ = trained
    source = load_split(tmp / "data", "test")
    prepared = prepare(source, encoder_from(tiny_config(tmp)))
    result = run_source(prepared, EvalSettings(routes=["kleene_gate"], budgets=(20,)))
    exposed = 0
    for qid, ranked in zip(result.query_ids, result.rankings["kleene_gate"]):
        for mid in ranked[:20]:
            label = source.label(qid, mid)
            if label.admissible is False and label.metadata_visible:
                exposed += 1
    assert exposed == 0


def test_label_permutation_control_is_at_chance(tmp_path):
    """Shuffled preferences must not teach the gate anything about the test set."""
    data = tmp_path / "data"
    generate(REPO_ROOT / "configs/data/tiny.yaml", data)
    summary = train(tiny_config(tmp_path, "data.shuffle_labels=true", "export.headline=true"), argv=["test"])
    gated = summary["headline"]["pref_acc_gated"]
    reference = summary["headline"]["pref_acc_reference"]
    # No better than the untrained reference by more than noise.
    assert gated <= reference + 0.05


def test_selected_metrics_belong_to_the_exported_weights(trained):
    """The selection records the dev accuracy of the very weights it exports."""
    from memgate.contract.triples import read_triples
    from memgate.eval.engine import encoder_for_gate
    from memgate.eval.headline import preference_accuracy

    tmp, summary = trained
    gate = MemGate.from_pretrained(summary["export_dir"])
    rows = read_triples(tmp / "data" / "dev" / "triples.jsonl", text_visible_only=True)
    encoder = encoder_for_gate(gate)
    q, p, n = (encoder.encode([r[k] for r in rows], progress=False)
               for k in ("query_text", "pos_text", "neg_text"))
    fresh = preference_accuracy(gate, q, p, n)["pref_acc_gated"]
    assert abs(fresh - summary["selection"]["dev_pref_acc_gated"]) <= 1e-6


def test_a_true_precision_run_exports_a_loadable_float32_gate(trained, tmp_path):
    """64-true trains the weights in float64; the checkpoint format stays float32 and loads."""
    tmp, _ = trained
    summary = train(tiny_config(tmp_path, f"data.data_dir={tmp / 'data'}", "trainer.precision=64-true",
                                "optim.max_steps=3", "optim.max_epochs=1", "export.headline=true"),
                    argv=["test"])
    gate = MemGate.from_pretrained(summary["export_dir"])
    assert {p.dtype for p in gate.parameters()} == {torch.float32}
    # The headline evaluated the export itself (it loads the checkpoint from disk).
    assert summary["headline"]["pref_acc_reference"] == pytest.approx(trained[1]["headline"]["pref_acc_reference"])


def test_the_data_card_goes_beside_the_report_where_the_data_has_one(tmp_path):
    from memgate.commands.pipeline import copy_data_card

    data_dir, report_dir = tmp_path / "data", tmp_path / "reports" / "gate"
    data_dir.mkdir()
    assert copy_data_card(data_dir, report_dir) is None and not report_dir.exists()
    (data_dir / "sources.json").write_text('{"natural_injection": {"train_triples": 12}}')
    copied = copy_data_card(data_dir, report_dir)
    assert copied == report_dir / "sources.json"
    assert copied.read_text() == '{"natural_injection": {"train_triples": 12}}'
