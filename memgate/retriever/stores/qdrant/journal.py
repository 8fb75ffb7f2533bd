"""The Qdrant store's redo journal, held by :class:`memgate.retriever.stores.qdrant.backend.QdrantBackend`:
the metadata point (counters, the suppression key, the keys of imported suppression entries),
a write stored there as a journal (one single-point upsert), applied in one batch, then cleared
(replayed on open after a kill), and what a full disk did to a write."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

from memgate.retriever.errors import StoreFullError
from memgate.retriever.stores.qdrant.points import _META_ID, qm

Journal = dict[str, Any]  # {"deletes": [point ids], "points": [point dicts], "meta": counters}


class WriteJournal:
    """All-or-nothing writes to ``collection`` without multi-point transactions; ``hook`` is
    the store's fault-injection hook (crash tests), called with a stage name."""

    def __init__(self, client: Any, collection: str, hook: Callable[[str], None]) -> None:
        self.client, self.collection, self.hook = client, collection, hook

    def meta_point(self) -> Any:
        got = self.client.retrieve(self.collection, [_META_ID], with_payload=True)
        return got[0] if got else None

    def put_meta(self, counters: Mapping[str, Any], journal: Optional[Journal] = None) -> None:
        payload: dict[str, Any] = {"_meta": dict(counters)}
        if journal is not None:
            payload["_journal"] = journal
        self.client.upsert(self.collection, [qm.PointStruct(id=_META_ID, vector={}, payload=payload)],
                           wait=True)

    def meta(self) -> dict[str, Any]:
        return dict(self.meta_point().payload["_meta"])

    def commit(self, journal: Journal) -> None:
        meta = self.meta()
        self.put_meta(meta, journal)  # (1) one single-point write: the redo journal
        self.hook("after_journal")
        self.apply(journal)

    def apply(self, journal: Journal) -> None:
        """(2) apply a journaled write, (3) clear the journal; idempotent (replayed on open)."""
        ops: list[Any] = []
        if journal["deletes"]:
            ops.append(qm.DeleteOperation(delete=qm.PointIdsList(points=journal["deletes"])))
        if journal["points"]:
            ops.append(qm.UpsertOperation(upsert=qm.PointsList(points=[
                qm.PointStruct(id=p["id"], vector=p["vector"], payload=p["payload"])
                for p in journal["points"]])))
        if ops:
            self.client.batch_update_points(self.collection, ops, wait=True)
        self.hook("after_points")
        self.put_meta(journal["meta"])

    def recover(self) -> None:
        """Apply a journal a killed writer left behind (its write becomes complete)."""
        raw = self.meta_point()
        if raw is not None and raw.payload.get("_journal") is not None:
            self.apply(raw.payload["_journal"])

    def full(self, exc: BaseException, staged: bool = True) -> StoreFullError:
        """What a full disk did to this write: nothing, or a journal that completes it later
        (``staged=False``: it failed completing an earlier write's journal, before this one)."""
        try:
            raw = self.meta_point()
        except Exception:  # (the collection cannot be read either)
            raw = None
        where = f"the Qdrant collection {self.collection!r}"
        if not staged or raw is None or raw.payload.get("_journal") is None:
            return StoreFullError(f"{where}: the disk is full ({exc}); nothing of this write was stored: "
                                  "free space and retry (this store stays usable)")
        return StoreFullError(f"{where}: the disk is full ({exc}); this write is in the store's journal "
                              "and is completed, all of it, by the next write or open once space is "
                              "freed: do not retry it")


__all__ = ["Journal", "WriteJournal"]
