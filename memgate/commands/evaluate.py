"""Evaluate routes under the recall-constrained protocol.

    memgate evaluate [--config configs/eval/default.yaml] [key=value ...]   (n_boot=1000, sweep.enabled=true, ...)
    python evaluate.py [--checkpoint checkpoints/memgate-minilm-l6] [--data data/default]
                       [--out reports/<name>] [--no-real] [--n-boot 10000]
                       [--sweep [--sweep-seeds 10] [--sweep-rows first_seed|all|none]]
                       [--verifier local,openai,finetuned [--verifier-dev 96] [--verifier-test 288]
                        [--verifier-depth 30] [--verifier-config BACKEND=FILE.yaml ...]]
    python evaluate.py --cases FILE.jsonl [--checkpoint DIR] [--out reports/cases-<stem>]
    memgate evaluate --checkpoint DIR --triples my_test.jsonl --out REPORT_DIR   (your own triples)

Writes report.md, metrics.json, routes.jsonl, timings.json and PNG plots.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import torch

from memgate.contract.config import REPO_ROOT, ConfigError, load_config, resolve_path
from memgate.contract.defaults import RERANK_DEPTH
from memgate.contract.jsonl import write_jsonl
from memgate.contract.progress import set_quiet
from memgate.datasets.cases import load_cases
from memgate.datasets.datagen import generate
from memgate.datasets.synthetic import load_split, read_meta
from memgate.eval.config import EvalConfig
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

log = logging.getLogger(__name__)

DEFAULT_CHECKPOINT = "checkpoints/memgate-minilm-l6"
DEFAULT_DATA = "data/default"


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


DEFAULT_CONFIG = "configs/eval/default.yaml"

# flag -> the EvalConfig key it overrides (flags default to None: only the ones given override)
FLAG_KEYS = {
    "checkpoint": "checkpoint", "data": "data", "out": "out", "n_boot": "n_boot", "seed": "seed",
    "threads": "threads", "rerank_depth": "rerank_depth", "sweep_seeds": "sweep.seeds",
    "sweep_rows": "sweep.rows", "verifier_dev": "verifier.dev", "verifier_test": "verifier.test",
    "verifier_depth": "verifier.depth",
}


PATH_FLAGS = ("checkpoint", "data", "out")


def flag_overrides(args) -> list[str]:
    """The flags given on the command line, as ``key=value`` overrides of the eval config."""
    out = []
    for flag, key in FLAG_KEYS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if flag in PATH_FLAGS:  # a path on the command line is relative to the working directory
            value = str(Path(value).resolve())
        out.append(f"{key}={json.dumps(value)}")  # JSON is YAML: a path stays a string
    if args.routes:
        out.append(f"routes={json.dumps(args.routes.split(','))}")
    if args.no_real:
        out.append("real_sources=[]")
    if args.sweep:
        out.append("sweep.enabled=true")
    if args.verifier:
        out.append(f"verifier.backends={json.dumps(args.verifier.split(','))}")
    for item in args.verifier_config:
        backend, _, path = item.partition("=")
        out.append(f"verifier.configs.{backend}={json.dumps(path)}")
    return out


def build_parser(prog=None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=DEFAULT_CONFIG,
                        help=f"evaluation config (default {DEFAULT_CONFIG}); key=value arguments and the "
                             "flags below override its keys")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="eval config overrides, e.g. n_boot=1000 routes=[global_dense,learned_gate]")
    parser.add_argument("--checkpoint", default=None, help=f"gate export directory (key checkpoint; default {DEFAULT_CHECKPOINT})")
    parser.add_argument("--data", default=None, help=f"generated data directory (key data; default: the one the checkpoint trained on, else {DEFAULT_DATA})")
    parser.add_argument("--cases", default=None, help="evaluate only this verify-agent-memory cases file")
    parser.add_argument("--triples", default=None,
                        help="evaluate the gate on your own triples (docs/workbench.md): preference accuracy "
                             "gated vs reference with group-bootstrap CIs, by category, and the suppression AUC")
    parser.add_argument("--quiet", action="store_true", help="no progress lines (also MEMGATE_QUIET=1)")
    parser.add_argument("--out", default=None, help="output directory (key out; default reports/<name>)")
    parser.add_argument("--routes", default=None, help="comma-separated route names (key routes; default: all core routes)")
    parser.add_argument("--no-real", action="store_true", help="skip the LoCoMo and GateMem report parts (real_sources=[])")
    parser.add_argument("--n-boot", type=int, default=None, help="bootstrap replicates (key n_boot; default 10000)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (key seed; default 0)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (key threads; default 2)")
    parser.add_argument("--rerank-depth", type=int, default=None,
                        help=f"cosine top candidates a gated route re-scores (key rerank_depth; default {RERANK_DEPTH})")
    parser.add_argument("--sweep", action="store_true",
                        help="also run the metadata corruption sweep (sweep.enabled; routes_sweep.jsonl; slow)")
    parser.add_argument("--sweep-seeds", type=int, default=None, help="corruption seeds per rate (sweep.seeds; default 10)")
    parser.add_argument("--sweep-rows", default=None, choices=("first_seed", "all", "none"),
                        help="which sweep runs write routes_sweep.jsonl rows (sweep.rows; default none: seed 0 alone is ~340 MB on synthetic test)")
    parser.add_argument("--verifier", default=None,
                        help="text-only verifier backends (comma-separated: local, openai, finetuned; "
                             "verifier.backends); adds text_verifier_<backend>[_abstain] routes on a hashed "
                             "subsample (verifiers.md); off by default")
    parser.add_argument("--verifier-dev", type=int, default=None, help="dev queries for calibration (verifier.dev; default 96)")
    parser.add_argument("--verifier-test", type=int, default=None, help="test queries in the subsample (verifier.test; default 288)")
    parser.add_argument("--verifier-depth", type=int, default=None, help="cosine top-depth a verifier scores (verifier.depth; default 30)")
    parser.add_argument("--verifier-config", action="append", default=[], metavar="BACKEND=FILE",
                        help="config per backend (verifier.configs.BACKEND; default configs/verifier/<backend>.yaml)")
    return parser


def main(argv=None, prog=None) -> int:
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    overrides = [*args.overrides, *flag_overrides(args)]
    config = load_config(EvalConfig, resolve_path(args.config), overrides)
    checkpoint_given = any(item.split("=", 1)[0] == "checkpoint" for item in overrides)
    if args.quiet:
        set_quiet()
    if args.triples:
        return evaluate_own_triples(config, Path(args.triples), checkpoint_given)
    if args.cases:
        cases = Path(args.cases)
        out = Path(config.out) if config.out else resolve_path(f"reports/cases-{cases.stem}")
        # A cases file is evaluated with a gate only when one is named on the command line.
        checkpoint = resolve_path(config.checkpoint) if checkpoint_given and config.checkpoint else None
        evaluate_cases(cases, out, checkpoint, n_boot=config.n_boot, seed=config.seed,
                       routes=config.routes, sweep_seeds=config.sweep.seeds if config.sweep.enabled else 0,
                       rerank_depth=config.rerank_depth)
        print(f"wrote {out}/report.md")
        return 0
    return run_config(config)


def checkpoint_data_dir(checkpoint: Path) -> str:
    """The data directory a checkpoint trained on (``train_config.data.data_dir``), else
    ``data/default`` (the release's; a mix row's gate trains on e.g. ``data/textrisk_dialogue``)."""
    try:
        info = json.loads((Path(checkpoint) / "config.json").read_text()).get("export", {})
    except (OSError, ValueError):
        return DEFAULT_DATA
    return info.get("train_config", {}).get("data", {}).get("data_dir") or DEFAULT_DATA


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


if __name__ == "__main__":
    sys.exit(main())
