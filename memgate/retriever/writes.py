"""The write path: embed and store memories, compare-and-set updates, corrections,
retirement, review marks and forget requests, each refreshing the query index (a part of
:class:`memgate.retriever.GatedRetriever`).

Every write is checked against the suppression list *before* anything is embedded
(``store.check_suppressed`` / ``store.check_forget_directive``), so a refused write never puts
a vector of forgotten content into the encoder's disk cache; the store checks again inside its
transaction, and a write it refuses there has its text's cached embedding removed. Record ids
follow :func:`memgate.contract.ids.check_id`."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Optional

from memgate.contract.ids import check_id, derived_id
from memgate.retriever.access import Access
from memgate.retriever.errors import RepeatedDetailError, SuppressedContentError
from memgate.retriever.query.actions import AllowedActions
from memgate.retriever.query.embed import Embedder, check_text
from memgate.retriever.query.index import QueryIndex
from memgate.retriever.records.memory import UPDATABLE_FIELDS, StoredMemory, Supersedes
from memgate.retriever.stores.base import MemoryStore

DEFAULT_DIRECTIVE = "The user asked me to forget a detail they had shared; do not recall, repeat or re-store it."


class WritePath:
    """Writes through ``store`` after the checks of ``access``: texts embedded by ``embedder``
    (after the suppression pre-check), action attributes checked by ``actions``, and ``index``
    refreshed after each write."""

    def __init__(self, *, store: MemoryStore, encoder_identity: dict[str, Any], access: Access,
                 embedder: Embedder, actions: AllowedActions, index: QueryIndex) -> None:
        self.store, self.encoder_identity, self.access = store, encoder_identity, access
        self.embedder, self.actions, self.index = embedder, actions, index

    def add(self, text: str, *, namespace: str, memory_id: Optional[str] = None,
            principal: Optional[str] = None, supersedes: Iterable[Supersedes | str] = (),
            allow_relearn: bool = False, **fields: Any) -> StoredMemory:
        """Embed and store a memory (fields as in :class:`StoredMemory`); returns the stored record.

        ``memory_id`` is scoped to ``namespace`` (default: a random id). A text that repeats
        content forgotten in ``namespace`` is refused unless ``allow_relearn`` (the user's
        renewed consent, audited as ``relearned``)."""
        if memory_id is not None:
            check_id(memory_id)
        self.access.check_write(principal, namespace)
        links = tuple(s if isinstance(s, Supersedes) else Supersedes(s) for s in supersedes)
        for link in links:  # supersession stays inside the namespace
            self.access.record_for(principal, link.memory_id, namespace)
        parents = {}
        for source in tuple(fields.get("derived_from", ())):
            parents[source] = self.access.record_for(principal, source, prefer=namespace).namespace
        memory = StoredMemory(memory_id=memory_id or f"m-{uuid.uuid4().hex[:12]}", namespace=namespace,
                        text=text, principal=principal, supersedes=links, **fields)
        self.actions.check_fields(memory)
        check_text(text)
        self._precheck(memory, allow_relearn)
        with self._uncache_if_refused([text]):
            stored = self.store.add(memory, self.embedder.embed(text), encoder=self.encoder_identity,
                                    allow_relearn=allow_relearn, parent_namespaces=parents)
        self.index.refresh()
        return stored

    def add_many(self, texts: Iterable[str], *, namespace: str, principal: Optional[str] = None,
                 fields: Optional[Iterable[Mapping[str, Any]]] = None,
                 allow_relearn: bool = False) -> list[StoredMemory]:
        """Embed (one batch) and store several memories of one namespace in one write, all or
        none; ``fields[i]`` are text i's record fields (``memory_id``, ``supersedes``, ... as in
        :meth:`add`, whose rules apply to each)."""
        self.access.check_write(principal, namespace)
        texts = list(texts)
        per = [dict(f) for f in fields] if fields is not None else [{} for _ in texts]
        if len(per) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(per)} field sets")
        memories = []
        parents: dict[str, str] = {}
        for text, f in zip(texts, per):
            check_text(text)
            links = tuple(s if isinstance(s, Supersedes) else Supersedes(s) for s in f.pop("supersedes", ()))
            for link in links:  # supersession stays inside the namespace
                self.access.record_for(principal, link.memory_id, namespace)
            for source in tuple(f.get("derived_from", ())):
                parents[source] = self.access.record_for(principal, source, prefer=namespace).namespace
            memory_id = f.pop("memory_id", None)
            if memory_id is not None:
                check_id(memory_id)
            memory = StoredMemory(memory_id=memory_id or f"m-{uuid.uuid4().hex[:12]}", namespace=namespace,
                            text=text, principal=principal, supersedes=links, **f)
            self.actions.check_fields(memory)
            memories.append(memory)
        if not memories:
            return []
        for memory in memories:
            self._precheck(memory, allow_relearn)
        with self._uncache_if_refused(texts):
            vectors = self.embedder.embed_many(texts)
            stored = self.store.add_many(memories, vectors, encoder=self.encoder_identity,
                                         allow_relearn=allow_relearn, parent_namespaces=parents)
        self.index.refresh()
        return stored

    def _precheck(self, memory: StoredMemory, allow_relearn: bool, previous: Optional[StoredMemory] = None) -> None:
        """Refuse forgotten content before it is embedded (a consented relearn goes on to the
        store, which lifts the entries it matches)."""
        check = getattr(self.store, "check_suppressed", None)
        if not allow_relearn and check is not None:
            check(memory, previous=previous)

    @contextmanager
    def _uncache_if_refused(self, texts: Iterable[str]) -> Iterator[None]:
        """A write the store refuses for forgotten content (a race with a forget in another
        process, past the pre-check) leaves no cached embedding of its texts behind."""
        try:
            yield
        except (SuppressedContentError, RepeatedDetailError):
            for text in texts:
                self.embedder.purge_cache(text)
            raise

    def update(self, memory_id: str, expected_revision: int, *, principal: Optional[str] = None,
               namespace: Optional[str] = None, allow_relearn: bool = False,
               **changes: Any) -> StoredMemory:
        """Compare-and-set update (see :meth:`EmbeddedStore.update`); a new text is re-embedded.
        ``namespace`` picks the record when the id is used in several of the principal's."""
        record = self.access.record_for(principal, memory_id, namespace)
        if "text" in changes:
            check_text(changes["text"])
        self._precheck(self._proposed(record, changes), allow_relearn, previous=record)
        texts = [changes["text"]] if "text" in changes else []
        with self._uncache_if_refused(texts):
            vector = self.embedder.embed(changes["text"]) if "text" in changes else None
            updated = self.store.update(memory_id, expected_revision, vector=vector,
                                        encoder=self.encoder_identity if vector is not None else None,
                                        principal=principal, namespace=record.namespace,
                                        allow_relearn=allow_relearn, **changes)
        self.index.refresh()
        return updated

    @staticmethod
    def _proposed(record: StoredMemory, changes: Mapping[str, Any]) -> StoredMemory:
        """The record as the update would write it (fields the store would refuse are left to
        the store, which names them)."""
        try:
            return record.replace(**{k: v for k, v in changes.items() if k in UPDATABLE_FIELDS})
        except (TypeError, ValueError):
            return record

    def correct(self, memory_id: str, expected_revision: int, text: str, *,
                principal: Optional[str] = None, namespace: Optional[str] = None,
                allow_relearn: bool = False, **changes: Any) -> tuple[StoredMemory, list[str]]:
        """Correct a record's content; returns it and the ids now flagged for review."""
        record = self.access.record_for(principal, memory_id, namespace)
        check_text(text)
        self._precheck(self._proposed(record, {**changes, "text": text}), allow_relearn, previous=record)
        with self._uncache_if_refused([text]):
            out = self.store.correct(memory_id, expected_revision, text, self.embedder.embed(text),
                                     encoder=self.encoder_identity, principal=principal,
                                     namespace=record.namespace, allow_relearn=allow_relearn, **changes)
        self.index.refresh()
        return out

    def retire(self, memory_id: str, expected_revision: int, *,
               principal: Optional[str] = None,
               namespace: Optional[str] = None) -> tuple[StoredMemory, list[str]]:
        record = self.access.record_for(principal, memory_id, namespace)
        out = self.store.retire(memory_id, expected_revision, principal=principal,
                                namespace=record.namespace)
        self.index.refresh()
        return out

    def mark_reviewed(self, memory_id: str, expected_revision: int, *,
                      principal: Optional[str] = None, namespace: Optional[str] = None) -> StoredMemory:
        record = self.access.record_for(principal, memory_id, namespace)
        out = self.store.mark_reviewed(memory_id, expected_revision, principal=principal,
                                       namespace=record.namespace)
        self.index.refresh()
        return out

    def forget(self, memory_id: str, *, principal: Optional[str] = None,
               directive_text: str = DEFAULT_DIRECTIVE, directive_id: Optional[str] = None,
               expected_revision: Optional[int] = None, namespace: Optional[str] = None,
               **directive_fields: Any) -> StoredMemory:
        """Forget a detail for good and keep the directive as a memory; returns the directive.

        The store erases the record and every record derived from it (text, markers, vector)
        and keeps keyed hashes of the erased content (the suppression list: a write repeating
        it is refused, an answer repeating it is still flagged by :meth:`report_answer`). This
        index drops their entries and precomputed gate parts, and their cached embeddings are
        removed from the encoder's disk cache (query embeddings never enter it). The directive
        text must not repeat the detail.
        """
        if directive_id is not None:
            check_id(directive_id, "directive_id")
        record = self.access.record_for(principal, memory_id, namespace)
        directive_fields.setdefault("policy_tags", record.policy_tags)
        directive_fields.setdefault("source_type", "correction")
        directive_fields.setdefault("epistemic_status", "verified")
        directive_fields.setdefault("evidence_strength", 1.0)
        directive = StoredMemory(
            memory_id=directive_id or derived_id(memory_id, "-forget"), namespace=record.namespace,
            text=directive_text, principal=principal, **directive_fields)
        self.actions.check_fields(directive)
        check_text(directive_text, "directive_text")
        precheck = getattr(self.store, "check_forget_directive", None)
        if precheck is not None:  # a directive repeating the detail is refused before it is embedded
            precheck(memory_id, directive)
        with self._uncache_if_refused([directive_text]):
            stored = self.store.forget(memory_id, directive, self.embedder.embed(directive_text),
                                       encoder=self.encoder_identity, expected_revision=expected_revision,
                                       on_erased=lambda erased: self.embedder.purge_cache(erased.text))
        self.index.refresh()
        return stored

    def erase(self, keys: Iterable[tuple[str, str]], *, event: str, principal: Optional[str] = None,
              lift_suppression: bool = False) -> list[StoredMemory]:
        """Erase records without a directive or suppression (expiry, reset:
        :meth:`memgate.retriever.records.rules.Records.erase`); their cached embeddings go too."""
        for namespace, _ in keys:
            self.access.check_write(principal, namespace)
        erased = self.store.erase(keys, event=event, principal=principal,
                                  lift_suppression=lift_suppression,
                                  on_erased=lambda record: self.embedder.purge_cache(record.text))
        self.index.refresh()
        return list(erased)


__all__ = ["DEFAULT_DIRECTIVE", "WritePath"]
