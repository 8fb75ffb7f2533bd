"""Train a MemGate: ``memgate train --config configs/train/default.yaml [key=value ...]``.

On your own triples (docs/workbench.md; schema memgate/datasets/schemas/triples.schema.json):
``memgate train --train my_train.jsonl --dev my_dev.jsonl --out DIR [--guards auto|none|locomo,...]
[key=value ...]`` (a .jsonl file, a ``datasets`` save_to_disk folder, or a .parquet/.csv table).

Writes the export directory under ``checkpoints/<export.name>/`` (config.json,
model.safetensors, headline.json, README.md) and the run (resolved config, CSV logs, Lightning
checkpoints, train_summary.json) under ``runs/<export.name>/``.
"""

import argparse
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

from memgate.contract.config import load_config, resolve_path
from memgate.contract.progress import set_quiet
from memgate.datasets.user_triples import load_triples
from memgate.train.config import TrainConfig
from memgate.train.run import train
from memgate.train.selection import selection_guards_for
from memgate.train.workbench import train_on_triples

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/train/default.yaml", help="training config YAML")
    parser.add_argument("--out", default=None, help="export directory (default checkpoints/<export.name>)")
    parser.add_argument("--train", default=None, help="your training triples (no meta.json needed)")
    parser.add_argument("--dev", default=None, help="your dev triples: selection and calibration (with --train)")
    parser.add_argument("--guards", default="auto",
                        help="real-data selection guards with --train: auto (locomo,gatemem_routes,gatemem,"
                             "text_risk when the vendored data is present, else none; stated in the output and "
                             "the model card), none, or any comma-separated subset of those four (required)")
    parser.add_argument("--benign-lists", default=None,
                        help="benign_lists.jsonl for the ranking-preservation term (with --train; default off)")
    parser.add_argument("--no-calibration", action="store_true",
                        help="with --train: skip the drop-threshold calibration on your dev triples")
    parser.add_argument("--encoder-id", default="precomputed",
                        help="with pre-computed vectors: the name of the encoder that made them")
    parser.add_argument("--quiet", action="store_true", help="no progress lines (also MEMGATE_QUIET=1)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. optim.lr=3e-4")
    args = parser.parse_args(argv)
    if args.quiet:
        set_quiet()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    config = load_config(TrainConfig, resolve_path(args.config), args.overrides)
    if args.quiet:
        config = replace(config, trainer=replace(config.trainer, progress_bar=False))
    if args.train or args.dev:
        return train_own(parser, args, config)
    guard = selection_guards_for(config)
    summary = train(config, argv=sys.argv, guard=guard, out_dir=args.out)
    if summary.get("export_dir") is None:  # a DDP worker (rank > 0): rank 0 exports and reports
        return 0
    print(json.dumps({k: summary[k] for k in ("export_dir", "seconds", "steps", "selection")},
                     indent=2, default=str))
    return 0


def train_own(parser, args, config) -> int:
    if not (args.train and args.dev and args.out):
        parser.error("--train needs --dev and --out (your dev triples select the gate; --out is where it lands)")
    # A bad triple raises TripleError naming file:line and the field; `memgate` prints it as one line.
    train_set, dev_set = load_triples(args.train), load_triples(args.dev)
    lists = ([json.loads(x) for x in open(args.benign_lists, encoding="utf-8") if x.strip()]
             if args.benign_lists else None)
    summary = train_on_triples(train_set, dev_set, args.out, config, guards=args.guards,
                               benign_lists=lists, calibrate=not args.no_calibration,
                               encoder_id=args.encoder_id, argv=sys.argv)
    best = summary["selection"] or {}
    print(f"guards: {summary['guards']}")
    print(f"calibration: {summary['calibration']}")
    for warning in summary["warnings"]:
        print(f"WARNING: {warning}")
    print(f"trained {summary['steps']} steps on {summary['train_examples']} examples; selected step "
          f"{best.get('step')}: dev preference accuracy {best.get('dev_pref_acc_gated', float('nan')):.4f} "
          f"gated vs {best.get('dev_pref_acc_reference', float('nan')):.4f} reference")
    curve = os.path.relpath(Path(summary["run_dir"]) / "training_curve.png")
    print(f"exported {summary['export_dir']} (MemGate.from_pretrained); training curve {curve}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
