"""Expiry of agent-surface memories (``Memory.add(..., expiration_date=...)``, the LangGraph
store's ``ttl``): the record's metadata key ``expiration_date`` (an ISO 8601 UTC time, reserved).

An expired memory is never returned (every read compares the expiry with its query time) and is
erased through the store's erasure path (:meth:`memgate.retriever.records.rules.Records.erase`,
audit event ``expired``) by ``memgate store sweep`` or lazily as reads meet it. Expiry is not a
forget: no directive, no suppression entry, so the text may be added again. It is not
``applicability.valid_to`` either (a lifecycle fact kept for history, read by the Kleene
exclusion): an expired memory is gone.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from memgate.contract.dates import parse_timestamp

EXPIRES_KEY = "expiration_date"


def stamp(moment: datetime) -> str:
    """The one string form (UTC, microseconds), so that stamps compare as strings."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def check_expiration(value: Any, field: str = "expiration_date") -> Optional[str]:
    """The stamp of an expiry date given as a datetime or ISO 8601 text (None: never expires)."""
    return None if value is None else stamp(parse_timestamp(value, field))


def check_ttl(value: Any, field: str = "ttl") -> Optional[float]:
    """A time to live in minutes (LangGraph's unit): a finite number > 0, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ValueError(f"field {field!r} must be a finite number of minutes > 0 or None, got {value!r}")
    return float(value)


def expiry_after(minutes: float, now: Optional[datetime] = None) -> str:
    return stamp((now or datetime.now(timezone.utc)) + timedelta(minutes=minutes))


def now_stamp() -> str:
    return stamp(datetime.now(timezone.utc))


def query_stamp(time: Optional[str]) -> str:
    """The stamp of a query time (``None``: now)."""
    return now_stamp() if time is None else stamp(parse_timestamp(time, "time"))


def is_expired(attributes: Any, at: str) -> bool:
    expires = attributes.get(EXPIRES_KEY) if attributes else None
    return isinstance(expires, str) and expires <= at


__all__ = ["EXPIRES_KEY", "check_expiration", "check_ttl", "expiry_after", "is_expired", "now_stamp",
           "query_stamp", "stamp"]
