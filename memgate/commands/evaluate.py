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
from pathlib import Path

from memgate.contract.config import load_config, resolve_path
from memgate.contract.defaults import RERANK_DEPTH
from memgate.contract.progress import quiet, set_quiet
from memgate.eval.config import DEFAULT_DATA, EvalConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_CHECKPOINT = "checkpoints/memgate-minilm-l6"
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
    parser.add_argument("--quiet", action="store_true",
                        help="no progress and no INFO lines: results, warnings and errors (also MEMGATE_QUIET=1)")
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
    if args.quiet:
        set_quiet()
    logging.basicConfig(level=logging.WARNING if quiet() else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")

    overrides = [*args.overrides, *flag_overrides(args)]
    config = load_config(EvalConfig, resolve_path(args.config), overrides)
    checkpoint_given = any(item.split("=", 1)[0] == "checkpoint" for item in overrides)
    # torch and the evaluation load here, after the arguments and the config are checked
    from memgate.commands.evaluate_run import evaluate_cases, evaluate_own_triples, run_config

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


if __name__ == "__main__":
    sys.exit(main())
