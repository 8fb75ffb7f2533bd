"""The embedded store's vector file (``vectors.f32``, row = slot), held by
:class:`memgate.retriever.stores.embedded.backend.EmbeddedBackend`: writing a slot, zeroing purged
ones, the read-only memory map, and the checks that keep a damaged file from being read silently.

- **Open**: the file must hold every slot a record references; a shorter file (truncated by a
  copy, a full disk, a restore gone wrong) is refused with :class:`DamagedStoreError` naming the
  file and the fix, before anything reads or writes it (``allow_damaged=True`` opens it anyway,
  for ``memgate store verify``).
- **Reads**: every vector a read returns is checked against the CRC-32 its record stored:
  ``vectors_for`` checks the rows it copies, ``search`` (exact and approximate) the rows it
  returns, so a flipped byte or a file cut short while the store is open is refused, not
  returned. Only returned rows are checked (``benchmarks/bench_vector_crc.py`` measures the
  cost): a damaged row that does not reach the top ``k`` is found by ``verify()``.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Optional

import numpy as np

from memgate.retriever.errors import DamagedStoreError, StoreFullError, is_disk_full
from memgate.retriever.records.index import SupportIndex

FIX = ("run `memgate store verify --store {path}` to list the damaged records, and restore the "
       "store from an export (`memgate store import --from EXPORT_DIR --store NEW_DIR`)")


class VectorFile:
    """The float32 rows of ``path`` (slot = row), its memory map and the CRC of each slot the
    search index knows; ``store_dir`` names the store in error messages, ``lock`` is the store's."""

    def __init__(self, path: Path, dim: int, store_dir: Path, lock: AbstractContextManager[Any]) -> None:
        self.path, self.dim, self.store_dir, self.lock = path, dim, store_dir, lock
        self.fd: Optional[int] = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.dirty = False  # written since the last sync (the next commit fsyncs it first)
        self._mmap: Optional[np.ndarray] = None
        self._slot_crc = np.zeros(0, dtype=np.int64)  # -1: unknown

    def close(self) -> None:
        self._mmap = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def damaged(self, problem: str) -> DamagedStoreError:
        return DamagedStoreError(f"{self.path}: {problem}; {FIX.format(path=self.store_dir)}")

    def problem(self, top_slot: Optional[int]) -> Optional[str]:
        """Why the file cannot hold the vectors of slots up to ``top_slot`` (the highest slot a
        record references; None: no record has one), or None."""
        assert self.fd is not None
        size = os.fstat(self.fd).st_size
        need = 0 if top_slot is None else (int(top_slot) + 1) * self.dim * 4
        if size < need:
            return (f"the vector file is truncated: {size:,} bytes, but the records reference slot "
                    f"{top_slot}, which needs {need:,} bytes")
        return None

    # -- writes -------------------------------------------------------------------------------

    def write(self, slot: int, v: np.ndarray) -> int:
        """Write one vector (fsynced before the transaction that references it commits, by
        :meth:`sync`); returns its CRC-32."""
        assert self.fd is not None
        data = v.tobytes()
        os.pwrite(self.fd, data, slot * self.dim * 4)
        self.dirty = True
        return zlib.crc32(data)

    def sync(self) -> None:
        assert self.fd is not None
        os.fsync(self.fd)

    def zero(self, slots: list[int]) -> None:
        """Overwrite ``slots`` with zeros and fsync (a full disk: :class:`StoreFullError`, the
        slots stay queued for the next write or open)."""
        assert self.fd is not None
        zero = np.zeros(self.dim, dtype="<f4")
        try:
            for slot in slots:
                os.pwrite(self.fd, zero.tobytes(), slot * self.dim * 4)
            os.fsync(self.fd)
        except OSError as exc:
            if is_disk_full(exc):
                raise StoreFullError(f"{self.path}: the disk is full ({exc}); {len(slots)} vector "
                                     "purge(s) wait") from exc
            raise

    # -- reads --------------------------------------------------------------------------------

    def matrix(self) -> np.ndarray:
        """All slots as a read-only (n_slots, dim) float32 memory map (remapped when it grows)."""
        with self.lock:
            assert self.fd is not None
            rows = os.fstat(self.fd).st_size // (self.dim * 4)
            if self._mmap is None or self._mmap.shape[0] != rows:
                if rows == 0:
                    self._mmap = np.zeros((0, self.dim), dtype=np.float32)
                else:
                    self._mmap = np.memmap(self.path, dtype="<f4", mode="r", shape=(rows, self.dim))
            return self._mmap

    def checked_row(self, matrix: np.ndarray, slot: int, crc: int, name: str) -> np.ndarray:
        if slot >= matrix.shape[0]:
            matrix = self.matrix()  # (grown since it was mapped?)
        if slot >= matrix.shape[0]:
            raise self.damaged(f"the vector file is truncated: {name} needs slot {slot}, the file "
                               f"holds {matrix.shape[0]} rows")
        row: np.ndarray = matrix[slot]
        if zlib.crc32(row.data) != crc:
            raise self.damaged(f"the vector of {name} (slot {slot}) does not match its checksum")
        return row

    def note_crcs(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Remember the CRC of each (slot, crc) a refresh of the search index read."""
        pairs = list(pairs)
        if not pairs:
            return
        top = max(s for s, _ in pairs)
        if top >= len(self._slot_crc):
            grown = np.full(max(top + 1, 2 * len(self._slot_crc)), -1, dtype=np.int64)
            grown[: len(self._slot_crc)] = self._slot_crc
            self._slot_crc = grown
        for slot, crc in pairs:
            self._slot_crc[slot] = crc

    def check_returned(self, positions: np.ndarray, index: SupportIndex, matrix: np.ndarray) -> None:
        """The rows a search returns (index positions) match their CRCs: a flipped byte or a
        file cut short is refused, never returned (one gather, one CRC per row)."""
        if not len(positions):
            return
        slots = index.slot[positions]
        if int(slots.max()) >= matrix.shape[0]:
            matrix = self.matrix()
        step = self.dim * 4
        for i in np.flatnonzero(slots >= matrix.shape[0]).tolist():  # (only a bad row pays for its name)
            p = int(positions[i])
            self.checked_row(matrix, int(slots[i]), 0, f"{index.namespaces[p]}/{index.ids[p]}")
        rows = np.ascontiguousarray(matrix[slots]).data.cast("B")
        want = self._slot_crc[slots].tolist()
        crc32 = zlib.crc32
        for i in range(len(want)):
            if crc32(rows[i * step:(i + 1) * step]) != want[i]:
                p = int(positions[i])
                raise self.damaged(f"the vector of {index.namespaces[p]}/{index.ids[p]} (slot "
                                   f"{int(slots[i])}) does not match its checksum")


__all__ = ["FIX", "VectorFile"]
