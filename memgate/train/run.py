"""``train.py``'s work: data -> embeddings -> Lightning fit -> selection -> export -> headline."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import lightning as L
import torch

from memgate.contract.config import REPO_ROOT, config_hash, resolve_path, to_dict, write_resolved
from memgate.contract.jsonl import read_jsonl, write_jsonl
from memgate.contract.progress import quiet
from memgate.contract.seeding import seed_everything
from memgate.datasets.data_check import verify_data_dir
from memgate.datasets.datagen import generate, mine
from memgate.datasets.real.io_guard import no_report_access
from memgate.datasets.real.paths import real_data_available, real_data_root
from memgate.datasets.synthetic import load_split
from memgate.eval.drop_calibration import calibrate_scorer, gate_suppression
from memgate.eval.engine import headline_for_export, prepare
from memgate.model.encoder import Encoder, set_offline_defaults
from memgate.model.export import export_gate, git_state, versions, write_json, write_model_card
from memgate.model.gate import MemGate, MemGateConfig
from memgate.model.pretrained import refuse_released_export
from memgate.train.config import LIST_SOURCES, TrainConfig
from memgate.train.curve import plot_training_curve
from memgate.train.lightning_quiet import quiet_lightning
from memgate.train.modules import Guard, MemGateModule, PreferenceDataModule, read_triples
from memgate.train.monitor import TrainingMonitor, preflight
from memgate.train.risk_scale import risk_export_info
from memgate.train.run_dirs import run_dir_for
from memgate.train.select_step import BestGateSelection

log = logging.getLogger(__name__)


def encoder_from(config: TrainConfig) -> Encoder:
    return Encoder(config.encoder, repo_root=REPO_ROOT)


def _missing_data(config: TrainConfig, data_dir: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"data.data_dir: {data_dir} has no meta.json and data.regenerate_if_missing=false (generate it "
        f"with `memgate generate --config {config.data.data_config} --out {data_dir}` or set "
        "data.regenerate_if_missing=true)")


def check_inputs(config: TrainConfig) -> None:
    """Every input ``train`` and its selection guards read, checked before any work (the guards
    encode the real select parts for minutes, ``train`` embeds the triples): the data directory
    (its files against ``meta.json``'s hashes, or the data config that regenerates it) and the
    real data each enabled guard needs. Each failure is one line naming the field."""
    data_dir = resolve_path(config.data.data_dir)
    if (data_dir / "meta.json").exists():
        verify_data_dir(data_dir, mined_key=encoder_from(config).key if config.data.use_mined else None)
    elif not config.data.regenerate_if_missing:
        raise _missing_data(config, data_dir)
    elif not resolve_path(config.data.data_config).is_file():
        raise FileNotFoundError(f"data.data_config: {resolve_path(config.data.data_config)} does not exist "
                                f"(it would generate the missing {data_dir})")
    for key in ("locomo_guard", "gatemem_guard"):
        root = real_data_root(config.real_data_root)
        if getattr(config.selection, key) and not real_data_available(root):
            raise FileNotFoundError(
                f"selection.{key}: real data not found at {root} (no SHA256SUMS); the repository ships "
                f"it under data/real (set MEMGATE_DATA or real_data_root to another copy), or pass "
                f"selection.{key}=false to select without it")


def ensure_data(config: TrainConfig) -> Path:
    """The data directory, generated from ``data.data_config`` when missing (and allowed)."""
    data_dir = resolve_path(config.data.data_dir)
    if (data_dir / "meta.json").exists():
        return data_dir
    if not config.data.regenerate_if_missing:
        raise _missing_data(config, data_dir)
    log.info("generating %s from %s", data_dir, config.data.data_config)
    generate(resolve_path(config.data.data_config), data_dir)
    if config.data.use_mined:
        # Mined and real-phrasing triples, as make release / make demo train on, keyed by the
        # encoder this run trains with (hardness is a property of the encoder).
        mine(data_dir, config.encoder.model)
    return data_dir


def training_triples(config: TrainConfig, data_dir: Path, encoder: Encoder) -> tuple[Path, list]:
    """(the triples file, its rows that train: text-visible ones of ``data.sources``)."""
    path, rows, _ = training_triples_checked(config, data_dir, encoder)
    return path, rows


def excluded_sources_warning(path: Path, counts: dict, sources) -> Optional[str]:
    """The warning when ``path`` holds triples of sources that ``data.sources`` leaves out (a
    data dir generated with a real-phrasing source on, trained with the default ``data.sources``,
    would otherwise drop them without a word), else None. ``counts``: source -> triples."""
    left_out = {s: n for s, n in sorted(counts.items()) if s not in sources}
    if not left_out:
        return None
    listed = ", ".join(f"{s} ({n:,} triples)" for s, n in left_out.items())
    return (f"{path} holds triples of sources that data.sources={list(sources)} excludes: {listed}; "
            "they do not train (list them in data.sources to train on them)")


def training_triples_checked(config: TrainConfig, data_dir: Path, encoder: Encoder) -> tuple[Path, list, Optional[str]]:
    """``training_triples`` plus the excluded-sources warning (logged here; None when nothing
    was excluded), which ``train`` also records in the export's warnings."""
    mined = data_dir / "mined" / encoder.key / "triples.jsonl"
    path = mined if (config.data.use_mined and mined.exists()) else data_dir / "train" / "triples.jsonl"
    if config.data.use_mined and not mined.exists():
        log.warning(
            "data.use_mined=true but %s does not exist (not mined for encoder %s): training on the "
            "template triples %s alone; mine with `python -m data_gen.mine --data %s --encoder %s`",
            mined, encoder.key, path, data_dir, config.encoder.model,
        )
    every = read_triples(path, config.data.text_visible_only)
    counts: dict = {}
    for r in every:
        counts[r.get("source", "template")] = counts.get(r.get("source", "template"), 0) + 1
    rows = [r for r in every if r.get("source", "template") in config.data.sources]
    if not rows:
        raise ValueError(f"{path}: no training triples from data.sources={list(config.data.sources)}")
    warning = excluded_sources_warning(path, counts, config.data.sources)
    if warning:
        log.warning(warning)
    return path, rows, warning


def benign_list_rows(config: TrainConfig, data_dir: Path) -> list:
    """The benign lists of every ``data.list_sources`` file when the ranking-preservation term or
    the risk head's calibration loss is on (else []): gatemem -> ``train/benign_lists.jsonl``,
    dialogue -> ``train/dialogue_lists.jsonl``."""
    risk_labels = config.loss.risk_weight > 0 and config.gate.score_form == "mask_risk"
    if config.loss.list_preservation_weight <= 0 and not risk_labels:
        return []
    rows: list = []
    for name in config.data.list_sources:
        path = data_dir / "train" / LIST_SOURCES[name]
        got = read_jsonl(path) if path.exists() else []
        if not got:
            log.warning(
                "loss.list_preservation_weight=%s but %s holds no benign lists (data.list_sources has %r; "
                "generated without the real data, or without dialogue_lists.enabled?): no %s lists; the "
                "model card says so", config.loss.list_preservation_weight, path, name, name)
        rows += got
    return rows


def triples_hash(rows: list) -> str:
    """sha256 over the training triples actually used (sorted-key JSON, in order): unlike
    ``data_hash`` it also covers ``data_gen.mine``'s output and the ``data.sources`` filter."""
    import hashlib

    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def triples_seen(prefs, trainer: L.Trainer, batch_size: int) -> float:
    """Training triples the fit consumed: optimiser steps x examples per step (every process) x
    triples per example (a grouped example holds up to max_negatives triples)."""
    if len(prefs) == 0:
        return 0.0
    triples_per_example = int((prefs.neg >= 0).sum()) / len(prefs)
    per_step = batch_size * trainer.world_size
    steps_per_epoch = -(-len(prefs) // per_step)
    epochs, steps = divmod(trainer.global_step, steps_per_epoch)
    examples = epochs * len(prefs) + min(steps * per_step, len(prefs))
    return examples * triples_per_example


def write_weight_digest(gate: MemGate, run_dir: Path, rank: int, stage: str) -> None:
    """sha256 of the selected weights per process: every rank must hold the same gate."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(gate.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    (run_dir / f"weights_{stage}_rank{rank}.sha256").write_text(digest.hexdigest() + "\n")


def calibrate_gate(gate: MemGate, data_dir: Path, encoder: Encoder, data_hash: str, anchor_sets=None):
    """The learned_gate_drop threshold on suppression S_ref - S, calibrated on synthetic dev and
    raised until it drops at most 1 % of each real benign anchor set (the select parts the
    guards hold: ``SelectionGuards.benign_anchor_sets``)."""
    dev = prepare(load_split(data_dir, "dev", name="synthetic_dev"), encoder)
    return calibrate_scorer(gate_suppression(gate), dev.source, dev.memory_vectors,
                            dev.query_vectors, data_hash, anchor_sets=anchor_sets)


def make_logger(config: TrainConfig, run_dir: Path):
    if config.trainer.logger == "none":
        return False
    if config.trainer.logger == "wandb":
        os.environ.setdefault("WANDB_MODE", "offline")
        try:
            from lightning.pytorch.loggers import WandbLogger
        except ImportError as exc:  # pragma: no cover - optional extra
            raise RuntimeError("trainer.logger=wandb needs `pip install memgate[wandb]`") from exc
        return WandbLogger(save_dir=str(run_dir), project="memgate")
    if config.trainer.logger == "tensorboard":  # event files under <run>/tensorboard (offline)
        try:
            from lightning.pytorch.loggers import TensorBoardLogger
        except ImportError as exc:  # pragma: no cover - optional extra
            raise RuntimeError("trainer.logger=tensorboard needs `pip install memgate[workbench]`") from exc
        return TensorBoardLogger(save_dir=str(run_dir), name="tensorboard")
    from lightning.pytorch.loggers import CSVLogger

    return CSVLogger(save_dir=str(run_dir), name="csv")


def build_trainer(config: TrainConfig, run_dir: Path, callbacks: list) -> L.Trainer:
    return L.Trainer(
        accelerator=config.trainer.accelerator,
        devices=config.trainer.devices,
        strategy=config.trainer.strategy,
        precision=config.trainer.precision,
        max_epochs=config.optim.max_epochs,
        max_steps=config.optim.max_steps,
        gradient_clip_val=config.optim.grad_clip,
        log_every_n_steps=config.trainer.log_every_n_steps,
        val_check_interval=config.trainer.val_check_interval,
        logger=make_logger(config, run_dir),
        callbacks=callbacks,
        enable_progress_bar=config.trainer.progress_bar and not quiet(),
        enable_checkpointing=True,
        default_root_dir=str(run_dir),
        deterministic=config.trainer.deterministic,
        num_sanity_val_steps=0,
        enable_model_summary=False,
    )


def run_record(config: TrainConfig, train_rows: list, dm, module, gate: MemGate, selection,
               n_lists: int, warnings: list) -> dict:
    """The export_info entries every training writes (run.train and the workbench's)."""
    return {
        "train_triples_hash": triples_hash(train_rows),
        "n_train_examples": len(dm.train),
        "benign_lists": {"lists": n_lists, "weight": config.loss.list_preservation_weight,
                         "active": module.lists is not None},
        "seed": config.seed,
        "config_hash": config_hash(config),
        "train_config": to_dict(config),
        "num_threads": config.trainer.num_threads,
        "parameters": gate.num_parameters(),
        "selection": dict(selection.best or {}),
        "selection_history": selection.history,
        "warnings": list(warnings),
        "versions": versions(),
        **git_state(),
    }


def write_curve(run_dir: Path, export_dir: Optional[Path], monitor: TrainingMonitor, history: list,
                config: TrainConfig, guards: str, warnings: Sequence[str] = ()) -> Path:
    """training_curve.png (and the per-step rows, curve.jsonl) in the run and the export."""
    write_jsonl(run_dir / "curve.jsonl", monitor.rows)
    path = plot_training_curve(run_dir / "training_curve.png", monitor.rows, history,
                               title=f"{config.export.name}: training curve",
                               max_recall_drop=config.selection.max_recall_drop, guards=guards,
                               warnings=warnings)
    if export_dir is not None:
        shutil.copyfile(path, Path(export_dir) / "training_curve.png")
    return path


def write_reliability(export_dir: Path, calibration: Optional[dict], name: str) -> Optional[Path]:
    """risk_reliability.png in the export (a gate with a risk head and labelled select sets)."""
    if not calibration or not calibration.get("sets"):
        return None
    from memgate.eval.calibration_risk import plot_reliability

    return plot_reliability(Path(export_dir) / "risk_reliability.png", calibration,
                            title=f"{name}: risk head reliability (select parts)")


def metric_for(config: TrainConfig, guard) -> str:
    """The selection metric: the config's, or dev accuracy when no text-risk guard runs (guards
    switched off by the caller, e.g. ``train(..., guard=None)`` in a test)."""
    if config.selection.metric == "text_risk_macro" and "text_risk" not in getattr(guard, "names", ()):
        log.warning("selection.metric=text_risk_macro without the text_risk guard: selecting on dev accuracy")
        return "dev_pref_acc_gated"
    return config.selection.metric


def step_zero_line(selection, guard) -> Optional[str]:
    """The one loud line when guarded selection ships step 0 (None otherwise)."""
    best = selection.best
    if guard is None or not best or best["step"] != 0:
        return None
    if not any(e["passed"] and e["step"] > 0 for e in selection.history):
        why = "no trained validation point passed every selection guard"
    elif best.get("rule") == "text_risk_macro":
        why = "no passing trained step beat step 0 beyond the paired CI of the selection figure"
    else:
        why = "no passing trained step beat step 0's dev preference accuracy"
    return (f"NO TRAINED STEP SELECTED: {why}; the export is the step-0 (near-identity) gate and ranks "
            "like the cosine")


def say_loudly(line: str) -> None:
    """Log it and print it to stderr, whatever the log level (a progress bar may hide the log)."""
    log.warning(line)
    print(f"\n*** memgate train: {line} ***\n", file=sys.stderr, flush=True)


@no_report_access
@quiet_lightning()
def train(
    config: TrainConfig,
    argv: Optional[list] = None,
    guard: Optional[Guard] = None,
    out_dir: Optional[Path] = None,
) -> dict:
    """Train, select and export one gate; returns a summary (also written as train_summary.json)."""
    export_dir = Path(out_dir) if out_dir else resolve_path(config.export.checkpoints_dir) / config.export.name
    refuse_released_export(export_dir)  # before any work: only make release exports the released name
    check_inputs(config)  # (memgate train checks them before its guards too)
    set_offline_defaults()
    torch.set_num_threads(config.trainer.num_threads)
    started = time.perf_counter()
    seed_value = seed_everything(config.seed, "train")
    name = config.export.name
    # The data is checked before any work and before the run directory exists: the split files
    # against meta.json's data_hash, the mined triples against their sha256, every triple's shape.
    data_dir = ensure_data(config)
    encoder = encoder_from(config)
    meta = verify_data_dir(data_dir, mined_key=encoder.key if config.data.use_mined else None)
    triples_path, train_rows, source_warning = training_triples_checked(config, data_dir, encoder)
    dev_rows = read_triples(data_dir / "dev" / "triples.jsonl", text_visible_only=True)
    list_rows = benign_list_rows(config, data_dir)
    # runs/<name>, or runs/<name>-2, ... when runs/<name> holds another export's run (run_dirs.py)
    run_dir = run_dir_for(resolve_path(config.export.runs_dir), name, export_dir)
    write_resolved(config, run_dir, argv=argv or sys.argv, seed=config.seed,
                   component_seed=seed_value, config_hash=config_hash(config))
    t0 = time.perf_counter()
    dm = PreferenceDataModule(
        train_rows, dev_rows, encoder, config.optim.batch_size, config.data.group_negatives,
        config.data.max_negatives, seed_value, config.data.shuffle_labels,
        list_rows=list_rows, list_size=config.data.list_size, source_shares=config.data.source_shares,
    )
    embed_seconds = time.perf_counter() - t0

    identity = encoder.identity
    gate_config = MemGateConfig(
        dim=identity["dim"], encoder_id=identity["id"], encoder_revision=identity["revision"],
        encoder_normalize=identity["normalize"], **asdict(config.gate),
    )
    gate = MemGate(gate_config)
    module = MemGateModule(
        gate, config.loss, dm.embeddings, config.optim.lr,
        config.optim.weight_decay, config.optim.warmup_steps,
        lists=dm.lists, lists_per_step=config.data.lists_per_step, seed=seed_value,
    )
    selection = BestGateSelection(guard, metric_for(config, guard), config.selection.risk_scale_grid)
    monitor = TrainingMonitor()
    warnings = preflight(len(dm.train), config.optim.batch_size, config.optim.max_epochs,
                         config.optim.max_steps, config.optim.warmup_steps)
    warnings += [source_warning] if source_warning else []
    trainer = build_trainer(config, run_dir, [selection, monitor])
    t0 = time.perf_counter()
    # The initial gate (g ~ 1, scores = plain cosine) is a candidate too: if no trained step
    # passes the real-data guard, the export is the near-identity gate, and the history says so.
    if config.trainer.devices > 1:
        write_weight_digest(gate, run_dir, 0, "initial")
    trainer.validate(module, datamodule=dm, verbose=False)
    trainer.fit(module, datamodule=dm)
    train_seconds = time.perf_counter() - t0
    selection.finalize()
    loud = step_zero_line(selection, guard)
    if loud:
        warnings.append(loud)
        say_loudly(loud)
    if trainer.world_size > 1:
        # The weights every process ended training with (before selection picks a step).
        write_weight_digest(gate, run_dir, trainer.global_rank, "final")
    gate.load_state_dict(selection.best_state)
    # A "*-true" precision trained the weights in bf16/fp16/fp64; calibration, the export and the
    # headline all use the float32 gate that retrievers will load.
    gate.float().eval()
    if not trainer.is_global_zero:
        return {"rank": trainer.global_rank, "export_dir": None}

    anchors = guard.benign_anchor_sets() if hasattr(guard, "benign_anchor_sets") else None
    calibration = calibrate_gate(gate, data_dir, encoder, meta["data_hash"], anchors)
    risk_sets = guard.risk_label_sets() if hasattr(guard, "risk_label_sets") else {}
    export_info = {
        **risk_export_info(gate, selection.best or {}, risk_sets, anchors),
        "calibration": calibration.to_dict(),
        "encoder": identity,
        "data_hash": meta["data_hash"],
        "data_dir": os.path.relpath(data_dir, REPO_ROOT),
        "train_triples_file": os.path.relpath(triples_path, REPO_ROOT),
        **run_record(config, train_rows, dm, module, gate, selection, len(list_rows),
                     warnings + monitor.warnings),
    }
    export_gate(gate, export_dir, export_info)
    write_curve(run_dir, export_dir, monitor, selection.history, config,
                ",".join(getattr(guard, "guards", {}) or {}) or "none", warnings + monitor.warnings)
    write_reliability(export_dir, export_info.get("risk_calibration"), config.export.name)
    headline = None
    eval_seconds = 0.0
    if config.export.headline:
        t0 = time.perf_counter()
        headline = headline_for_export(export_dir, data_dir, encoder)
        eval_seconds = time.perf_counter() - t0
        write_json(export_dir / "headline.json", headline)
    write_model_card(export_dir, export_info, headline)
    summary = {
        "export_dir": str(export_dir),
        "run_dir": str(run_dir),
        "seconds": {"embed": embed_seconds, "train": train_seconds, "headline": eval_seconds,
                    "total": time.perf_counter() - started},
        "train_examples": len(dm.train),
        # Triples through the optimiser per second of the whole fit, validation and the real-data
        # guard included (benchmarks/bench_train.py times bare optimiser steps).
        "fit_triples_per_s": triples_seen(dm.train, trainer, config.optim.batch_size) / max(train_seconds, 1e-9),
        "steps": int(trainer.global_step),
        "selection": selection.best,
        "warnings": warnings + monitor.warnings,
        "headline": headline,
    }
    write_json(run_dir / "train_summary.json", summary)
    return summary
