"""One parser for the timestamps callers pass (expiry dates, query times)."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_timestamp(value: object, field: str) -> datetime:
    """``value`` (a ``datetime`` or an ISO 8601 string; a date alone is midnight) as a tz-aware
    datetime (naive: UTC), else a one-line ``ValueError`` naming ``field``."""
    parsed = None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            parsed = None
    if parsed is None:
        raise ValueError(f"field {field!r} must be a datetime or an ISO 8601 date or date-time "
                         f"(e.g. 2026-05-01T12:00:00+00:00), got {value!r}")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


__all__ = ["parse_timestamp"]
