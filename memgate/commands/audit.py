"""``memgate audit``: follow one memory id through a retriever's append-only audit log.

    memgate audit <memory-id> --log <store>/audit.jsonl     the memory's trail
    memgate audit <memory-id> --log ... --json              the same as JSON
    memgate audit <memory-id> --log ... --namespace user:alice [--principal alice]   narrowed
    memgate audit --verify --log ...                        check E <= R <= W on every query
    memgate audit <memory-id> --url postgresql://... [--schema S]   a PostgreSQL store's audit table

This is the store operator's view (whoever can read the log file): without ``--namespace`` and
``--principal`` it shows every namespace's record of the id and every principal's queries (an
id can name records in several namespaces). Tenants read their own trail through the agent
surfaces (``memgate.Memory.history``, HTTP, MCP, ``memgate store history --user``), which show
only their record and their own queries (:func:`memgate.retriever.audit.trail`).

Exit status: 0 success, 1 nothing found or a violation, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from memgate.retriever.audit import AuditLog, format_trail, iter_events, operator_trail, verify_log
from memgate.retriever.stores.embedded.layout import AUDIT_FILE


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("memory_id", nargs="?", help="the memory id to follow")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--log", type=Path, help="the audit log (a store's audit.jsonl)")
    where.add_argument("--store", type=Path, help="a store directory (reads <store>/audit.jsonl)")
    where.add_argument("--url", help="a PostgreSQL store's URL (reads its audit table; '' for "
                       "$MEMGATE_POSTGRES_URL, which keeps a password off the command line)")
    p.add_argument("--schema", default="memgate", help="with --url: the store's schema (default memgate)")
    p.add_argument("--namespace", help="only the record of the id in this namespace")
    p.add_argument("--principal", help="only this principal's queries")
    p.add_argument("--json", action="store_true", help="print the trail as JSON")
    p.add_argument("--verify", action="store_true",
                   help="check E <= R <= W and the no-text guard on every logged query")


def _run_audit(args: argparse.Namespace) -> int:
    if args.url is not None:
        import os

        from memgate.retriever.stores.postgres.store import URL_ENV, PostgresStore

        url = args.url or os.environ.get(URL_ENV, "")
        if not url:
            print(f"memgate audit: --url '' needs ${URL_ENV}", file=sys.stderr)
            return 2
        store = PostgresStore(url, None, schema=args.schema)
        try:
            return _report(args, store.audit, store.where)
        finally:
            store.close()
    path = args.log if args.log is not None else args.store / AUDIT_FILE
    if not path.is_file():
        print(f"memgate audit: no audit log at {path}", file=sys.stderr)
        return 2
    return _report(args, path, str(path))


def _report(args: argparse.Namespace, path: Any, where: str) -> int:
    """The trail or the check of one log (a file's path, or an AuditLog kept in a database)."""
    if args.verify:
        check = verify_log(path)
        print(f"{where}: {check.queries} queries, {check.exposures} exposure reports, "
              f"{check.disclosures} disclosure scans, {check.torn_lines} torn line(s); "
              f"{'E <= R <= W holds' if check.ok else f'{len(check.violations)} violation(s)'}")
        for violation in check.violations:
            print(f"  {violation}")
        if args.memory_id is None:
            return 0 if check.ok else 1
    if args.memory_id is None:
        print("memgate audit: give a memory id (or --verify)", file=sys.stderr)
        return 2
    events = path.events() if isinstance(path, AuditLog) else iter_events(path)
    steps = operator_trail(events, args.memory_id, args.namespace, args.principal)
    if args.json:
        print(json.dumps([asdict(s) for s in steps], indent=2, sort_keys=True))
    else:
        print(format_trail(args.memory_id, steps))
    return 0 if steps else 1


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Follow one memory id through the retriever's append-only audit log "
        "(stored -> retrieved -> exposed -> disclosed): the store operator's view, every namespace "
        "and principal unless --namespace / --principal narrow it. The log holds ids, ranks, "
        "reasons, actions and versions, never a memory's text.")
    _add_arguments(parser)
    return _run_audit(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
