"""What the agent surfaces return: a search's and a listing's answer shapes (``{"results": [...]}``
with the search's keys also as attributes, the list shapes kept one release) and one stored
record as a JSON-ready memory (:func:`record_view`)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any, Optional

from memgate.integrations.expiry import EXPIRES_KEY
from memgate.integrations.scoping import SCOPE_KEYS, scope_of_namespace


class _Results(dict[str, Any]):
    """A dict whose keys are also attributes; indexing it with a number still reaches
    ``results``, with a DeprecationWarning, for one release."""

    call = "Memory.search"

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, slice)):
            warnings.warn(f"{self.call} returns {{'results': [...]}}: read found['results'][i] "
                          "(indexing the result itself goes in the next release)",
                          DeprecationWarning, stacklevel=2)
            return self["results"][key]
        return super().__getitem__(key)


class SearchResults(_Results):
    """One search: ``{"results": [hit, ...], "forgotten_relevant": bool, "query_id": str,
    "route": str, "excluded": int, "dropped": int, "dropped_ids": [str]}`` (hits best first,
    each with ``gate_risk``: :mod:`memgate.integrations.hits`; ``excluded``: memories left out by
    the metadata rules; ``forgotten_relevant``: a forget directive would have ranked within the
    limit; ``dropped`` / ``dropped_ids``: the user's memories the learned gate dropped). The keys are also attributes (``.results``, ``.query_id``, ...). Indexing it with a
    number (``hits[0]``, the shape of 0.1) still reaches ``results``, with a DeprecationWarning,
    for one release."""

    def __init__(self, hits: Iterable[dict[str, Any]], query_id: str, excluded: int, route: str,
                 forgotten_relevant: bool = False, dropped: int = 0,
                 dropped_ids: Iterable[str] = ()):
        super().__init__(results=list(hits), forgotten_relevant=bool(forgotten_relevant),
                         query_id=query_id, route=route, excluded=int(excluded),
                         dropped=int(dropped), dropped_ids=list(dropped_ids))


class ListResults(_Results):
    """``get_all``'s answer (output format v1.2): ``{"results": [memory, ...]}``, oldest first."""

    call = "Memory.get_all"

    def __init__(self, items: Iterable[dict[str, Any]]):
        super().__init__(results=list(items))


class LegacySearchResults(list[Any]):
    """The shape of 0.1 (``output_format="v1.0"``, one release): a list of hits with
    ``query_id``, ``excluded``, ``route``, ``forgotten_relevant``, ``dropped`` and
    ``dropped_ids`` attributes."""

    def __init__(self, found: SearchResults):
        super().__init__(found["results"])
        self.query_id, self.excluded, self.route = found["query_id"], found["excluded"], found["route"]
        self.forgotten_relevant = found["forgotten_relevant"]
        self.dropped, self.dropped_ids = found["dropped"], found["dropped_ids"]


def results_of(found: Any) -> list[dict[str, Any]]:
    """The list of memories of a ``search`` / ``get_all`` answer, whatever the output format."""
    return list(found["results"]) if isinstance(found, dict) else list(found)


def record_view(record: Any, user_id: Optional[str] = None) -> dict[str, Any]:
    """A stored record as the agent surfaces return it (JSON-ready); ``agent_id`` / ``run_id``
    and ``expiration_date`` are fields of their own, not metadata; ``user_id`` is None for an
    agent's or a run's memory."""
    metadata = dict(record.attributes)
    scope = {k: metadata.pop(k, None) for k in SCOPE_KEYS}
    expires = metadata.pop(EXPIRES_KEY, None)
    if user_id is None:
        owner = scope_of_namespace(record.namespace or "")
        user_id = owner.user_id if owner is not None else record.principal
    return {
        "id": record.memory_id,
        "memory": record.text,
        "user_id": user_id,
        **scope,
        "metadata": metadata,
        "kind": record.kind or "memory",
        "provenance": record.provenance,
        "lifecycle": record.lifecycle_state,
        "policy_tags": None if record.policy_tags is None else list(record.policy_tags),
        "revision": record.revision,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "expiration_date": expires,
        "needs_review": record.needs_review,
    }


__all__ = ["LegacySearchResults", "ListResults", "SearchResults", "record_view", "results_of"]
