"""The PostgreSQL store's page erasure: after a write that erased content commits (a forget's
tombstones, :meth:`PostgresBackend.erase`), the old row versions holding the text and the vector
are still in the records table's pages and the HNSW index's copy of the vector is still in the
index until a ``VACUUM`` prunes them. :class:`Eraser` runs that ``VACUUM`` on a connection of its
own, off the caller's path, within :data:`ERASURE_WINDOW_S` of the commit (docs/design.md
section 7, "Erasure window"):

- the requests of one window share one ``VACUUM (INDEX_CLEANUP ON, VERBOSE)`` of the records
  table (a burst of forgets costs one table pass, not one each);
- the pass checks PostgreSQL's own account of it (its ``VERBOSE`` report): a dead row version it
  could not remove (a page another session held pinned, or a transaction whose snapshot still
  sees it) makes it try again shortly, until the report says none is left;
- PostgreSQL does not zero the space pruning frees: the pass then scrubs each page that held an
  erased version (:meth:`PostgresBackend._vacuum_pass`), listed in the ``erase_pages`` table by
  the erasing write itself, so the next process that opens the store finishes the work after a
  crash;
- ``close()`` finishes a pending pass before it returns (a short-lived process, the CLI, leaves
  nothing behind).

``background=False`` runs the pass in the writer's thread before the write returns (the old
behaviour: the forget's latency includes the table pass).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from memgate.retriever.errors import StoreError

ERASURE_WINDOW_S = 5.0  # the contract: pages clean within this many seconds of the commit
COALESCE_S = 0.25  # how long a request waits for others to share its pass
IDLE_EXIT_S = 30.0  # an idle eraser thread ends after this long
RETRY_S = 0.25  # the pause before another pass when the last one left dead versions behind
log = logging.getLogger("memgate")

# VACUUM VERBOSE's report of the table (PostgreSQL 15+): dead versions it could not remove
_NOT_REMOVABLE = re.compile(r"(\d+) are dead but not yet removable")
_MISSED = re.compile(r"tuples missed: (\d+) dead")


def leftover(report: str) -> int:
    """Dead row versions a ``VACUUM VERBOSE`` report says it left in the table's pages."""
    return sum(int(m.group(1)) for pattern in (_NOT_REMOVABLE, _MISSED) for m in pattern.finditer(report))


class Eraser:
    """Runs ``vacuum()`` (returns the dead versions left, 0 when the pages are clean) for each
    window of requests, on a daemon thread (``background=False``: at once, in the requester's
    thread)."""

    def __init__(self, vacuum: Callable[[], int], *, background: bool, describe: str) -> None:
        self._vacuum = vacuum
        self.background = bool(background)
        self._describe = describe
        self._cond = threading.Condition()
        self._requested = 0  # generation of the last request
        self._done = 0  # generation the last clean pass covered
        self._closing = False
        self._thread: Optional[threading.Thread] = None
        self.passes = 0  # passes run (tests, the bench)
        self.clean = True  # whether the last pass left the pages clean

    def request(self) -> None:
        """A write that erased content committed: clean the pages within the window."""
        if not self.background:
            self.clean = self._run_until_clean(deadline=time.monotonic() + ERASURE_WINDOW_S)
            return
        with self._cond:
            self._requested += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="memgate-pg-eraser", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> bool:
        with self._cond:
            return self._done < self._requested

    def wait(self, timeout: float = ERASURE_WINDOW_S) -> bool:
        """Block until every request made so far is covered by a clean pass (or ``timeout``
        seconds passed); True when it is."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._requested
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return self.clean

    def _pass(self) -> int:
        self.passes += 1
        try:
            return self._vacuum()
        except StoreError as exc:  # (the write is committed: the next pass or an autovacuum prunes)
            log.warning("%s: erasing the pages failed: %s; trying again", self._describe, exc)
            return -1

    def _run_until_clean(self, deadline: float) -> bool:
        while True:
            left = self._pass()
            if left == 0:
                return True
            if time.monotonic() >= deadline:
                log.warning("%s: %s dead row version(s) still in the records table's pages after "
                            "%.1f s (a long transaction holds them); the next forget or open "
                            "tries again", self._describe, "some" if left < 0 else left, ERASURE_WINDOW_S)
                return False
            time.sleep(RETRY_S)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._done >= self._requested and not self._closing:
                    if not self._cond.wait(IDLE_EXIT_S) and self._done >= self._requested:
                        self._thread = None  # idle: the thread ends (the next request starts one)
                        return
                if self._done >= self._requested:  # closing, nothing pending
                    return
            time.sleep(COALESCE_S if not self._closing else 0)  # let a burst share the pass
            with self._cond:
                target = self._requested
            clean = self._run_until_clean(deadline=time.monotonic() + ERASURE_WINDOW_S - COALESCE_S)
            with self._cond:  # (given up: waiters learn it from clean; a later request retries)
                self.clean = clean
                self._done = max(self._done, target)
                self._cond.notify_all()

    def close(self) -> None:
        """Finish a pending pass (so a process that exits leaves clean pages), stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(ERASURE_WINDOW_S + 1.0)


def vacuum_report(conn: Any, statement: Any) -> str:
    """Run ``VACUUM ... VERBOSE`` on ``conn`` and return its report (the server's notices)."""
    notices: list[str] = []

    def keep(diag: Any) -> None:
        notices.append(str(diag.message_primary or ""))

    conn.add_notice_handler(keep)
    try:
        conn.execute(statement)
    finally:
        conn.remove_notice_handler(keep)
    return "\n".join(notices)


def erasure_pass(conn: Any, q: Callable[[str], Any]) -> int:
    """One erasure pass (on the eraser's own connection), for the pages listed in
    ``erase_pages`` by any process:

    1. ``VACUUM (INDEX_CLEANUP ON, VERBOSE)`` of the records table: the dead row versions
       holding the erased text and vector are pruned and their entries leave every index,
       the HNSW graph's copy of the vector included (pgvector zeroes a deleted element; a
       plain VACUUM skips the indexes while under 2 % of the table's pages hold dead rows,
       which at 100,000 records is always). Returns early, the pages kept, when its report
       says it left dead versions (a pinned page, an open snapshot): the eraser retries.
    2. PostgreSQL does not zero the space pruning frees, and that space is the top of the
       page's free space (live rows are moved up over it): each listed page is scrubbed by
       an ``UPDATE`` of one of its live rows that adds a run of zero bytes (``pad``, stored
       plain) as large as the page holds, so the new version lands on the same page over
       the freed bytes, and is rolled back (nothing changes; the bytes stay written).
    3. ``VACUUM (INDEX_CLEANUP OFF)`` prunes the rolled-back versions (only the pages not
       all-visible are read), and the pages leave the list.

    Returns the dead versions left (0: done).
    """
    listed = [(int(i), int(p)) for i, p in conn.execute(q("SELECT id, page FROM {s}.erase_pages")).fetchall()]
    pages = sorted({p for _, p in listed})  # (a write that lists a page again meanwhile adds a row of
    # its own, which this pass leaves for the next)
    report = vacuum_report(conn, q("VACUUM (INDEX_CLEANUP ON, VERBOSE) {s}.records"))
    left = leftover(report)
    if left or not pages:
        return left
    failed = {page for page in pages if not scrub(conn, q, page)}
    conn.execute(q("VACUUM (INDEX_CLEANUP OFF) {s}.records"))
    conn.execute(q("DELETE FROM {s}.erase_pages WHERE id = ANY(%s)"), ([i for i, p in listed if p not in failed],))
    return len(failed)  # (a page whose row a writer held or moved meanwhile: the next pass)


def delete_rows(tx: Any, q: Callable[[str], Any], keys: list[tuple[str, str]]) -> list[tuple[Optional[int], int]]:
    """Delete the records rows of ``keys`` (``(namespace, memory_id)``, database form) and their
    derivation links in the open transaction ``tx``; returns ``(slot, page)`` of each row."""
    out: list[tuple[Optional[int], int]] = []
    for start in range(0, len(keys), 10_000):
        chunk = keys[start:start + 10_000]
        nss, mids = [k[0] for k in chunk], [k[1] for k in chunk]
        rows = tx.execute(q(
            "DELETE FROM {s}.records r USING unnest(%s::text[], %s::text[]) AS k(ns, id) "
            "WHERE r.namespace = k.ns AND r.memory_id = k.id "
            "RETURNING r.slot, (r.ctid::text::point)[0]::bigint"), (nss, mids)).fetchall()
        tx.execute(q(
            "DELETE FROM {s}.derivations d USING unnest(%s::text[], %s::text[]) AS k(ns, id) "
            "WHERE (d.child_ns = k.ns AND d.child = k.id) OR (d.parent_ns = k.ns AND d.parent = k.id)"),
            (nss, mids))
        out += [(None if slot is None else int(slot), int(page)) for slot, page in rows]
    return out


def scrub(conn: Any, q: Callable[[str], Any], page: int) -> bool:
    """Overwrite the free space of ``page`` of the records table (step 2 of
    :func:`erasure_pass`), in one transaction that is rolled back: one of the page's live rows is
    updated, again and again, each time in a savepoint rolled back at once, to a minimal version
    (no text, no vector) plus a run of zero bytes as large as still lands on the page itself
    (PostgreSQL keeps an updated version on its page while it fits; a rolled-back version keeps
    its place until pruned), from the top of the free space down, halving the run when it does
    not fit. What stays unwritten is less than one minimal version (about 200 bytes) at the
    bottom of the free space. (Row reads go by ``ctid``, which does not prune the page.) False when the page's row could not be updated (a writer held or moved it:
    the next pass tries again)."""
    low, high = f"({page},0)", f"({page + 1},0)"
    found = conn.execute(q("SELECT ctid FROM {s}.records WHERE ctid >= %s::tid AND ctid < %s::tid LIMIT 1"),
                         (low, high)).fetchone()
    if found is None:  # (an empty page: VACUUM truncates it when it is the last)
        return True
    target = str(found[0])
    size, attempts = 7900, 0  # (a version is at most 8160 bytes)
    with conn.transaction(force_rollback=True):
        while size >= 16 and attempts < 40:
            attempts += 1
            with conn.transaction(force_rollback=True):  # (a savepoint: a miss is undone)
                moved = conn.execute(q(
                    "UPDATE {s}.records SET pad = decode(repeat('00', %s), 'hex'), text = NULL, "
                    "embedding = NULL, slot = NULL, data = '' WHERE ctid = %s::tid "
                    "RETURNING ctid, (ctid::text::point)[0]::bigint"), (size, target)).fetchone()
            if moved is None:
                return False
            if int(moved[1]) != page:
                size //= 2
                continue
            # landed: rolled back, the version still takes its place on the page until pruned,
            # so the next one (of the same row's live version) lands below it
    return True


__all__ = ["COALESCE_S", "ERASURE_WINDOW_S", "Eraser", "delete_rows", "erasure_pass", "leftover", "scrub", "vacuum_report"]
