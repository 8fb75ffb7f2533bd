"""Evaluate routes under the recall-constrained protocol.

    python evaluate.py [--checkpoint checkpoints/memgate-minilm-l6] [--data data/default]
                       [--out reports/<name>] [--no-real] [--n-boot 10000]
                       [--sweep [--sweep-seeds 10] [--sweep-rows first_seed|all|none]]
                       [--verifier local,openai,finetuned [--verifier-dev 96] [--verifier-test 288]
                        [--verifier-depth 30] [--verifier-config BACKEND=FILE.yaml ...]]
    python evaluate.py --cases FILE.jsonl [--checkpoint DIR] [--out reports/cases-<stem>]

Writes report.md, metrics.json, routes.jsonl, timings.json and PNG plots.
"""

import argparse
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_CHECKPOINT = "checkpoints/memgate-minilm-l6"
DEFAULT_DATA = "data/default"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help=f"gate export directory (default {DEFAULT_CHECKPOINT})")
    parser.add_argument("--data", default=None, help=f"generated data directory (default {DEFAULT_DATA})")
    parser.add_argument("--cases", default=None, help="evaluate only this verify-agent-memory cases file")
    parser.add_argument("--out", default=None, help="output directory (default reports/<name>)")
    parser.add_argument("--routes", default=None, help="comma-separated route names (default: all core routes)")
    parser.add_argument("--no-real", action="store_true", help="skip the LoCoMo and GateMem report parts")
    parser.add_argument("--n-boot", type=int, default=10_000, help="bootstrap replicates")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--sweep", action="store_true",
                        help="also run the metadata corruption sweep (routes_sweep.jsonl; slow)")
    parser.add_argument("--sweep-seeds", type=int, default=10, help="corruption seeds per rate")
    parser.add_argument("--sweep-rows", default="none", choices=("first_seed", "all", "none"),
                        help="which sweep runs write routes_sweep.jsonl rows (default none: seed 0 alone is ~340 MB on synthetic test)")
    parser.add_argument("--verifier", default=None,
                        help="text-only verifier backends (comma-separated: local, openai, finetuned); "
                             "adds text_verifier_<backend>[_abstain] routes on a hashed subsample "
                             "(verifiers.md); off by default")
    parser.add_argument("--verifier-dev", type=int, default=96, help="dev queries for calibration")
    parser.add_argument("--verifier-test", type=int, default=288, help="test queries in the subsample")
    parser.add_argument("--verifier-depth", type=int, default=30, help="cosine top-depth a verifier scores")
    parser.add_argument("--verifier-config", action="append", default=[], metavar="BACKEND=FILE",
                        help="config per backend (default configs/verifier/<backend>.yaml)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    from memgate.config import resolve_path
    from memgate.evaluate_run import CORE_ROUTES, ensure_eval_data, evaluate, evaluate_cases

    routes = tuple(args.routes.split(",")) if args.routes else CORE_ROUTES
    if args.cases:
        cases = Path(args.cases)
        out = Path(args.out) if args.out else resolve_path(f"reports/cases-{cases.stem}")
        checkpoint = Path(args.checkpoint) if args.checkpoint else None
        evaluate_cases(cases, out, checkpoint, n_boot=args.n_boot, seed=args.seed,
                       routes=routes if args.routes else None,
                       sweep_seeds=args.sweep_seeds if args.sweep else 0)
        print(f"wrote {out}/report.md")
        return 0
    checkpoint = Path(args.checkpoint) if args.checkpoint else resolve_path(DEFAULT_CHECKPOINT)
    data_dir = Path(args.data) if args.data else resolve_path(DEFAULT_DATA)
    ensure_eval_data(checkpoint, data_dir)
    out = Path(args.out) if args.out else resolve_path(f"reports/{checkpoint.name}")
    evaluate(checkpoint, data_dir, out, routes=routes,
             real_sources=() if args.no_real else ("locomo", "gatemem"),
             n_boot=args.n_boot, seed=args.seed, num_threads=args.threads,
             sweep_seeds=args.sweep_seeds if args.sweep else 0, sweep_rows=args.sweep_rows,
             verifiers=tuple(args.verifier.split(",")) if args.verifier else (),
             verifier_options={"dev": args.verifier_dev, "test": args.verifier_test,
                               "depth": args.verifier_depth,
                               "configs": dict(c.split("=", 1) for c in args.verifier_config)})
    print((out / "report.md").read_text().split("## ")[1] if (out / "report.md").exists() else "")
    print(f"wrote {out}/report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
