"""Train a MemGate: ``memgate train --config configs/train/default.yaml [key=value ...]``.

On your own triples (docs/workbench.md; schema memgate/datasets/schemas/triples.schema.json):
``memgate train --train my_train.jsonl --dev my_dev.jsonl --out DIR [--guards auto|none|locomo,...]
[key=value ...]`` (a .jsonl file, a ``datasets`` save_to_disk folder, or a .parquet/.csv table).

Writes the export directory under ``checkpoints/<export.name>/`` (config.json,
model.safetensors, headline.json, README.md) and the run (resolved config, CSV logs, Lightning
checkpoints, train_summary.json) under ``runs/<export.name>/`` (``runs/<name>-2``, ... when that
holds another export's run: runs never overwrite each other). Ends with a few lines saying what
was trained and where it went; ``--json`` prints the summary as JSON instead. ``--quiet``: no
progress and no INFO lines (results, warnings and errors only).
"""

import argparse
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

from memgate.contract.config import load_config, resolve_path
from memgate.contract.progress import quiet, set_quiet
from memgate.datasets.user_triples import load_triples
from memgate.model.pretrained import refuse_released_export
from memgate.train.config import TrainConfig
from memgate.train.run_dirs import displaced

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# (WANDB_MODE is set to offline only for trainer.logger=wandb: with it set, transformers prints
# "[INFO] Running in WANDB offline mode" whenever it loads the encoder)


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
    parser.add_argument("--quiet", action="store_true",
                        help="no progress and no INFO lines: results, warnings and errors (also MEMGATE_QUIET=1)")
    parser.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. optim.lr=3e-4")
    args = parser.parse_args(argv)
    if args.quiet:
        set_quiet()
    logging.basicConfig(level=logging.WARNING if quiet() else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")

    config = load_config(TrainConfig, resolve_path(args.config), args.overrides)
    if args.quiet:
        config = replace(config, trainer=replace(config.trainer, progress_bar=False))
    if args.train or args.dev:
        return train_own(parser, args, config)
    # torch and Lightning load here, after the arguments and the config are checked (--help and
    # usage errors come back without them)
    from memgate.train.run import check_inputs, train
    from memgate.train.selection import selection_guards_for

    refuse_released_export(Path(args.out) if args.out else  # only make release exports the released name
                           resolve_path(config.export.checkpoints_dir) / config.export.name)
    check_inputs(config)  # every input, before the guards encode the real data (minutes)
    guard = selection_guards_for(config)
    summary = train(config, argv=sys.argv, guard=guard, out_dir=args.out)
    if summary.get("export_dir") is None:  # a DDP worker (rank > 0): rank 0 exports and reports
        return 0
    print(report(summary, config.export.name, args.json))
    return 0


SUMMARY_KEYS = ("export_dir", "run_dir", "seconds", "steps", "train_examples", "selection", "warnings")


def report(summary: dict, name: str, as_json: bool = False) -> str:
    """What config-mode ``memgate train`` prints: ``summary_lines``, or the summary as JSON."""
    if as_json:
        return json.dumps({k: summary[k] for k in SUMMARY_KEYS if k in summary}, indent=2, default=str)
    return "\n".join(summary_lines(summary, name))


def summary_lines(summary: dict, name: str) -> list[str]:
    """The few lines a run ends with: what trained, which step was selected, where it went."""
    best = summary.get("selection") or {}
    seconds = (summary.get("seconds") or {}).get("total")
    took = f" in {seconds:.1f} s" if isinstance(seconds, (int, float)) else ""
    lines = [f"trained {summary['steps']} steps on {summary['train_examples']} examples{took}; selected "
             f"step {best.get('step')}: dev preference accuracy "
             f"{best.get('dev_pref_acc_gated', float('nan')):.4f} gated vs "
             f"{best.get('dev_pref_acc_reference', float('nan')):.4f} reference"]
    lines.append(f"exported {summary['export_dir']} (MemGate.from_pretrained)"
                 + ("; headline.json beside it" if summary.get("headline") else ""))
    run = Path(summary["run_dir"])
    note = f"; runs/{name} holds another export's run" if displaced(run, name) else ""
    lines.append(f"run {run} (resolved config, logs, checkpoints, training curve{note})")
    if summary.get("warnings"):
        lines.append(f"{len(summary['warnings'])} warning(s) (logged above; also in the export's README.md)")
    return lines


def train_own(parser, args, config) -> int:
    if not (args.train and args.dev and args.out):
        parser.error("--train needs --dev and --out (your dev triples select the gate; --out is where it lands)")
    from memgate.train.workbench import train_on_triples  # torch and Lightning (after usage errors)

    # A bad triple raises TripleError naming file:line and the field; `memgate` prints it as one line.
    train_set, dev_set = load_triples(args.train), load_triples(args.dev)
    lists = ([json.loads(x) for x in open(args.benign_lists, encoding="utf-8") if x.strip()]
             if args.benign_lists else None)
    summary = train_on_triples(train_set, dev_set, args.out, config, guards=args.guards,
                               benign_lists=lists, calibrate=not args.no_calibration,
                               encoder_id=args.encoder_id, argv=sys.argv)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return 0
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
    name = Path(args.out).name
    if displaced(Path(summary["run_dir"]), name):
        print(f"run {summary['run_dir']} (runs/{name} holds another export's run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
