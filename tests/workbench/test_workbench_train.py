"""Train and evaluate on your own triples (docs/workbench.md), on tiny data: the too-small run
warns, the export loads with MemGate.from_pretrained, the card states the guards, every run
writes its training curve; evaluation gives gated vs reference accuracy with CIs by category."""

import json
from dataclasses import replace
from itertools import islice

import numpy as np
import pytest

from memgate.contract.config import load_config, resolve_path
from memgate.datasets.user_triples import load_triples
from memgate.eval.triples_eval import evaluate_triples
from memgate.model.gate import MemGate
from memgate.train.config import TrainConfig
from memgate.train.workbench import resolve_guards, train_on_triples


def head(src, dst, n):
    with open(src) as handle:
        dst.write_text("".join(islice(handle, n)))
    return dst


def tiny_config(tmp_path, **optim):
    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"),
                         [f"export.runs_dir={tmp_path / 'runs'}", f"encoder.cache_dir={tmp_path / 'cache'}",
                          "trainer.progress_bar=false", "trainer.logger=none"])
    return replace(config, optim=replace(config.optim, **optim))


@pytest.fixture(scope="module")
def too_small(tmp_path_factory):
    """40 triples, batch 256, warm-up 20: every step inside warm-up, one partial batch per epoch."""
    tmp = tmp_path_factory.mktemp("wb")
    train = load_triples(head("examples/triples/train.jsonl", tmp / "train.jsonl", 40))
    dev = load_triples(head("examples/triples/dev.jsonl", tmp / "dev.jsonl", 20))
    summary = train_on_triples(train, dev, tmp / "gate", tiny_config(tmp, max_epochs=2), guards="none")
    return tmp, summary


def test_a_too_small_run_says_so_and_still_exports_a_loadable_gate(too_small):
    tmp, summary = too_small
    warnings = " | ".join(summary["warnings"])
    assert "data too small for the batch size: 40 training examples < optim.batch_size=256" in warnings
    assert "every step falls inside warm-up: 2 planned optimiser steps <= optim.warmup_steps=20" in warnings
    assert "the loss has not moved" in warnings
    gate = MemGate.from_pretrained(tmp / "gate")
    assert gate.export_info["guards"].startswith("none (--guards none")
    assert gate.export_info["dev_set"].endswith("dev.jsonl")
    card = (tmp / "gate" / "README.md").read_text()
    assert "real-data selection guards: none (--guards none" in card
    assert "## Warnings" in card and "![training curve](training_curve.png)" in card
    assert (tmp / "gate" / "training_curve.png").stat().st_size > 10_000
    assert (tmp / "runs" / "gate" / "training_curve.png").exists()
    rows = [json.loads(x) for x in (tmp / "runs" / "gate" / "curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("loss_dpo" in r for r in rows)


def test_evaluate_on_your_triples_reports_accuracy_with_cis_by_category(too_small, tmp_path):
    tmp, _ = too_small
    test = head("examples/triples/test.jsonl", tmp_path / "test.jsonl", 30)
    metrics = evaluate_triples(tmp / "gate", test, tmp_path / "report", n_boot=200, seed=0)
    overall = metrics["overall"]
    assert overall["n"] == 30 and overall["groups"] >= 2
    for key in ("pref_acc_gated", "pref_acc_reference"):
        lo, hi = overall[key]["ci"]
        assert lo <= overall[key]["value"] <= hi
    rows = [json.loads(x) for x in test.read_text().splitlines()]
    assert set(metrics["by_category"]) == {r["category"] for r in rows}
    assert sum(m["n"] for m in metrics["by_category"].values()) == 30
    assert 0.0 <= metrics["suppression_auc"]["gate"] <= 1.0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "| **all** | 30 |" in report and (tmp_path / "report" / "accuracy_by_category.png").exists()


def test_precomputed_vectors_train_without_an_encoder_and_refuse_the_guards(tmp_path):
    rng = np.random.default_rng(0)
    dim = 16
    direction = rng.normal(size=dim)

    def rows(n, seed):
        r = np.random.default_rng(seed)
        out = []
        for i in range(n):
            q = r.normal(size=dim)
            out.append({"query_vector": q.tolist(), "pos_vector": (q + 0.5 * direction).tolist(),
                        "neg_vector": (q - 0.5 * direction + r.normal(size=dim)).tolist(),
                        "group": f"g{i % 5}", "category": "ab"[i % 2]})
        return out

    for name, seed, n in (("train", 1, 64), ("dev", 2, 32)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(n, seed)))
    train, dev = load_triples(tmp_path / "train.jsonl"), load_triples(tmp_path / "dev.jsonl")
    config = tiny_config(tmp_path, batch_size=16, max_epochs=2, warmup_steps=1)
    config = replace(config, trainer=replace(config.trainer, logger="tensorboard", log_every_n_steps=1))
    assert resolve_guards("auto", config, "vector")[0] == ()
    with pytest.raises(ValueError, match="need text triples"):
        resolve_guards("locomo,gatemem", config, "vector")
    with pytest.raises(ValueError, match="unknown guard"):
        resolve_guards("lcomo", config, "text")
    summary = train_on_triples(train, dev, tmp_path / "vgate", config, encoder_id="my-encoder")
    assert summary["guards"].startswith("none (default for pre-computed vectors")
    pytest.importorskip("tensorboard")
    assert list((tmp_path / "runs" / "vgate" / "tensorboard").rglob("events.out.tfevents.*"))
    gate = MemGate.from_pretrained(tmp_path / "vgate")
    assert gate.config.dim == dim and gate.config.encoder_id == "my-encoder"
    metrics = evaluate_triples(tmp_path / "vgate", tmp_path / "dev.jsonl", tmp_path / "rep", n_boot=100)
    assert set(metrics["by_category"]) == {"a", "b"} and metrics["overall"]["n"] == 32


def test_a_configs_source_shares_apply_only_to_triples_that_hold_those_sources():
    """A train config whose data.source_shares names the project's sources (the default config and
    the text-risk mix rows of docs/ablations.md, natural phrasing among them): your triples (no
    ``source``: user) get batches drawn as they are, where the shares raised "no training triples of
    that source to draw from"; a config without shares is kept as it is."""
    from memgate.train.workbench import own_source_shares

    default = load_config(TrainConfig, resolve_path("configs/train/default.yaml"))
    assert default.data.source_shares and own_source_shares(default, [{"query_text": "q"}]).data.source_shares is None
    unshared = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), ["data.source_shares=null"])
    assert own_source_shares(unshared, [{"query_text": "q"}]) is unshared
    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        "data.sources=[template,gatemem,phrasing_jailbreak]",
        "data.source_shares={template: 0.5, gatemem: 0.4, phrasing_jailbreak: 0.1}"])
    assert own_source_shares(config, [{"query_text": "q"}]).data.source_shares is None
    held = [{"source": s} for s in config.data.source_shares]
    assert own_source_shares(config, held).data.source_shares == config.data.source_shares
