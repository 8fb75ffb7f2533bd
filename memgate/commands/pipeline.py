"""generate -> mine -> train -> evaluate, timed, for ``make demo`` and ``make release``."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from memgate.commands.evaluate_run import evaluate
from memgate.contract.config import load_config, resolve_path
from memgate.datasets.datagen import generate, mine
from memgate.eval.engine import CORE_ROUTES
from memgate.model.encoder import set_offline_defaults
from memgate.train.config import TrainConfig
from memgate.train.run import train
from memgate.train.selection import selection_guards_for


def record_locomo_report(export_dir: Path, report_dir: Path) -> Optional[dict]:
    """Copy the LoCoMo-report recall drop of ``learned_gate_namespace`` against ``namespace_dense``
    (recall_required@20, with its paired CI) from the report into the card's ``headline.json``,
    where ``memgate.Memory``'s default-gate rule reads it. None when the report has no LoCoMo."""
    metrics = json.loads(Path(report_dir, "metrics.json").read_text())
    diff = metrics.get("locomo", {}).get("learned_gate_namespace", {}).get(
        "diff_vs_namespace_dense:recall_required@20")
    if not diff or diff.get("value") is None:
        return None
    lo, hi = diff["ci"]
    entry = {"drop": -diff["value"], "ci": [None if hi is None else -hi, None if lo is None else -lo],
             "route": "learned_gate_namespace", "baseline": "namespace_dense", "metric": "recall_required@20"}
    path = Path(export_dir, "headline.json")
    headline = json.loads(path.read_text()) if path.exists() else {}
    headline["locomo_report"] = entry
    path.write_text(json.dumps(headline, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return entry


def copy_data_card(data_dir: Path, report_dir: Path) -> Optional[Path]:
    """The data build's card (``<data_dir>/sources.json``: per natural source its counts,
    ``data_gen.natural_card``) beside the report, where the data has one; None where it has not."""
    card = data_dir / "sources.json"
    if not card.exists():
        return None
    report_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(card, report_dir / "sources.json"))


def run_pipeline(
    export_dir: Path,
    report_dir: Path,
    overrides: Sequence[str] = (),
    fresh_data: bool = False,
    install_seconds: Optional[float] = None,
    n_boot: int = 10_000,
    routes: Optional[Sequence[str]] = None,
    gate_threads: Optional[int] = None,
) -> dict:
    """Run the pipeline; ``routes`` None evaluates every core route (``make release``), a subset
    evaluates only those (``make demo`` passes the headline routes); ``gate_threads`` sets the torch
    threads of the gated routes' scoring (None: the evaluation's)."""
    set_offline_defaults()
    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), overrides)
    data_dir = resolve_path(config.data.data_dir)
    timings: dict = {}
    if install_seconds is not None:
        timings["install"] = float(install_seconds)
    t0 = time.perf_counter()
    if fresh_data and data_dir.exists():
        shutil.rmtree(data_dir)
    if not (data_dir / "meta.json").exists():
        generate(resolve_path(config.data.data_config), data_dir)
    timings["generate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if config.data.use_mined:
        mine(data_dir)
    timings["mine (embeds the split texts)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    guard = selection_guards_for(config)
    timings["selection guard (embeds LoCoMo select)"] = time.perf_counter() - t0
    summary = train(config, argv=["memgate.commands.pipeline", *overrides], guard=guard, out_dir=export_dir)
    timings["embed (training texts)"] = summary["seconds"]["embed"]
    timings["train"] = summary["seconds"]["train"]
    timings["headline"] = summary["seconds"]["headline"]
    t0 = time.perf_counter()
    copy_data_card(data_dir, report_dir)
    evaluate(export_dir, data_dir, report_dir, n_boot=n_boot,
             routes=CORE_ROUTES if routes is None else tuple(routes), gate_threads=gate_threads)
    record_locomo_report(export_dir, report_dir)
    timings["evaluate"] = time.perf_counter() - t0
    timings["total (without install)"] = sum(v for k, v in timings.items() if k != "install")
    Path(report_dir, "pipeline_timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    return {"timings": timings, "summary": summary}
