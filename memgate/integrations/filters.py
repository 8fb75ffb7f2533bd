"""Metadata filters: ``{"key": value}`` or ``{"key": {"op": value}}`` over a record's free-form
metadata (``Memory.attributes``), all conditions of one object joined by AND; ``{"AND": [...]}``,
``{"OR": [...]}`` and ``{"NOT": [...]}`` (lists of filter objects, nested freely, as Mem0 writes
them) combine them: ``{"OR": [{"topic": "food"}, {"AND": [{"topic": "travel"}, {"year":
{"gte": 2025}}]}]}``. ``NOT`` holds when none of its filters does.

============  ======================================================================
``value``     equality; when the stored value is a list, membership
``eq`` ``ne`` equal / not equal (``ne`` also matches a missing key)
``in`` ``nin`` the stored value (or one of its list items) is / is not in a list
``gt`` ``gte`` ``lt`` ``lte``   ordered comparison of two numbers or two strings
``exists``    the key is present (``True``) or absent (``False``)
``contains``  the stored string contains the value (a substring), or the stored list holds it
``icontains`` ``contains`` with strings compared case-insensitively
============  ======================================================================

Operators may be written with a leading ``$`` (``$gte``), as LangGraph's stores do. Keys are
top-level metadata keys. A malformed filter raises ``ValueError`` naming the key; ``AND`` /
``OR`` / ``NOT`` nest at most :data:`MAX_FILTER_DEPTH` levels (the metadata's own cap), deeper
is one line naming ``filters``, never a ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

from memgate.retriever.records.memory import MAX_ATTRIBUTES_DEPTH

OPS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists", "contains", "icontains")
LOGICAL = ("AND", "OR", "NOT")
_MISSING = object()
MAX_FILTER_DEPTH = MAX_ATTRIBUTES_DEPTH  # logical operators nested in one filter


def _op(name: str, key: str) -> str:
    op = name[1:] if name.startswith("$") else name
    if op not in OPS:
        raise ValueError(f"filters[{key!r}]: unknown operator {name!r}; known: {OPS}")
    return op


def check_filters(filters: Optional[Mapping[str, Any]], where: str = "filters", depth: int = 0) -> dict[str, Any]:
    """A validated copy (operators normalised); ``None`` -> ``{}``."""
    if filters is None:
        return {}
    if depth > MAX_FILTER_DEPTH:
        raise ValueError(f"field 'filters' nests AND / OR / NOT deeper than {MAX_FILTER_DEPTH} levels "
                         "(MAX_FILTER_DEPTH)")
    if not isinstance(filters, Mapping):
        raise ValueError(f"{where} must be a JSON object, got {type(filters).__name__}")
    out: dict[str, Any] = {}
    for key, cond in filters.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{where}: keys must be non-empty strings, got {key!r}")
        if key in LOGICAL:
            if not isinstance(cond, (list, tuple)) or not cond:
                raise ValueError(f"{where}[{key!r}] must be a non-empty list of filter objects, got {cond!r}")
            out[key] = [check_filters(sub, f"{where}[{key!r}][{i}]", depth + 1) or {} for i, sub in enumerate(cond)]
            continue
        if isinstance(cond, Mapping):
            if not cond:
                raise ValueError(f"filters[{key!r}]: an empty condition")
            norm = {}
            for name, value in cond.items():
                op = _op(str(name), key)
                if op in ("in", "nin") and not isinstance(value, (list, tuple)):
                    raise ValueError(f"filters[{key!r}].{name} must be a list, got {value!r}")
                if op == "exists" and type(value) is not bool:
                    raise ValueError(f"filters[{key!r}].{name} must be true or false, got {value!r}")
                if op in ("contains", "icontains") and not isinstance(value, (str, int, float, bool)):
                    raise ValueError(f"filters[{key!r}].{name} must be a JSON scalar, got {value!r}")
                if op in ("gt", "gte", "lt", "lte") and (
                        isinstance(value, bool) or not isinstance(value, (int, float, str))):
                    raise ValueError(f"filters[{key!r}].{name} must be a number or a string, got {value!r}")
                norm[op] = list(value) if op in ("in", "nin") else value
            out[key] = norm
        elif cond is None or isinstance(cond, (str, int, float, bool)):
            out[key] = {"eq": cond}
        else:
            raise ValueError(f"filters[{key!r}] must be a JSON scalar or an operator object, got {cond!r}")
    return out


def _items(stored: Any) -> list[Any]:
    return list(stored) if isinstance(stored, list) else [stored]


def _ordered(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, numbers) and isinstance(b, numbers)) or (isinstance(a, str) and isinstance(b, str))


def _holds(op: str, stored: Any, value: Any) -> bool:
    if op == "exists":
        return (stored is not _MISSING) is value
    if stored is _MISSING:
        return op in ("ne", "nin")
    if op in ("contains", "icontains"):
        fold: Callable[[Any], Any] = (lambda x: x.casefold() if isinstance(x, str) else x) if op == "icontains" \
            else (lambda x: x)
        if isinstance(stored, str):
            return isinstance(value, str) and fold(value) in fold(stored)
        return isinstance(stored, list) and fold(value) in [fold(i) for i in stored]
    items = _items(stored)
    if op == "eq":
        return stored == value or value in items
    if op == "ne":
        return not (stored == value or value in items)
    if op == "in":
        return any(i in value for i in items)
    if op == "nin":
        return not any(i in value for i in items)
    if not _ordered(stored, value):
        return False
    holds: bool = {"gt": stored > value, "gte": stored >= value, "lt": stored < value,
                   "lte": stored <= value}[op]
    return holds


def matches(attributes: Mapping[str, Any], filters: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether ``attributes`` satisfies every condition of a :func:`check_filters` result."""
    for key, cond in filters.items():
        if key == "AND" and isinstance(cond, list):
            if not all(matches(attributes, sub) for sub in cond):
                return False
            continue
        if key == "OR" and isinstance(cond, list):
            if not any(matches(attributes, sub) for sub in cond):
                return False
            continue
        if key == "NOT" and isinstance(cond, list):
            if any(matches(attributes, sub) for sub in cond):
                return False
            continue
        stored = attributes.get(key, _MISSING)
        if not all(_holds(op, stored, value) for op, value in cond.items()):
            return False
    return True


__all__ = ["LOGICAL", "MAX_FILTER_DEPTH", "OPS", "check_filters", "matches"]
