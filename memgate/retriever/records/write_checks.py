"""What the store layer refuses in a record it is asked to write, whichever surface built it
(issue 46, item 3): the same rules ``memgate.Memory``, HTTP and MCP apply, so a caller of the
store itself cannot store what they refuse.

- ``text``: a non-empty string with a non-space character, within
  :data:`memgate.retriever.records.memory.MAX_TEXT_CHARS`;
- no lone surrogate (``"\\ud800"``) in the text, the markers or the metadata: it cannot be
  written as UTF-8, so the store would fail later with a ``UnicodeEncodeError`` naming nothing;
- the timestamps (``observed_at``, ``applicability.valid_from`` / ``valid_to``, a supersession
  scope's ``valid_from`` / ``valid_to``) parse (:func:`memgate.contract.dates.parse_timestamp`).

Every error is one line naming the record and the field. Records read back from a store (or
imported) are not checked here: a store written before these rules still opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memgate.contract.dates import parse_timestamp
from memgate.retriever.records.memory import Applicability, StoredMemory, check_text_size


def lone_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def check_unicode(value: Any, field: str) -> None:
    """Refuse a string (or a key or string leaf of a mapping / list) holding a lone surrogate."""
    if isinstance(value, str):
        if lone_surrogate(value):
            raise ValueError(f"field {field!r} holds a lone surrogate (not valid Unicode text)")
    elif isinstance(value, Mapping):
        for key, sub in value.items():
            check_unicode(key, field)
            check_unicode(sub, f"{field}.{key}" if isinstance(key, str) and not lone_surrogate(key) else field)
    elif isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            check_unicode(sub, f"{field}[{i}]")


def check_record_text(text: Any, where: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: field 'text' must be a non-empty string, got {text!r}")
    check_text_size(text, where)
    check_unicode(text, "text")


def check_times(observed_at: Any, applicability: Applicability | None,
                supersedes: Iterable[Any] = ()) -> None:
    if observed_at is not None:
        parse_timestamp(observed_at, "observed_at")
    if applicability is not None:
        for name in ("valid_from", "valid_to"):
            if getattr(applicability, name) is not None:
                parse_timestamp(getattr(applicability, name), f"applicability.{name}")
    for i, link in enumerate(supersedes):
        scope = getattr(link, "scope", None)
        for name in ("valid_from", "valid_to"):
            if scope is not None and getattr(scope, name) is not None:
                parse_timestamp(getattr(scope, name), f"supersedes[{i}].scope.{name}")


def check_written(memory: StoredMemory) -> None:
    """Refuse a new record the store must not hold (module doc)."""
    where = f"memory {memory.memory_id!r}"
    check_record_text(memory.text, where)
    try:
        check_unicode(list(memory.markers), "markers")
        check_unicode(dict(memory.attributes), "metadata")
        check_times(memory.observed_at, memory.applicability, memory.supersedes)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def check_changes(memory_id: str, changes: Mapping[str, Any]) -> None:
    """Refuse an update whose changed fields break the rules of :func:`check_written`."""
    where = f"memory {memory_id!r}"
    if "text" in changes:
        check_record_text(changes["text"], where)
    try:
        for name in ("markers", "attributes"):
            if name in changes:
                check_unicode(changes[name], "metadata" if name == "attributes" else name)
        applicability = changes.get("applicability")
        check_times(changes.get("observed_at"),
                    applicability if isinstance(applicability, Applicability) else None)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


__all__ = ["check_changes", "check_record_text", "check_times", "check_unicode", "check_written",
           "lone_surrogate"]
