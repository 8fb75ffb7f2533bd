"""Record semantics shared by every store: one implementation, so the stores cannot drift.

:class:`RecordSemantics` implements the writes of the ``MemoryStore`` protocol (add, update,
correct, retire, mark_reviewed, forget), compare-and-set on ``revision``, scoped supersession,
transitive derived-record review flags, forget tombstones and the suppression list of forgotten
content (:mod:`memgate.retriever.suppression`), plus encoder, vector and text-size checks.

Record ids are scoped per namespace: a record's key is ``(namespace, memory_id)``, so one tenant's
ids never collide with (or reveal) another's. A by-id call names the namespace with
``namespace=``; without it the id must be unique across the store (else
:class:`AmbiguousMemoryError`). ``supersedes`` links resolve inside the new record's namespace;
``derived_from`` ids resolve in the record's own namespace first, then (given ``parent_namespaces``
or when unique) in another.

A store subclasses it and supplies the storage primitives, each called inside one atomic write
(``_write()``) and each seeing the write's own earlier changes (a new store, e.g. a database
backend, implements exactly these and inherits every rule):

=======================================  ======================================================
``_write()``                             context manager: one all-or-nothing write; sets
                                         ``self._events`` (audit events appended after it)
``_load(memory_id, namespace)``          the record (``UnknownMemoryError`` when missing)
``_exists(memory_id, namespace)``        whether the key is taken (tombstones included)
``_namespaces_of(memory_id)``            the namespaces holding that id, sorted
``_children(namespace, parent)``         ``(namespace, id)`` of records derived from the
                                         parent, sorted
``_bump("seq")``                         the write's new store version
``_put_new(memory, seq, v, parents)``    insert a record with its vector in a fresh slot and its
                                         resolved ``(namespace, id)`` parents -> slot
``_put(memory, seq)``                    replace a record, keeping its vector
``_put_new_vector(memory, seq, v)``      replace a record and its vector (fresh slot; the old
                                         vector is erased) -> slot
``_put_tombstone(tomb, seq)``            replace a record by its tombstone: vector, text,
                                         markers and its derivation links erased
``_put_restored_tombstone(tomb, seq)``   insert an exported tombstone (no vector, no text)
``_suppression_key()``                   the store's own HMAC key (bytes)
``_foreign_keys()``                      ``{key id: key}`` of suppression entries imported from
                                         another store (``memgate store import``)
``_put_foreign_keys(keys)``              add such keys (idempotent)
``_suppressed(namespaces)``              the suppression entries of those namespaces (``None``:
                                         every namespace), each with its normalisation
                                         ``version``, ``key_id`` ("" = the store's own key) and
                                         ``whole`` flag, all persisted
``_put_suppressed(entries)``             add entries (idempotent)
``_lift_suppressed(entries)``            remove entries (a consented relearn)
``_describe()``                          where the store lives, for error messages
=======================================  ======================================================

Record ids follow :func:`memgate.contract.ids.check_id` when a record is created (``add``,
``add_many``, a forget directive); imported records keep the ids they had.

Also here: the encoder identity (``normalize_identity``) and the index entry a query-time
index needs about one record (``IndexEntry``, ``index_entry``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from memgate.contract.admissibility import SupersessionScope
from memgate.contract.ids import check_id
from memgate.retriever.audit import make_event
from memgate.retriever.forgetting import ForgetSemantics
from memgate.retriever.schema import (
    CONTENT_FIELDS,
    UPDATABLE_FIELDS,
    AmbiguousMemoryError,
    Applicability,
    EncoderMismatchError,
    ForgottenMemoryError,
    StaleRevisionError,
    StoredMemory,
    SupersededIn,
    UnknownMemoryError,
    check_text_size,
    scope_to_dict,
)
from memgate.retriever.suppression import Suppressed

ENCODER_KEYS = ("id", "revision", "normalize", "dim")
UNIT_KEEP = 1e-6  # a vector whose float32 norm is within this of 1 is unit already (kept as given)


def normalize_identity(identity: Any) -> dict:
    """An encoder identity as ``{id, revision, normalize, dim}``; anything else is an error."""
    if hasattr(identity, "identity") and not isinstance(identity, Mapping):
        identity = identity.identity  # an Encoder
    if not isinstance(identity, Mapping):
        raise TypeError(
            f"an encoder identity must be a mapping with keys {ENCODER_KEYS} or an Encoder, "
            f"got {type(identity).__name__}"
        )
    missing = [k for k in ENCODER_KEYS if identity.get(k) is None]
    if missing:
        raise ValueError(f"encoder identity is missing {missing}: {dict(identity)!r}")
    return {k: identity[k] for k in ENCODER_KEYS}


@dataclass(frozen=True)
class IndexEntry:
    """What a query-time index needs about one record (metadata only, never text)."""

    memory_id: str
    namespace: str
    slot: Optional[int]
    alive: bool  # False once forgotten (no text, no vector)
    lifecycle_state: str
    superseded_in: tuple
    applicability: Applicability
    policy_tags: Optional[tuple]
    seq: int


def index_entry(raw: Mapping, *, memory_id: str, namespace: str, slot: Optional[int],
                lifecycle_state: str, seq: int) -> IndexEntry:
    """An :class:`IndexEntry` from a record's stored fields (``raw``: its ``to_dict()`` form)."""
    return IndexEntry(
        memory_id=memory_id, namespace=namespace, slot=slot,
        alive=lifecycle_state != "forgotten" and slot is not None,
        lifecycle_state=lifecycle_state,
        superseded_in=tuple(
            SupersededIn(s["by"], None if s["scope"] is None else SupersessionScope(**s["scope"]))
            for s in raw.get("superseded_in") or ()),
        applicability=Applicability.from_dict(raw.get("applicability")),
        policy_tags=None if raw.get("policy_tags") is None else tuple(raw["policy_tags"]),
        seq=seq,
    )


def signature_key(entry: IndexEntry) -> tuple:
    """What a record's Kleene verdict depends on (namespace, policy tags, lifecycle, the scopes it
    was superseded in, its validity window): records with one key get one verdict per query."""
    return (
        entry.namespace,
        entry.policy_tags,
        entry.lifecycle_state,
        tuple(sorted({(None if s.scope is None else (s.scope.subject, s.scope.valid_from, s.scope.valid_to))
                      for s in entry.superseded_in}, key=repr)),
        (entry.applicability.valid_from, entry.applicability.valid_to),
    )


def signature_digest(key: tuple) -> str:
    """A stable name for a :func:`signature_key` (a store that keeps it per record can filter a
    search by the signatures a query excludes instead of by each excluded record's id)."""
    return hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()[:32]


def record_signature(memory: StoredMemory) -> str:
    """The :func:`signature_digest` of a record as stored (what a store filtering by signature
    keeps beside it)."""
    entry = index_entry(memory.to_dict(), memory_id=memory.memory_id, namespace=memory.namespace,
                        slot=None, lifecycle_state=memory.lifecycle_state, seq=0)
    return signature_digest(signature_key(entry))


def check_cas(memory: StoredMemory, expected_revision: Optional[int]) -> None:
    """Compare-and-set: refuse a forgotten record, or a revision other than ``expected``
    (``None`` skips the revision check)."""
    if memory.forgotten:
        raise ForgottenMemoryError(
            f"memory {memory.memory_id!r} was forgotten (directive {memory.forgotten_by!r}); "
            "it cannot be changed")
    if expected_revision is None:
        return
    if type(expected_revision) is not int:
        raise TypeError(f"expected_revision must be an int, got {expected_revision!r}")
    if memory.revision != expected_revision:
        raise StaleRevisionError(memory.memory_id, expected_revision, memory.revision)


def check_namespace_arg(namespace: Any) -> None:
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        raise ValueError(f"namespace must be a non-empty string or None, got {namespace!r}")


class RecordSemantics(ForgetSemantics):
    """The write half of the ``MemoryStore`` protocol over a store's primitives (module doc)."""

    encoder_identity: dict
    dim: int
    audit: Any
    clock: Any

    # -- checks -------------------------------------------------------------------------------

    def _describe(self) -> str:
        raise NotImplementedError

    def check_encoder(self, identity: Any, action: str = "use") -> None:
        """Raise :class:`EncoderMismatchError` unless ``identity`` is the store's encoder."""
        try:
            given = normalize_identity(identity)
        except (TypeError, ValueError) as exc:
            raise EncoderMismatchError(f"cannot {action}: {exc}") from None
        clashes = [k for k in ENCODER_KEYS if given[k] != self.encoder_identity[k]]
        if clashes:
            raise EncoderMismatchError(
                f"cannot {action} with encoder {given!r}: {self._describe()} was built with "
                f"encoder {self.encoder_identity!r} (differs on {clashes}); re-embed into a new "
                "store or use the store's encoder")

    def _check_vector(self, vector: Any) -> np.ndarray:
        """A finite, non-zero float vector of the store's dim, unit-normalised little-endian f4."""
        if hasattr(vector, "detach"):
            vector = vector.detach().cpu().numpy()
        v = np.asarray(vector)
        if not np.issubdtype(v.dtype, np.floating):
            raise TypeError(f"vector must be a float array, got dtype {v.dtype}")
        v = v.astype(np.float32)
        if v.ndim == 2 and v.shape[0] == 1:
            v = v[0]
        if v.shape != (self.dim,):
            raise ValueError(f"vector has shape {v.shape}, the store's encoder has dim {self.dim}")
        if not np.isfinite(v).all():
            raise ValueError("vector contains NaN or inf")
        norm = float(np.linalg.norm(v))
        if norm < 1e-8:
            raise ValueError("vector is zero; it has no direction to rank by")
        if abs(norm - 1.0) <= UNIT_KEEP:  # already unit: kept bit for bit (dividing again by a norm
            return v.astype("<f4")        # of 1 +- 1 ulp moves bits), so a copy (export, import) is exact
        return (v / norm).astype("<f4")

    def _cas(self, memory: StoredMemory, expected_revision: Optional[int]) -> None:
        check_cas(memory, expected_revision)

    def _event(self, event_type: str, /, **payload: Any) -> None:
        if self.audit is not None:
            self._events.append(make_event(event_type, clock=self.clock, **payload))

    def _resolve(self, memory_id: str, namespace: Optional[str]) -> str:
        """The namespace of ``memory_id``: ``namespace`` when given, else the one namespace
        holding the id (``UnknownMemoryError`` / :class:`AmbiguousMemoryError`)."""
        if not isinstance(memory_id, str) or not memory_id:
            raise ValueError(f"memory_id must be a non-empty string, got {memory_id!r}")
        check_namespace_arg(namespace)
        if namespace is not None:
            return namespace
        found = self._namespaces_of(memory_id)
        if not found:
            raise UnknownMemoryError(f"no memory with id {memory_id!r}")
        if len(found) > 1:
            raise AmbiguousMemoryError(
                f"memory id {memory_id!r} names records in several namespaces (ids are scoped per "
                "namespace): pass namespace=")
        return found[0]

    # -- reads --------------------------------------------------------------------------------

    def namespace_of(self, memory_id: str) -> Optional[str]:
        """The namespace of the one record with this id (None if none; several raise):
        one implementation for every store."""
        with self._lock:
            try:
                return self._resolve(memory_id, None)
            except UnknownMemoryError:
                return None

    def get(self, memory_id: str, *, namespace: Optional[str] = None) -> Optional[StoredMemory]:
        """The record ``(namespace, memory_id)``; without ``namespace``, the record with that id
        if exactly one namespace holds it (several: :class:`AmbiguousMemoryError`)."""
        with self._lock:
            try:
                return self._load(memory_id, self._resolve(memory_id, namespace))
            except UnknownMemoryError:
                return None

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
            check_text_size(memory.text, f"memory {memory.memory_id!r}")
            checked.append((memory, self._check_vector(vector)))
        hints = dict(parent_namespaces or {})
        stored_all = []
        with self._write():
            seq = self._bump("seq")
            now = self.clock()
            for memory, v in checked:
                stored_all.append(self._add_one(memory, v, seq, now, allow_relearn, hints))
        return stored_all

    def _parent_key(self, parent: str, own_namespace: str, hints: Mapping[str, str]) -> tuple:
        if parent in hints:
            return hints[parent], parent
        if self._exists(parent, own_namespace):
            return own_namespace, parent
        return self._resolve(parent, None), parent

    def _add_one(self, memory: StoredMemory, v: np.ndarray, seq: int, now: str, allow_relearn: bool,
                 hints: Mapping[str, str]) -> StoredMemory:
        ns = memory.namespace
        if self._exists(memory.memory_id, ns):
            raise ValueError(f"memory {memory.memory_id!r} already exists in namespace {ns!r}; use update()")
        parents = []
        for parent in memory.derived_from:
            key = self._parent_key(parent, ns, hints)
            if self._load(parent, key[0]).forgotten:
                raise ForgottenMemoryError(
                    f"memory {memory.memory_id!r}: derived_from names forgotten memory {parent!r}")
            parents.append(key)
        old_records = []
        for link in memory.supersedes:  # supersession stays inside the namespace
            old = self._load(link.memory_id, ns)
            self._cas(old, link.expected_revision)
            old_records.append((link, old))
        self._check_suppressed(memory, allow_relearn, memory.principal)
        stored = memory.replace(revision=1, created_at=now, updated_at=now, superseded_in=(),
                                needs_review=False, review_reasons=(), forgotten_by=None)
        slot = self._put_new(stored, seq, v, parents)
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
            self._put(new_old, seq)
            self._event("superseded", memory_id=old.memory_id, namespace=ns, by=stored.memory_id,
                        scope=scope_to_dict(link.scope), revision=new_old.revision)
            self._flag_derived((ns, old.memory_id), "superseded", seq, now)
        return stored

    def _descendants(self, source: tuple) -> list[tuple]:
        """``(namespace, id)`` of every record derived (transitively) from ``source`` with the
        parent it was reached through, breadth first."""
        out, seen, frontier = [], {source}, [source]
        while frontier:
            parent = frontier.pop(0)
            for child in self._children(*parent):
                if child in seen:
                    continue
                seen.add(child)
                frontier.append(child)
                out.append((child, parent))
        return out

    def _flag_derived(self, source: tuple, cause: str, seq: int, now: str) -> list[str]:
        """Mark every record derived (transitively) from ``source`` as needing review."""
        flagged: list[str] = []
        source_id = source[1]
        for (child_ns, child), parent in self._descendants(source):
            record = self._load(child, child_ns)
            if record.forgotten:
                continue
            reason = f"{cause}:{source_id}" + ("" if parent == source else f" via {parent[1]}")
            flagged_record = record.replace(
                needs_review=True,
                review_reasons=tuple(dict.fromkeys(record.review_reasons + (reason,))),
                revision=record.revision + 1, updated_at=now)
            self._put(flagged_record, seq)
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

    def _update(self, memory_id, expected_revision, vector, encoder, principal, cause, changes,
                namespace=None, allow_relearn=False):
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
        if "text" in changes:
            check_text_size(changes["text"], f"memory {memory_id!r}")
        v = None
        if vector is not None:
            self.check_encoder(encoder, "write")
            v = self._check_vector(vector)
        if "applicability" in changes:
            changes["applicability"] = Applicability.from_dict(changes["applicability"])
        with self._write():
            ns = self._resolve(memory_id, namespace)
            current = self._load(memory_id, ns)
            self._cas(current, expected_revision)
            seq = self._bump("seq")
            now = self.clock()
            new = current.replace(**changes, revision=current.revision + 1, updated_at=now)
            self._check_suppressed(new, allow_relearn, principal, previous=current)
            if v is not None:
                self._put_new_vector(new, seq, v)
            else:
                self._put(new, seq)
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
        with self._write():
            ns = self._resolve(memory_id, namespace)
            current = self._load(memory_id, ns)
            self._cas(current, expected_revision)
            seq = self._bump("seq")
            new = current.replace(needs_review=False, review_reasons=(),
                                  revision=current.revision + 1, updated_at=self.clock())
            self._put(new, seq)
            self._event("reviewed", memory_id=memory_id, namespace=ns, revision=new.revision,
                        principal=principal)
        return new

    def restore_many(self, memories: Iterable[StoredMemory], vectors: Iterable[Any], *, encoder: Any,
                     suppression: Optional[Mapping] = None) -> int:
        """Write exported records as they were (ids, revisions, timestamps, lifecycle,
        supersession and review state, tombstones) in one write, all or none; ``vectors[i]`` is
        record i's vector, ``None`` for a tombstone. A key that already exists is refused, and so
        is a live record repeating content forgotten in its namespace here (before the import).
        ``derived_from`` ids resolve as in :meth:`add_many`, among the batch's records too.
        ``suppression`` (:meth:`export_suppression`'s form) adds the exported suppression list,
        its keys included, in the same write: what was forgotten there stays forgotten here.
        Used by ``memgate store import``; the export's audit log travels separately."""
        self.check_encoder(encoder, "write")
        checked = []
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
        keys, entries = self._imported_suppression(suppression)
        batch: dict[str, set] = {}
        for memory, _ in checked:
            batch.setdefault(memory.memory_id, set()).add(memory.namespace)
        with self._write():
            seq = self._bump("seq")
            for memory, v in checked:
                if self._exists(memory.memory_id, memory.namespace):
                    raise ValueError(f"memory {memory.memory_id!r} already exists in namespace "
                                     f"{memory.namespace!r} of {self._describe()}")
                if v is None:
                    self._put_restored_tombstone(memory, seq)
                    continue
                self._check_suppressed(memory, False, memory.principal)
                parents = []
                for parent in memory.derived_from:
                    if memory.namespace in batch.get(parent, ()) or self._exists(parent, memory.namespace):
                        parents.append((memory.namespace, parent))
                    else:
                        found = sorted(batch.get(parent, set()) | set(self._namespaces_of(parent)))
                        if len(found) == 1:  # (an unresolvable link is kept in derived_from only)
                            parents.append((found[0], parent))
                slot = self._put_new(memory, seq, v, parents)
                self._event("stored", memory_id=memory.memory_id, namespace=memory.namespace,
                            revision=memory.revision, principal=memory.principal, kind=memory.kind,
                            derived_from=list(memory.derived_from),
                            supersedes=[x.to_dict() for x in memory.supersedes],
                            encoder=self.encoder_identity, slot=slot, cause="import")
            # (after the records: they lived beside these entries in the store they come from)
            if keys:
                self._put_foreign_keys(keys)
            if entries:
                self._put_suppressed(entries)
        return len(checked)


__all__ = ["ENCODER_KEYS", "IndexEntry", "RecordSemantics", "Suppressed", "check_cas",
           "check_namespace_arg", "index_entry", "normalize_identity", "record_signature",
           "signature_digest", "signature_key"]
