"""Every agent surface behind one small adapter, for tests that must hold on all of them: the
retriever, ``memgate.Memory``, the LangGraph store, the HTTP app (through FastAPI's test client)
and the MCP tools (called in process), each over every store kind of
``tests.retriever.store_helpers.KINDS``.

    with open_surface("http", "qdrant", tmp_path) as s:
        user = s.new_user()                      # a principal of its own (its own namespace)
        mid = s.add(user, "My locker code is 4417.")
        s.forget(user, mid)
        with pytest.raises(Refused): s.add(user, "locker code 4417")

An adapter raises :class:`Refused` when the surface refuses a write (``reason`` is
``"suppressed"`` for forgotten content, ``"invalid"`` for bad input such as an id) and
:class:`NotFound` when it answers "no memory" for an id (``update``, ``forget``, ``history``),
and returns plain dicts ``{"id", "text", "metadata"}`` from ``get`` and ``search`` and
``{"event", "ts", "query_id", "detail"}`` from ``history``. ``caps`` says what the surface can do
(``memory_id``: the caller chooses ids; ``metadata``; ``markers``; ``update``; ``relearn``:
``allow_relearn=True``; ``history``: the audit trail). A new surface is one more adapter in
``SURFACES``; a new store kind joins through ``KINDS``. Tests of other properties (tenants,
audit) extend this module: ``new_user`` gives each example a principal of its own, and
``expose`` searches and reports every hit as put in the prompt (through the library under the
surface: no surface but the retriever and ``Memory`` has that call).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from memgate.contract.records import QueryContext
from memgate.retriever.errors import RepeatedDetailError, SuppressedContentError, UnknownMemoryError
from tests.retriever.store_helpers import KINDS, HashEncoder, make_retriever, make_store, memory_args

SURFACES = ("retriever", "memory", "langgraph", "http", "mcp")
MAX_USERS = 2000  # principals the HTTP app has keys for


class Refused(Exception):
    """The surface refused a write; ``reason``: ``suppressed`` or ``invalid``."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason, self.message = reason, message


class NotFound(Exception):
    """The surface answered "no memory" for an id (an unknown id, another tenant's, forgotten)."""


def _reason(message: str) -> str:
    return "suppressed" if "repeats content forgotten" in message or "repeats forgotten" in message else "invalid"


@contextmanager
def _refusals():
    try:
        yield
    except (UnknownMemoryError, KeyError, PermissionError) as exc:  # (the retriever's answers)
        raise NotFound(str(exc)) from None
    except (SuppressedContentError, RepeatedDetailError) as exc:
        raise Refused("suppressed", str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise Refused("invalid", str(exc)) from None


class Surface:
    name = ""
    caps: frozenset = frozenset()

    def __init__(self, kind: str, path: Path, encoder: Any = None):
        self.kind, self.path = kind, Path(path)
        self.encoder = encoder or HashEncoder()
        self._users = itertools.count()
        self._ids = itertools.count()

    def new_user(self) -> str:
        return f"u{next(self._users)}"

    def _new_id(self) -> str:
        return f"id-{next(self._ids)}"

    def close(self) -> None:
        raise NotImplementedError


def _steps(steps) -> list[dict]:
    return [{"event": s.stage, "ts": s.ts, "query_id": s.query_id, "detail": s.detail} for s in steps]


class RetrieverSurface(Surface):
    name = "retriever"
    caps = frozenset({"memory_id", "metadata", "markers", "update", "relearn", "history"})

    def __init__(self, kind, path, encoder=None):
        super().__init__(kind, path, encoder)
        from memgate.retriever import EmbeddedStore, GatedRetriever, RetrieverConfig
        from memgate.retriever.stores.qdrant.store import QdrantStore
        if encoder is None:
            self.r = make_retriever(make_store(kind, path, name="retriever", audit=True), acl=None)
        else:
            store = (EmbeddedStore(self.path / "retriever-emb", encoder.identity, fsync=False)
                     if kind == "embedded" else QdrantStore("mem", encoder.identity, path=self.path / "retriever-qd"))
            self.r = GatedRetriever(store, self.encoder, config=RetrieverConfig(acl=None))
        self._q = itertools.count()

    def add(self, user, text, *, memory_id=None, metadata=None, markers=None, allow_relearn=False):
        with _refusals():
            return self.r.add(text, namespace=user, principal=user,
                              memory_id=self._new_id() if memory_id is None else memory_id,
                              attributes=dict(metadata or {}), markers=list(markers or ()),
                              allow_relearn=allow_relearn).memory_id

    def update(self, user, memory_id, *, text=None, metadata=None):
        record = self.r.store.get(memory_id, namespace=user)
        if record is None:
            raise NotFound(f"no memory {memory_id!r}")
        changes = {k: v for k, v in (("text", text), ("attributes", metadata)) if v is not None}
        with _refusals():
            self.r.update(memory_id, record.revision, principal=user, namespace=user, **changes)

    def get(self, user, memory_id):
        record = self.r.store.get(memory_id, namespace=user)
        if record is None or record.forgotten:
            return None
        return {"id": record.memory_id, "text": record.text, "metadata": dict(record.attributes)}

    def _retrieve(self, user, query, limit):
        ctx = QueryContext(query_id=f"q{next(self._q)}", text="", principal=user,
                           namespaces=frozenset({user}), intent="unknown")
        return self.r.retrieve(query, ctx, k=limit)

    def search(self, user, query, limit=10):
        with _refusals():
            items = self._retrieve(user, query, limit).items
        return [{"id": i.memory_id, "text": i.text, "metadata": dict(i.memory.attributes)} for i in items]

    def expose(self, user, query):
        result = self._retrieve(user, query, 10)
        self.r.report_exposed(result.query_id, result.ids)

    def history(self, user, memory_id):
        with _refusals():
            return _steps(self.r.history(memory_id, principal=user, namespace=user))

    def forget(self, user, memory_id):
        with _refusals():
            self.r.forget(memory_id, principal=user, namespace=user,
                          directive_text="The user asked me to forget a detail.")

    def close(self):
        self.r.store.close()


class _OverMemory(Surface):
    """A surface over one ``memgate.Memory`` (``self.m``): exposure reports go through it."""

    def expose(self, user, query):
        hits = self.m.search(query, user_id=user)
        self.m.report_exposed(hits["query_id"], [h["id"] for h in hits["results"]])


class MemorySurface(_OverMemory):
    name = "memory"
    caps = frozenset({"memory_id", "metadata", "markers", "update", "relearn", "history"})

    def __init__(self, kind, path, encoder=None):
        super().__init__(kind, path, encoder)
        from memgate import Memory
        self.m = Memory(**memory_args(kind, self.path / "memory-store"), encoder=self.encoder, gate=None,
                        fsync=False)

    def add(self, user, text, *, memory_id=None, metadata=None, markers=None, allow_relearn=False):
        extra = {"markers": list(markers)} if markers else {}
        if allow_relearn:
            extra["allow_relearn"] = True
        with _refusals():
            return self.m.add(text, user_id=user, metadata=metadata, memory_id=memory_id, **extra)["id"]

    def update(self, user, memory_id, *, text=None, metadata=None):
        with _refusals():
            self.m.update(memory_id, user_id=user, text=text, metadata=metadata)

    def get(self, user, memory_id):
        hit = self.m.get(memory_id, user_id=user)
        return None if hit is None else {"id": hit["id"], "text": hit["memory"], "metadata": hit["metadata"]}

    def search(self, user, query, limit=10):
        with _refusals():
            hits = self.m.search(query, user_id=user, limit=limit)
        return [{"id": h["id"], "text": h["memory"], "metadata": h["metadata"]} for h in hits["results"]]

    def forget(self, user, memory_id):
        with _refusals():
            self.m.delete(memory_id, user_id=user)

    def history(self, user, memory_id):
        with _refusals():
            return self.m.history(memory_id, user_id=user)

    def close(self):
        self.m.close()


class LangGraphSurface(Surface):
    """Ids are the items' keys; a memory is the value ``{"text": ..., "meta": metadata}``."""

    name = "langgraph"
    caps = frozenset({"memory_id", "metadata", "update"})

    def __init__(self, kind, path, encoder=None):
        super().__init__(kind, path, encoder)
        from memgate.integrations.langgraph_store import MemgateStore
        self.s = MemgateStore(**memory_args(kind, self.path / "lg-store"), encoder=self.encoder, gate=None,
                              fsync=False)

    @staticmethod
    def _value(text, metadata):
        return {"text": text, **({"meta": dict(metadata)} if metadata else {})}

    def add(self, user, text, *, memory_id=None, metadata=None, markers=None, allow_relearn=False):
        key = self._new_id() if memory_id is None else memory_id
        with _refusals():
            self.s.put(("users", user), key, self._value(text, metadata))
        return key

    def update(self, user, memory_id, *, text=None, metadata=None):
        item = self.s.get(("users", user), memory_id)
        if item is None:
            raise NotFound(f"no item {memory_id!r}")
        current = item.value
        with _refusals():
            self.s.put(("users", user), memory_id,
                       self._value(current["text"] if text is None else text,
                                   current.get("meta") if metadata is None else metadata))

    @staticmethod
    def _view(item):
        return {"id": item.key, "text": item.value.get("text"), "metadata": item.value.get("meta", {})}

    def get(self, user, memory_id):
        item = self.s.get(("users", user), memory_id)
        return None if item is None else self._view(item)

    def search(self, user, query, limit=10):
        with _refusals():
            items = self.s.search(("users", user), query=query, limit=limit)
        return [self._view(i) for i in items]

    def forget(self, user, memory_id):
        with _refusals():
            self.s.delete(("users", user), memory_id)

    def close(self):
        self.s.close()


class HttpSurface(_OverMemory):
    name = "http"
    caps = frozenset({"memory_id", "metadata", "markers", "update", "history"})

    def __init__(self, kind, path, encoder=None):
        super().__init__(kind, path, encoder)
        from starlette.testclient import TestClient

        from memgate import Memory
        from memgate.integrations.http_server import create_app
        self.m = Memory(**memory_args(kind, self.path / "http-store"), encoder=self.encoder, gate=None, fsync=False)
        keys = {f"key-{i:04d}-0123456789abcdef": f"u{i}" for i in range(MAX_USERS)}
        self.client = TestClient(create_app(self.m, keys, max_body_bytes=256 * 1024))

    @staticmethod
    def _auth(user):
        return {"Authorization": f"Bearer key-{int(user[1:]):04d}-0123456789abcdef"}

    @staticmethod
    def _path(memory_id):
        return "/memories/" + quote(memory_id, safe="")

    def _check(self, response, ok=(200, 201)):
        if response.status_code in ok:
            return response.json()
        error = response.json()["error"]
        message = f"{response.status_code} {error['field']}: {error['message']}"
        if response.status_code == 404:
            raise NotFound(message)
        if response.status_code in (400, 409, 413, 422):
            raise Refused(_reason(message), message)
        raise AssertionError(f"HTTP {response.status_code}: {message}")

    def add(self, user, text, *, memory_id=None, metadata=None, markers=None, allow_relearn=False):
        body: dict = {"text": text, "metadata": dict(metadata or {})}
        if memory_id is not None:
            body["memory_id"] = memory_id
        if markers:
            body["fields"] = {"markers": list(markers)}
        return self._check(self.client.post("/memories", json=body, headers=self._auth(user)))["id"]

    def update(self, user, memory_id, *, text=None, metadata=None):
        body = {k: v for k, v in (("text", text), ("metadata", metadata)) if v is not None}
        self._check(self.client.patch(self._path(memory_id), json=body, headers=self._auth(user)))

    def get(self, user, memory_id):
        r = self.client.get(self._path(memory_id), headers=self._auth(user))
        if r.status_code == 404:
            return None
        hit = self._check(r)
        return {"id": hit["id"], "text": hit["memory"], "metadata": hit["metadata"]}

    def search(self, user, query, limit=10):
        out = self._check(self.client.post("/search", json={"query": query, "limit": limit}, headers=self._auth(user)))
        return [{"id": h["id"], "text": h["memory"], "metadata": h["metadata"]} for h in out["results"]]

    def forget(self, user, memory_id):
        self._check(self.client.delete(self._path(memory_id), headers=self._auth(user)))

    def history(self, user, memory_id):
        return self._check(self.client.get(self._path(memory_id) + "/history", headers=self._auth(user)))["events"]

    def close(self):
        self.client.close()
        self.m.close()


class McpSurface(_OverMemory):
    """The four tools of one MCP server per principal, called in process; the server mints the
    ids (no tool takes one), and a memory is read back through ``search_memory``."""

    name = "mcp"
    caps = frozenset({"metadata", "history"})

    def __init__(self, kind, path, encoder=None):
        super().__init__(kind, path, encoder)
        from memgate import Memory
        self.m = Memory(**memory_args(kind, self.path / "mcp-store"), encoder=self.encoder, gate=None, fsync=False)
        self._servers: dict[str, Any] = {}
        self._texts: dict[tuple, str] = {}

    def _call(self, user, tool, args):
        from mcp.server.mcpserver.exceptions import ToolError

        from memgate.integrations.mcp_server import create_mcp_server
        if user not in self._servers:
            self._servers[user] = create_mcp_server(self.m, user)
        try:
            result = asyncio.run(self._servers[user].call_tool(tool, args))
        except ToolError as exc:
            raise self._refusal(str(exc)) from None
        if result.is_error:
            raise self._refusal(result.content[0].text)
        return result.structured_content or json.loads(result.content[0].text)

    @staticmethod
    def _refusal(message: str) -> Exception:
        return NotFound(message) if "no memory" in message else Refused(_reason(message), message)

    def add(self, user, text, *, memory_id=None, metadata=None, markers=None, allow_relearn=False):
        added = self._call(user, "add_memory", {"text": text, "metadata": dict(metadata or {}) or None})
        self._texts[(user, added["id"])] = text
        return added["id"]

    def get(self, user, memory_id):
        text = self._texts.get((user, memory_id))
        if text is None:
            return None
        return next((h for h in self.search(user, text, limit=100) if h["id"] == memory_id), None)

    def search(self, user, query, limit=10):
        out = self._call(user, "search_memory", {"query": query, "limit": limit})
        return [{"id": h["id"], "text": h["memory"], "metadata": h["metadata"]} for h in out["results"]]

    def forget(self, user, memory_id):
        self._call(user, "forget_memory", {"memory_id": memory_id})

    def history(self, user, memory_id):
        return self._call(user, "memory_history", {"memory_id": memory_id})["events"]

    def close(self):
        self.m.close()


_ADAPTERS = {cls.name: cls for cls in (RetrieverSurface, MemorySurface, LangGraphSurface, HttpSurface, McpSurface)}
assert tuple(_ADAPTERS) == SURFACES


@contextmanager
def open_surface(name: str, kind: str, path: Path, encoder: Optional[Any] = None):
    """One surface over a new store of ``kind`` under ``path`` (``encoder``: default the hash
    encoder of ``store_helpers``; pass a real one for cache tests)."""
    surface = _ADAPTERS[name](kind, Path(path), encoder)
    try:
        yield surface
    finally:
        surface.close()


def pairs(*caps: str) -> list[tuple[str, str]]:
    """Every (surface, store kind) pair whose surface has all of ``caps``."""
    return [(s, k) for s in SURFACES if set(caps) <= _ADAPTERS[s].caps for k in KINDS]


def pair_ids(items: list[tuple[str, str]]) -> list[str]:
    return [f"{s}-{k}" for s, k in items]


PAIRS = pairs()  # every (surface, store kind) pair

__all__ = ["KINDS", "MAX_USERS", "PAIRS", "SURFACES", "NotFound", "Refused", "Surface", "open_surface", "pair_ids",
           "pairs"]
