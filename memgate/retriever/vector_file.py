"""``EmbeddedStore``'s vector file (``vectors.f32``, row = slot; a mixin of
:class:`memgate.retriever.EmbeddedStore`): writing a slot, zeroing purged ones, the read-only
memory map, and the checks that keep a damaged file from being read silently.

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
from typing import Optional

import numpy as np

from memgate.retriever.schema import DamagedStoreError, StoreFullError, UnknownMemoryError, is_disk_full

FIX = ("run `memgate store verify --store {path}` to list the damaged records, and restore the "
       "store from an export (`memgate store import --from EXPORT_DIR --store NEW_DIR`)")


class VectorFile:
    """The vector file of ``self.path`` (``self._vpath``, ``self._vfd``), its memory map and the
    CRC of each slot the search index knows (``self._slot_crc``)."""

    def _open_vectors(self, vpath: os.PathLike, allow_damaged: bool) -> None:
        self._vpath = vpath
        self._vfd: Optional[int] = os.open(self._vpath, os.O_RDWR | os.O_CREAT, 0o644)
        self._mmap: Optional[np.ndarray] = None
        self._slot_crc = np.zeros(0, dtype=np.int64)  # -1: unknown
        if not allow_damaged:
            problem = self._vector_file_problem()
            if problem:
                self.close()
                raise self._damaged(problem)

    def _damaged(self, problem: str) -> DamagedStoreError:
        return DamagedStoreError(f"{self._vpath}: {problem}; {FIX.format(path=self.path)}")

    def _vector_file_problem(self) -> Optional[str]:
        """Why the vector file cannot hold the records' vectors (shorter than the slots they
        reference), or None."""
        with self._lock:
            (top,) = self._db.execute("SELECT MAX(slot) FROM records").fetchone()
            size = os.fstat(self._vfd).st_size
        need = 0 if top is None else (int(top) + 1) * self.dim * 4
        if size < need:
            return (f"the vector file is truncated: {size:,} bytes, but the records reference slot "
                    f"{top}, which needs {need:,} bytes")
        return None

    # -- writes -------------------------------------------------------------------------------

    def _write_vector(self, slot: int, v: np.ndarray) -> int:
        """Write one vector; it is fsynced before the transaction that references it commits."""
        data = v.tobytes()
        os.pwrite(self._vfd, data, slot * self.dim * 4)
        self._vectors_dirty = True
        return zlib.crc32(data)

    def _new_slot(self, v: np.ndarray) -> tuple[int, int]:
        slot = self._bump("next_slot") - 1
        crc = self._write_vector(slot, v)
        self._hook("after_vector")
        return slot, crc

    def _purge_pending(self) -> None:
        """Zero every vector slot queued for purging (forgotten or replaced vectors)."""
        with self._lock:
            slots = [s for (s,) in self._db.execute("SELECT slot FROM purge")]
            if not slots:
                return
            zero = np.zeros(self.dim, dtype="<f4")
            try:
                for slot in slots:
                    os.pwrite(self._vfd, zero.tobytes(), slot * self.dim * 4)
                os.fsync(self._vfd)
            except OSError as exc:
                if is_disk_full(exc):  # (the slots stay queued: redone by the next write or open)
                    raise StoreFullError(f"{self._vpath}: the disk is full ({exc}); {len(slots)} vector "
                                         "purge(s) wait") from exc
                raise
            with self._txn():
                self._db.executemany("DELETE FROM purge WHERE slot = ?", [(s,) for s in slots])

    # -- reads --------------------------------------------------------------------------------

    def vector_matrix(self) -> np.ndarray:
        """All slots as a read-only (n_slots, dim) float32 memory map (remapped when it grows)."""
        with self._lock:
            rows = os.fstat(self._vfd).st_size // (self.dim * 4)
            if self._mmap is None or self._mmap.shape[0] != rows:
                if rows == 0:
                    self._mmap = np.zeros((0, self.dim), dtype=np.float32)
                else:
                    self._mmap = np.memmap(self._vpath, dtype="<f4", mode="r", shape=(rows, self.dim))
            return self._mmap

    def _checked_row(self, matrix: np.ndarray, slot: int, crc: int, name: str) -> np.ndarray:
        if slot >= matrix.shape[0]:
            matrix = self.vector_matrix()  # (grown since it was mapped?)
        if slot >= matrix.shape[0]:
            raise self._damaged(f"the vector file is truncated: {name} needs slot {slot}, the file "
                                f"holds {matrix.shape[0]} rows")
        row = matrix[slot]
        if zlib.crc32(row) != crc:
            raise self._damaged(f"the vector of {name} (slot {slot}) does not match its checksum")
        return row

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        """Copies of the stored vectors of live records (forgotten ones have none), each checked
        against its record's CRC (:class:`DamagedStoreError` if it does not match)."""
        out = {}
        matrix = self.vector_matrix()
        with self._lock:
            for memory_id in memory_ids:
                try:
                    ns = self._resolve(memory_id, namespace)
                except UnknownMemoryError:
                    continue
                row = self._db.execute(
                    "SELECT slot, vec_crc FROM records WHERE namespace = ? AND memory_id = ? "
                    "AND slot IS NOT NULL", (ns, memory_id)).fetchone()
                if row is not None:
                    out[memory_id] = np.array(self._checked_row(matrix, row[0], row[1], f"{ns}/{memory_id}"))
        return out

    def _note_crcs(self, pairs: Iterable[tuple[int, int]]) -> None:
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

    def _check_returned(self, positions: np.ndarray, index, matrix: np.ndarray) -> None:
        """The rows a search returns (index positions) match their CRCs: a flipped byte or a
        file cut short is refused, never returned (one gather, one CRC per row)."""
        if not len(positions):
            return
        slots = index.slot[positions]
        if int(slots.max()) >= matrix.shape[0]:
            matrix = self.vector_matrix()
        step = self.dim * 4
        for i in np.flatnonzero(slots >= matrix.shape[0]).tolist():  # (only a bad row pays for its name)
            p = int(positions[i])
            self._checked_row(matrix, int(slots[i]), 0, f"{index.namespaces[p]}/{index.ids[p]}")
        rows = memoryview(np.ascontiguousarray(matrix[slots])).cast("B")
        want = self._slot_crc[slots].tolist()
        crc32 = zlib.crc32
        for i in range(len(want)):
            if crc32(rows[i * step:(i + 1) * step]) != want[i]:
                p = int(positions[i])
                raise self._damaged(f"the vector of {index.namespaces[p]}/{index.ids[p]} (slot "
                                    f"{int(slots[i])}) does not match its checksum")


__all__ = ["FIX", "VectorFile"]
