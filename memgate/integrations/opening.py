"""Opening a store and a retriever with the agent-facing defaults (shared by ``memgate.Memory``,
the LangGraph store, the servers and the CLI).

- the bundled encoder, with no on-disk embedding cache (memory texts stay inside the store);
  one instance per process, its model loaded at the first encode;
- the embedded store by default, with its approximate index for namespaces of 20,000+ records
  when hnswlib is installed (exact below); ``store="qdrant"`` opens a Qdrant collection (``path=`` local
  mode, ``url=`` a server). qdrant-client's local mode keeps its points in a pickle-backed
  file: opening one warns, once per directory, that it must be trusted; ``store="postgres"``
  opens a PostgreSQL + pgvector store (``url=``, default ``$MEMGATE_POSTGRES_URL``; the schema
  ``collection``; ``path=`` the folder of its audit log, ``audit.jsonl``, or ``audit_log=``);
- the learned gate per :func:`memgate.integrations.gate_default.gate_default`; when it is off,
  the reason is logged once per process at INFO (logger ``memgate``: quiet unless asked for) and
  held in ``gate_decision`` (HTTP ``/health`` shows it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Optional

from memgate.contract.admissibility import PolicyRules
from memgate.contract.defaults import RERANK_DEPTH
from memgate.integrations.gate_default import GateDecision, gate_default, released_gate_dir
from memgate.model.encoder import Encoder, EncoderConfig, set_offline_defaults
from memgate.retriever import GatedRetriever, RetrieverConfig
from memgate.retriever.stores.base import StoreOptions
from memgate.retriever.stores.registry import STORE_KINDS, open_kind

log = logging.getLogger("memgate")

STORES = tuple(STORE_KINDS)  # ("embedded", "qdrant", "postgres")
DEFAULT_POLICY_TAG = "general"  # what the agent surfaces tag an untagged memory with
DEFAULT_POLICY_RULES: dict[str, Mapping[str, Any]] = {DEFAULT_POLICY_TAG: {}}  # readable for every purpose
QDRANT_TRUST_WARNING = (
    "{path}: a Qdrant local-mode directory; qdrant-client stores its points there with pickle, "
    "so opening it can run code: open only directories you created or trust")
# store kinds whose local files must be trusted: said once per directory when one is opened
LOCAL_FILE_NOTICES = {"qdrant": QDRANT_TRUST_WARNING}

_said: set[str] = set()


def say_once(key: str, message: str, level: int = logging.WARNING) -> None:
    """Log ``message`` (logger ``memgate``, WARNING unless ``level``) the first time ``key`` is seen."""
    if key not in _said:
        _said.add(key)
        log.log(level, message)


@cache
def default_encoder() -> Any:
    """The bundled all-MiniLM-L6-v2 encoder without a disk cache (one per process). Its model
    loads at the first encode (or ``warm_up()``), quietly: opening a store to list, read or
    forget loads no model and imports no torch."""
    set_offline_defaults()
    return Encoder(EncoderConfig(cache_dir=None))


def resolve_gate(gate: Any) -> tuple[Any, GateDecision]:
    """``gate="auto"`` -> the released gate when the rule allows it (else None, said once);
    ``"released"`` -> the released gate regardless; ``None`` -> no gate; a checkpoint directory
    or a MemGate -> that gate (the meanings :func:`memgate.rerank` gives them too)."""
    if isinstance(gate, str) and gate == "auto":
        decision = gate_default()
        if decision.use:
            return decision.checkpoint, decision
        say_once("gate-off", f"memgate: the learned gate is off by default because {decision.reason}; "
                             "ranking is cosine after namespace support and Kleene exclusion "
                             "(pass gate=<checkpoint dir> to use one anyway)", logging.INFO)
        return None, decision  # (INFO: the default state while no card passes the rule; quiet)
    if gate is None:
        return None, GateDecision(False, "gate=None was passed", None)
    if isinstance(gate, str) and gate == "released":
        where = released_gate_dir()
        return where, GateDecision(True, "gate='released' was passed", where)
    given = Path(gate) if isinstance(gate, (str, os.PathLike)) else None
    return gate, GateDecision(True, "a gate was passed explicitly", given)


def open_store(store: str = "embedded", *, path: Any = None, url: Optional[str] = None,
               collection: str = "memgate", api_key: Optional[str] = None, encoder: Any = None,
               fsync: bool = True, audit_log: Any = None, allow_damaged: bool = False) -> Any:
    """An :class:`EmbeddedStore` at ``path``, a :class:`QdrantStore` (``path=`` or ``url=``) or
    a :class:`memgate.retriever.stores.postgres.PostgresStore` (``url=``; ``path=`` its audit
    log's folder): the kind named ``store`` in :data:`memgate.retriever.stores.registry.STORE_KINDS`,
    opened by its module's ``from_options``. ``allow_damaged``: open an embedded store whose vector file is
    truncated (to verify it)."""
    encoder = encoder or default_encoder()
    if store not in STORES:
        raise ValueError(f"store must be one of {STORES}, got {store!r}")
    options = StoreOptions(path=path, url=url, collection=collection, api_key=api_key, fsync=fsync,
                           audit_log=audit_log, allow_damaged=allow_damaged)
    notice = LOCAL_FILE_NOTICES.get(store)
    if notice is not None and path is not None and url is None:
        say_once(f"{store}-trust:{Path(path).resolve()}", notice.format(path=path))
    return open_kind(store, encoder.identity, options)  # (imports the kind's extra: qdrant-client, psycopg)


def open_retriever(store: Any, *, encoder: Any = None, gate: Any = "auto",
                   policy_rules: Optional[Mapping[str, Mapping[str, Any]]] = None,
                   action_preset: str = "agent_default", rerank_depth: int = RERANK_DEPTH,
                   fail_mode: str = "open") -> tuple[Any, GateDecision]:
    """A :class:`GatedRetriever` over ``store`` with the agent defaults; the caller (the
    surface) is the trusted layer that sets each query's namespaces (no static ACL)."""
    rules = dict(DEFAULT_POLICY_RULES)
    rules.update(policy_rules or {})
    chosen, decision = resolve_gate(gate)
    # exact_search=False: approximate (HNSW) candidate search for a namespace of 20,000+ records
    # on the embedded store, a Qdrant server's HNSW on Qdrant, pgvector's HNSW index (or an exact
    # plan, PostgreSQL's choice) on PostgreSQL; exact below that
    config = RetrieverConfig(policy_rules=PolicyRules.from_dict(rules), action_preset=action_preset,
                             rerank_depth=rerank_depth, fail_mode=fail_mode, exact_search=False)
    return GatedRetriever(store, encoder or default_encoder(), gate=chosen, config=config), decision


__all__ = ["DEFAULT_POLICY_RULES", "DEFAULT_POLICY_TAG", "QDRANT_TRUST_WARNING", "STORES",
           "default_encoder", "open_retriever", "open_store", "resolve_gate", "say_once"]
