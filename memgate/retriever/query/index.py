"""The retriever's query index: the candidate support (a
:class:`memgate.retriever.records.index.SupportIndex` of every record's metadata and vector slot,
never text), its cached Kleene verdicts (:mod:`memgate.retriever.query.verdicts`) and the
gate's memory part ``W_v v`` per vector slot (computed once per record, when it enters the index
or when the gate loads: the write-time split of the gate's first layer), refreshed from the
store's change feed (``changes_since``: another process's writes and forgets count too)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from memgate.retriever.config import RetrieverConfig
from memgate.retriever.query.gate import RetrieverGate
from memgate.retriever.query.verdicts import VerdictCache
from memgate.retriever.records.index import SupportIndex
from memgate.retriever.stores.base import MemoryStore


class QueryIndex:
    """The query-time state of one retriever over ``store`` (module docstring)."""

    def __init__(self, store: MemoryStore, gate: RetrieverGate, config: RetrieverConfig) -> None:
        self.store, self.gate, self.config = store, gate, config
        self.support = SupportIndex()
        self.verdicts = VerdictCache()
        self.vpart: Optional[np.ndarray] = None  # (slots, hidden): the gate's W_v v per slot

    def refresh(self) -> None:
        """Apply the store's changes since the last refresh (nothing to do when its version is
        the index's)."""
        support = self.support
        if self.store.version() == support.seq:
            return
        version, entries = self.store.changes_since(support.seq)
        born, died = support.apply(entries)
        support.seq = version
        self.verdicts.note_changes(support)  # another process's writes count too
        if self.gate.scorer is not None and self.config.use_gate:  # (a gate not loaded yet: at its load)
            self.update_vpart(born, died)

    def gate_installed(self) -> None:
        """A gate was installed: its memory part of the records indexed before it loaded."""
        if self.gate.scorer is not None and self.config.use_gate:
            support = self.support
            live = [int(s) for s in support.slot[np.flatnonzero(support.alive[: len(support.ids)])]]
            self.update_vpart(live, [])

    def update_vpart(self, born: list[int], died: list[int]) -> None:
        import torch  # the gate is loaded, so torch is too

        with torch.no_grad():
            self._update_vpart(born, died)

    def _update_vpart(self, born: list[int], died: list[int]) -> None:
        gate, scorer = self.gate.loaded, self.gate.scorer
        assert gate is not None and scorer is not None
        hidden = gate.config.hidden
        need = max(born, default=-1) + 1
        if self.vpart is None:
            self.vpart = np.zeros((max(need, 1024), hidden), dtype=np.float32)
        elif need > self.vpart.shape[0]:
            grown = np.zeros((max(need, 2 * self.vpart.shape[0]), hidden), dtype=np.float32)
            grown[: self.vpart.shape[0]] = self.vpart
            self.vpart = grown
        for slot in died:  # a forgotten or replaced vector leaves nothing derived from it
            if slot < self.vpart.shape[0]:
                self.vpart[slot] = 0.0
        if born:
            matrix = self.store.vector_matrix()
            slots = np.asarray(sorted(born), dtype=np.int64)
            for start in range(0, len(slots), 4096):
                chunk = slots[start : start + 4096]
                V = np.ascontiguousarray(matrix[chunk], dtype=np.float32)
                self.vpart[chunk] = scorer.memory_part(V).numpy()

    @property
    def precomputed_bytes(self) -> int:
        """Memory held by the precomputed first-layer parts of live records."""
        if self.vpart is None:
            return 0
        return len(self.support) * int(self.vpart.shape[1]) * 4

    def ids(self) -> list[str]:
        """Ids of the records in the index, every namespace (diagnostics and tests only)."""
        support = self.support
        return [support.ids[p] for p in np.flatnonzero(support.alive[: len(support.ids)])]


__all__ = ["QueryIndex"]
