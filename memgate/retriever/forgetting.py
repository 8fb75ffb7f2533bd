"""Forgetting, shared by every store (a mixin of :class:`memgate.retriever.semantics.RecordSemantics`):
the forget write, the suppression checks every write path runs (read-only ones for callers that
must check before they embed or cache anything), and the suppression list's export and import.

What is forgotten and how it is matched is :mod:`memgate.retriever.suppression` (over the one
normalisation, :mod:`memgate.contract.text_normal`); the storage primitives are listed in
:mod:`memgate.retriever.semantics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from memgate.contract.ids import check_id
from memgate.retriever.schema import (
    FORGET_DIRECTIVE_KIND,
    RepeatedDetailError,
    StoredMemory,
    SuppressedContentError,
    check_text_size,
)
from memgate.retriever.suppression import (
    Suppressed,
    content_fields,
    entries_for,
    key_id,
    match_fields,
    matching,
)


class ForgetSemantics:
    """Forget and suppression over a store's primitives (``_write``, ``_load``, ``_suppressed``,
    ``_put_suppressed``, ...; see :mod:`memgate.retriever.semantics`)."""

    def _suppression_keys(self) -> dict[str, bytes]:
        """Key id -> key for every key entries may name ("" = the store's own)."""
        return {**self._foreign_keys(), "": self._suppression_key()}

    def _suppressed_hits(self, memory: StoredMemory, previous: Optional[StoredMemory] = None) -> list[tuple]:
        """``(field, entry)`` for the forgotten content of ``memory``'s namespace that a field of
        ``memory`` repeats; with ``previous`` (an update), only fields whose text is new."""
        fields = content_fields(memory)
        if previous is not None:
            old = {text for _, text in content_fields(previous)}
            fields = [(name, text) for name, text in fields if text not in old]
        if not fields:
            return []
        return match_fields(self._suppression_keys(), fields, self._suppressed([memory.namespace]))

    def _refusal(self, memory: StoredMemory, hits: list[tuple]) -> SuppressedContentError:
        field = sorted({name for name, _ in hits})[0]
        forgotten = sorted({e.memory_id for _, e in hits})
        return SuppressedContentError(
            f"memory {memory.memory_id!r}: field {field!r} repeats content forgotten in namespace "
            f"{memory.namespace!r} (forgotten record(s) {forgotten}); refused. Pass "
            "allow_relearn=True to store it again with the user's consent (audited)")

    def check_suppressed(self, memory: StoredMemory, *, previous: Optional[StoredMemory] = None) -> None:
        """Raise :class:`SuppressedContentError` when a field of ``memory`` repeats content
        forgotten in its namespace (read-only: callers check before they embed or cache
        anything; the write checks again inside its transaction)."""
        with self._lock:
            hits = self._suppressed_hits(memory, previous)
        if hits:
            raise self._refusal(memory, hits)

    def _check_suppressed(self, memory: StoredMemory, allow_relearn: bool, principal: Optional[str],
                          previous: Optional[StoredMemory] = None) -> None:
        """Refuse a record with a field that repeats forgotten content of its namespace, unless
        re-consented (then the matched entries are lifted and the relearn is audited)."""
        hits = self._suppressed_hits(memory, previous)
        if not hits:
            return
        if not allow_relearn:
            raise self._refusal(memory, hits)
        self._lift_suppressed(list({e.key: e for _, e in hits}.values()))
        self._event("relearned", memory_id=memory.memory_id, namespace=memory.namespace,
                    forgotten=sorted({e.memory_id for _, e in hits}), principal=principal)

    def export_suppression(self) -> dict:
        """The whole suppression list for ``memgate store export``: ``{"keys": {key id: hex},
        "entries": [entry dicts]}``, every entry naming its key explicitly (the store's own key
        included: its hashes cannot be checked without it)."""
        with self._lock:
            own = self._suppression_key()
            keys = {key_id(own): own.hex(), **{k: v.hex() for k, v in self._foreign_keys().items()}}
            entries = [e.to_dict() | {"key_id": e.key_id or key_id(own)} for e in self._suppressed(None)]
        entries.sort(key=lambda e: (e["namespace"], e["memory_id"], e["kind"], e["digest"]))
        return {"keys": keys, "entries": entries}

    def scan_suppressed(self, namespaces: Iterable[str], text: str) -> list[tuple[str, str]]:
        """``(namespace, memory_id)`` of forgotten records in ``namespaces`` whose text or a
        marker ``text`` repeats (through the suppression list's keyed hashes)."""
        ns = sorted(set(namespaces))
        if not ns or not isinstance(text, str) or not text:
            return []
        with self._lock:
            hits = matching(self._suppression_keys(), text, self._suppressed(ns))
        return sorted({(h.namespace, h.memory_id) for h in hits})

    def _imported_suppression(self, suppression: Optional[Mapping]) -> tuple[dict, list]:
        """Checked keys (bytes, the store's own left out) and entries (keyed to this store)."""
        if suppression is None:
            return {}, []
        if not isinstance(suppression, Mapping) or set(suppression) != {"keys", "entries"}:
            raise ValueError("suppression must be a mapping with exactly 'keys' and 'entries'")
        own = key_id(self._suppression_key())
        keys: dict[str, bytes] = {}
        for kid, hex_key in dict(suppression["keys"]).items():
            try:
                raw = bytes.fromhex(hex_key)
            except (TypeError, ValueError):
                raise ValueError(f"suppression key {kid!r}: not a hex string") from None
            if len(raw) != 32 or key_id(raw) != kid:
                raise ValueError(f"suppression key {kid!r}: not a 32-byte key with that id")
            if kid != own:
                keys[kid] = raw
        entries = []
        for raw in suppression["entries"]:
            entry = Suppressed.from_dict(raw)
            if entry.key_id not in keys and entry.key_id != own:
                raise ValueError(f"suppression entry of {entry.memory_id!r}: field 'key_id' names no "
                                 "exported key")
            entries.append(entry if entry.key_id != own else Suppressed(**(entry.to_dict() | {"key_id": ""})))
        return keys, entries

    def _forget_plan(self, memory_id: str, directive: StoredMemory,
                     expected_revision: Optional[int]) -> tuple[StoredMemory, list[StoredMemory], list[Suppressed]]:
        """The record, the records erased with it and their new suppression entries; refuses a
        stale revision, a taken directive id and a directive that repeats the detail."""
        ns = directive.namespace
        current = self._load(memory_id, ns)
        self._cas(current, expected_revision)
        if self._exists(directive.memory_id, ns):
            raise ValueError(f"memory {directive.memory_id!r} already exists in namespace {ns!r}")
        erased = [current] + [
            record for record in (self._load(child, child_ns)
                                  for (child_ns, child), _ in self._descendants((ns, memory_id)))
            if not record.forgotten and record.kind != FORGET_DIRECTIVE_KIND]
        key = self._suppression_key()
        entries = [e for r in erased for e in entries_for(key, r.namespace, r.memory_id, r.text, r.markers)]
        repeated = match_fields({"": key, **self._foreign_keys()}, content_fields(directive),
                                entries + self._suppressed([ns]))
        if repeated:
            name, entry = sorted(repeated, key=lambda h: (h[0], h[1].memory_id))[0]
            raise RepeatedDetailError(
                f"forget directive {directive.memory_id!r}: field {name!r} repeats forgotten content "
                f"(the {entry.kind} of {entry.memory_id!r}); describe what was forgotten without the "
                "detail itself")
        return current, erased, entries

    def check_forget_directive(self, memory_id: str, directive: StoredMemory) -> None:
        """Raise as :meth:`forget` would for ``directive`` (read-only: checked before the
        directive is embedded, so a refused directive never reaches an embedding cache)."""
        if not isinstance(directive, StoredMemory):
            raise TypeError("directive must be a StoredMemory")
        check_id(directive.memory_id, "directive_id")
        with self._lock:
            self._forget_plan(memory_id, directive, None)

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
        with self._write():
            current, erased, entries = self._forget_plan(memory_id, directive, expected_revision)
            seq = self._bump("seq")
            now = self.clock()
            for record in erased:
                tomb = StoredMemory(
                    memory_id=record.memory_id, namespace=record.namespace, text=None,
                    kind=record.kind, lifecycle_state="forgotten", principal=record.principal,
                    revision=record.revision + 1, created_at=record.created_at, updated_at=now,
                    forgotten_by=directive.memory_id)
                self._put_tombstone(tomb, seq)
                cause = None if record is current else f"derived_from:{memory_id}"
                self._event("forgotten", memory_id=record.memory_id, namespace=record.namespace,
                            directive_id=directive.memory_id, revision=tomb.revision,
                            principal=directive.principal, cause=cause)
            self._put_suppressed(entries)
            stored = directive.replace(
                kind=FORGET_DIRECTIVE_KIND, forgets=memory_id, revision=1, created_at=now,
                updated_at=now, superseded_in=(), needs_review=False, review_reasons=(),
                forgotten_by=None, supersedes=())
            parents = [self._parent_key(p, ns, {}) for p in stored.derived_from]
            slot = self._put_new(stored, seq, v, parents)
            self._event("stored", memory_id=stored.memory_id, namespace=stored.namespace,
                        revision=1, principal=stored.principal, kind=stored.kind,
                        derived_from=list(stored.derived_from), supersedes=[], forgets=memory_id,
                        encoder=self.encoder_identity, slot=slot)
        if on_erased is not None:
            for record in erased:
                on_erased(record)
        return stored

__all__ = ["ForgetSemantics"]
