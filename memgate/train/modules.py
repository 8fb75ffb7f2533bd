"""Lightning training of the gate: data module and module (model selection: ``memgate.train.select_step``).

The gate (``memgate.model.gate``) and the objective (``memgate.train.objective``) know nothing of this file.
Embeddings are computed once by the frozen encoder; batches carry indices into that matrix.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from memgate.contract.seeding import component_rng
from memgate.contract.triples import read_triples  # noqa: F401  (re-exported)
from memgate.model.encoder import Encoder
from memgate.model.gate import MemGate
from memgate.train.batching import SourceShareBatchSampler
from memgate.train.objective import LossConfig, list_preservation_loss, preference_loss

log = logging.getLogger(__name__)

# A guard takes the gate and returns {"passed": bool, ...figures}; see memgate.train.selection.
Guard = Callable[[MemGate], dict]


@dataclass
class PreferenceSet:
    """Training or dev preferences as indices into one embedding matrix.

    ``neg`` has shape (n, max_negatives) with -1 padding; ``neg[:, 0]`` is always real.
    """

    q: np.ndarray
    pos: np.ndarray
    neg: np.ndarray
    scenario: list
    n_triples: int
    source: list = None  # the triple source of each example ("template" when a row has none)

    def __len__(self) -> int:
        return len(self.q)


def build_preferences(
    rows: list[dict],
    text_index: dict[str, int],
    group_negatives: bool,
    max_negatives: int,
    shuffle_labels: bool = False,
    rng: Optional[np.random.Generator] = None,
) -> PreferenceSet:
    """Turn triples into index arrays; optionally group negatives per (query, m+)."""
    if group_negatives:
        grouped: dict[tuple, list] = {}
        scen: dict[tuple, str] = {}
        src: dict[tuple, str] = {}
        for row in rows:
            key = (row["query_text"], row["pos_text"])
            grouped.setdefault(key, []).append(row["neg_text"])
            scen.setdefault(key, row.get("scenario", "unknown"))
            src.setdefault(key, row.get("source", "template"))
        keys = list(grouped)
        negs = [grouped[k][:max_negatives] for k in keys]
        width = max(len(n) for n in negs)
        neg = np.full((len(keys), width), -1, dtype=np.int64)
        for i, ns in enumerate(negs):
            neg[i, : len(ns)] = [text_index[t] for t in ns]
        q = np.array([text_index[k[0]] for k in keys], dtype=np.int64)
        pos = np.array([text_index[k[1]] for k in keys], dtype=np.int64)
        scenarios = [scen[k] for k in keys]
        sources = [src[k] for k in keys]
    else:
        q = np.array([text_index[r["query_text"]] for r in rows], dtype=np.int64)
        pos = np.array([text_index[r["pos_text"]] for r in rows], dtype=np.int64)
        neg = np.array([[text_index[r["neg_text"]]] for r in rows], dtype=np.int64)
        scenarios = [r.get("scenario", "unknown") for r in rows]
        sources = [r.get("source", "template") for r in rows]
    if shuffle_labels:
        # Label-permutation control: which memory is "preferred" becomes a coin flip.
        rng = rng or np.random.default_rng(0)
        flip = rng.random(len(q)) < 0.5
        pos_new = np.where(flip, neg[:, 0], pos)
        neg[:, 0] = np.where(flip, pos, neg[:, 0])
        pos = pos_new
    return PreferenceSet(q=q, pos=pos, neg=neg, scenario=scenarios, n_triples=len(rows), source=sources)


@dataclass
class BenignLists:
    """Benign candidate lists as indices into the embedding matrix: ``query`` (L,) and ``items``
    (L, list_size) with -1 padding; item 0 of every list is real."""

    query: np.ndarray
    items: np.ndarray

    def __len__(self) -> int:
        return len(self.query)


def build_benign_lists(rows: list[dict], text_index: dict[str, int], list_size: int,
                       rng: np.random.Generator) -> BenignLists:
    """Index arrays of ``train/benign_lists.jsonl`` rows; a list longer than ``list_size`` keeps a
    seeded subset in its original order, fixed for the whole run."""
    query = np.array([text_index[r["query_text"]] for r in rows], dtype=np.int64)
    items = np.full((len(rows), list_size), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        texts = [item["text"] for item in row["items"]]
        if len(texts) > list_size:
            keep = np.sort(rng.choice(len(texts), size=list_size, replace=False))
            texts = [texts[j] for j in keep]
        items[i, : len(texts)] = [text_index[t] for t in texts]
    return BenignLists(query=query, items=items)


class _IndexDataset(Dataset):
    def __init__(self, prefs: PreferenceSet):
        self.prefs = prefs

    def __len__(self) -> int:
        return len(self.prefs)

    def __getitem__(self, i: int):
        return self.prefs.q[i], self.prefs.pos[i], self.prefs.neg[i]


class PreferenceDataModule(L.LightningDataModule):
    """Embeds every text of the train and dev triples once and serves index batches."""

    def __init__(
        self,
        train_rows: list[dict],
        dev_rows: list[dict],
        encoder: Encoder,
        batch_size: int,
        group_negatives: bool,
        max_negatives: int,
        seed: int,
        shuffle_labels: bool = False,
        list_rows: Optional[list[dict]] = None,
        list_size: int = 16,
        source_shares: Optional[dict] = None,
    ):
        super().__init__()
        self.batch_size = batch_size
        self.seed = seed
        self.source_shares = source_shares
        texts: dict[str, int] = {}
        for row in (*train_rows, *dev_rows):
            for key in ("query_text", "pos_text", "neg_text"):
                texts.setdefault(row[key], len(texts))
        for row in list_rows or ():
            texts.setdefault(row["query_text"], len(texts))
            for item in row["items"]:
                texts.setdefault(item["text"], len(texts))
        self.embeddings = torch.from_numpy(encoder.encode(list(texts), desc="embed triples"))
        self.lists = (build_benign_lists(list_rows, texts, list_size, component_rng(seed, "benign_lists"))
                      if list_rows else None)
        rng = component_rng(seed, "label_permutation")
        self.train = build_preferences(
            train_rows, texts, group_negatives, max_negatives, shuffle_labels, rng
        )
        self.dev = build_preferences(dev_rows, texts, group_negatives, max_negatives)

    def train_dataloader(self) -> DataLoader:
        if self.source_shares:
            sampler = SourceShareBatchSampler(self.train.source, self.source_shares, self.batch_size, self.seed)
            return DataLoader(_IndexDataset(self.train), batch_sampler=sampler, num_workers=0)
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            _IndexDataset(self.train), batch_size=self.batch_size, shuffle=True,
            generator=generator, num_workers=0,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_IndexDataset(self.dev), batch_size=4096, shuffle=False, num_workers=0)


class MemGateModule(L.LightningModule):
    """Wraps a MemGate and the preference objective; logs the docs/design.md section 4 diagnostics."""

    def __init__(
        self,
        gate: MemGate,
        loss_config: LossConfig,
        embeddings: torch.Tensor,
        lr: float,
        weight_decay: float,
        warmup_steps: int,
        lists: Optional[BenignLists] = None,
        lists_per_step: int = 64,
        seed: int = 0,
    ):
        super().__init__()
        self.gate = gate
        self.loss_config = loss_config
        self.register_buffer("embeddings", embeddings, persistent=False)
        # Ranking preservation (and the risk head's label-0 items): benign lists drawn per step
        # from their own seeded stream.
        uses_lists = loss_config.list_preservation_weight > 0 or (loss_config.risk_weight > 0 and gate.has_risk)
        self.lists = lists if (lists is not None and len(lists) and uses_lists) else None
        if self.lists is not None:
            self.register_buffer("list_query", torch.from_numpy(self.lists.query), persistent=False)
            self.register_buffer("list_items", torch.from_numpy(self.lists.items), persistent=False)
        self.lists_per_step = lists_per_step
        self._list_generator = torch.Generator().manual_seed(int(component_rng(seed, "benign_list_draws").integers(2**62)))
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup_steps = warmup_steps
        self._val: list[dict] = []
        self.last_dev: dict = {}

    def _gather(self, batch):
        q_idx, pos_idx, neg_idx = batch
        emb = self.embeddings
        mask = neg_idx >= 0
        negs = emb[neg_idx.clamp_min(0)]
        return emb[q_idx], emb[pos_idx], negs, mask

    def _list_term(self) -> tuple[torch.Tensor, dict]:
        """The ranking-preservation loss on ``lists_per_step`` benign lists drawn for this step."""
        n = len(self.list_query)
        pick = torch.randperm(n, generator=self._list_generator)[: min(self.lists_per_step, n)].to(self.device)
        items = self.list_items[pick]
        mask = items >= 0
        emb = self.embeddings
        losses, diag = list_preservation_loss(self.loss_config, self.gate, emb[self.list_query[pick]],
                                              emb[items.clamp_min(0)], mask)
        return losses.mean(), diag

    def training_step(self, batch, batch_idx):
        q, pos, negs, mask = self._gather(batch)
        losses, diag = preference_loss(self.loss_config, self.gate, q, pos, negs, mask)
        loss = losses.mean()
        if self.lists is not None:
            list_loss, list_diag = self._list_term()
            loss = loss + list_loss
            diag.update(list_diag)
        self.log_dict({f"train/{k}": v for k, v in diag.items() if k != "loss"},
                      batch_size=len(q), prog_bar=False)
        self.log("train/loss", loss, batch_size=len(q), prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        q, pos, negs, mask = self._gather(batch)
        _, diag = preference_loss(self.loss_config, self.gate, q, pos, negs, mask, mask_stats=True)
        self._val.append({"n": len(q), **diag})

    def on_validation_epoch_end(self):
        if not self._val:
            return
        keys = [k for k in self._val[0] if k != "n"]
        # Weighted sums, reduced over processes so every rank selects on the whole dev set.
        sums = torch.tensor(
            [sum(d["n"] for d in self._val)] + [sum(d[k] * d["n"] for d in self._val) for k in keys],
            dtype=torch.float64, device=self.device,
        )
        self._val.clear()
        if self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        merged = {k: float(sums[i + 1] / sums[0]) for i, k in enumerate(keys)}
        self.last_dev = merged
        self.log_dict({f"dev/{k}": v for k, v in merged.items()}, prog_bar=False)
        self.log("dev_pref_acc_gated", merged["pref_acc_gated"], prog_bar=True)

    def configure_optimizers(self):
        optimiser = torch.optim.AdamW(self.gate.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        # The optimiser steps this process will take: the smaller of max_steps and epochs x its own
        # share of the batches (a DDP process sees 1/world of the data), so the cosine reaches 0.
        total = max(1, int(self.trainer.estimated_stepping_batches))

        def schedule(step: int) -> float:
            if step < self.warmup_steps:
                return (step + 1) / self.warmup_steps
            progress = (step - self.warmup_steps) / max(1, total - self.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, schedule)
        return {"optimizer": optimiser, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
