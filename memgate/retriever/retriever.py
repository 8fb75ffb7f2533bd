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

Each step lives in its own module, mixed into :class:`GatedRetriever`: ``access`` (ACL),
``writes`` (the write path and forget), ``exclusion`` (Kleene verdicts), ``ranking`` (search,
cosine, gate), ``query`` (``retrieve``), ``exposure`` (the audit of R, E and answers); this
module holds the facade, its gate and its query index.
"""
from __future__ import annotations

import hashlib
import inspect
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from memgate.model.gate import MemGate, check_encoder
from memgate.model.scoring import FusedGateScorer, OnnxGateScorer, fast_gate_scorer
from memgate.retriever.access import AccessControl
from memgate.retriever.audit import AuditLog, utc_now
from memgate.retriever.config import FAIL_MODES, RetrieverConfig
from memgate.retriever.config import actions_module as _actions
from memgate.retriever.exclusion import KleeneExclusion, resolve_lifecycle
from memgate.retriever.exposure import ExposureAudit
from memgate.retriever.query import QueryPath
from memgate.retriever.ranking import GatedRanking
from memgate.retriever.results import (
    Disclosure,
    Exclusion,
    GateDrop,
    RetrievalResult,
    RetrievedItem,
)
from memgate.retriever.schema import EncoderMismatchError
from memgate.retriever.semantics import normalize_identity
from memgate.retriever.store import EmbeddedStore, MemoryStore
from memgate.retriever.support import SupportIndex
from memgate.retriever.writes import DEFAULT_DIRECTIVE, WritePath


def gate_fingerprint(gate: MemGate) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(gate.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


class GatedRetriever(AccessControl, WritePath, QueryPath, KleeneExclusion, GatedRanking,
                     ExposureAudit):
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
        encoder: Any,
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
        self.gate: Optional[MemGate] = None
        self._scorer: Optional[FusedGateScorer | OnnxGateScorer] = None
        self.gate_version: Optional[str] = None
        self.drop_threshold: Optional[float] = None
        if gate is not None:
            if isinstance(gate, (str, Path)):
                try:
                    loaded = MemGate.from_pretrained(gate, expected_encoder=self.encoder_identity)
                except ValueError as exc:
                    if "encoder mismatch" in str(exc):
                        raise EncoderMismatchError(str(exc)) from None
                    raise
                self.gate_version = f"{Path(gate).name}@{gate_fingerprint(loaded)}"
                gate = loaded
            elif isinstance(gate, MemGate):
                try:
                    check_encoder(gate.config, self.encoder_identity)
                except ValueError as exc:
                    raise EncoderMismatchError(str(exc)) from None
                self.gate_version = f"memgate@{gate_fingerprint(gate)}"
            else:
                raise TypeError(f"gate must be a MemGate, a checkpoint directory or None, got {type(gate).__name__}")
            self.gate = gate.eval()
            self._scorer = fast_gate_scorer(self.gate) if self.config.precompute else None
            t = self.config.drop_threshold
            if t == "checkpoint":
                t = (gate.export_info.get("calibration") or {}).get("threshold")
            self.drop_threshold = None if t is None else float(t)
        self.audit = audit if audit is not None else getattr(store, "audit", None)
        self._action_policy = None
        self.action_policy_version: Optional[str] = None
        if _actions is not None:
            self._action_policy = _actions.load_policy(self.config.action_policy)
            self._action_policy.preset(self.config.action_preset)  # fail fast on a bad preset
            self.action_policy_version = f"{self._action_policy.version}/{self.config.action_preset}"
        try:  # query embeddings stay out of the encoder's disk cache when it allows that
            self._encode_takes_cache = "cache" in inspect.signature(encoder.encode).parameters
        except (TypeError, ValueError):
            self._encode_takes_cache = False
        self._index = SupportIndex()
        self._vpart: Optional[np.ndarray] = None  # (slots, hidden): the gate's W_v v per slot
        self._retrieved: OrderedDict[str, dict] = OrderedDict()
        self._refresh()

    # -- convenience constructor --------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, encoder: Any, gate: Any = None,
             config: RetrieverConfig | None = None, **store_kwargs: Any) -> "GatedRetriever":
        """Open (or create) an :class:`EmbeddedStore` at ``path`` for ``encoder``."""
        store = EmbeddedStore(path, encoder.identity, **store_kwargs)
        return cls(store, encoder, gate=gate, config=config)

    @classmethod
    def open_postgres(cls, url: str, encoder: Any, gate: Any = None,
                      config: RetrieverConfig | None = None, *, schema: str = "memgate",
                      **store_kwargs: Any) -> "GatedRetriever":
        """Open (or create) a :class:`memgate.retriever.pg_store.PostgresStore` in ``schema`` of
        the PostgreSQL database at ``url`` for ``encoder`` (needs the ``[postgres]`` extra)."""
        from memgate.retriever.pg_store import PostgresStore

        store = PostgresStore(url, encoder.identity, schema=schema, **store_kwargs)
        try:
            return cls(store, encoder, gate=gate, config=config)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Close the store (its database, vector file or client)."""
        self.store.close()

    def __enter__(self) -> "GatedRetriever":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def route(self) -> str:
        if self.gate is not None and self.config.use_gate:
            return "hybrid_drop" if self.drop_threshold is not None else "hybrid"
        return "namespace_kleene"

    # -- index --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        if self.store.version() == self._index.seq:
            return
        version, entries = self.store.changes_since(self._index.seq)
        born, died = self._index.apply(entries)
        self._index.seq = version
        if self._scorer is not None and self.config.use_gate:
            self._update_vpart(born, died)

    @torch.no_grad()
    def _update_vpart(self, born: list[int], died: list[int]) -> None:
        hidden = self.gate.config.hidden
        need = max(born, default=-1) + 1
        if self._vpart is None:
            self._vpart = np.zeros((max(need, 1024), hidden), dtype=np.float32)
        elif need > self._vpart.shape[0]:
            grown = np.zeros((max(need, 2 * self._vpart.shape[0]), hidden), dtype=np.float32)
            grown[: self._vpart.shape[0]] = self._vpart
            self._vpart = grown
        for slot in died:  # a forgotten or replaced vector leaves nothing derived from it
            if slot < self._vpart.shape[0]:
                self._vpart[slot] = 0.0
        if born:
            matrix = self.store.vector_matrix()
            slots = np.asarray(sorted(born), dtype=np.int64)
            for start in range(0, len(slots), 4096):
                chunk = slots[start : start + 4096]
                V = np.ascontiguousarray(matrix[chunk], dtype=np.float32)
                self._vpart[chunk] = self._scorer.memory_part(V).numpy()

    @property
    def precomputed_bytes(self) -> int:
        """Memory held by the precomputed first-layer parts of live records."""
        if self._vpart is None:
            return 0
        return len(self._index) * self._vpart.shape[1] * 4

    def _index_ids(self) -> list[str]:
        """Ids of the records currently in the query index, every namespace (diagnostics and
        tests only: not part of the namespace-restricted public surface)."""
        idx = self._index
        return [idx.ids[p] for p in np.flatnonzero(idx.alive[: len(idx.ids)])]


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
