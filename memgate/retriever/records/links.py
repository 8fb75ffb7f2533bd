"""How records name each other, over a back-end's primitives: compare-and-set on ``revision``,
the namespace a by-id call means (ids are scoped per namespace), and ``derived_from`` links
(a parent's namespace, every record derived from a source)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from memgate.retriever.errors import (
    AmbiguousMemoryError,
    ForgottenMemoryError,
    StaleRevisionError,
    UnknownMemoryError,
)
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.records.primitives import Key, StoreBackend


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


def resolve_namespace(backend: StoreBackend, memory_id: str, namespace: Optional[str]) -> str:
    """The namespace of ``memory_id``: ``namespace`` when given, else the one namespace holding
    the id (``UnknownMemoryError`` / :class:`AmbiguousMemoryError`)."""
    if not isinstance(memory_id, str) or not memory_id:
        raise ValueError(f"memory_id must be a non-empty string, got {memory_id!r}")
    check_namespace_arg(namespace)
    if namespace is not None:
        return namespace
    found = backend.namespaces_of(memory_id)
    if not found:
        raise UnknownMemoryError(f"no memory with id {memory_id!r}")
    if len(found) > 1:
        raise AmbiguousMemoryError(
            f"memory id {memory_id!r} names records in several namespaces (ids are scoped per "
            "namespace): pass namespace=")
    return found[0]


def parent_key(backend: StoreBackend, parent: str, own_namespace: str, hints: Mapping[str, str]) -> Key:
    """The ``(namespace, id)`` a ``derived_from`` id names: the caller's hint, else the record's
    own namespace if it holds the id, else the one namespace that does."""
    if parent in hints:
        return hints[parent], parent
    if backend.exists(parent, own_namespace):
        return own_namespace, parent
    return resolve_namespace(backend, parent, None), parent


def descendants(backend: StoreBackend, source: Key) -> list[tuple[Key, Key]]:
    """``(namespace, id)`` of every record derived (transitively) from ``source`` with the
    parent it was reached through, breadth first."""
    out: list[tuple[Key, Key]] = []
    seen, frontier = {source}, [source]
    while frontier:
        parent = frontier.pop(0)
        for child in backend.children(*parent):
            if child in seen:
                continue
            seen.add(child)
            frontier.append(child)
            out.append((child, parent))
    return out


__all__ = ["check_cas", "check_namespace_arg", "descendants", "parent_key", "resolve_namespace"]
