"""memgate.retriever: an exported gate in an agent's memory path.

An embedded memory store (SQLite records, memory-mapped float32 vectors, transactional writes,
revisions, scoped supersession, derived-record review flags, forget requests), the query path
(namespace support -> Kleene exclusion before truncation -> cosine or gated ranking -> top k ->
allowed actions) and an append-only audit trail (stored -> retrieved -> exposed -> disclosed).

    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.contract.records import QueryContext
    from memgate.retriever import GatedRetriever, RetrieverConfig

    encoder = Encoder(EncoderConfig())
    retriever = GatedRetriever.open("memstore", encoder, gate="checkpoints/memgate-minilm-l6",
                                    config=RetrieverConfig(acl={"alice": {"alice"}}))
    retriever.add("My dentist moved to Tuesday.", namespace="alice", principal="alice")
    ctx = QueryContext(query_id="q1", text="", principal="alice", intent="current_state")
    result = retriever.retrieve("When is the dentist?", ctx, k=5)
    retriever.report_exposed("q1", result.ids)

See docs/retriever.md. Importing it imports no torch: the gate and its scorer load at the first
score (``FusedGateScorer``, re-exported here, is imported when first asked for).

The package's folders follow the flow: ``records/`` (the record and the rules every store
shares), ``stores/`` (one package per back-end over ``stores/base.py``), ``query/`` (the query
path's steps), ``audit/`` (the log and trails); beside them the retriever's own parts
(``access``, ``writes``, ``exposure``), ``errors``, ``vectors`` and ``config``.
"""

from typing import TYPE_CHECKING, Any

from memgate.retriever.audit.log import (
    AuditError,
    AuditLog,
    LogCheck,
    iter_events,
    verify_log,
)
from memgate.retriever.audit.trails import TrailStep, format_trail, operator_trail, trail
from memgate.retriever.errors import (
    AmbiguousMemoryError,
    EncoderMismatchError,
    ForgottenMemoryError,
    RepeatedDetailError,
    StaleRevisionError,
    StoreError,
    SuppressedContentError,
    UnknownMemoryError,
)
from memgate.retriever.records.identity import normalize_identity
from memgate.retriever.records.index import IndexEntry
from memgate.retriever.records.memory import (
    MAX_TEXT_CHARS,
    Applicability,
    StoredMemory,
    SupersededIn,
    Supersedes,
    renamed_memory,
)
from memgate.retriever.retriever import (
    DEFAULT_DIRECTIVE,
    Disclosure,
    Exclusion,
    GatedRetriever,
    GateDrop,
    RetrievalResult,
    RetrievedItem,
    RetrieverConfig,
    resolve_lifecycle,
)
from memgate.retriever.stores.base import MemoryStore
from memgate.retriever.stores.embedded.store import EmbeddedStore

if TYPE_CHECKING:
    from memgate.model.scoring import FusedGateScorer

__all__ = [
    "DEFAULT_DIRECTIVE",
    "MAX_TEXT_CHARS",
    "AmbiguousMemoryError",
    "Applicability",
    "AuditError",
    "AuditLog",
    "Disclosure",
    "EmbeddedStore",
    "EncoderMismatchError",
    "Exclusion",
    "ForgottenMemoryError",
    "FusedGateScorer",
    "GateDrop",
    "GatedRetriever",
    "IndexEntry",
    "LogCheck",
    "StoredMemory",
    "MemoryStore",
    "RepeatedDetailError",
    "RetrievalResult",
    "RetrievedItem",
    "RetrieverConfig",
    "StaleRevisionError",
    "StoreError",
    "SupersededIn",
    "Supersedes",
    "SuppressedContentError",
    "TrailStep",
    "UnknownMemoryError",
    "format_trail",
    "operator_trail",
    "iter_events",
    "normalize_identity",
    "resolve_lifecycle",
    "trail",
    "verify_log",
]


def __getattr__(name: str) -> Any:
    if name == "Memory":  # the record's old name, for one release
        return renamed_memory("memgate.retriever")
    if name == "FusedGateScorer":  # torch: imported when asked for, not with the retriever
        from memgate.model.scoring import FusedGateScorer

        return FusedGateScorer
    raise AttributeError(f"module 'memgate.retriever' has no attribute {name!r}")
