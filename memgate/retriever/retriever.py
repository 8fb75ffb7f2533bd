"""``GatedRetriever``: an exported gate in an agent's memory path.

Query path (docs/design.md section 2)::

    candidate support   live records in the context's readable namespaces (trusted ACL)
    Kleene exclusion    route_verdict on trusted metadata, over the whole support, before any
                        truncation; False -> excluded with its reasons; None -> kept and flagged
                        (fail_mode="open") or excluded as unresolved (fail_mode="closed")
    candidate search    MemoryStore.search(query, readable namespaces, max(k, rerank_depth),
                        exclude_states=, exclude_ids=): the namespace restriction and the
                        Kleene exclusions are the search's filter, applied before truncation
                        (a payload filter inside Qdrant's vector search; the same filter over
                        the embedded store's index); the retriever never filters after it
                        (an EmbeddedStore answers ``search_slots``: hits as vector slots, and
                        the audit's unfiltered ranking from the same call)
    ranking             exact cosine; with a gate, the gate re-scores the cosine's top
                        rerank_depth (ties by memory id), dropping items whose suppression
                        cos - S reaches the checkpoint's calibrated threshold, if it has one
    top k               records fetched (text, action attributes) for the k survivors only
    allowed actions     memgate.actions.decide_actions for the returned memories
    audit               one "retrieved" event: ranks, exclusions and reasons, drops, actions,
                        gate / policy / encoder versions (never text)

The gate's first layer splits as ``W_q q + W_v v + W_qv (q * v) + b``: the retriever computes
``W_v v`` once per memory when it enters the index (``precompute=True``), ``W_q q`` once per
query, and only the ``q * v`` term and the remaining layers per candidate, fused into a few
large operations (:class:`memgate.model.scoring.FusedGateScorer`, equal to ``MemGate.score``),
run as one ONNX Runtime graph when the ``[fast]`` extra is installed
(:class:`memgate.model.scoring.OnnxGateScorer`, the same scores; ``MEMGATE_GATE_BACKEND=torch``
keeps torch).

:class:`GatedRetriever` is a facade over its parts, each an object given the state it needs:
``access`` (:class:`memgate.retriever.access.Access`: the ACL), ``writes``
(:class:`memgate.retriever.writes.WritePath`: the write path and forget), ``query``
(:class:`memgate.retriever.query.path.QueryPath`: ``retrieve``, over the query index, the Kleene
exclusion, the ranking and the allowed actions of :mod:`memgate.retriever.query`) and
``exposure`` (:class:`memgate.retriever.exposure.ExposureAudit`: the audit of R, E and answers);
the learned gate is ``gates`` (:class:`memgate.retriever.query.gate.RetrieverGate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from memgate.contract.records import QueryContext
from memgate.retriever.access import Access
from memgate.retriever.audit.log import AuditLog, utc_now
from memgate.retriever.audit.trails import TrailStep
from memgate.retriever.config import FAIL_MODES, RetrieverConfig
from memgate.retriever.exposure import ExposureAudit
from memgate.retriever.query.actions import AllowedActions
from memgate.retriever.query.embed import Embedder, TextEncoder
from memgate.retriever.query.exclusion import KleeneExclusion, resolve_lifecycle
from memgate.retriever.query.gate import RetrieverGate, gate_fingerprint
from memgate.retriever.query.index import QueryIndex
from memgate.retriever.query.path import QueryPath
from memgate.retriever.query.ranking import GatedRanking
from memgate.retriever.query.results import (
    Disclosure,
    Exclusion,
    GateDrop,
    RetrievalResult,
    RetrievedItem,
)
from memgate.retriever.records.identity import normalize_identity
from memgate.retriever.records.index import SupportIndex
from memgate.retriever.records.memory import StoredMemory, Supersedes
from memgate.retriever.stores.base import MemoryStore
from memgate.retriever.stores.embedded.store import EmbeddedStore
from memgate.retriever.writes import DEFAULT_DIRECTIVE, WritePath

if TYPE_CHECKING:
    from memgate.model.gate import MemGate


class GatedRetriever:
    """Namespace support -> Kleene exclusion -> (gated) ranking -> top k -> allowed actions,
    with an audit trail, over a :class:`MemoryStore`.

    ``encoder`` is a :class:`memgate.model.encoder.Encoder` (its identity must be the store's);
    ``gate`` is ``None`` (plain cosine), a :class:`MemGate` or a checkpoint directory (loaded
    with ``expected_encoder`` set to the store's encoder: a gate trained on another encoder is
    refused).
    """

    def __init__(
        self,
        store: MemoryStore,
        encoder: TextEncoder,
        gate: MemGate | str | Path | None = None,
        config: RetrieverConfig | None = None,
        audit: AuditLog | None = None,
        clock: Any = None,
    ):
        self.config = config or RetrieverConfig()
        self.clock = clock or getattr(store, "clock", None) or utc_now
        self.store = store
        self.encoder = encoder
        self.encoder_identity = normalize_identity(encoder.identity)
        store.check_encoder(self.encoder_identity, "query or write this store")
        # The gate loads at the first score (or warm_up()), not here: opening a store to list,
        # read or forget imports no torch and reads no weights. A MemGate passed in is used as is.
        self.gates = RetrieverGate(gate, self.config, self.encoder_identity)
        self.audit = audit if audit is not None else getattr(store, "audit", None)
        self.actions = AllowedActions(self.config)
        self.action_policy_version: Optional[str] = self.actions.version
        self.embedder = Embedder(encoder)
        self.index = QueryIndex(store, self.gates, self.config)
        self.gates.on_install = self.index.gate_installed
        self.access = Access(self.config, store)
        self.exposure = ExposureAudit(store=store, audit=self.audit, clock=self.clock, config=self.config,
                                      encoder_identity=self.encoder_identity, access=self.access,
                                      gate=self.gates)
        ranking = GatedRanking(self.index, store, self.config, self.gates)
        self.query = QueryPath(store=store, config=self.config, access=self.access, embedder=self.embedder,
                               index=self.index, gate=self.gates,
                               exclusion=KleeneExclusion(self.index, store, self.config), ranking=ranking,
                               actions=self.actions, log=self.exposure)
        self.writes = WritePath(store=store, encoder_identity=self.encoder_identity, access=self.access,
                                embedder=self.embedder, actions=self.actions, index=self.index)
        self.index.refresh()

    # -- convenience constructors -------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, encoder: TextEncoder, gate: Any = None,
             config: RetrieverConfig | None = None, **store_kwargs: Any) -> GatedRetriever:
        """Open (or create) an :class:`EmbeddedStore` at ``path`` for ``encoder``."""
        store = EmbeddedStore(path, encoder.identity, **store_kwargs)
        return cls(store, encoder, gate=gate, config=config)

    @classmethod
    def open_postgres(cls, url: str, encoder: TextEncoder, gate: Any = None,
                      config: RetrieverConfig | None = None, *, schema: str = "memgate",
                      **store_kwargs: Any) -> GatedRetriever:
        """Open (or create) a :class:`memgate.retriever.stores.postgres.PostgresStore` in
        ``schema`` of the PostgreSQL database at ``url`` for ``encoder`` (needs the ``[postgres]``
        extra)."""
        from memgate.retriever.stores.postgres.store import PostgresStore

        store = PostgresStore(url, encoder.identity, schema=schema, **store_kwargs)
        try:
            return cls(store, encoder, gate=gate, config=config)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Close the store (its database, vector file or client)."""
        self.store.close()

    def __enter__(self) -> GatedRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the gate (loaded at the first score) -------------------------------------------------

    @property
    def route(self) -> str:
        return self.gates.route

    @property
    def gate(self) -> Optional[MemGate]:
        """The learned gate (loaded from its checkpoint on first access), or None."""
        return self.gates.gate

    @property
    def gate_version(self) -> Optional[str]:
        return self.gates.version

    @property
    def drop_threshold(self) -> Optional[float]:
        """The gate's drop threshold, on the scale of :attr:`drop_rule` (known from the
        checkpoint's config before its weights load)."""
        return self.gates.drop_threshold

    @property
    def drop_rule(self) -> str:
        """``"suppression"`` (score form mask: ``cos - S``) or ``"risk"`` (mask_risk: ``gate_risk``)."""
        return self.gates.drop_rule

    @property
    def risk_warn(self) -> Optional[float]:
        """The checkpoint's ``risk_warn`` (mask_risk), else None: the allowed-action cap's threshold."""
        return self.gates.risk_warn

    def warm_up(self, *, encoder: bool = True, gate: bool = True) -> None:
        """Load the encoder's model (one short text embedded, never cached) and the gate now;
        otherwise the first encode or score does. The servers warm up in the background so that
        they accept connections at once (:class:`memgate.integrations.warmup.Warmup`)."""
        if encoder:
            self.embedder.embed("warm-up", what="warm-up", cache=False)
        if gate:
            self.gates.ensure()

    @property
    def precomputed_bytes(self) -> int:
        """Memory held by the precomputed first-layer parts of live records."""
        return self.index.precomputed_bytes

    # -- the parts' methods -------------------------------------------------------------------

    def readable_namespaces(self, context: QueryContext) -> frozenset[str]:
        """The candidate support's namespaces for ``context`` (see ``RetrieverConfig.acl``)."""
        return self.access.readable_namespaces(context)

    def retrieve(self, query_text: str, context: QueryContext, k: int = 10, *, asks: str = "fact",
                 proposed_action: Optional[str] = None, risk: Optional[str] = None,
                 only_ids: Optional[Iterable[str]] = None,
                 set_apart: Optional[Iterable[Any]] = None) -> RetrievalResult:
        """Top ``k`` admissible memories for ``query_text`` under ``context``
        (:meth:`memgate.retriever.query.path.QueryPath.retrieve`)."""
        return self.query.retrieve(query_text, context, k, asks=asks, proposed_action=proposed_action,
                                   risk=risk, only_ids=only_ids, set_apart=set_apart)

    def add(self, text: str, *, namespace: str, memory_id: Optional[str] = None,
            principal: Optional[str] = None, supersedes: Iterable[Supersedes | str] = (),
            allow_relearn: bool = False, **fields: Any) -> StoredMemory:
        """Embed and store a memory (:meth:`memgate.retriever.writes.WritePath.add`)."""
        return self.writes.add(text, namespace=namespace, memory_id=memory_id, principal=principal,
                               supersedes=supersedes, allow_relearn=allow_relearn, **fields)

    def add_many(self, texts: Iterable[str], *, namespace: str, principal: Optional[str] = None,
                 fields: Optional[Iterable[Mapping[str, Any]]] = None,
                 allow_relearn: bool = False) -> list[StoredMemory]:
        """Embed (one batch) and store several memories of one namespace in one write, all or
        none (:meth:`memgate.retriever.writes.WritePath.add_many`)."""
        return self.writes.add_many(texts, namespace=namespace, principal=principal, fields=fields,
                                    allow_relearn=allow_relearn)

    def update(self, memory_id: str, expected_revision: int, *, principal: Optional[str] = None,
               namespace: Optional[str] = None, allow_relearn: bool = False,
               **changes: Any) -> StoredMemory:
        """Compare-and-set update; a new text is re-embedded
        (:meth:`memgate.retriever.writes.WritePath.update`)."""
        return self.writes.update(memory_id, expected_revision, principal=principal, namespace=namespace,
                                  allow_relearn=allow_relearn, **changes)

    def correct(self, memory_id: str, expected_revision: int, text: str, *,
                principal: Optional[str] = None, namespace: Optional[str] = None,
                allow_relearn: bool = False, **changes: Any) -> tuple[StoredMemory, list[str]]:
        """Correct a record's content; returns it and the ids now flagged for review."""
        return self.writes.correct(memory_id, expected_revision, text, principal=principal,
                                   namespace=namespace, allow_relearn=allow_relearn, **changes)

    def retire(self, memory_id: str, expected_revision: int, *, principal: Optional[str] = None,
               namespace: Optional[str] = None) -> tuple[StoredMemory, list[str]]:
        """Mark a record stale (kept for history); returns it and the ids flagged for review."""
        return self.writes.retire(memory_id, expected_revision, principal=principal, namespace=namespace)

    def mark_reviewed(self, memory_id: str, expected_revision: int, *,
                      principal: Optional[str] = None, namespace: Optional[str] = None) -> StoredMemory:
        """Clear a record's review flag (compare-and-set)."""
        return self.writes.mark_reviewed(memory_id, expected_revision, principal=principal,
                                         namespace=namespace)

    def forget(self, memory_id: str, *, principal: Optional[str] = None,
               directive_text: str = DEFAULT_DIRECTIVE, directive_id: Optional[str] = None,
               expected_revision: Optional[int] = None, namespace: Optional[str] = None,
               **directive_fields: Any) -> StoredMemory:
        """Forget a detail for good and keep the directive as a memory; returns the directive
        (:meth:`memgate.retriever.writes.WritePath.forget`)."""
        return self.writes.forget(memory_id, principal=principal, directive_text=directive_text,
                                  directive_id=directive_id, expected_revision=expected_revision,
                                  namespace=namespace, **directive_fields)

    def erase(self, keys: Iterable[tuple[str, str]], *, event: str, principal: Optional[str] = None,
              lift_suppression: bool = False) -> list[StoredMemory]:
        """Erase ``(namespace, memory_id)`` records with no forget directive (expiry, reset:
        :meth:`memgate.retriever.writes.WritePath.erase`)."""
        return self.writes.erase(list(keys), event=event, principal=principal,
                                 lift_suppression=lift_suppression)

    def report_exposed(self, query_id: str, memory_ids: Iterable[str]) -> None:
        """Record which retrieved memories the caller put in the prompt (E); E must be within R."""
        self.exposure.report_exposed(query_id, memory_ids)

    def report_answer(self, query_id: str, answer: str) -> list[Disclosure]:
        """Scan the answer the caller produced for disclosed markers and forgotten content
        (:meth:`memgate.retriever.exposure.ExposureAudit.report_answer`)."""
        return self.exposure.report_answer(query_id, answer)

    def history(self, memory_id: str, *, principal: str, namespace: Optional[str] = None) -> list[TrailStep]:
        """``principal``'s audit trail of the record ``memory_id`` names for it
        (:meth:`memgate.retriever.exposure.ExposureAudit.history`)."""
        return self.exposure.history(memory_id, principal=principal, namespace=namespace)

    # -- internals for diagnostics, tests and benchmarks --------------------------------------

    @property
    def _index(self) -> SupportIndex:
        """The query index's candidate support (positions, slots, namespaces of every record)."""
        return self.index.support

    @property
    def _vpart(self) -> Optional[np.ndarray]:
        """The gate's precomputed memory part per vector slot."""
        return self.index.vpart

    @property
    def _gate(self) -> Optional[MemGate]:
        """The gate if loaded (None until its first score or warm_up)."""
        return self.gates.loaded

    @property
    def _pending_gate(self) -> Optional[Path]:
        """The checkpoint directory of a gate not loaded yet."""
        return self.gates.pending

    def _refresh(self) -> None:
        self.index.refresh()

    def _index_ids(self) -> list[str]:
        """Ids of the records currently in the query index, every namespace (diagnostics and
        tests only: not part of the namespace-restricted public surface)."""
        return self.index.ids()


__all__ = [
    "DEFAULT_DIRECTIVE",
    "FAIL_MODES",
    "Disclosure",
    "Exclusion",
    "GateDrop",
    "GatedRetriever",
    "RetrievalResult",
    "RetrievedItem",
    "RetrieverConfig",
    "gate_fingerprint",
    "resolve_lifecycle",
]
