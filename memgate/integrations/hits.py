"""One search hit and one search's gate summary as every agent surface returns them (``Memory``,
HTTP, MCP, ``memgate store search``; the LangGraph store carries what ``SearchItem`` can): the one
place that builds the per-hit dict and attaches the gate's keys (issue 44 item 7).

Per hit: the record (:func:`memgate.integrations.memory.record_view`), the ranking fields and
``gate_risk``, the learned gate's calibrated risk ``sigmoid(r)`` of the memory for this query
(a float in (0, 1)), ``None`` when no gate ran, when the gate's score form has no risk head
(``mask``: the released ``memgate-minilm-l6``) or when the hit was not re-scored (below the
rerank depth). It is not ``risk``: that is the request's stakes (a ``search`` parameter) and the
record's own field.

Per search: ``dropped``, how many re-scored candidates the gate dropped (its drop rule,
:mod:`memgate.retriever.query.gate`), and ``dropped_ids``, their ids, best cosine first, given
only where the caller may read those memories (a ``Memory`` caller may: they are its user's own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from memgate.retriever.query.results import RetrievalResult, RetrievedItem


def hit_view(item: RetrievedItem, view: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """A returned item as the surfaces show it: ``view(record)`` (the record's fields) plus the
    ranking fields of this query, ``gate_risk`` included."""
    hit = view(item.memory)
    hit.update(lifecycle=item.lifecycle, score=item.score, cosine=item.cosine,
               gate_score=item.gate_score, gate_risk=item.gate_risk, action=item.action,
               action_reasons=list(item.action_binding), unresolved=list(item.unresolved),
               needs_review=item.needs_review)
    return hit


def drop_summary(result: RetrievalResult, readable: Optional[Callable[[str], bool]] = None) -> dict[str, Any]:
    """``{"dropped": count, "dropped_ids": [...]}`` of one retrieval; ``readable(namespace)``
    says which dropped memories' ids the caller may see (None: none, only the count)."""
    out: dict[str, Any] = {"dropped": len(result.dropped)}
    if readable is not None:
        out["dropped_ids"] = [d.memory_id for d in result.dropped
                              if d.namespace is None or readable(d.namespace)]
    return out


__all__ = ["drop_summary", "hit_view"]
