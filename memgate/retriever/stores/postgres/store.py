"""``PostgresStore``: the ``MemoryStore`` protocol on PostgreSQL with pgvector (through psycopg 3).

One store is one PostgreSQL schema (default ``memgate``) in a database the caller names by URL;
its tables are :mod:`memgate.retriever.stores.postgres.tables`. Several processes may open the same store:

- **Transactions are PostgreSQL's.** A write (``add_many`` batch, update, correct, retire,
  forget, import) is one transaction: all or nothing, durable when it returns (the server's
  ``synchronous_commit``). Every write first locks the ``seq`` row of ``meta`` (``SELECT ...
  FOR UPDATE``), so writes from any number of processes run one after another and commit in
  version order; compare-and-set is a conditional ``UPDATE ... WHERE revision = %s`` on top of
  the checks the shared semantics make inside that transaction, so two racing writers based on
  one revision have exactly one winner.
- **Forget** erases the record's text, markers, metadata, vector and derivation links (and those
  of every record derived from it) in the transaction that writes the directive and the
  suppression entries. PostgreSQL's MVCC leaves the old row versions' bytes in the table's pages
  (and the WAL) until ``VACUUM`` prunes them; no query can read them after the commit, and the
  store's eraser (:mod:`memgate.retriever.stores.postgres.eraser`) prunes them, off the caller's
  path, within 5 s (docs/design.md section 7, "Erasure window").
- **The audit trail** is the schema's ``audit`` table (``audit="table"``, the default): a write's
  events commit with it, and ``history``, ``memgate audit --url`` and export read it. An
  :class:`AuditLog` file instead (``audit=AuditLog(path)``) gets the events through the
  ``outbox`` table after each commit.
- **Many processes, one database.** ``version()`` is the ``seq`` row (one indexed read);
  ``changes_since(seq)`` reads the records written after ``seq`` (``records.seq`` is the change
  log: monotone because writes commit in ``seq`` order) in one snapshot, with the vectors this
  process has not seen yet, which fill the local mirror ``vector_matrix()`` returns.
- **Search** (:mod:`memgate.retriever.stores.postgres.search`) is one SQL query whose ``WHERE`` holds the
  namespace restriction and the Kleene exclusions (lifecycle states, signatures, ids), applied
  before its ``LIMIT``.
- **Errors** never hold the URL's password: database errors become
  :class:`memgate.retriever.StoreError` (:class:`StoreUnavailableError` when the server cannot be
  reached; the next call reconnects), their text scrubbed
  (:mod:`memgate.retriever.stores.postgres.connection`).

The write semantics (CAS, supersession, review flags, forget, suppression) are
:class:`memgate.retriever.records.rules.Records`, shared with the other stores; the primitives
:class:`memgate.retriever.stores.postgres.backend.PostgresBackend`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np

from memgate.retriever.audit.log import AuditLog, utc_now
from memgate.retriever.records.index import record_signature
from memgate.retriever.records.rules import Records
from memgate.retriever.stores.base import StoreOptions
from memgate.retriever.stores.postgres import search as pg_search
from memgate.retriever.stores.postgres.backend import PostgresBackend
from memgate.retriever.stores.postgres.connection import StoreUnavailableError
from memgate.retriever.vectors import check_k, readable_namespace_list

URL_ENV = "MEMGATE_POSTGRES_URL"


class PostgresStore(Records):
    """Records and vectors in one PostgreSQL schema (module docstring).

    ``PostgresStore(url, encoder_identity, schema="memgate")`` creates the store's tables when
    the schema holds none (the identity, with ``dim``, is then required; ``CREATE EXTENSION
    vector`` runs when pgvector is not installed in the database yet) or opens them and refuses
    a different identity or a newer format (a format 1 schema is migrated: it gains the audit
    table). ``audit``: ``"table"`` (default: the schema's ``audit`` table), an :class:`AuditLog`
    file (processes sharing a store should share one) or ``None`` (no trail).
    ``vacuum_on_forget`` (default): the pages of erased row versions are cleaned by a ``VACUUM``
    of the records table, in the background within 5 s of the commit (``erase_in_background``,
    default) or before the forget returns (``erase_in_background=False``).
    """

    filters_signatures = True  # search(exclude_signatures=): the retriever's Kleene filter by digest
    _backend: PostgresBackend

    def __init__(self, url: str, encoder_identity: Any = None, *, schema: str = "memgate",
                 audit: AuditLog | None | Literal["table"] = "table", clock: Callable[[], str] = utc_now,
                 vacuum_on_forget: bool = True, erase_in_background: bool = True):
        if audit is not None and audit != "table" and not isinstance(audit, AuditLog):
            raise ValueError(f"field 'audit' must be \"table\", an AuditLog or None, got {audit!r:.80}")
        super().__init__(PostgresBackend(url, encoder_identity, schema=schema, audit=audit, clock=clock,
                                         vacuum_on_forget=vacuum_on_forget,
                                         erase_in_background=erase_in_background))

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the store's tables."""
        return self._backend.schema

    @property
    def where(self) -> str:
        """The server's URL without its password."""
        return self._backend.where

    def __enter__(self) -> PostgresStore:
        return self

    def wait_erased(self, timeout: float = 5.0) -> bool:
        """Block until the pages of this process's forgets are clean (True) or ``timeout``
        seconds passed (False): :meth:`PostgresBackend.wait_erased`."""
        return self._backend.wait_erased(timeout)

    def compact(self) -> None:
        """``VACUUM FULL`` the store's tables (an operator's maintenance step after a batch of
        forget requests: :meth:`PostgresBackend.compact`)."""
        self._backend.compact()

    def search(self, query: Any, namespaces: Iterable[str], k: int = 10, *,
               exclude_ids: Iterable[Any] = (), exclude_states: Iterable[str] = (),
               exclude_signatures: Iterable[str] = (), exact: bool = True,
               hnsw_ef: Optional[int] = None, with_namespace: bool = False) -> list[tuple[Any, ...]]:
        """Top ``k`` live records by cosine *within* ``namespaces`` (see :class:`MemoryStore`):
        the namespace restriction, ``exclude_ids``, ``exclude_states`` and
        ``exclude_signatures`` (digests of :func:`memgate.retriever.records.index.signature_key`)
        are the query's ``WHERE``, applied before its ``LIMIT``. Returns ``(memory_id, cosine)``
        pairs, best first, ties by memory id (``(memory_id, cosine, namespace)`` with
        ``with_namespace``). There is no unfiltered form."""
        ns = readable_namespace_list(namespaces)
        check_k(k)
        if type(exact) is not bool:
            raise TypeError(f"exact must be a bool, got {exact!r}")
        q = self._check_vector(query).astype(np.float32)
        hits = pg_search.search(self._backend, q, ns, k, exclude_ids=exclude_ids, exclude_states=exclude_states,
                                exclude_signatures=exclude_signatures, exact=exact, hnsw_ef=hnsw_ef)
        return list(hits) if with_namespace else [(m, c) for m, c, _ in hits]


def from_options(identity: Any, options: StoreOptions) -> PostgresStore:
    """The agent surfaces' PostgreSQL store (``memgate.integrations.opening.open_store``):
    ``url=`` (default ``$MEMGATE_POSTGRES_URL``), the schema ``collection``, the audit log at
    ``audit_log=`` or in the folder ``path=`` (``audit.jsonl``), else the schema's audit table."""
    url = options.url or os.environ.get(URL_ENV)
    if not url:
        raise ValueError(f"store='postgres' needs url=postgresql://... (or ${URL_ENV})")
    audit_log = options.audit_log
    if audit_log is None and options.path is not None:
        audit_log = Path(options.path) / "audit.jsonl"
    return PostgresStore(url, identity, schema=options.collection,
                         audit=AuditLog(audit_log) if audit_log is not None else "table")


__all__ = ["from_options", "URL_ENV", "PostgresStore", "StoreUnavailableError", "record_signature"]
