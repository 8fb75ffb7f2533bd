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

Each step lives in its own module, mixed into :class:`GatedRetriever`: ``access`` (ACL),
``writes`` (the write path and forget), ``exclusion`` (Kleene verdicts), ``ranking`` (search,
cosine, gate), ``query`` (``retrieve``), ``exposure`` (the audit of R, E and answers); this
module holds the facade, its gate and its query index.
"""
from __future__ import annotations

import hashlib
import inspect
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from memgate.model.gate_config import check_encoder, read_checkpoint_config
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
from memgate.retriever.verdict_cache import VerdictCache
from memgate.retriever.writes import DEFAULT_DIRECTIVE, WritePath

if TYPE_CHECKING:
    from memgate.model.gate import MemGate
    from memgate.model.scoring import FusedGateScorer, OnnxGateScorer


def gate_fingerprint(gate: "MemGate") -> str:
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
        # The gate loads at the first score (or warm_up()), not here: opening a store to list,
        # read or forget imports no torch and reads no weights. A MemGate passed in is used as is.
        self._gate: Optional[MemGate] = None
        self._scorer: Optional[FusedGateScorer | OnnxGateScorer] = None
        self._gate_version: Optional[str] = None
        self._drop_threshold: Optional[float] = None
        self._pending_gate: Optional[Path] = None  # a checkpoint directory not loaded yet
        self._gate_lock = threading.Lock()
        if isinstance(gate, (str, Path)):
            # the checkpoint's config.json is read now (no torch): a missing checkpoint or a gate
            # of another encoder is refused at open, as before the weights were deferred
            directory, gate_config, export, _ = read_checkpoint_config(gate)
            try:
                check_encoder(gate_config, self.encoder_identity)
            except ValueError as exc:
                raise EncoderMismatchError(str(exc)) from None
            self._pending_gate = directory
            self._drop_threshold = self._threshold_of(export)
        elif gate is not None:
            self._install_gate(gate, version=None)
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
        self._verdict_cache = VerdictCache()
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
        if (self._gate is not None or self._pending_gate is not None) and self.config.use_gate:
            return "hybrid_drop" if self._drop_threshold is not None else "hybrid"
        return "namespace_kleene"

    # -- the gate (loaded at the first score) -------------------------------------------------

    @property
    def gate(self) -> Optional["MemGate"]:
        """The learned gate (loaded from its checkpoint on first access), or None."""
        self._ensure_gate()
        return self._gate

    @property
    def gate_version(self) -> Optional[str]:
        self._ensure_gate()
        return self._gate_version

    @property
    def drop_threshold(self) -> Optional[float]:
        return self._drop_threshold  # known from the checkpoint's config before its weights load

    def _threshold_of(self, export: dict) -> Optional[float]:
        t = self.config.drop_threshold
        if t == "checkpoint":
            t = (export.get("calibration") or {}).get("threshold")
        return None if t is None else float(t)

    def warm_up(self, *, encoder: bool = True, gate: bool = True) -> None:
        """Load the encoder's model (one short text embedded, never cached) and the gate now;
        otherwise the first encode or score does. The servers warm up in the background so that
        they accept connections at once (:class:`memgate.integrations.warmup.Warmup`)."""
        if encoder:
            self._embed("warm-up", what="warm-up", cache=False)
        if gate:
            self._ensure_gate()

    def _ensure_gate(self) -> None:
        if self._pending_gate is None:
            return
        with self._gate_lock:  # two threads asking at once load it once
            path = self._pending_gate
            if path is None:
                return
            from memgate.model.gate import MemGate  # torch: imported with the first gate

            loaded = MemGate.from_pretrained(path, expected_encoder=self.encoder_identity)
            self._install_gate(loaded, version=f"{path.name}@{gate_fingerprint(loaded)}")
            self._pending_gate = None

    def _install_gate(self, gate: Any, version: Optional[str]) -> None:
        from memgate.model.gate import MemGate  # torch (the gate is a torch module)
        from memgate.model.scoring import fast_gate_scorer

        if not isinstance(gate, MemGate):
            raise TypeError(f"gate must be a MemGate, a checkpoint directory or None, got {type(gate).__name__}")
        if version is None:
            try:
                check_encoder(gate.config, self.encoder_identity)
            except ValueError as exc:
                raise EncoderMismatchError(str(exc)) from None
            version = f"memgate@{gate_fingerprint(gate)}"
        self._gate_version = version
        self._gate = gate.eval()
        self._scorer = fast_gate_scorer(self._gate) if self.config.precompute else None
        self._drop_threshold = self._threshold_of(gate.export_info)
        if self._scorer is not None and self.config.use_gate and hasattr(self, "_index"):
            live = [int(s) for s in self._index.slot[np.flatnonzero(self._index.alive[: len(self._index.ids)])]]
            self._update_vpart(live, [])  # the records indexed before the gate loaded

    # -- index --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        if self.store.version() == self._index.seq:
            return
        version, entries = self.store.changes_since(self._index.seq)
        born, died = self._index.apply(entries)
        self._index.seq = version
        self._verdict_cache.note_changes(self._index)  # another process's writes count too
        if self._scorer is not None and self.config.use_gate:  # (a gate not loaded yet: at its load)
            self._update_vpart(born, died)

    def _update_vpart(self, born: list[int], died: list[int]) -> None:
        import torch  # the gate is loaded, so torch is too

        with torch.no_grad():
            self._update_vpart_now(born, died)

    def _update_vpart_now(self, born: list[int], died: list[int]) -> None:
        hidden = self._gate.config.hidden
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
