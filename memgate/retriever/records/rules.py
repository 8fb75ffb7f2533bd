"""``Records``: the one records class. It holds a back-end (:mod:`memgate.retriever.records.primitives`)
and implements, once for every store, the writes of the ``MemoryStore`` protocol (add, update,
correct, retire, mark_reviewed, forget, restore_many), compare-and-set on ``revision``, scoped
supersession, transitive derived-record review flags, forget tombstones and the suppression list of
forgotten content (:mod:`memgate.retriever.records.forgetting`), plus encoder, vector and
text-size checks; the reads every store shares go to the back-end as they are.

Record ids are scoped per namespace: a record's key is ``(namespace, memory_id)``, so one tenant's
ids never collide with (or reveal) another's. A by-id call names the namespace with
``namespace=``; without it the id must be unique across the store (else
:class:`AmbiguousMemoryError`). ``supersedes`` links resolve inside the new record's namespace;
``derived_from`` ids resolve in the record's own namespace first, then (given ``parent_namespaces``
or when unique) in another. Record ids follow :func:`memgate.contract.ids.check_id` when a record
is created (``add``, ``add_many``, a forget directive); imported records keep the ids they had.

A store kind (:mod:`memgate.retriever.stores`) is this class over its back-end, plus its own
candidate search.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Optional

import numpy as np

from memgate.contract.ids import check_id
from memgate.retriever.audit.log import AuditLog, make_event
from memgate.retriever.errors import ForgottenMemoryError, UnknownMemoryError
from memgate.retriever.records.forgetting import (
    export_suppression,
    forget_plan,
    imported_suppression,
    refusal,
    scan_suppressed,
    suppressed_hits,
    tombstone,
)
from memgate.retriever.records.identity import check_encoder, check_vector
from memgate.retriever.records.index import IndexEntry
from memgate.retriever.records.links import check_cas, descendants, parent_key, resolve_namespace
from memgate.retriever.records.memory import (
    CONTENT_FIELDS,
    FORGET_DIRECTIVE_KIND,
    UPDATABLE_FIELDS,
    Applicability,
    StoredMemory,
    SupersededIn,
    check_text_size,
    scope_to_dict,
)
from memgate.retriever.records.primitives import Event, StoreBackend
from memgate.retriever.records.write_checks import check_changes, check_written


class Records:
    """Records over a back-end's primitives: the store the retriever and the agent surfaces use
    (module docstring). ``backend`` is the back-end object (its primitives, reads and files)."""

    def __init__(self, backend: StoreBackend) -> None:
        self._backend = backend
        self._events: list[Event] = []  # the open write's audit events (see _writing)

    # -- what the back-end knows --------------------------------------------------------------

    @property
    def encoder_identity(self) -> dict[str, Any]:
        return self._backend.encoder_identity

    @property
    def dim(self) -> int:
        return self._backend.dim

    @property
    def audit(self) -> Optional[AuditLog]:
        return self._backend.audit

    @property
    def clock(self) -> Callable[[], str]:
        return self._backend.clock

    def close(self) -> None:
        """Close the back-end (its database, vector file or client)."""
        self._backend.close()

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checks -------------------------------------------------------------------------------

    def check_encoder(self, identity: Any, action: str = "use") -> None:
        """Raise :class:`EncoderMismatchError` unless ``identity`` is the store's encoder."""
        check_encoder(identity, self.encoder_identity, self._backend.describe(), action)

    def _check_vector(self, vector: Any) -> np.ndarray:
        """A finite, non-zero float vector of the store's dim, unit-normalised little-endian f4."""
        return check_vector(vector, self.dim)

    def _cas(self, memory: StoredMemory, expected_revision: Optional[int]) -> None:
        """Compare-and-set (:func:`memgate.retriever.records.links.check_cas`)."""
        check_cas(memory, expected_revision)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One all-or-nothing write of the back-end; its audit events go into ``self._events``."""
        with self._backend.write() as events:
            self._events = events
            yield

    def _event(self, event_type: str, /, **payload: Any) -> None:
        if self.audit is not None:
            self._events.append(make_event(event_type, clock=self.clock, **payload))

    # -- reads --------------------------------------------------------------------------------

    def namespace_of(self, memory_id: str) -> Optional[str]:
        """The namespace of the one record with this id (None if none; several raise):
        one implementation for every store."""
        with self._backend.lock:
            try:
                return resolve_namespace(self._backend, memory_id, None)
            except UnknownMemoryError:
                return None

    def get(self, memory_id: str, *, namespace: Optional[str] = None) -> Optional[StoredMemory]:
        """The record ``(namespace, memory_id)``; without ``namespace``, the record with that id
        if exactly one namespace holds it (several: :class:`AmbiguousMemoryError`)."""
        with self._backend.lock:
            try:
                return self._backend.load(memory_id, resolve_namespace(self._backend, memory_id, namespace))
            except UnknownMemoryError:
                return None

    def get_many(self, memory_ids: Iterable[str], *,
                 namespace: Optional[str] = None) -> dict[str, StoredMemory]:
        """Records by id: in ``namespace``, or (without it) ids that name one record each
        (an id in several namespaces raises :class:`AmbiguousMemoryError`)."""
        return self._backend.get_many(memory_ids, namespace=namespace)

    def version(self) -> int:
        return self._backend.version()

    def changes_since(self, seq: int) -> tuple[int, list[IndexEntry]]:
        """Index entries of every record written after ``seq``, and the current version."""
        return self._backend.changes_since(seq)

    def vector_matrix(self) -> np.ndarray:
        """Every vector slot as a read-only ``(slots, dim)`` float32 matrix (row = slot)."""
        return self._backend.vector_matrix()

    def vectors_for(self, memory_ids: Iterable[str], *,
                    namespace: Optional[str] = None) -> dict[str, np.ndarray]:
        """Copies of the stored vectors of live records (forgotten ones have none)."""
        return self._backend.vectors_for(memory_ids, namespace=namespace)

    def scan_markers(self, namespaces: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
        """(memory_id, markers) of live records with markers in ``namespaces``."""
        return self._backend.scan_markers(namespaces)

    def ids(self) -> list[str]:
        """Every record's id, sorted (an id used in several namespaces appears once per record)."""
        return self._backend.ids()

    def __len__(self) -> int:
        return self._backend.count()

    def verify(self) -> list[str]:
        """Integrity problems (empty when sound); what is checked is the back-end's."""
        return self._backend.verify()

    def flush_outbox(self) -> None:
        """Move committed audit events to the audit log (idempotent)."""
        self._backend.flush_outbox()

    # -- suppression checks (memgate.retriever.records.forgetting) -----------------------------

    def check_suppressed(self, memory: StoredMemory, *, previous: Optional[StoredMemory] = None) -> None:
        """Raise :class:`SuppressedContentError` when a field of ``memory`` repeats content
        forgotten in its namespace (read-only: callers check before they embed or cache
        anything; the write checks again inside its transaction)."""
        with self._backend.lock:
            hits = suppressed_hits(self._backend, memory, previous)
        if hits:
            raise refusal(memory, hits)

    def _check_suppressed(self, memory: StoredMemory, allow_relearn: bool, principal: Optional[str],
                          previous: Optional[StoredMemory] = None) -> None:
        """Refuse a record with a field that repeats forgotten content of its namespace, unless
        re-consented (then the matched entries are lifted and the relearn is audited)."""
        hits = suppressed_hits(self._backend, memory, previous)
        if not hits:
            return
        if not allow_relearn:
            raise refusal(memory, hits)
        self._backend.lift_suppressed(list({e.key: e for _, e in hits}.values()))
        self._event("relearned", memory_id=memory.memory_id, namespace=memory.namespace,
                    forgotten=sorted({e.memory_id for _, e in hits}), principal=principal)

    def export_suppression(self) -> dict[str, Any]:
        """The whole suppression list for ``memgate store export``: ``{"keys": {key id: hex},
        "entries": [entry dicts]}``, every entry naming its key explicitly."""
        with self._backend.lock:
            return export_suppression(self._backend)

    def scan_suppressed(self, namespaces: Iterable[str], text: str) -> list[tuple[str, str]]:
        """``(namespace, memory_id)`` of forgotten records in ``namespaces`` whose text or a
        marker ``text`` repeats (through the suppression list's keyed hashes)."""
        with self._backend.lock:
            return scan_suppressed(self._backend, namespaces, text)

    # -- writes -------------------------------------------------------------------------------

    def add(self, memory: StoredMemory, vector: Any, *, encoder: Any, allow_relearn: bool = False,
            parent_namespaces: Optional[Mapping[str, str]] = None) -> StoredMemory:
        """Store a new record and its vector; apply its ``supersedes`` links. Returns it at
        revision 1 with the store's timestamps."""
        return self.add_many([memory], [vector], encoder=encoder, allow_relearn=allow_relearn,
                             parent_namespaces=parent_namespaces)[0]

    def add_many(self, memories: Iterable[StoredMemory], vectors: Any, *, encoder: Any,
                 allow_relearn: bool = False,
                 parent_namespaces: Optional[Mapping[str, str]] = None) -> list[StoredMemory]:
        """Store several new records in one write (all or none); links may point at records
        earlier in the batch.

        A text that repeats content forgotten in its namespace is refused
        (:class:`SuppressedContentError`) unless ``allow_relearn`` (audited as ``relearned``).
        ``parent_namespaces`` maps a ``derived_from`` id to the namespace it names (default: the
        record's own namespace if it holds the id, else the one namespace that does).
        """
        self.check_encoder(encoder, "write")
        if type(allow_relearn) is not bool:
            raise TypeError(f"allow_relearn must be a bool, got {allow_relearn!r}")
        memories = list(memories)
        vectors = list(vectors) if not isinstance(vectors, np.ndarray) else vectors
        if len(memories) != len(vectors):
            raise ValueError(f"{len(memories)} memories but {len(vectors)} vectors")
        checked = []
        for memory, vector in zip(memories, vectors):
            if not isinstance(memory, StoredMemory):
                raise TypeError(f"memory must be a StoredMemory, got {type(memory).__name__}")
            if memory.lifecycle_state in ("superseded", "forgotten"):
                raise ValueError(
                    f"memory {memory.memory_id!r}: lifecycle_state {memory.lifecycle_state!r} is "
                    "set by the store (add a superseding record / call forget), not written directly")
            check_id(memory.memory_id)
            check_written(memory)
            checked.append((memory, self._check_vector(vector)))
        hints = dict(parent_namespaces or {})
        stored_all = []
        with self._writing():
            seq = self._backend.bump("seq")
            now = self._backend.clock()
            for memory, v in checked:
                stored_all.append(self._add_one(memory, v, seq, now, allow_relearn, hints))
        return stored_all

    def _add_one(self, memory: StoredMemory, v: np.ndarray, seq: int, now: str, allow_relearn: bool,
                 hints: Mapping[str, str]) -> StoredMemory:
        ns = memory.namespace
        if self._backend.exists(memory.memory_id, ns):
            raise ValueError(f"memory {memory.memory_id!r} already exists in namespace {ns!r}; use update()")
        parents = []
        for parent in memory.derived_from:
            key = parent_key(self._backend, parent, ns, hints)
            if self._backend.load(parent, key[0]).forgotten:
                raise ForgottenMemoryError(
                    f"memory {memory.memory_id!r}: derived_from names forgotten memory {parent!r}")
            parents.append(key)
        old_records = []
        for link in memory.supersedes:  # supersession stays inside the namespace
            old = self._backend.load(link.memory_id, ns)
            self._cas(old, link.expected_revision)
            old_records.append((link, old))
        self._check_suppressed(memory, allow_relearn, memory.principal)
        stored = memory.replace(revision=1, created_at=now, updated_at=now, superseded_in=(),
                                needs_review=False, review_reasons=(), forgotten_by=None)
        slot = self._backend.put_new(stored, seq, v, parents)
        self._event("stored", memory_id=stored.memory_id, namespace=stored.namespace, revision=1,
                    principal=stored.principal, kind=stored.kind,
                    derived_from=list(stored.derived_from),
                    supersedes=[s.to_dict() for s in stored.supersedes],
                    encoder=self.encoder_identity, slot=slot)
        for link, old in old_records:
            new_old = old.replace(
                lifecycle_state="superseded",
                superseded_in=old.superseded_in + (SupersededIn(stored.memory_id, link.scope),),
                revision=old.revision + 1, updated_at=now)
            self._backend.put(new_old, seq)
            self._event("superseded", memory_id=old.memory_id, namespace=ns, by=stored.memory_id,
                        scope=scope_to_dict(link.scope), revision=new_old.revision)
            self._flag_derived((ns, old.memory_id), "superseded", seq, now)
        return stored

    def _flag_derived(self, source: tuple[Any, ...], cause: str, seq: int, now: str) -> list[str]:
        """Mark every record derived (transitively) from ``source`` as needing review."""
        flagged: list[str] = []
        source_id = source[1]
        for (child_ns, child), parent in descendants(self._backend, source):
            record = self._backend.load(child, child_ns)
            if record.forgotten:
                continue
            reason = f"{cause}:{source_id}" + ("" if parent == source else f" via {parent[1]}")
            flagged_record = record.replace(
                needs_review=True,
                review_reasons=tuple(dict.fromkeys(record.review_reasons + (reason,))),
                revision=record.revision + 1, updated_at=now)
            self._backend.put(flagged_record, seq)
            self._event("flagged_for_review", memory_id=child, namespace=child_ns, source=source_id,
                        via=parent[1], cause=cause, revision=flagged_record.revision)
            flagged.append(child)
        return flagged

    def update(self, memory_id: str, expected_revision: int, *, vector: Any = None,
               encoder: Any = None, principal: Optional[str] = None,
               namespace: Optional[str] = None, allow_relearn: bool = False,
               **changes: Any) -> StoredMemory:
        """Compare-and-set update: applied only if the stored revision is ``expected_revision``.

        A text change needs the new ``vector`` (and ``encoder``); content changes (text,
        applicability) flag every derived record for review. A new text that repeats forgotten
        content is refused unless ``allow_relearn``.
        """
        return self._update(memory_id, expected_revision, vector, encoder, principal, "updated",
                            changes, namespace, allow_relearn)[0]

    def _update(self, memory_id: str, expected_revision: int, vector: Any, encoder: Any,
                principal: Optional[str], cause: str, changes: dict[str, Any], namespace: Optional[str] = None,
                allow_relearn: bool = False) -> tuple[StoredMemory, list[str]]:
        if type(expected_revision) is not int:
            raise TypeError(f"expected_revision must be an int, got {expected_revision!r}")
        unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
        if unknown:
            raise ValueError(f"update: field(s) {unknown} cannot be updated; allowed: {UPDATABLE_FIELDS}")
        if changes.get("lifecycle_state") in ("superseded", "forgotten"):
            raise ValueError("update: lifecycle_state 'superseded' / 'forgotten' are set by "
                             "add(supersedes=...) and forget()")
        if ("text" in changes) != (vector is not None):
            raise ValueError("update: a text change and a new vector go together (pass both or neither)")
        v = None
        if vector is not None:
            self.check_encoder(encoder, "write")
            v = self._check_vector(vector)
        if "applicability" in changes:
            changes["applicability"] = Applicability.from_dict(changes["applicability"])
        check_changes(memory_id, changes)
        with self._writing():
            ns = resolve_namespace(self._backend, memory_id, namespace)
            current = self._backend.load(memory_id, ns)
            self._cas(current, expected_revision)
            seq = self._backend.bump("seq")
            now = self._backend.clock()
            new = current.replace(**changes, revision=current.revision + 1, updated_at=now)
            self._check_suppressed(new, allow_relearn, principal, previous=current)
            if v is not None:
                self._backend.put_new_vector(new, seq, v)
            else:
                self._backend.put(new, seq)
            self._event("retired" if cause == "retired" else "updated", memory_id=memory_id,
                        namespace=ns, revision=new.revision, fields=sorted(changes), cause=cause,
                        principal=principal)
            flagged: list[str] = []
            if cause == "retired":
                flagged = self._flag_derived((ns, memory_id), "retired", seq, now)
            elif any(f in changes for f in CONTENT_FIELDS):
                flagged = self._flag_derived((ns, memory_id), "corrected", seq, now)
        return new, flagged

    def correct(self, memory_id: str, expected_revision: int, text: str, vector: Any, *,
                encoder: Any, principal: Optional[str] = None, namespace: Optional[str] = None,
                allow_relearn: bool = False, **changes: Any) -> tuple[StoredMemory, list[str]]:
        """Replace a record's content (compare-and-set); returns it and the ids flagged for review."""
        return self._update(memory_id, expected_revision, vector, encoder, principal, "corrected",
                            {**changes, "text": text}, namespace, allow_relearn)

    def retire(self, memory_id: str, expected_revision: int, principal: Optional[str] = None, *,
               namespace: Optional[str] = None) -> tuple[StoredMemory, list[str]]:
        """Mark a record stale (kept for history); returns it and the ids flagged for review."""
        return self._update(memory_id, expected_revision, None, None, principal, "retired",
                            {"lifecycle_state": "stale"}, namespace)

    def mark_reviewed(self, memory_id: str, expected_revision: int,
                      principal: Optional[str] = None, *, namespace: Optional[str] = None) -> StoredMemory:
        """Clear a record's review flag (compare-and-set)."""
        with self._writing():
            ns = resolve_namespace(self._backend, memory_id, namespace)
            current = self._backend.load(memory_id, ns)
            self._cas(current, expected_revision)
            seq = self._backend.bump("seq")
            new = current.replace(needs_review=False, review_reasons=(),
                                  revision=current.revision + 1, updated_at=self._backend.clock())
            self._backend.put(new, seq)
            self._event("reviewed", memory_id=memory_id, namespace=ns, revision=new.revision,
                        principal=principal)
        return new

    def restore_many(self, memories: Iterable[StoredMemory], vectors: Iterable[Any], *, encoder: Any,
                     suppression: Optional[Mapping[str, Any]] = None) -> int:
        """Write exported records as they were (ids, revisions, timestamps, lifecycle,
        supersession and review state, tombstones) in one write, all or none; ``vectors[i]`` is
        record i's vector, ``None`` for a tombstone. A key that already exists is refused, and so
        is a live record repeating content forgotten in its namespace here (before the import).
        ``derived_from`` ids resolve as in :meth:`add_many`, among the batch's records too.
        ``suppression`` (:meth:`export_suppression`'s form) adds the exported suppression list,
        its keys included, in the same write: what was forgotten there stays forgotten here.
        Used by ``memgate store import``; the export's audit log travels separately."""
        self.check_encoder(encoder, "write")
        checked: list[tuple[StoredMemory, Optional[np.ndarray]]] = []
        for memory, vector in zip(memories, vectors, strict=True):
            if not isinstance(memory, StoredMemory):
                raise TypeError(f"memory must be a StoredMemory, got {type(memory).__name__}")
            if memory.forgotten:
                if vector is not None or memory.text is not None:
                    raise ValueError(f"memory {memory.memory_id!r}: a forgotten record has no text or vector")
                checked.append((memory, None))
            else:
                check_text_size(memory.text, f"memory {memory.memory_id!r}")
                checked.append((memory, self._check_vector(vector)))
        keys, entries = imported_suppression(self._backend, suppression)
        batch: dict[str, set[Any]] = {}
        for memory, _ in checked:
            batch.setdefault(memory.memory_id, set()).add(memory.namespace)
        with self._writing():
            seq = self._backend.bump("seq")
            for memory, v in checked:
                if self._backend.exists(memory.memory_id, memory.namespace):
                    raise ValueError(f"memory {memory.memory_id!r} already exists in namespace "
                                     f"{memory.namespace!r} of {self._backend.describe()}")
                if v is None:
                    self._backend.put_restored_tombstone(memory, seq)
                    continue
                self._check_suppressed(memory, False, memory.principal)
                parents = []
                for parent in memory.derived_from:
                    if memory.namespace in batch.get(parent, ()) or self._backend.exists(parent, memory.namespace):
                        parents.append((memory.namespace, parent))
                    else:
                        found = sorted(batch.get(parent, set()) | set(self._backend.namespaces_of(parent)))
                        if len(found) == 1:  # (an unresolvable link is kept in derived_from only)
                            parents.append((found[0], parent))
                slot = self._backend.put_new(memory, seq, v, parents)
                self._event("stored", memory_id=memory.memory_id, namespace=memory.namespace,
                            revision=memory.revision, principal=memory.principal, kind=memory.kind,
                            derived_from=list(memory.derived_from),
                            supersedes=[x.to_dict() for x in memory.supersedes],
                            encoder=self.encoder_identity, slot=slot, cause="import")
            # (after the records: they lived beside these entries in the store they come from)
            if keys:
                self._backend.put_foreign_keys(keys)
            if entries:
                self._backend.put_suppressed(entries)
        return len(checked)

    # -- forgetting ---------------------------------------------------------------------------

    def check_forget_directive(self, memory_id: str, directive: StoredMemory) -> None:
        """Raise as :meth:`forget` would for ``directive`` (read-only: checked before the
        directive is embedded, so a refused directive never reaches an embedding cache)."""
        if not isinstance(directive, StoredMemory):
            raise TypeError("directive must be a StoredMemory")
        check_id(directive.memory_id, "directive_id")
        with self._backend.lock:
            forget_plan(self._backend, memory_id, directive, None)

    def erase(self, keys: Iterable[tuple[str, str]], *, event: str, principal: Optional[str] = None,
              lift_suppression: bool = False,
              on_erased: Optional[Callable[[StoredMemory], None]] = None) -> list[StoredMemory]:
        """Erase records (``(namespace, memory_id)`` pairs) for good, with no forget directive
        and no suppression entry: the same tombstone and erasure as :meth:`forget` (text,
        markers, vector and links gone; secure delete / vector zeroing / VACUUM as the back-end
        does for a forget), one audit ``event`` (``expired`` or ``reset``) per record. Unknown or
        already erased records are skipped. ``lift_suppression``: the whole suppression list
        goes too (a reset that gives up the forget list). Returns the records as they were."""
        erased: list[StoredMemory] = []
        with self._writing():
            seq = self._backend.bump("seq")
            now = self._backend.clock()
            for ns, memory_id in keys:
                if not self._backend.exists(memory_id, ns):
                    continue
                record = self._backend.load(memory_id, ns)
                if record.forgotten:
                    continue
                tomb = tombstone(record, event, now)
                self._backend.put_tombstone(tomb, seq)
                erased.append(record)
                self._event(event, memory_id=memory_id, namespace=ns, revision=tomb.revision,
                            principal=principal)
            if lift_suppression:
                self._backend.lift_suppressed(self._backend.suppressed(None))
        if on_erased is not None:
            for record in erased:
                on_erased(record)
        return erased

    def note(self, event: str, /, **payload: Any) -> None:
        """One audit event about no change of record (``deduplicated``, ``reset``)."""
        if self.audit is not None:
            self.audit.append(make_event(event, clock=self.clock, **payload))

    def forget(self, memory_id: str, directive: StoredMemory, directive_vector: Any, *, encoder: Any,
               expected_revision: Optional[int] = None,
               on_erased: Optional[Callable[[StoredMemory], None]] = None) -> StoredMemory:
        """Erase a detail for good and store the forget directive as a usable memory.

        The record ``(directive.namespace, memory_id)`` and every record derived from it,
        transitively (they may hold the detail), become tombstones: id, namespace, kind,
        principal, timestamps, revision and lifecycle ``forgotten`` (the id cannot be reused or
        revived); text, markers, applicability, vector and derivation links are erased. Their
        texts and markers enter the namespace's suppression list as keyed hashes, so the detail
        cannot be written back without ``allow_relearn`` and an answer repeating it can still be
        flagged. The directive (a new record in the same namespace, ``kind = forget_directive``,
        ``forgets = memory_id``) must not repeat the forgotten text or a marker in any field
        (:meth:`check_forget_directive` checks that without writing).
        ``on_erased`` is called, after the write, with each erased record as it was (to purge
        caches derived from it).
        """
        self.check_encoder(encoder, "write")
        if not isinstance(directive, StoredMemory):
            raise TypeError("directive must be a StoredMemory")
        if memory_id in directive.derived_from:
            raise ValueError("the forget directive must not be derived from the forgotten record")
        check_id(directive.memory_id, "directive_id")
        check_text_size(directive.text, f"forget directive {directive.memory_id!r}")
        v = self._check_vector(directive_vector)
        ns = directive.namespace
        erased: list[StoredMemory] = []
        with self._writing():
            current, erased, entries = forget_plan(self._backend, memory_id, directive, expected_revision)
            seq = self._backend.bump("seq")
            now = self._backend.clock()
            for record in erased:
                tomb = tombstone(record, directive.memory_id, now)
                self._backend.put_tombstone(tomb, seq)
                cause = None if record is current else f"derived_from:{memory_id}"
                self._event("forgotten", memory_id=record.memory_id, namespace=record.namespace,
                            directive_id=directive.memory_id, revision=tomb.revision,
                            principal=directive.principal, cause=cause)
            self._backend.put_suppressed(entries)
            stored = directive.replace(
                kind=FORGET_DIRECTIVE_KIND, forgets=memory_id, revision=1, created_at=now,
                updated_at=now, superseded_in=(), needs_review=False, review_reasons=(),
                forgotten_by=None, supersedes=())
            parents = [parent_key(self._backend, p, ns, {}) for p in stored.derived_from]
            slot = self._backend.put_new(stored, seq, v, parents)
            self._event("stored", memory_id=stored.memory_id, namespace=stored.namespace,
                        revision=1, principal=stored.principal, kind=stored.kind,
                        derived_from=list(stored.derived_from), supersedes=[], forgets=memory_id,
                        encoder=self.encoder_identity, slot=slot)
        if on_erased is not None:
            for record in erased:
                on_erased(record)
        return stored


__all__ = ["Records"]
