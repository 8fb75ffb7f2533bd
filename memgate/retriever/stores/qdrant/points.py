"""How a memgate record maps onto Qdrant: the optional ``qdrant-client`` import, the store
format, point ids derived from ``(namespace, memory_id)``, the payload back to a ``StoredMemory``, and
the filter that selects record points (not the metadata or suppression points)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.suppression import Suppressed

try:  # optional dependency
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without qdrant-client
    QdrantClient = None  # type: ignore[assignment, misc]
    qm = None  # type: ignore[assignment]

QDRANT_FORMAT = "memgate-qdrant/3"
OLDER_FORMATS = ("memgate-qdrant/1", "memgate-qdrant/2")
VECTOR_NAME = "dense"
API_KEY_ENV = "QDRANT_API_KEY"
_ID_NS = uuid.UUID("5b1c8f0e-6d0a-4b7e-9a57-6d656d676174")
_META_ID = str(uuid.uuid5(_ID_NS, "\x00memgate-meta"))


def point_id(memory_id: str, namespace: Optional[str] = None) -> str:
    """The Qdrant point id of the record ``(namespace, memory_id)`` (a UUID derived from both);
    without ``namespace``, the format-1 id (``uuid5(memory_id)``), kept for migration."""
    if namespace is None:
        return str(uuid.uuid5(_ID_NS, memory_id))
    return str(uuid.uuid5(_ID_NS, _key(namespace, memory_id)))


def _key(namespace: str, memory_id: str) -> str:
    return json.dumps([namespace, memory_id], ensure_ascii=False)  # injective, unlike a join


def _suppressed_id(e: Suppressed) -> str:
    return str(uuid.uuid5(_ID_NS, json.dumps(["\x00suppressed", e.namespace, e.digest, e.memory_id])))


_RECORDS = None  # set lazily (qdrant models may be missing)
if qm is not None:
    _RECORDS = qm.Filter(must=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key="_meta")),
                               qm.IsEmptyCondition(is_empty=qm.PayloadField(key="_suppressed"))])


def scroll(client: Any, collection: str, flt: Any, payload: Any = True, vectors: Any = False) -> Iterator[Any]:
    """Every point of ``collection`` that ``flt`` selects (None: every point), page by page."""
    offset = None
    while True:
        points, offset = client.scroll(collection, scroll_filter=flt, limit=1024, offset=offset,
                                       with_payload=payload, with_vectors=vectors)
        yield from points
        if offset is None:
            return


def index_fields(client: Any, collection: str) -> None:
    """The payload indexes of a record collection (the filters of search, changes_since and the
    suppression list)."""
    for field, schema in (("lifecycle_state", qm.PayloadSchemaType.KEYWORD),
                          ("memory_id", qm.PayloadSchemaType.KEYWORD),
                          ("derived_from", qm.PayloadSchemaType.KEYWORD),
                          ("_parents", qm.PayloadSchemaType.KEYWORD),
                          ("_suppressed.namespace", qm.PayloadSchemaType.KEYWORD),
                          ("_seq", qm.PayloadSchemaType.INTEGER)):
        client.create_payload_index(collection, field, schema)


def _to_memory(payload: Mapping[str, Any]) -> StoredMemory:
    raw = {k: v for k, v in payload.items() if not k.startswith("_")}
    return StoredMemory.from_dict(raw)


__all__ = ["API_KEY_ENV", "OLDER_FORMATS", "QDRANT_FORMAT", "VECTOR_NAME", "QdrantClient", "index_fields", "point_id",
           "qm", "scroll"]
