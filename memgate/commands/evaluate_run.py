"""The work of ``memgate evaluate`` (``memgate.commands.evaluate`` parses the arguments and the
config first, then imports this module: torch and the evaluation load only for a run).
``evaluate`` is also what ``make release``, ``make demo`` and the ablations call."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import torch

from memgate.contract.config import REPO_ROOT, ConfigError, resolve_path
from memgate.contract.defaults import RERANK_DEPTH
from memgate.contract.jsonl import write_jsonl
from memgate.datasets.cases import load_cases
from memgate.datasets.datagen import generate
from memgate.datasets.synthetic import load_split, read_meta
from memgate.eval.config import EvalConfig, checkpoint_data_dir
from memgate.eval.engine import (
    CORE_ROUTES,
    breakdowns,
    build_real_source,
    encoder_for_gate,
    fit_embed_classifier,
    gatemem_transfer,
    macro,
    prepare,
    source_metrics,
    test_preferences,
)
from memgate.eval.evaluation import (
    EvalSettings,
    PreparedSource,
    run_source,
)
from memgate.eval.headline import build_headline
from memgate.eval.report.markdown import write_report
from memgate.eval.report.plots import write_plots
from memgate.eval.sweep import run_sweep
from memgate.eval.triples_eval import evaluate_triples
from memgate.model.encoder import Encoder, EncoderConfig, set_offline_defaults
from memgate.model.export import write_json
from memgate.model.gate import MemGate
from memgate.studies.verifiers.study import run_from_evaluate

log = logging.getLogger(__name__)


def evaluate(
    checkpoint: Optional[Path],
    data_dir: Optional[Path],
    out_dir: Path,
    routes: Sequence[str] = CORE_ROUTES,
    real_sources: Sequence[str] = ("locomo", "gatemem"),
    real_data_root: Optional[str] = None,
    n_boot: int = 10_000,
    seed: int = 0,
    num_threads: int = 2,
    extra_sources: Sequence[PreparedSource] = (),
    sweep_seeds: int = 0,
    sweep_rows: str = "first_seed",
    verifiers: Sequence[str] = (),
    verifier_options: Optional[dict] = None,
    rerank_depth: int = RERANK_DEPTH,
    gate_threads: Optional[int] = None,
) -> dict:
    set_offline_defaults()
    torch.set_num_threads(num_threads)
    started = time.perf_counter()
    timings: dict = {"routes": {}, "embed": {}}
    gate = None
    drop_threshold = None
    encoder = None
    if checkpoint is not None:
        gate = MemGate.from_pretrained(checkpoint)
        gate.eval()
        calibration = gate.export_info.get("calibration")
        if calibration is not None:
            # null = the calibration found no feasible threshold: the drop route keeps everything.
            threshold = calibration.get("threshold")
            drop_threshold = float("inf") if threshold is None else float(threshold)
        encoder = encoder_for_gate(gate)
    settings = EvalSettings(routes=list(routes), n_boot=n_boot, seed=seed,
                            drop_threshold=drop_threshold, rerank_depth=rerank_depth,
                            gate_threads=gate_threads)

    prepared: list[PreparedSource] = list(extra_sources)
    if data_dir is not None:
        if encoder is None:
            encoder = Encoder(EncoderConfig(), repo_root=REPO_ROOT)
        t0 = time.perf_counter()
        prepared.append(prepare(load_split(data_dir, "test"), encoder))
        timings["embed"]["synthetic_test"] = time.perf_counter() - t0
        if any(r.startswith("embed_classifier") for r in routes):
            t0 = time.perf_counter()
            settings.classifier, calibration = fit_embed_classifier(data_dir, encoder, seed)
            settings.classifier_threshold = calibration.threshold if calibration else None
            timings["embed_classifier_fit"] = time.perf_counter() - t0
        for name in real_sources:
            t0 = time.perf_counter()
            source = build_real_source(name, real_data_root)
            if source is not None:
                prepared.append(prepare(source, encoder))
                timings["embed"][name] = time.perf_counter() - t0

    metrics: dict = {}
    all_rows: list = []
    breakdown: dict = {}
    skipped: dict = {}
    results: dict = {}
    for item in prepared:
        result = run_source(item, settings, gate)
        results[item.source.name] = result
        all_rows.extend(result.rows)
        metrics[item.source.name] = source_metrics(item.source, result, settings)
        for route, (n_cos, n_gate) in result.candidates.items():
            n = max(1, len(result.query_ids))
            metrics[item.source.name][route]["candidates_scored_cosine"] = {"value": n_cos / n, "ci": [None, None]}
            metrics[item.source.name][route]["candidates_scored_gate"] = {"value": n_gate / n, "ci": [None, None]}
        breakdown[item.source.name] = breakdowns(item.source, result, settings)
        skipped[item.source.name] = result.skipped
        timings["routes"][item.source.name] = result.seconds

    for item in prepared:
        if item.source.name == "gatemem" and gate is not None:
            t0 = time.perf_counter()
            metrics.setdefault("transfer", {})["gatemem"] = gatemem_transfer(item, gate, n_boot, seed)
            timings["transfer_gatemem"] = time.perf_counter() - t0

    source_names = [p.source.name for p in prepared]
    metrics["macro"] = macro(metrics, source_names, routes)
    if data_dir is not None and gate is not None:
        synthetic = next(p for p in prepared if p.source.name == "synthetic_test")
        headline = build_headline(synthetic.source, results["synthetic_test"],
                                  test_preferences(gate, data_dir, encoder))
        metrics["headline"] = headline
    metrics["breakdowns"] = breakdown
    metrics["skipped"] = skipped

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if verifiers:  # evaluate.py --verifier: text-only verifiers on a hashed subsample (memgate.studies.verifiers)
        metrics["verifiers"], timings["verifiers"] = run_from_evaluate(
            verifiers, verifier_options or {}, prepared, data_dir, encoder, settings, gate, routes, out_dir)
    if sweep_seeds:  # evaluate.py --sweep: metadata corruption sweep (memgate.eval.sweep)
        t0 = time.perf_counter()
        metrics["sweep"] = run_sweep(prepared, settings, gate, out_dir / "routes_sweep.jsonl",
                                     seeds=sweep_seeds, rows=sweep_rows)
        timings["sweep"] = time.perf_counter() - t0
    write_jsonl(out_dir / "routes.jsonl", all_rows)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
    timings["total"] = time.perf_counter() - started
    write_json(out_dir / "timings.json", timings)
    write_report(out_dir, metrics, timings, source_names, routes,
                 checkpoint=str(checkpoint) if checkpoint else None,
                 data_dir=str(data_dir) if data_dir else None)
    write_plots(out_dir, metrics, source_names)
    return metrics


def ensure_eval_data(checkpoint: Path, data_dir: Path) -> None:
    """Regenerate the default data when missing, and check it is the data the gate saw."""
    if not (Path(checkpoint) / "config.json").exists():
        raise FileNotFoundError(f"{checkpoint}: no config.json (train a gate or run `make release`)")
    gate = MemGate.from_pretrained(checkpoint)
    expected = gate.export_info.get("data_hash")
    if not (Path(data_dir) / "meta.json").exists():
        config_path = gate.export_info.get("train_config", {}).get("data", {}).get(
            "data_config", "configs/data/default.yaml")
        log.info("%s missing: regenerating from %s", data_dir, config_path)
        generate(REPO_ROOT / config_path, Path(data_dir))
    meta = read_meta(data_dir)
    actual = meta.get("data_hash")
    if expected is not None and actual != expected:
        real_text = meta.get("real_text") or {}
        why = ""
        if real_text.get("enabled") and not real_text.get("available"):
            why = (" (this data was generated without the real data: data/real or MEMGATE_DATA was "
                   "not found, so it lacks the GateMem real-phrasing triples the gate trained on)")
        raise ValueError(
            f"data hash mismatch: {data_dir} has {actual} but {checkpoint} was trained on {expected}{why}; "
            "regenerate the data with the checkpoint's data config or pass --data"
        )


CASE_ROUTES = ("global_dense", "namespace_dense", "current_only", "kleene_gate",
               "kleene_gate_fail_closed")


def evaluate_cases(cases: Path, out_dir: Path, checkpoint: Optional[Path] = None,
                   n_boot: int = 10_000, seed: int = 0,
                   routes: Optional[Sequence[str]] = None, sweep_seeds: int = 0,
                   rerank_depth: int = RERANK_DEPTH) -> dict:
    """Evaluate only a verify-agent-memory cases file (no other data read or generated)."""
    prepared = [PreparedSource(c.source, c.memory_embeddings, c.query_embeddings) for c in load_cases(cases)]
    routes = list(routes or CASE_ROUTES)
    if checkpoint is not None and not any(r.startswith("learned") for r in routes):
        # A gate whose dimension differs from the file's embeddings is skipped with a reason.
        routes += ["learned_gate", "learned_gate_namespace", "hybrid"]
    return evaluate(checkpoint, None, out_dir, routes=routes, real_sources=(),
                    n_boot=n_boot, seed=seed, extra_sources=prepared, sweep_seeds=sweep_seeds,
                    rerank_depth=rerank_depth)


def evaluate_own_triples(config: EvalConfig, triples: Path, checkpoint_given: bool) -> int:
    if not checkpoint_given:
        print("evaluate: --triples needs --checkpoint DIR (the gate to evaluate)", file=sys.stderr)
        return 2
    out = Path(config.out) if config.out else resolve_path(f"reports/triples-{triples.stem}")
    evaluate_triples(resolve_path(config.checkpoint), triples, out, n_boot=config.n_boot, seed=config.seed)
    print((out / "report.md").read_text())
    print(f"wrote {out}/report.md")
    return 0


def run_config(config: EvalConfig) -> int:
    """Evaluate as ``config`` says (what ``memgate evaluate`` runs without --cases / --triples)."""
    if config.checkpoint is None:
        raise ConfigError("checkpoint: null needs --cases (a gate-free evaluation of a cases file)")
    checkpoint = resolve_path(config.checkpoint)
    data_dir = resolve_path(config.data or checkpoint_data_dir(checkpoint))
    ensure_eval_data(checkpoint, data_dir)
    out = resolve_path(config.out) if config.out else resolve_path(f"reports/{checkpoint.name}")
    routes = config.routes or CORE_ROUTES
    verifier = config.verifier
    evaluate(checkpoint, data_dir, out, routes=routes, real_sources=config.real_sources,
             real_data_root=config.real_data_root,
             n_boot=config.n_boot, seed=config.seed, num_threads=config.threads,
             sweep_seeds=config.sweep.seeds if config.sweep.enabled else 0, sweep_rows=config.sweep.rows,
             rerank_depth=config.rerank_depth, gate_threads=config.gate_threads,
             verifiers=verifier.backends,
             verifier_options={"dev": verifier.dev, "test": verifier.test, "depth": verifier.depth,
                               "configs": dict(verifier.configs)})
    print((out / "report.md").read_text().split("## ")[1] if (out / "report.md").exists() else "")
    print(f"wrote {out}/report.md")
    return 0
