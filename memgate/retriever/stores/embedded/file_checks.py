"""The embedded store's two files must come together (issue 46, item 4: R10, R11).

A store directory holds ``store.sqlite`` (the records) and ``vectors.f32`` (their vectors, by
slot). Opened with only one of them, the store used to start over: with ``store.sqlite`` gone
it opened empty, ``verify()`` found nothing, and the next add overwrote the orphaned vectors.
Now

- ``vectors.f32`` without ``store.sqlite`` is refused before anything is created
  (:func:`check_pair_before_open`), naming both files and the fix;
- ``store.sqlite`` whose records hold vector slots without ``vectors.f32`` is refused the same
  way (:func:`check_vectors_present`; ``allow_damaged=True``, for ``verify()``, opens it);
- a ``store.sqlite`` SQLite cannot read (not a database, a malformed page) is
  :class:`memgate.retriever.errors.DamagedStoreError` naming the file
  (:func:`damaged_database`), not a raw ``sqlite3.DatabaseError``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memgate.retriever.errors import DamagedStoreError
from memgate.retriever.stores.embedded.layout import DB_FILE, VECTOR_FILE

RESTORE = ("restore both files from the same backup, or import an export into a new directory "
           "(`memgate store import --from EXPORT_DIR --store NEW_DIR`)")


def check_pair_before_open(path: Path) -> None:
    """Refuse a directory whose vector file has data but whose database is missing."""
    vectors, db = path / VECTOR_FILE, path / DB_FILE
    if vectors.exists() and vectors.stat().st_size > 0 and not db.exists():
        raise DamagedStoreError(
            f"{db} is missing but {vectors} holds vectors: the records they belong to are gone, "
            f"and opening would start an empty store over them; {RESTORE}, or move {vectors} "
            "away to start a new store in this directory")


def check_vectors_present(path: Path, slots_used: int) -> None:
    """Refuse a database whose records hold ``slots_used`` vector slots when the vector file is
    missing (a store that never stored a vector needs none)."""
    vectors, db = path / VECTOR_FILE, path / DB_FILE
    if slots_used > 0 and not vectors.exists():
        raise DamagedStoreError(
            f"{vectors} is missing but {db} holds records with {slots_used} vector slot(s); {RESTORE}")


def damaged_database(path: Path, exc: sqlite3.DatabaseError) -> DamagedStoreError:
    """The error for a database file SQLite cannot read (``exc``: what SQLite said)."""
    return DamagedStoreError(
        f"{path / DB_FILE}: not a readable SQLite database ({exc}); {RESTORE}")


def unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file itself is damaged (not locked, not a full disk)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


__all__ = ["RESTORE", "check_pair_before_open", "check_vectors_present", "damaged_database", "unreadable"]
