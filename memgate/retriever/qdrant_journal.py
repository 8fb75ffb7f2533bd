"""``QdrantStore``'s journaled write: stage a write, store it as a redo journal in the metadata
point, apply it in one batch, clear the journal (replayed on open after a kill), and the format-1
migration through the same journal (a mixin of :class:`memgate.retriever.qdrant_store.QdrantStore`)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from typing import Optional

import numpy as np

from memgate.retriever.qdrant_points import (
    _META_ID,
    QDRANT_FORMAT,
    VECTOR_NAME,
    _key,
    _suppressed_id,
    point_id,
    qm,
)
from memgate.retriever.schema import StoreFullError, is_disk_full
from memgate.retriever.suppression import Suppressed, new_key

log = logging.getLogger("memgate")


class QdrantJournal:
    """All-or-nothing writes over ``self.client`` without multi-point transactions."""

    @contextmanager
    def _write(self):
        """Stage a write (validated against current points), then commit it through the journal.
        A full disk raises :class:`StoreFullError` saying whether the write is absent or
        journaled (then completed by the next write or open); audit events a full disk kept out
        of the log are appended after the next write (they are lost if the process ends first:
        this store has no outbox)."""
        with self._lock:
            try:
                self._recover()
            except Exception as exc:
                raise self._full(exc, staged=False) if is_disk_full(exc) else exc
            meta = self._meta()
            self._pending = {}
            self._sup_put: dict[tuple, Suppressed] = {}
            self._sup_del: dict[tuple, Suppressed] = {}
            self._dead_slots: list[int] = []
            self._events: list[dict] = []
            self._counters = dict(meta)
            try:
                yield
                try:
                    self._commit(self._journal())
                except Exception as exc:
                    if not is_disk_full(exc):
                        raise
                    full = self._full(exc)
                    if "journal" in str(full):  # (completed later: so are its events)
                        self._unlogged = getattr(self, "_unlogged", []) + self._events
                    raise full from exc
                for slot in self._dead_slots:  # replaced or forgotten vectors
                    self._mirror_set(slot, None)
                for memory, slot, vector, _ in self._pending.values():
                    if vector is not None:
                        self._mirror_set(slot, vector)
            finally:
                self._pending = None
            events = getattr(self, "_unlogged", []) + self._events
            if self.audit is not None and events:
                try:
                    self.audit.append_many(events)
                    self._unlogged = []
                except StoreFullError as exc:  # the write is applied: it must not look refused
                    self._unlogged = events
                    log.warning("%s; the write itself was applied, its events wait in this process", exc)

    def _full(self, exc: BaseException, staged: bool = True) -> StoreFullError:
        """What a full disk did to this write: nothing, or a journal that completes it later
        (``staged=False``: it failed completing an earlier write's journal, before this one)."""
        try:
            raw = self._meta_point()
        except Exception:  # (the collection cannot be read either)
            raw = None
        where = f"the Qdrant collection {self.collection!r}"
        if not staged or raw is None or raw.payload.get("_journal") is None:
            return StoreFullError(f"{where}: the disk is full ({exc}); nothing of this write was stored: "
                                  "free space and retry (this store stays usable)")
        return StoreFullError(f"{where}: the disk is full ({exc}); this write is in the store's journal "
                              "and is completed, all of it, by the next write or open once space is "
                              "freed: do not retry it")

    def _journal(self) -> dict:
        """The staged write as JSON: deletions, points (record, tombstone, suppression), counters."""
        deletes, points = [], []
        for (namespace, memory_id), (memory, slot, vector, parents) in self._pending.items():
            pid = point_id(memory_id, namespace)
            if memory.forgotten:
                deletes.append(pid)  # the old point (vector + payload) goes before its tombstone
            payload = memory.to_dict()
            payload.update(_seq=self._counters["seq"], _slot=slot, _parents=list(parents))
            points.append({"id": pid, "payload": payload,
                           "vector": {} if vector is None else {VECTOR_NAME: np.asarray(vector).tolist()}})
        deletes += [_suppressed_id(e) for e in self._sup_del.values()]
        points += [{"id": _suppressed_id(e), "payload": {"_suppressed": e.to_dict()}, "vector": {}}
                   for e in self._sup_put.values()]
        return {"deletes": deletes, "points": points, "meta": self._counters}

    def _commit(self, journal: dict) -> None:
        meta = self._meta()
        self._put_meta(meta, journal)  # (1) one single-point write: the redo journal
        self._hook("after_journal")
        self._apply(journal)

    def _apply(self, journal: dict) -> None:
        """(2) apply a journaled write, (3) clear the journal; idempotent (replayed on open)."""
        ops = []
        if journal["deletes"]:
            ops.append(qm.DeleteOperation(delete=qm.PointIdsList(points=journal["deletes"])))
        if journal["points"]:
            ops.append(qm.UpsertOperation(upsert=qm.PointsList(points=[
                qm.PointStruct(id=p["id"], vector=p["vector"], payload=p["payload"])
                for p in journal["points"]])))
        if ops:
            self.client.batch_update_points(self.collection, ops, wait=True)
        self._hook("after_points")
        self._put_meta(journal["meta"])

    def _recover(self) -> None:
        """Apply a journal a killed writer left behind (its write becomes complete)."""
        raw = self._meta_point()
        if raw is not None and raw.payload.get("_journal") is not None:
            self._apply(raw.payload["_journal"])

    def _meta_point(self):
        got = self.client.retrieve(self.collection, [_META_ID], with_payload=True)
        return got[0] if got else None

    def _put_meta(self, counters: Mapping, journal: Optional[dict] = None) -> None:
        payload: dict = {"_meta": dict(counters)}
        if journal is not None:
            payload["_journal"] = journal
        self.client.upsert(self.collection, [qm.PointStruct(id=_META_ID, vector={}, payload=payload)],
                           wait=True)

    def _meta(self) -> dict:
        return dict(self._meta_point().payload["_meta"])

    def _bump(self, key: str) -> int:
        self._counters[key] = int(self._counters[key]) + 1
        return self._counters[key]

    def _migrate(self, fmt: str, metadata: dict) -> None:
        """Format 2 -> 3: nothing to rewrite (suppression points without a version are version
        1). Format 1 -> 3: re-key every record by (namespace, id), resolve derivation links,
        rebuild the counters from the data (a torn format-1 batch left them behind) and give
        each record that shared a slot a fresh one; one journaled write."""
        if fmt != "memgate-qdrant/1":
            self.client.update_collection(self.collection, metadata={
                "format": QDRANT_FORMAT, "encoder": metadata["encoder"], "migrated_from": fmt})
            return
        meta = self._meta()
        records = [p for p in self._scroll(None, True, [VECTOR_NAME]) if "memory_id" in (p.payload or {})]
        ns_of = {p.payload["memory_id"]: p.payload["namespace"] for p in records}
        seq = max([int(meta.get("seq", 0))] + [int(p.payload.get("_seq") or 0) for p in records])
        next_slot = max([int(meta.get("next_slot", 0))] + [int(p.payload["_slot"]) + 1 for p in records
                                                           if p.payload.get("_slot") is not None])
        taken: set = set()
        deletes, points = [], []
        for p in sorted(records, key=lambda p: (int(p.payload.get("_seq") or 0), p.payload["memory_id"])):
            payload = dict(p.payload)
            slot = payload.get("_slot")
            if slot is not None and slot in taken:
                slot, next_slot = next_slot, next_slot + 1
            if slot is not None:
                taken.add(slot)
            payload["_slot"] = slot
            payload["_parents"] = [_key(ns_of[d], d) for d in payload.get("derived_from") or () if d in ns_of]
            new_id = point_id(payload["memory_id"], payload["namespace"])
            if str(p.id) != new_id:
                deletes.append(str(p.id))
            vector = (p.vector or {}).get(VECTOR_NAME)
            points.append({"id": new_id, "payload": payload,
                           "vector": {} if vector is None else {VECTOR_NAME: list(vector)}})
        counters = {"seq": seq, "next_slot": next_slot,
                    "suppression_key": meta.get("suppression_key") or new_key()}
        self._commit({"deletes": deletes, "points": points, "meta": counters})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._index_fields()
        self.client.update_collection(self.collection, metadata={
            "format": QDRANT_FORMAT, "encoder": metadata["encoder"], "migrated_from": fmt})


__all__ = ["QdrantJournal"]
