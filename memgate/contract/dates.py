"""One parser for the timestamps a caller writes (``observed_at``, ``applicability.valid_from`` /
``valid_to``, a supersession scope's window, and any later date field): a timezone-aware
``datetime`` or a one-line ``ValueError`` naming the field.

Accepted: a ``datetime`` (a naive one is read as UTC), or an ISO 8601 string, a date
(``2026-05-01``, midnight UTC) or a date-time with or without an offset (``2026-05-01T12:00:00``,
``...+02:00``, ``...Z``; without one, UTC). Anything else, ``"whenever"`` or ``"not-a-date"``
included, is refused on write: the Kleene exclusion compares these times, and a stored time
that is not one would drop its memory out of every search without a word.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

EXAMPLE = "2026-05-01T12:00:00+00:00"
MAX_SHOWN = 60  # characters of a refused value quoted in the error


def _refuse(value: object, field: str) -> ValueError:
    shown = repr(value)
    if len(shown) > MAX_SHOWN:
        shown = shown[:MAX_SHOWN] + "..."
    return ValueError(f"field {field!r} must be an ISO 8601 date or date-time (e.g. {EXAMPLE}), got {shown}")


def parse_timestamp(value: object, field: str) -> datetime:
    """``value`` as a timezone-aware datetime (module doc), else ``ValueError`` naming ``field``."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise _refuse(value, field)
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value)
    except ValueError:
        raise _refuse(value, field) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


__all__ = ["parse_timestamp"]
