"""Checks of what a caller hands ``memgate.Memory`` (and so HTTP and MCP), each failing with one
line that names the field (issue 46, item 3): a ``user_id`` or text with a lone surrogate,
metadata that is not a mapping, an ``add_many`` item that is neither a text nor a mapping (its
index named), a blank text, a reserved metadata key, a timestamp that does not parse.

The store layer refuses the same records again (:mod:`memgate.retriever.records.write_checks`);
these checks run first so the error names the item (``items[2]``) and the caller's field names
(``metadata``, not the record's ``attributes``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Optional

from memgate.retriever.records.memory import Applicability
from memgate.retriever.records.write_checks import check_times, check_unicode, lone_surrogate


def prefix(index: Optional[int]) -> str:
    """How an error names the call or the item: ``add():`` or ``items[2]:``."""
    return "add():" if index is None else f"items[{index}]:"


def check_no_surrogate(value: str, field: str) -> None:
    if lone_surrogate(value):
        raise ValueError(f"field {field!r} holds a lone surrogate (not valid Unicode text)")


def check_item_shape(given: Any, index: Optional[int]) -> dict[str, Any]:
    """One item of ``add`` / ``add_many`` as a mapping: a text, or a mapping with ``text``."""
    if isinstance(given, str):
        return {"text": given}
    if not isinstance(given, Mapping):
        name = "text" if index is None else f"items[{index}]"
        raise ValueError(f"{prefix(index)} field {name!r} must be a text or a mapping with 'text', "
                         f"got {type(given).__name__}")
    return dict(given)


def check_metadata(value: Any, index: Optional[int], call: str = "") -> dict[str, Any]:
    """``metadata`` as a dict (None -> {}); anything but a mapping is refused (``call``: how the
    error names the call, default :func:`prefix`)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{call or prefix(index)} field 'metadata' must be a JSON object (a mapping), "
                         f"got {type(value).__name__}")
    return dict(value)


def check_item_fields(item: Mapping[str, Any], index: Optional[int]) -> None:
    """The text, the metadata's strings and the timestamps of one item (``attributes`` is the
    record's name for ``metadata``)."""
    where = prefix(index)
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where} field 'text' must be a non-empty string with a non-space "
                         f"character, got {text!r}")
    try:
        check_unicode(text, "text")
        check_unicode(dict(item.get("attributes") or {}), "metadata")
        check_unicode(list(item.get("markers") or ()), "markers")
        raw = item.get("applicability")
        applicability = None
        if isinstance(raw, Applicability):
            applicability = raw
        elif isinstance(raw, Mapping):
            applicability = Applicability(valid_from=raw.get("valid_from"), valid_to=raw.get("valid_to"))
        check_times(item.get("observed_at"), applicability)
    except ValueError as exc:
        raise ValueError(f"{where} {exc}") from None


def check_time(value: Any, field: str = "time") -> str:
    """An ISO 8601 date or date-time (``2026-05-01``, ``2026-05-01T12:00:00+00:00``), else a
    ``ValueError`` naming ``field``: the Kleene exclusion compares times, so a time that is not
    one must not reach it."""
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
            return value
        except ValueError:
            pass
    raise ValueError(f"field {field!r} must be an ISO 8601 date or date-time "
                     f"(e.g. 2026-05-01T12:00:00+00:00), got {value!r}")


def check_threshold(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"field 'threshold' must be a finite number (a minimum score), got {value!r}")
    return float(value)


__all__ = ["check_item_fields", "check_item_shape", "check_metadata", "check_no_surrogate", "check_threshold",
           "check_time", "prefix"]
