"""Train a gate on your own triples (``memgate.datasets.user_triples``): no ``meta.json``, no
synthetic split. Selection is on your dev triples; the drop threshold is calibrated on them
(``pos`` = required and admissible, ``neg`` = inadmissible) or skipped with a note; the real-data
guards are an explicit choice, stated in the output and the model card:

- ``guards="auto"`` (default): ``locomo,gatemem_routes,gatemem,text_risk`` when the vendored real
  data is present, else none, and the note says which and why;
- ``guards="none"``: selection on your dev set alone;
- ``guards="locomo,gatemem"`` (any subset of the four): required; a missing copy raises.

When guarded selection ships step 0 (no trained step passed every guard, or none beat step 0 on
your dev set), the run prints one loud line and the model card says the export ranks like the
cosine.

Pre-computed vector files train the same way (no encoder; no guards, which embed real text with
the bundled encoder).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from memgate.contract.config import REPO_ROOT, config_hash, resolve_path, write_resolved
from memgate.contract.seeding import seed_everything
from memgate.datasets.real.paths import real_data_available, real_data_root
from memgate.datasets.user_triples import TripleSet
from memgate.eval.calibration import calibrate_threshold
from memgate.eval.drop_calibration import gate_suppression
from memgate.model.encoder import set_offline_defaults
from memgate.model.export import export_gate, write_json, write_model_card
from memgate.model.gate import MemGate, MemGateConfig
from memgate.model.pretrained import refuse_released_export
from memgate.train.config import TrainConfig
from memgate.train.lightning_quiet import quiet_lightning
from memgate.train.modules import MemGateModule, PreferenceDataModule
from memgate.train.monitor import TrainingMonitor, preflight
from memgate.train.risk_scale import risk_export_info
from memgate.train.run import (
    build_trainer,
    encoder_from,
    run_record,
    say_loudly,
    step_zero_line,
    write_curve,
    write_reliability,
)
from memgate.train.run_dirs import run_dir_for
from memgate.train.select_step import BestGateSelection
from memgate.train.selection import GUARD_NAMES, selection_guards_for

log = logging.getLogger("memgate.train")

class VectorTable:
    """The encoder of a pre-computed vector file: ``encode`` looks the ``vec:`` keys up."""

    def __init__(self, vectors: dict, encoder_id: str = "precomputed"):
        self.vectors = vectors
        dim = len(next(iter(vectors.values())))
        self.identity = {"id": encoder_id, "revision": None, "normalize": False, "dim": dim}

    def encode(self, texts, progress: bool = True, desc: str = "") -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def resolve_guards(spec: str, config: TrainConfig, kind: str) -> tuple[tuple[str, ...], str]:
    """(guard names, the sentence the output and the model card state)."""
    root = real_data_root(config.real_data_root)
    shown = os.path.relpath(root, REPO_ROOT) if str(root).startswith(str(REPO_ROOT)) else str(root)
    if spec == "auto":
        if kind == "vector":
            return (), ("none (default for pre-computed vectors: the guards embed real text with the "
                        "bundled encoder, which these vectors need not come from)")
        if real_data_available(root):
            return GUARD_NAMES, (f"{','.join(GUARD_NAMES)} (default: the vendored real data is present at {shown}; "
                                 "pass --guards none to select on your dev set alone)")
        return (), (f"none (default: no real data at {shown}; pass --guards {','.join(GUARD_NAMES)} to require it)")
    if spec == "none":
        return (), "none (--guards none: selection on your dev set alone)"
    names = tuple(n.strip() for n in spec.split(",") if n.strip())
    unknown = sorted(set(names) - set(GUARD_NAMES))
    if unknown or not names:
        raise ValueError(f"--guards: unknown guard(s) {unknown or [spec]}; give auto, none or a "
                         f"comma-separated subset of {list(GUARD_NAMES)}")
    if kind == "vector":
        raise ValueError("--guards: the real-data guards need text triples (they embed LoCoMo, GateMem and "
                         "natural-phrasing text with the bundled encoder); use --guards none with pre-computed vectors")
    return names, f"{','.join(names)} (--guards {spec}: required)"


def calibrate_on_triples(gate: MemGate, dm: PreferenceDataModule, dev: TripleSet, enabled: bool):
    """(calibration dict or None, note). Pairs: (q, pos) required + admissible, (q, neg)
    inadmissible; a pair labelled both ways is left out (None)."""
    if not enabled:
        return None, "skipped (--no-calibration): the learned_gate_drop route keeps every candidate"
    label: dict = {}
    for prefs in (dm.dev,):
        for q, p, negs in zip(prefs.q, prefs.pos, prefs.neg):
            for key, value in [((q, p), True)] + [((q, n), False) for n in negs if n >= 0]:
                label[key] = value if label.get(key, value) == value else None
    pairs = sorted(label)
    qi = np.array([a for a, _ in pairs], dtype=np.int64)
    mi = np.array([b for _, b in pairs], dtype=np.int64)
    emb = dm.embeddings.numpy()
    scores = gate_suppression(gate)(emb[qi], emb[mi])
    admissible = [label[k] for k in pairs]
    required = np.array([a is True for a in admissible])
    calibration = calibrate_threshold(scores.tolist(), admissible, required, data_hash=dev.content_hash())
    return calibration.to_dict(), (f"on your dev triples ({dev.name}): {int(required.sum())} (query, pos) "
                                   f"pairs as required, {sum(a is False for a in admissible)} (query, neg) "
                                   "pairs as inadmissible, at most 1% of required pairs dropped")


def own_source_shares(config: TrainConfig, rows: list) -> TrainConfig:
    """``data.source_shares`` of a mix config (the text-risk rows) mixes the project's triple sources
    (templates, GateMem, the natural-phrasing sources); your triples keep them only when they hold
    every source with a share (the loader gives a triple without ``source`` ``user``), else batches are drawn
    from your triples as they are, and the run says so."""
    shares = config.data.source_shares
    if not shares:
        return config
    held = {row.get("source", "template") for row in rows}
    missing = sorted(s for s, share in shares.items() if share > 0 and s not in held)
    if not missing:
        return config
    log.info("data.source_shares: off (your triples hold no %s; batches draw from them as they are)",
             ", ".join(missing))
    return replace(config, data=replace(config.data, source_shares=None))


DEFAULT_TRAIN_CONFIG = TrainConfig()  # (a frozen dataclass: one default shared by every call)


@quiet_lightning()
def train_on_triples(
    train: TripleSet,
    dev: TripleSet,
    out_dir: Path,
    config: TrainConfig = DEFAULT_TRAIN_CONFIG,
    guards: str = "auto",
    benign_lists: Optional[list] = None,
    calibrate: bool = True,
    encoder_id: str = "precomputed",
    argv: Optional[list] = None,
) -> dict:
    """Train, select on ``dev``, export into ``out_dir``; returns the summary (train_summary.json)."""
    set_offline_defaults()
    torch.set_num_threads(config.trainer.num_threads)
    started = time.perf_counter()
    if train.kind != dev.kind:
        raise ValueError(f"{train.name} holds {train.kind}s but {dev.name} holds {dev.kind}s")
    out_dir = Path(out_dir)
    refuse_released_export(out_dir)  # before any work: only make release exports the released name
    config = replace(config, export=replace(config.export, name=out_dir.name, headline=False))
    names, guard_note = resolve_guards(guards, config, train.kind)
    # selection on your dev set (its preference accuracy), under the guards you chose
    config = replace(config, selection=replace(
        config.selection, metric="dev_pref_acc_gated", locomo_guard="locomo" in names,
        gatemem_routes_guard="gatemem_routes" in names, gatemem_guard="gatemem" in names,
        text_risk_guard="text_risk" in names))
    log.info("guards: %s", guard_note)
    config = own_source_shares(config, train.rows)
    seed_value = seed_everything(config.seed, "train")
    # runs/<out name>, or runs/<out name>-2, ... when that holds another export's run
    run_dir = run_dir_for(resolve_path(config.export.runs_dir), config.export.name, out_dir)
    write_resolved(config, run_dir, argv=argv or [], seed=config.seed, component_seed=seed_value,
                   config_hash=config_hash(config))
    if train.kind == "vector":
        if benign_lists:
            raise ValueError("--benign-lists needs text triples (the lists are embedded text)")
        encoder = VectorTable({**train.vectors, **dev.vectors}, encoder_id)
    else:
        encoder = encoder_from(config)
    guard = selection_guards_for(config) if names else None
    lists = list(benign_lists or [])
    if not lists and config.loss.list_preservation_weight > 0:
        log.info("ranking preservation: off (no --benign-lists given)")
    dm = PreferenceDataModule(
        train.rows, dev.rows, encoder, config.optim.batch_size, config.data.group_negatives,
        config.data.max_negatives, seed_value, config.data.shuffle_labels,
        list_rows=lists, list_size=config.data.list_size, source_shares=config.data.source_shares,
    )
    identity = encoder.identity
    gate = MemGate(MemGateConfig(dim=identity["dim"], encoder_id=identity["id"],
                                 encoder_revision=identity["revision"],
                                 encoder_normalize=identity["normalize"], **asdict(config.gate)))
    module = MemGateModule(gate, config.loss, dm.embeddings, config.optim.lr,
                           config.optim.weight_decay, config.optim.warmup_steps, lists=dm.lists,
                           lists_per_step=config.data.lists_per_step, seed=seed_value)
    selection, monitor = BestGateSelection(guard, "dev_pref_acc_gated", config.selection.risk_scale_grid), TrainingMonitor()
    warnings = preflight(len(dm.train), config.optim.batch_size, config.optim.max_epochs,
                         config.optim.max_steps, config.optim.warmup_steps)
    trainer = build_trainer(replace(config, trainer=replace(config.trainer, devices=1)), run_dir,
                            [selection, monitor])
    t0 = time.perf_counter()
    trainer.validate(module, datamodule=dm, verbose=False)
    trainer.fit(module, datamodule=dm)
    train_seconds = time.perf_counter() - t0
    selection.finalize()
    loud = step_zero_line(selection, guard)
    if loud:
        warnings.append(loud)
        say_loudly(loud)
    gate.load_state_dict(selection.best_state)
    gate.float().eval()
    calibration, calibration_note = calibrate_on_triples(gate, dm, dev, calibrate)
    warnings = warnings + monitor.warnings
    export_info = {
        **risk_export_info(gate, selection.best or {},
                           guard.risk_label_sets() if hasattr(guard, "risk_label_sets") else {},
                           guard.benign_anchor_sets() if hasattr(guard, "benign_anchor_sets") else None),
        "calibration": calibration,
        "calibration_note": calibration_note,
        "encoder": identity,
        "data_hash": train.content_hash(),
        "dev_set": dev.name,
        "guards": guard_note,
        "train_triples_file": train.name,
        "dev_triples_file": dev.name,
        **run_record(config, train.rows, dm, module, gate, selection, len(lists), warnings),
    }
    export_gate(gate, out_dir, export_info)
    write_curve(run_dir, out_dir, monitor, selection.history, config, ",".join(names) or "none", warnings)
    write_reliability(out_dir, export_info.get("risk_calibration"), config.export.name)
    write_model_card(out_dir, export_info, None)
    summary = {
        "export_dir": str(out_dir),
        "run_dir": str(run_dir),
        "guards": guard_note,
        "calibration": calibration_note,
        "train_examples": len(dm.train),
        "dev_examples": len(dm.dev),
        "steps": int(trainer.global_step),
        "selection": selection.best,
        "warnings": warnings,
        "seconds": {"train": train_seconds, "total": time.perf_counter() - started},
    }
    write_json(run_dir / "train_summary.json", summary)
    return summary
