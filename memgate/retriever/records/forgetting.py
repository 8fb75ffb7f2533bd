"""Forgetting, shared by every store: what a forget erases and the suppression entries it leaves,
the suppression checks every write path runs (read-only ones for callers that must check before
they embed or cache anything), and the suppression list's export and import; functions over a
back-end's primitives (:mod:`memgate.retriever.records.primitives`), used by
:class:`memgate.retriever.records.rules.Records`.

What is forgotten and how it is matched is :mod:`memgate.retriever.records.suppression` (over the
one normalisation, :mod:`memgate.contract.text_normal`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from memgate.retriever.errors import RepeatedDetailError, SuppressedContentError
from memgate.retriever.records.links import check_cas, descendants
from memgate.retriever.records.markers import derived_markers
from memgate.retriever.records.memory import FORGET_DIRECTIVE_KIND, StoredMemory
from memgate.retriever.records.primitives import StoreBackend
from memgate.retriever.records.suppression import (
    Suppressed,
    content_fields,
    entries_for,
    key_id,
    match_fields,
    matching,
)

Hit = tuple[str, Suppressed]  # (the field that repeats forgotten content, the entry it matches)


def suppression_keys(backend: StoreBackend) -> dict[str, bytes]:
    """Key id -> key for every key entries may name ("" = the store's own)."""
    return {**backend.foreign_keys(), "": backend.suppression_key()}


def suppressed_hits(backend: StoreBackend, memory: StoredMemory,
                    previous: Optional[StoredMemory] = None) -> list[Hit]:
    """``(field, entry)`` for the forgotten content of ``memory``'s namespace that a field of
    ``memory`` repeats; with ``previous`` (an update), only fields whose text is new."""
    fields = content_fields(memory)
    if previous is not None:
        old = {text for _, text in content_fields(previous)}
        fields = [(name, text) for name, text in fields if text not in old]
    if not fields:
        return []
    return match_fields(suppression_keys(backend), fields, backend.suppressed([memory.namespace]))


def refusal(memory: StoredMemory, hits: list[Hit]) -> SuppressedContentError:
    field = sorted({name for name, _ in hits})[0]
    forgotten = sorted({e.memory_id for _, e in hits})
    return SuppressedContentError(
        f"memory {memory.memory_id!r}: field {field!r} repeats content forgotten in namespace "
        f"{memory.namespace!r} (forgotten record(s) {forgotten}); refused. Pass "
        "allow_relearn=True to store it again with the user's consent (audited)")


def export_suppression(backend: StoreBackend) -> dict[str, Any]:
    """The whole suppression list for ``memgate store export``: ``{"keys": {key id: hex},
    "entries": [entry dicts]}``, every entry naming its key explicitly (the store's own key
    included: its hashes cannot be checked without it)."""
    own = backend.suppression_key()
    keys = {key_id(own): own.hex(), **{k: v.hex() for k, v in backend.foreign_keys().items()}}
    entries = [e.to_dict() | {"key_id": e.key_id or key_id(own)} for e in backend.suppressed(None)]
    entries.sort(key=lambda e: (e["namespace"], e["memory_id"], e["kind"], e["digest"]))
    return {"keys": keys, "entries": entries}


def scan_suppressed(backend: StoreBackend, namespaces: Iterable[str], text: str) -> list[tuple[str, str]]:
    """``(namespace, memory_id)`` of forgotten records in ``namespaces`` whose text or a
    marker ``text`` repeats (through the suppression list's keyed hashes)."""
    ns = sorted(set(namespaces))
    if not ns or not isinstance(text, str) or not text:
        return []
    hits = matching(suppression_keys(backend), text, backend.suppressed(ns))
    return sorted({(h.namespace, h.memory_id) for h in hits})


def imported_suppression(backend: StoreBackend,
                         suppression: Optional[Mapping[str, Any]]) -> tuple[dict[str, bytes], list[Suppressed]]:
    """Checked keys (bytes, the store's own left out) and entries (keyed to this store)."""
    if suppression is None:
        return {}, []
    if not isinstance(suppression, Mapping) or set(suppression) != {"keys", "entries"}:
        raise ValueError("suppression must be a mapping with exactly 'keys' and 'entries'")
    own = key_id(backend.suppression_key())
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
    for item in suppression["entries"]:
        entry = Suppressed.from_dict(item)
        if entry.key_id not in keys and entry.key_id != own:
            raise ValueError(f"suppression entry of {entry.memory_id!r}: field 'key_id' names no "
                             "exported key")
        entries.append(entry if entry.key_id != own else Suppressed(**(entry.to_dict() | {"key_id": ""})))
    return keys, entries


def forget_plan(backend: StoreBackend, memory_id: str, directive: StoredMemory,
                expected_revision: Optional[int]) -> tuple[StoredMemory, list[StoredMemory], list[Suppressed]]:
    """The record, the records erased with it and their new suppression entries (each record's
    text, its markers and those derived from its text, read before it is erased); refuses a
    stale revision, a taken directive id and a directive that repeats the detail."""
    ns = directive.namespace
    current = backend.load(memory_id, ns)
    check_cas(current, expected_revision)
    if backend.exists(directive.memory_id, ns):
        raise ValueError(f"memory {directive.memory_id!r} already exists in namespace {ns!r}")
    erased = [current] + [
        record for record in (backend.load(child, child_ns)
                              for (child_ns, child), _ in descendants(backend, (ns, memory_id)))
        if not record.forgotten and record.kind != FORGET_DIRECTIVE_KIND]
    key = backend.suppression_key()
    entries = [e for r in erased for e in entries_for(key, r.namespace, r.memory_id, r.text,
                                                      [*r.markers, *derived_markers(r.text)])]
    repeated = match_fields({"": key, **backend.foreign_keys()}, content_fields(directive),
                            entries + backend.suppressed([ns]))
    if repeated:
        name, entry = sorted(repeated, key=lambda h: (h[0], h[1].memory_id))[0]
        raise RepeatedDetailError(
            f"forget directive {directive.memory_id!r}: field {name!r} repeats forgotten content "
            f"(the {entry.kind} of {entry.memory_id!r}); describe what was forgotten without the "
            "detail itself")
    return current, erased, entries


def tombstone(record: StoredMemory, directive_id: str, now: str) -> StoredMemory:
    """What is left of a forgotten record: id, namespace, kind, principal, timestamps, revision
    and lifecycle ``forgotten`` (text, markers, applicability, vector and links erased)."""
    return StoredMemory(
        memory_id=record.memory_id, namespace=record.namespace, text=None,
        kind=record.kind, lifecycle_state="forgotten", principal=record.principal,
        revision=record.revision + 1, created_at=record.created_at, updated_at=now,
        forgotten_by=directive_id)


__all__ = ["export_suppression", "forget_plan", "imported_suppression", "refusal", "scan_suppressed",
           "suppressed_hits", "suppression_keys", "tombstone"]
