"""A by-namespace view of a store's live records and their metadata (no text), for the surfaces
that list, filter or look up by key: ``memgate.Memory``, the LangGraph store and the CLI.

Refreshed incrementally from ``MemoryStore.changes_since`` (the same feed the retriever's index
reads), so another process's writes are seen at the next call and a forgotten record leaves the
view with its tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from memgate.integrations.dedup import text_digest
from memgate.integrations.expiry import EXPIRES_KEY
from memgate.integrations.filters import matches
from memgate.retriever.records.memory import FORGET_DIRECTIVE_KIND


class Catalog:
    """``key_field``: a metadata key whose value names a record within its namespace (the
    LangGraph store's item key); ``by_key(namespace, key)`` then finds the live record.
    Records are keyed by ``(namespace, memory_id)``: ids are scoped per namespace."""

    def __init__(self, store: Any, key_field: Optional[str] = None):
        self.store = store
        self.key_field = key_field
        self.seq = 0
        self._attrs: dict[tuple[str, str], dict[str, Any]] = {}
        self._kinds: dict[tuple[str, str], str] = {}
        self._directives: dict[str, set[str]] = {}  # namespace -> its forget directives' ids
        self._by_ns: dict[str, set[str]] = {}
        self._by_key: dict[tuple[str, Any], str] = {}
        self._expiry: dict[tuple[str, str], str] = {}  # records with an expiration_date
        self._digests: dict[tuple[str, str], str] = {}  # (namespace, normalised-text digest) -> ids
        self._by_digest: dict[tuple[str, str], set[str]] = {}

    def refresh(self) -> None:
        if self.store.version() == self.seq:
            return
        version, entries = self.store.changes_since(self.seq)
        latest = {(e.namespace, e.memory_id): e for e in entries}  # one entry per record: its last write
        records: dict[tuple[str, str], Any] = {}
        for ns in sorted({k[0] for k, e in latest.items() if e.alive}):
            got = self.store.get_many([k[1] for k, e in latest.items() if e.alive and k[0] == ns],
                                      namespace=ns)
            records.update(((ns, mid), r) for mid, r in got.items())
        for key, entry in latest.items():
            self._drop(key)
            record = records.get(key)
            if entry.alive and record is not None and not record.forgotten:
                self._attrs[key] = dict(record.attributes)
                self._kinds[key] = record.kind
                if record.kind == FORGET_DIRECTIVE_KIND:
                    self._directives.setdefault(key[0], set()).add(key[1])
                else:
                    digest = text_digest(record.text)
                    if digest is not None:
                        self._digests[key] = digest
                        self._by_digest.setdefault((key[0], digest), set()).add(key[1])
                expires = record.attributes.get(EXPIRES_KEY)
                if isinstance(expires, str):
                    self._expiry[key] = expires
                self._by_ns.setdefault(key[0], set()).add(key[1])
                item_key = record.attributes.get(self.key_field) if self.key_field else None
                if isinstance(item_key, str):
                    self._by_key[(key[0], item_key)] = key[1]
        self.seq = version

    def _drop(self, key: tuple[str, str]) -> None:
        ns, memory_id = key
        attrs = self._attrs.pop(key, None)
        self._expiry.pop(key, None)
        digest = self._digests.pop(key, None)
        if digest is not None:
            same = self._by_digest.get((ns, digest))
            if same is not None:
                same.discard(memory_id)
                if not same:
                    del self._by_digest[(ns, digest)]
        if self._kinds.pop(key, None) == FORGET_DIRECTIVE_KIND:
            self._directives[ns].discard(memory_id)
        item_key = attrs.get(self.key_field) if attrs and self.key_field else None
        if isinstance(item_key, str) and self._by_key.get((ns, item_key)) == memory_id:
            del self._by_key[(ns, item_key)]
        members = self._by_ns.get(ns)
        if members is not None:
            members.discard(memory_id)
            if not members:
                del self._by_ns[ns]

    def namespaces(self) -> list[str]:
        self.refresh()
        return sorted(self._by_ns)

    def ids(self, namespaces: Iterable[str], filters: Optional[Mapping[str, Any]] = None,
            where: Optional[Callable[[dict[str, Any]], bool]] = None,
            directives: Optional[bool] = None) -> list[str]:
        """Live ids in ``namespaces`` whose metadata matches ``filters`` (a checked
        :mod:`memgate.integrations.filters` spec) and ``where`` (a predicate), sorted;
        ``directives``: True for forget directives only, False for memories only, None both."""
        self.refresh()
        out: list[str] = []
        for ns in set(namespaces):
            for i in (self._directives.get(ns, ()) if directives else self._by_ns.get(ns, ())):
                if directives is not None and (self._kinds[(ns, i)] == FORGET_DIRECTIVE_KIND) is not directives:
                    continue
                attrs = self._attrs[(ns, i)]
                if (not filters or matches(attrs, filters)) and (where is None or where(attrs)):
                    out.append(i)
        return sorted(out)

    def expired(self, at: str, namespaces: Optional[Iterable[str]] = None) -> list[tuple[str, str]]:
        """``(namespace, id)`` of live records whose expiration_date is at or before ``at`` (a
        :func:`memgate.integrations.expiry.stamp`), sorted."""
        self.refresh()
        wanted = None if namespaces is None else set(namespaces)
        return sorted(k for k, v in self._expiry.items() if v <= at and (wanted is None or k[0] in wanted))

    def same_text(self, namespace: str, digest: str) -> list[str]:
        """Ids of the namespace's live memories whose normalised text has ``digest``."""
        self.refresh()
        return sorted(self._by_digest.get((namespace, digest), ()))

    def by_key(self, namespace: str, key: str) -> Optional[str]:
        self.refresh()
        return self._by_key.get((namespace, key))

    def attributes(self, memory_id: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The live record's metadata (``namespace`` picks among namespaces using the id)."""
        self.refresh()
        found = [a for (ns, mid), a in self._attrs.items()
                 if mid == memory_id and (namespace is None or ns == namespace)]
        return dict(found[0]) if len(found) == 1 else None

    def namespace_of(self, memory_id: str) -> Optional[str]:
        """The namespace of the one live record with this id (None if none or several)."""
        self.refresh()
        found = [ns for (ns, mid) in self._attrs if mid == memory_id]
        return found[0] if len(found) == 1 else None


__all__ = ["Catalog"]
