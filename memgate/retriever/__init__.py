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
"""

from typing import TYPE_CHECKING

from memgate.retriever.audit import (
    AuditError,
    AuditLog,
    LogCheck,
    TrailStep,
    format_trail,
    iter_events,
    operator_trail,
    trail,
    verify_log,
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
from memgate.retriever.schema import (
    MAX_TEXT_CHARS,
    AmbiguousMemoryError,
    Applicability,
    EncoderMismatchError,
    ForgottenMemoryError,
    RepeatedDetailError,
    StaleRevisionError,
    StoredMemory,
    StoreError,
    SupersededIn,
    Supersedes,
    SuppressedContentError,
    UnknownMemoryError,
    renamed_memory,
)
from memgate.retriever.store import EmbeddedStore, IndexEntry, MemoryStore, normalize_identity

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


def __getattr__(name: str):
    if name == "Memory":  # the record's old name, for one release
        return renamed_memory("memgate.retriever")
    if name == "FusedGateScorer":  # torch: imported when asked for, not with the retriever
        from memgate.model.scoring import FusedGateScorer

        return FusedGateScorer
    raise AttributeError(f"module 'memgate.retriever' has no attribute {name!r}")
