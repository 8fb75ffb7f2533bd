"""An MCP server over one memgate store (the official ``mcp`` SDK): ``memgate serve mcp --store DIR
--principal alice`` (stdio) or ``... --transport http`` (streamable HTTP on 127.0.0.1; the
program is :mod:`memgate.commands.serve`).

Tools: ``add_memory``, ``search_memory``, ``list_memories``, ``get_memory``, ``update_memory``,
``forget_memory``, ``memory_history``. A call with an argument the tool does not take (a
``principal``, a misspelt ``limt``) is a tool error naming it, never silently ignored.

The principal (the ``user_id`` of :class:`memgate.Memory`) is fixed by the server's
configuration: no tool takes a user, principal or namespace argument, so a model driving the
client cannot read or write another principal's memories. Run one server per principal (an MCP
client launches its own over stdio); over HTTP the server also requires a bearer key
(``--api-key-env``).

The server answers ``initialize`` and ``tools/list`` at once: the encoder and the gate load in the
background (:class:`memgate.integrations.warmup.Warmup`). A tool that embeds or scores
(add_memory, search_memory, update_memory, forget_memory) called before then waits up to
``WAIT_SECONDS`` (30), then answers the tool error "memgate is warming up ... retry in a few
seconds"; list_memories, get_memory and memory_history never wait.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.responses import JSONResponse
from starlette.types import Receive, Send

from memgate.integrations.memory import check_user_id, results_of
from memgate.integrations.warmup import WarmingUp, Warmup, WarmupFailed
from memgate.retriever.errors import StoreError, UnknownMemoryError

INSTRUCTIONS = (
    "Long-term memory for one user. add_memory stores a fact the user shared; search_memory "
    "returns the user's relevant memories with an allowed action for each (answer, "
    "answer_context, warn, verify_first, archive_only, block): respect it. When its "
    "forgotten_relevant is true, the user asked to forget something relevant: do not guess or "
    "reconstruct it. list_memories, get_memory and update_memory read and correct memories; "
    "forget_memory erases a memory for good when the user asks; memory_history shows a memory's "
    "audit trail.")


class StrictMCPServer(MCPServer):
    """An MCP server whose tools refuse arguments they do not take (the SDK drops them)."""

    warmup: Optional[Warmup] = None  # the background load of its encoder and gate (create_mcp_server)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = {t.name: t for t in await self.list_tools()}
        if name in known:
            schema = getattr(known[name], "input_schema", None) or getattr(known[name], "inputSchema", {})
            allowed = set((schema or {}).get("properties", {}))
            unknown = sorted(set(arguments or {}) - allowed)
            if unknown:
                raise ToolError(f"{name}: unknown argument(s) {unknown}; it takes {sorted(allowed)}")
        return await super().call_tool(name, arguments, context)


RESULT_FIELDS = ("id", "memory", "kind", "metadata", "score", "gate_risk", "action", "lifecycle", "created_at")


def create_mcp_server(memory: Any, principal: str, *, name: str = "memgate",
                      warmup: Optional[Warmup] = None) -> MCPServer:
    """The MCP server over ``memory`` (a :class:`memgate.Memory`) for one ``principal``;
    ``warmup``: the background load of its encoder and gate (default: one started here)."""
    user = check_user_id(principal)
    server = StrictMCPServer(name=name, instructions=INSTRUCTIONS, log_level="WARNING")
    warm = warmup if warmup is not None else Warmup(memory)

    def guarded(call: Callable[[], dict[str, Any]], embeds: bool = True) -> dict[str, Any]:
        try:
            if embeds:
                warm.wait()
            return call()
        except (WarmingUp, WarmupFailed) as exc:
            raise ToolError(str(exc)) from None
        except UnknownMemoryError as exc:
            raise ToolError(str(exc)) from None
        except (ValueError, TypeError, StoreError, PermissionError) as exc:
            raise ToolError(str(exc)) from None

    @server.tool(structured_output=True)
    def add_memory(text: str, metadata: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Store one memory (a fact, preference or event the user shared). ``metadata`` is an
        optional JSON object kept with it and usable as a search filter."""
        return guarded(lambda: memory.add(text, user_id=user, metadata=metadata))

    @server.tool(structured_output=True)
    def search_memory(query: str, limit: int = 5, filters: Optional[dict[str, Any]] = None,
                      intent: str = "current_state") -> dict[str, Any]:
        """The user's memories most relevant to ``query``, best first, each with its ``kind``,
        an allowed action and ``gate_risk`` (the learned gate's risk estimate in (0, 1), or null
        when the gate gives none); ``dropped`` counts memories the gate held back as risky;
        ``forgotten_relevant`` is true when the user asked to forget
        something relevant (the forgotten detail itself is gone). ``intent``: current_state
        (default), history or unknown; ``filters``: metadata filters."""
        def run() -> dict[str, Any]:
            hits = memory.search(query, user_id=user, limit=limit, filters=filters, intent=intent)
            return {"query_id": hits["query_id"], "forgotten_relevant": hits["forgotten_relevant"],
                    "dropped": hits["dropped"],  # a count: the agent gets no dropped ids
                    "results": [{k: h[k] for k in RESULT_FIELDS} for h in hits["results"]]}
        return guarded(run)

    @server.tool(structured_output=True)
    def list_memories(limit: int = 100) -> dict[str, Any]:
        """The user's memories, oldest first (forget directives are not memories: not listed)."""
        return guarded(lambda: {"results": results_of(memory.get_all(user_id=user, limit=limit))}, embeds=False)

    @server.tool(structured_output=True)
    def get_memory(memory_id: str) -> dict[str, Any]:
        """One of the user's memories by id."""
        def run() -> dict[str, Any]:
            found: Optional[dict[str, Any]] = memory.get(memory_id, user_id=user)
            if found is None:
                raise UnknownMemoryError(f"no memory {memory_id!r} for this user")
            return found
        return guarded(run, embeds=False)

    @server.tool(structured_output=True)
    def update_memory(memory_id: str, text: Optional[str] = None,
                      metadata: Optional[dict[str, Any]] = None,
                      expected_revision: Optional[int] = None) -> dict[str, Any]:
        """Correct a memory's text (re-embedded) or replace its metadata; ``expected_revision``
        makes it compare-and-set (a stale revision is an error)."""
        return guarded(lambda: memory.update(memory_id, user_id=user, text=text, metadata=metadata,
                                             expected_revision=expected_revision))

    @server.tool(structured_output=True)
    def forget_memory(memory_id: str, directive: Optional[str] = None) -> dict[str, Any]:
        """Forget a memory for good (text, metadata and vector erased); a short directive saying
        the user asked to forget it is kept instead."""
        return guarded(lambda: {"forgotten": memory_id,
                                "directive": memory.delete(memory_id, user_id=user, directive=directive)})

    @server.tool(structured_output=True)
    def memory_history(memory_id: str) -> dict[str, Any]:
        """A memory's audit trail: stored, updated, retrieved, forgotten (never its text)."""
        return guarded(lambda: {"memory_id": memory_id,
                                "events": memory.history(memory_id, user_id=user)}, embeds=False)

    server.warmup = warm
    return server


class BearerKey:
    """ASGI middleware for the streamable HTTP transport: every request needs the one key."""

    def __init__(self, app: Any, key: str):
        if not isinstance(key, str) or len(key) < 16:
            raise ValueError("the MCP server's API key must be at least 16 characters")
        self.app, self.key = app, key.encode()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            auth = dict(scope.get("headers") or []).get(b"authorization", b"")
            given = auth[7:].strip() if auth.lower().startswith(b"bearer ") else b""
            if not hmac.compare_digest(given, self.key):
                response = JSONResponse({"error": {"field": "authorization", "message": "unknown or missing key"}},
                                        status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, key: str) -> Any:
    """The streamable HTTP app (path ``/mcp``) behind the bearer key."""
    return BearerKey(server.streamable_http_app(), key)


__all__ = ["INSTRUCTIONS", "RESULT_FIELDS", "BearerKey", "StrictMCPServer", "create_mcp_server", "http_app"]
