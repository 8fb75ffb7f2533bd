"""Access control, a part of :class:`memgate.retriever.GatedRetriever`: a context's readable
namespaces under the trusted ACL, write checks, and the record an id names for a principal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, cast

from memgate.contract.records import QueryContext
from memgate.retriever.config import RetrieverConfig
from memgate.retriever.errors import AmbiguousMemoryError
from memgate.retriever.records.memory import StoredMemory
from memgate.retriever.stores.base import MemoryStore


class Access:
    """ACL checks over ``config.acl`` (a trusted ACL, or None: the caller is trusted) and ``store``."""

    def __init__(self, config: RetrieverConfig, store: MemoryStore) -> None:
        self.config, self.store = config, store

    def readable_namespaces(self, context: QueryContext) -> frozenset[str]:
        """The candidate support's namespaces for ``context`` (see ``RetrieverConfig.acl``)."""
        if not isinstance(context, QueryContext):
            raise TypeError(f"context must be a memgate.contract.records.QueryContext, got {type(context).__name__}")
        requested = context.namespaces
        acl = self._acl()
        if acl is None:
            return frozenset() if requested is None else frozenset(requested)
        if context.principal is None or context.principal not in acl:
            raise PermissionError(f"principal {context.principal!r} has no entry in the retriever's ACL")
        granted = acl[context.principal]
        if requested is None:
            return granted
        beyond = sorted(set(requested) - granted)
        if beyond:
            raise PermissionError(
                f"principal {context.principal!r} may not read namespace(s) {beyond}; "
                f"the ACL grants {sorted(granted)}")
        return frozenset(requested)

    def _acl(self) -> Optional[Mapping[str, frozenset[str]]]:
        """``config.acl``: principal -> the namespaces it may read (``RetrieverConfig`` holds them as
        frozensets), or None."""
        return cast(Optional[Mapping[str, frozenset[str]]], self.config.acl)

    def check_write(self, principal: Optional[str], namespace: str) -> None:
        acl = self._acl()
        if acl is None:
            return
        if principal is None or principal not in acl or namespace not in acl[principal]:
            raise PermissionError(
                f"principal {principal!r} may not write namespace {namespace!r} under the ACL")

    def record_for(self, principal: Optional[str], memory_id: str,
                             namespace: Optional[str] = None, prefer: Optional[str] = None) -> StoredMemory:
        """The record ``memory_id`` names for ``principal``: in ``namespace`` when given, else
        in the one namespace of the principal's ACL that holds it (``prefer`` wins a tie).
        Under an ACL an unknown id and another tenant's id get the same answer: ids are scoped
        per namespace and nothing outside the principal's namespaces is looked up."""
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(f"namespace must be a non-empty string or None, got {namespace!r}")
        acl = self._acl()
        if acl is None:  # the caller is trusted
            if namespace is not None:
                record = self.store.get(memory_id, namespace=namespace)
            else:
                record = self.store.get(memory_id, namespace=prefer) if prefer else None
                record = record or self.store.get(memory_id)  # (an id in several: ambiguous)
            if record is None:
                raise KeyError(f"no memory with id {memory_id!r}")
            return record
        refused = PermissionError(
            f"principal {principal!r} cannot use memory {memory_id!r}: unknown id or a "
            "namespace outside its ACL")
        if principal is None or principal not in acl or (namespace is not None and namespace not in acl[principal]):
            raise refused
        scope = [namespace] if namespace is not None else sorted(acl[principal])
        found = [r for r in (self.store.get(memory_id, namespace=ns) for ns in scope) if r is not None]
        if len(found) > 1 and any(r.namespace == prefer for r in found):
            found = [r for r in found if r.namespace == prefer]
        if len(found) > 1:
            raise AmbiguousMemoryError(
                f"memory id {memory_id!r} names records in several of principal {principal!r}'s "
                "namespaces: pass namespace=")
        if not found:
            raise refused
        return found[0]


__all__ = ["Access"]
