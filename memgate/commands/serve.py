"""``memgate serve mcp|http --store DIR``: run the MCP or the HTTP server over a store;
``memgate serve postgres DIR``: a throwaway PostgreSQL + pgvector server to try the store on.

    memgate serve http --store memstore --api-keys keys.json [--port 8080]
    memgate serve mcp  --store memstore --principal alice            (stdio)
    memgate serve mcp  --store memstore --principal alice --transport http   (MEMGATE_MCP_KEY)
    memgate serve postgres pgdata        (prints the export line of $MEMGATE_POSTGRES_URL)

``--backend postgres --url postgresql://...`` (default ``$MEMGATE_POSTGRES_URL``, which keeps a
password off the command line) serves a PostgreSQL store (the schema ``--schema``, default
``memgate``); there ``--store DIR`` names the folder of the audit log (``DIR/audit.jsonl``,
which ``history`` reads) and is optional. Several servers may serve one PostgreSQL store.

``keys.json`` maps API keys (16+ characters) to principals: ``{"<key>": "alice"}``; keep it
private (it is read once at start). Both servers bind 127.0.0.1 unless ``--allow-remote``. The
servers need the ``[serve]`` extra (FastAPI, uvicorn, the ``mcp`` SDK).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from memgate.integrations.memory import Memory
from memgate.retriever.errors import StoreError
from memgate.retriever.stores.postgres.local import LocalServer

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


def add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", type=Path,
                        help="the store directory (--backend postgres: the audit log's folder, optional)")
    parser.add_argument("--backend", choices=("embedded", "qdrant", "postgres"), default="embedded",
                        help="embedded (default), a Qdrant local-mode directory (trusted only) or "
                             "PostgreSQL (--url)")
    parser.add_argument("--url", help="the PostgreSQL URL (--backend postgres; default $MEMGATE_POSTGRES_URL)")
    parser.add_argument("--schema", default="memgate", help="the PostgreSQL schema (--backend postgres)")
    parser.add_argument("--gate", default="auto",
                        help="'auto' (the released gate if its card passes the default-on rule), "
                             "'none', or a checkpoint directory")


def open_memory(args: argparse.Namespace) -> Any:
    gate = None if args.gate == "none" else args.gate
    if args.backend == "postgres":
        return Memory(path=args.store, store="postgres", url=args.url, collection=args.schema, gate=gate)
    if args.store is None:
        raise ValueError(f"--store DIR is required with --backend {args.backend}")
    if args.url is not None:
        raise ValueError("--url goes with --backend postgres")
    return Memory(path=args.store, store=args.backend, gate=gate)


def _opened(args: argparse.Namespace, server: str) -> Any:
    """The Memory to serve, or None after a one-line error (a bad setup, an unreachable store)."""
    try:
        return open_memory(args)
    except (ValueError, StoreError) as exc:
        print(f"memgate serve {server}: {exc}", file=sys.stderr)
        return None


def check_loopback(host: str, allow_remote: bool = False) -> None:
    if host not in LOOPBACK_HOSTS and not allow_remote:
        raise ValueError(f"host {host!r} is not a loopback address; this server speaks plain HTTP "
                         "(keys in clear): put it behind a TLS proxy and pass --allow-remote")


def read_api_keys(path: Path) -> dict:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the API keys file ({exc})") from None
    if not isinstance(raw, dict) or not raw or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ValueError(f"{path}: must be a JSON object mapping API keys to principals")
    return raw


def build_parser(prog: str = "memgate serve") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="serve a store over MCP or an HTTP API",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="server", metavar="{mcp,http,postgres}", required=True)
    http = sub.add_parser("http", help="the HTTP API (FastAPI + uvicorn)")
    add_store_args(http)
    http.add_argument("--api-keys", required=True, type=Path, help="JSON file: API key -> principal")
    http.add_argument("--host", default="127.0.0.1")
    http.add_argument("--port", type=int, default=8080)
    http.add_argument("--allow-remote", action="store_true", help="bind a non-loopback host")
    http.add_argument("--max-body-bytes", type=int, default=None)
    mcp = sub.add_parser("mcp", help="an MCP server for one principal (stdio or streamable HTTP)")
    add_store_args(mcp)
    mcp.add_argument("--principal", required=True, help="the one user this server reads and writes")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp.add_argument("--host", default="127.0.0.1")
    mcp.add_argument("--port", type=int, default=8765)
    mcp.add_argument("--allow-remote", action="store_true", help="bind a non-loopback host")
    mcp.add_argument("--api-key-env", default="MEMGATE_MCP_KEY",
                     help="environment variable holding the bearer key (http transport)")
    postgres = sub.add_parser("postgres", help="a throwaway local PostgreSQL + pgvector (pgserver) "
                              "on a Unix socket, until Ctrl-C; not for production")
    postgres.add_argument("pgdata", type=Path, help="its data folder (created on first use)")
    return parser


def serve_postgres(args: argparse.Namespace) -> int:
    """Start (or take over) the server of ``pgdata``, print the line that points the store at it,
    and keep it until SIGINT / SIGTERM, which stop it (LocalServer's handlers)."""
    try:
        server = LocalServer(args.pgdata)
    except ImportError as exc:  # pragma: no cover - the [postgres] extra (pgserver) is missing
        print(f"memgate serve postgres: {exc} (pip install -e '.[postgres]')", file=sys.stderr)
        return 2
    # Ctrl-C stops it even where SIGINT came in ignored (a background job of a non-interactive shell)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with server:
        print(f"export MEMGATE_POSTGRES_URL={shlex.quote(server.url)}", flush=True)
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


def serve_http(args: argparse.Namespace) -> int:
    try:
        check_loopback(args.host, args.allow_remote)
        keys = read_api_keys(args.api_keys)
    except ValueError as exc:
        print(f"memgate serve http: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from memgate.integrations.http_server import MAX_BODY_BYTES, create_app

    memory = _opened(args, "http")
    if memory is None:
        return 2
    with memory:
        app = create_app(memory, keys, max_body_bytes=args.max_body_bytes or MAX_BODY_BYTES)
        uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def serve_mcp(args: argparse.Namespace) -> int:
    key = None
    if args.transport == "http":
        try:
            check_loopback(args.host, args.allow_remote)
        except ValueError as exc:
            print(f"memgate serve mcp: {exc}", file=sys.stderr)
            return 2
        key = os.environ.get(args.api_key_env)
        if not key:
            print(f"memgate serve mcp: set {args.api_key_env} to the bearer key clients must send",
                  file=sys.stderr)
            return 2
    from memgate.integrations.mcp_server import create_mcp_server, http_app

    if args.transport == "stdio" and os.environ.get("WANDB_MODE") == "offline":
        # transformers prints "[INFO] Running in WANDB offline mode" to stdout when the encoder
        # loads with WANDB_MODE=offline: on stdio that line would break the protocol (this
        # server never logs to wandb)
        del os.environ["WANDB_MODE"]
    memory = _opened(args, "mcp")
    if memory is None:
        return 2
    with memory:
        server = create_mcp_server(memory, args.principal)
        if args.transport == "stdio":
            server.run("stdio")
            return 0
        import uvicorn

        uvicorn.run(http_app(server, key), host=args.host, port=args.port, log_level="warning")
    return 0


def main(argv: Optional[Sequence[str]] = None, prog: str = "memgate serve") -> int:
    args = build_parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
    return {"http": serve_http, "mcp": serve_mcp, "postgres": serve_postgres}[args.server](args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
