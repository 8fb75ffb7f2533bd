"""Opening an older Qdrant store format: format 2 needs no rewrite (its suppression points read
as normalisation version 1); format 1 (before scoped ids) is re-keyed through one journaled
write (:mod:`memgate.retriever.stores.qdrant.journal`)."""

from __future__ import annotations

import warnings
from typing import Any

from memgate.retriever.records.suppression import new_key
from memgate.retriever.stores.qdrant.journal import WriteJournal
from memgate.retriever.stores.qdrant.points import (
    QDRANT_FORMAT,
    VECTOR_NAME,
    _key,
    index_fields,
    point_id,
    scroll,
)


def migrate(journal: WriteJournal, fmt: str, metadata: dict[str, Any]) -> None:
    """Format 2 -> 3: nothing to rewrite (suppression points without a version are version
    1). Format 1 -> 3: re-key every record by (namespace, id), resolve derivation links,
    rebuild the counters from the data (a torn format-1 batch left them behind) and give
    each record that shared a slot a fresh one; one journaled write."""
    client, collection = journal.client, journal.collection
    if fmt != "memgate-qdrant/1":
        client.update_collection(collection, metadata={
            "format": QDRANT_FORMAT, "encoder": metadata["encoder"], "migrated_from": fmt})
        return
    meta = journal.meta()
    records = [p for p in scroll(client, collection, None, True, [VECTOR_NAME]) if "memory_id" in (p.payload or {})]
    ns_of = {p.payload["memory_id"]: p.payload["namespace"] for p in records}
    seq = max([int(meta.get("seq", 0))] + [int(p.payload.get("_seq") or 0) for p in records])
    next_slot = max([int(meta.get("next_slot", 0))] + [int(p.payload["_slot"]) + 1 for p in records
                                                       if p.payload.get("_slot") is not None])
    taken: set[int] = set()
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
    journal.commit({"deletes": deletes, "points": points, "meta": counters})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        index_fields(client, collection)
    client.update_collection(collection, metadata={
        "format": QDRANT_FORMAT, "encoder": metadata["encoder"], "migrated_from": fmt})


__all__ = ["migrate"]
