"""The audit trail: an append-only JSONL log of what was stored, retrieved, exposed and disclosed
(:mod:`memgate.retriever.audit.log`; never a text), and one memory's trail through it
(:mod:`memgate.retriever.audit.trails`)."""

from memgate.retriever.audit.log import (
    AUDIT_FORMAT,
    EVENTS,
    FORBIDDEN_KEYS,
    QUERY_EVENTS,
    STORE_EVENTS,
    AuditError,
    AuditLog,
    LogCheck,
    iter_events,
    make_event,
    utc_now,
    verify_log,
)
from memgate.retriever.audit.trails import TrailStep, format_trail, operator_trail, trail

__all__ = ["AUDIT_FORMAT", "EVENTS", "FORBIDDEN_KEYS", "QUERY_EVENTS", "STORE_EVENTS", "AuditError",
           "AuditLog", "LogCheck", "TrailStep", "format_trail", "iter_events", "make_event",
           "operator_trail", "trail", "utc_now", "verify_log"]
