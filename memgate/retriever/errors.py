"""Every error the stores and the retriever raise (one module, so that a caller catches them by
one import): ``StoreError`` and its kinds. Some also subclass the builtin a caller would reach for
(``UnknownMemoryError`` is a ``KeyError``, ``EncoderMismatchError`` a ``ValueError``, ...), so they
keep two bases."""

from __future__ import annotations

import errno
import sqlite3
from typing import Optional


class StoreError(RuntimeError):
    """Base class for memory-store errors."""


class StaleRevisionError(StoreError):
    """A compare-and-set write was based on an older revision; nothing was applied."""

    def __init__(self, memory_id: str, expected: int, current: Optional[int]):
        self.memory_id, self.expected, self.current = memory_id, expected, current
        super().__init__(
            f"memory {memory_id!r}: write based on revision {expected} rejected, the stored "
            f"revision is {current}; re-read the record and retry"
        )


class EncoderMismatchError(StoreError, ValueError):
    """A vector, store, query or gate comes from a different encoder than the store's."""


class UnknownMemoryError(StoreError, KeyError):
    """No record with that id."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class ForgottenMemoryError(StoreError):
    """The record was forgotten; its detail is gone and it cannot be changed."""


class SuppressedContentError(ForgottenMemoryError, ValueError):
    """A write repeats content forgotten in its namespace (its text or a marker); nothing was
    applied. ``allow_relearn=True`` stores it with the user's renewed consent (audited)."""


class RepeatedDetailError(ValueError):
    """A forget directive repeats the content it forgets (its text or a marker); nothing was
    applied. Describe what was forgotten without the detail itself."""


class AmbiguousMemoryError(StoreError, ValueError):
    """Ids are scoped per namespace: this id names records in several namespaces, so the call
    must say which (``namespace=``)."""


class StoreFullError(StoreError):
    """The disk holding the store is full (ENOSPC, SQLite's "database or disk is full"): the
    write was not applied (or, after its commit, its audit events wait in the store's outbox);
    the handle stays usable once space is freed."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full: ENOSPC / EDQUOT from the OS, or SQLite's
    ``database or disk is full`` (SQLITE_FULL)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "database or disk is full" in str(exc)


class DamagedStoreError(StoreError):
    """A store file does not hold what its records say (a truncated vector file, a vector that
    does not match its checksum): refused rather than returned. The message names the file and
    the fix (``memgate store verify``, restore from an export)."""


__all__ = [
    "AmbiguousMemoryError",
    "DamagedStoreError",
    "EncoderMismatchError",
    "ForgottenMemoryError",
    "RepeatedDetailError",
    "StaleRevisionError",
    "StoreError",
    "StoreFullError",
    "SuppressedContentError",
    "UnknownMemoryError",
    "is_disk_full",
]
