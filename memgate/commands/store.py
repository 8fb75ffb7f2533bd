"""``memgate store``: a memgate store from the command line.

    memgate store add "I'm vegetarian." --user alice --store DIR [--metadata '{"topic": "food"}']
    memgate store search "what do I eat?" --user alice --store DIR [--limit 5] [--filters JSON] [--gate DIR]
    memgate store list --store DIR [--user alice]         (no --user: users and their counts)
    memgate store get MEMORY_ID --user alice --store DIR
    memgate store forget MEMORY_ID --user alice --store DIR [--directive TEXT]
    memgate store history MEMORY_ID --user alice --store DIR
    memgate store export --store DIR --out EXPORT_DIR     (JSONL + safetensors, see transfer.py)
    memgate store import --from EXPORT_DIR --store DIR    (or --backend qdrant|postgres --url URL)
    memgate store verify --store DIR                      (checksums, half records, E <= R <= W)
    memgate store sweep --store DIR                       (erase the memories whose expiry passed)
    memgate store reset --yes --store DIR [--drop-forget-list]   (empty the whole store)

``--backend qdrant`` opens ``--store`` as a Qdrant local-mode directory (trusted only: qdrant-
client pickles its points there; a warning says so) or ``--url`` a Qdrant server.
``--backend postgres`` opens the PostgreSQL store at ``--url`` (default ``$MEMGATE_POSTGRES_URL``,
which keeps a password off the command line) in the schema ``--collection``; there ``--store DIR``
is optional and names the folder of the audit log (``DIR/audit.jsonl``) that ``history`` reads.
``--json`` prints JSON. Only add and import create a store: every other verb refuses a ``--store``
that holds none (a mistyped path creates nothing). Verbs that embed nothing (list, get, forget,
history, export, verify) load no encoder model and no gate. Exit status: 0 success, 1 nothing found or a failed check, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from memgate.integrations import transfer
from memgate.integrations.memory import USER_PREFIX, Memory, results_of
from memgate.integrations.opening import open_store
from memgate.retriever.audit import verify_log
from memgate.retriever.errors import StoreError, UnknownMemoryError
from memgate.retriever.stores.embedded.layout import DB_FILE

VERBS = ("add", "search", "list", "get", "forget", "history", "export", "import", "verify", "sweep", "reset")
CREATING = ("add", "import")  # the verbs that may create the store they name


def _json_arg(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg})") from None


def build_parser(prog: str = "memgate store") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="a memgate store from the command line",
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="verb", metavar="<verb>", required=True)

    def verb(name: str, help_: str, user: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--store", type=Path, help="the store directory (postgres: its audit log's folder)")
        p.add_argument("--backend", choices=("embedded", "qdrant", "postgres"), default="embedded")
        p.add_argument("--url", help="a Qdrant server (--backend qdrant) or a PostgreSQL URL "
                                     "(--backend postgres; default $MEMGATE_POSTGRES_URL)")
        p.add_argument("--collection", default="memgate",
                       help="the Qdrant collection or the PostgreSQL schema")
        p.add_argument("--json", action="store_true", help="print JSON")
        if user:
            p.add_argument("--user", required=True, help="the user (principal) the call acts for")
        return p

    p = verb("add", "store one memory", user=True)
    p.add_argument("text")
    p.add_argument("--metadata", type=_json_arg, default=None, help="a JSON object")
    p = verb("search", "a user's memories for a query, with allowed actions", user=True)
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--filters", type=_json_arg, default=None, help="metadata filters (JSON)")
    p.add_argument("--intent", choices=("current_state", "history", "unknown"), default="current_state")
    p.add_argument("--gate", default="auto",
                   help="the learned gate: auto (default), released, none, or a checkpoint directory")
    p = verb("list", "a user's memories (or, without --user, the users)")
    p.add_argument("--user")
    p.add_argument("--directives", action="store_true",
                   help="the user's forget directives instead of their memories")
    p = verb("get", "one of a user's memories by id", user=True)
    p.add_argument("memory_id")
    p = verb("forget", "forget a memory for good (the directive stays)", user=True)
    p.add_argument("memory_id")
    p.add_argument("--directive")
    p = verb("history", "a memory's audit trail", user=True)
    p.add_argument("memory_id")
    p = verb("export", "write the store as JSONL + safetensors")
    p.add_argument("--out", type=Path, required=True)
    p = verb("import", "restore an export into an empty or disjoint store")
    p.add_argument("--from", dest="src", type=Path, required=True)
    p.add_argument("--accept-unprotected", action="store_true",
                   help="import an export that has forget directives but no forget list (a "
                        "format-1 export, or one whose suppression.json is gone): what they forgot "
                        "could be stored again; a warning names it")
    verb("verify", "check vectors, half records and the audit log")
    verb("sweep", "erase every memory whose expiration_date has passed (audit: expired)")
    p = verb("reset", "erase every record, vector and the audit history of the whole store")
    p.add_argument("--yes", action="store_true", help="required: the reset cannot be undone")
    p.add_argument("--drop-forget-list", action="store_true",
                   help="remove the forget directives too (forgotten content may be stored again)")
    return parser


def check_store_exists(args: argparse.Namespace) -> None:
    """A verb other than add and import names a store that exists: a mistyped ``--store`` is
    refused before anything is created there."""
    if args.verb in CREATING or args.store is None or (args.backend == "qdrant" and args.url):
        return
    marker = args.store / {"embedded": DB_FILE, "postgres": "audit.jsonl"}.get(args.backend, "memgate.lock")
    if not marker.is_file():
        raise ValueError(f"--store {args.store}: no {args.backend} memgate store there (only add "
                         f"and import create one; check the path)")


def _open_store(args: argparse.Namespace) -> Any:
    if args.backend == "postgres":
        return open_store("postgres", url=args.url, path=args.store, collection=args.collection)
    if args.backend == "qdrant" and args.url:
        return open_store("qdrant", url=args.url, collection=args.collection,
                          audit_log=None if args.store is None else args.store / "audit.jsonl")
    if args.store is None:
        raise ValueError("--store DIR is required" + (" (or --url)" if args.backend == "qdrant" else ""))
    return open_store(args.backend, path=args.store, collection=args.collection,
                      allow_damaged=args.verb == "verify")  # (verify reports a damaged store)


def _memory(args: argparse.Namespace) -> Any:
    gate = getattr(args, "gate", "auto")
    gate = None if gate == "none" else gate
    if args.backend == "postgres":
        return Memory(path=args.store, store="postgres", url=args.url, collection=args.collection, gate=gate)
    if args.store is None and not args.url:
        raise ValueError("--store DIR is required")
    return Memory(path=args.store if not args.url else None, store=args.backend, url=args.url, gate=gate,
                  collection=args.collection, audit_log=None if not args.url or args.store is None
                  else args.store / "audit.jsonl")


def _print(args: argparse.Namespace, value: Any, text: str) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str) if args.json else text)


def _run(args: argparse.Namespace) -> int:
    check_store_exists(args)
    if args.verb == "reset" and not args.yes:
        raise ValueError("reset: pass --yes (every record, vector and the audit history go)")
    if args.verb in ("add", "search", "list", "get", "forget", "history", "sweep", "reset"):
        with _memory(args) as m:
            if args.verb == "sweep":
                n = m.sweep()
                _print(args, {"expired": n}, f"erased {n} expired memories")
            elif args.verb == "reset":
                m.reset(keep_forget_list=not args.drop_forget_list)
                _print(args, {"reset": True}, "store reset" + (" (forget list dropped)"
                                                              if args.drop_forget_list else ""))
            elif args.verb == "add":
                item = m.add(args.text, user_id=args.user, metadata=args.metadata)
                _print(args, item, f"added {item['id']}")
            elif args.verb == "search":
                hits = m.search(args.query, user_id=args.user, limit=args.limit, filters=args.filters,
                                intent=args.intent)
                lines = [f"query {hits['query_id']} route={hits['route']}"] + [
                    f"  {h['score']:.3f}  {h['action']:<14} {h['id']}  {h['memory']}"
                    + ("" if h["gate_risk"] is None else f"  (gate risk {h['gate_risk']:.3f})")
                    for h in hits["results"]]
                if hits["dropped"]:
                    lines.append(f"  ({hits['dropped']} dropped by the learned gate: "
                                 f"{', '.join(hits['dropped_ids'])})")
                if hits["forgotten_relevant"]:
                    lines.append("  (the user asked to forget something relevant to this query)")
                _print(args, dict(hits), "\n".join(lines))
                return 0 if hits["results"] else 1
            elif args.verb == "list":
                if args.user is None:
                    users = {ns[len(USER_PREFIX):]: len(m.catalog.ids([ns], directives=False))
                             for ns in m.catalog.namespaces() if ns.startswith(USER_PREFIX)}
                    _print(args, users, "\n".join(f"{u}\t{n}" for u, n in sorted(users.items())))
                    return 0 if users else 1
                items = results_of((m.directives if args.directives else m.get_all)(user_id=args.user))
                _print(args, items, "\n".join(f"{i['id']}  {i['created_at']}  {i['memory']}" for i in items))
                return 0 if items else 1
            elif args.verb == "get":
                item = m.get(args.memory_id, user_id=args.user)
                if item is None:
                    raise UnknownMemoryError(f"no memory {args.memory_id!r} for user {args.user!r}")
                _print(args, item, f"{item['id']}  {item['created_at']}  {item['memory']}")
            elif args.verb == "forget":
                directive = m.delete(args.memory_id, user_id=args.user, directive=args.directive)
                _print(args, directive, f"forgot {args.memory_id}; directive {directive['id']} kept")
            else:
                events = m.history(args.memory_id, user_id=args.user)
                _print(args, events, "\n".join(
                    f"{e['ts']}  {e['event']:<16} {e['query_id'] or ''} "
                    f"{json.dumps(e['detail'], sort_keys=True)}" for e in events))
                return 0 if events else 1
        return 0
    loaded = transfer.read_export(args.src) if args.verb == "import" else None  # before any store exists
    store = _open_store(args)
    try:
        if args.verb == "export":
            manifest = transfer.export_store(store, args.out)
            _print(args, manifest, f"exported {manifest['records']} records ({manifest['vectors']} "
                                   f"vectors) to {args.out}")
        elif args.verb == "import":
            n = transfer.import_store(store, args.src, loaded, accept_unprotected=args.accept_unprotected)
            _print(args, {"imported": n}, f"imported {n} records from {args.src}")
        else:
            problems = store.verify() if hasattr(store, "verify") else []
            audit = getattr(store, "audit", None)
            log = getattr(audit, "path", None)
            check = verify_log(log) if log is not None and Path(log).is_file() else (
                verify_log(audit) if audit is not None and log is None else None)
            report = {"problems": problems, "audit": None if check is None else {
                "queries": check.queries, "ok": check.ok, "violations": check.violations,
                "torn_lines": check.torn_lines}}
            lines = [f"{len(store)} records; " + ("no integrity problems" if not problems
                                                  else f"{len(problems)} problem(s)")]
            lines += [f"  {p}" for p in problems]
            if not hasattr(store, "verify"):
                lines.append("  (this backend has no integrity check of its own)")
            if check is not None:
                lines.append(f"audit log: {check.queries} queries, "
                             + ("E <= R <= W holds" if check.ok else f"{len(check.violations)} violation(s)"))
            _print(args, report, "\n".join(lines))
            return 0 if not problems and (check is None or check.ok) else 1
    finally:
        store.close()
    return 0


def main(argv: Optional[Sequence[str]] = None, prog: str = "memgate store") -> int:
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (and --help) as an exit status, not an exception
        return int(exc.code or 0)
    try:
        return _run(args)
    except UnknownMemoryError as exc:
        print(f"memgate store {args.verb}: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, PermissionError, StoreError) as exc:
        print(f"memgate store {args.verb}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
