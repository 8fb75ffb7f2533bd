"""An HTTP API over one memgate store (FastAPI; OpenAPI schema at ``/openapi.json``, docs at
``/docs``): ``memgate serve http --store DIR --api-keys keys.json``.

    POST   /memories                  add          {text, metadata?, memory_id?, agent_id?, run_id?, fields?}
    POST   /memories/batch            batch add    {items: [add bodies], agent_id?, run_id?} (all or none)
    GET    /memories                  list         ?limit= (memories only, not forget directives)
    DELETE /memories                  forget all   every memory of the caller (directives stay)
    POST   /search                    search       {query, filters?, limit?, intent?, agent_id?, ...}
                                      -> {results, forgotten_relevant, query_id, route, excluded,
                                          dropped, dropped_ids} (each hit with gate_risk)
    GET    /memories/{id}             get
    PATCH  /memories/{id}             update       {text?, metadata?, expected_revision?}
    DELETE /memories/{id}             forget       ?directive=
    GET    /memories/{id}/history     audit trail
    GET    /health                    liveness, {"ready": bool}, store and gate (no key needed)

- Every call but ``/health`` needs an API key (``Authorization: Bearer <key>`` or
  ``X-API-Key``); the key maps to a principal, which is the ``user_id`` of
  :class:`memgate.Memory`: a request can never name another user. A request carrying both
  headers is refused unless both keys are known and name the same principal.
- Request bodies are limited to ``max_body_bytes`` (413 beyond), memory texts to
  ``MAX_TEXT_CHARS`` characters and queries to ``MAX_QUERY_CHARS``.
- Errors are JSON ``{"error": {"field": ..., "message": ...}}``: 400 bad input (an id that
  :func:`memgate.contract.ids.check_id` refuses included: a memory created here can always be
  read and forgotten here), 401 no or unknown key, 404 unknown id (also another user's id), 409
  stale revision, forgotten record, or content that repeats a forgotten detail (``field`` names
  the field, e.g. ``text`` or ``metadata.pin``), 413 body too large, 422 a field fails the
  schema (``field`` is its path, e.g. ``body.text``), 507 the store's disk is full (nothing was
  applied), 500 a damaged store file (``field`` ``store``). A body that is not UTF-8 JSON (or
  nests too deeply to parse) is a 400 naming ``body``; FastAPI's own answers (an unknown path,
  a wrong method) keep their status in the same shape. ``field`` is never null: an error that
  names no field names ``body`` (4xx) or ``server`` (5xx); a batch item's field is prefixed
  with its index (``items[2].metadata``).
- Ids in paths are percent-encoded path segments (``/memories/a%3Fb``).
- One :class:`memgate.Memory` serves every request and serialises them with its lock (the
  retriever is not thread-safe), so the server is safe under concurrent requests.
- Concurrent adds and searches embed in one batch (:mod:`memgate.model.encoder_batching`): the
  first waits ``batch_window_ms`` (2 ms) for the others' texts, outside the Memory's lock, and
  each request then stores or searches with its own vector, the same bits it gets alone.
- The server accepts connections at once: the encoder and the gate load in the background
  (:class:`memgate.integrations.warmup.Warmup`; ``/health`` says ``"ready"``). A call that embeds
  or scores (add, search, update, forget) before then waits up to ``WAIT_SECONDS`` (30) and
  then answers 503 "warming up" with ``Retry-After``; list, get and history never wait.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.metadata
import json
import re
from collections.abc import Mapping
from typing import Any, Literal, Optional, cast

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Send

from memgate.contract.defaults import MAX_LIMIT
from memgate.integrations.memory import check_user_id, results_of
from memgate.integrations.warmup import WarmingUp, Warmup, WarmupFailed
from memgate.model.encoder_batching import DEFAULT_WINDOW_MS, EmbeddingBatcher
from memgate.retriever.errors import (
    DamagedStoreError,
    ForgottenMemoryError,
    StaleRevisionError,
    StoreFullError,
    SuppressedContentError,
    UnknownMemoryError,
)

MAX_BODY_BYTES = 64 * 1024
MAX_TEXT_CHARS = 8_000
MAX_QUERY_CHARS = 2_000
MAX_BATCH = 100  # memories per batch add

_FIELD = re.compile(r"field '([^']+)'|^(filters\[[^\]]+\])|^(metadata|attributes)\b")
_ITEM = re.compile(r"(items\[\d+\]):")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordFields(_Strict):
    """Optional record fields (memgate.retriever.StoredMemory); anything else is refused."""

    policy_tags: Optional[list[str]] = None
    observed_at: Optional[str] = None
    kind: Optional[str] = None
    domain: Optional[str] = None
    provenance: Optional[str] = None
    epistemic_status: Optional[str] = None
    source_type: Optional[str] = None
    verification_required: Optional[bool] = None
    status: Optional[str] = None
    priority: Optional[str] = None
    risk: Optional[str] = None
    evidence_strength: Optional[float] = None
    forbids: Optional[list[str]] = None
    markers: Optional[list[str]] = None
    derived_from: Optional[list[str]] = None
    supersedes: Optional[list[str]] = None


class AddRequest(_Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)
    memory_id: Optional[str] = Field(default=None, min_length=1, max_length=200)
    agent_id: Optional[str] = Field(default=None, min_length=1, max_length=256)
    run_id: Optional[str] = Field(default=None, min_length=1, max_length=256)
    fields: RecordFields = Field(default_factory=RecordFields)
    allow_relearn: bool = False  # the user's renewed consent, where a 409 asks for it


class BatchItem(_Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)
    memory_id: Optional[str] = Field(default=None, min_length=1, max_length=200)
    fields: RecordFields = Field(default_factory=RecordFields)


class BatchAddRequest(_Strict):
    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)
    agent_id: Optional[str] = Field(default=None, min_length=1, max_length=256)
    run_id: Optional[str] = Field(default=None, min_length=1, max_length=256)
    allow_relearn: bool = False


class UpdateRequest(_Strict):
    text: Optional[str] = Field(default=None, min_length=1, max_length=MAX_TEXT_CHARS)
    metadata: Optional[dict[str, Any]] = None
    expected_revision: Optional[int] = Field(default=None, ge=1)
    allow_relearn: bool = False


class SearchRequest(_Strict):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    filters: Optional[dict[str, Any]] = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    intent: Literal["current_state", "history", "unknown"] = "current_state"
    purpose: Optional[str] = None
    time: Optional[str] = None
    subject: Optional[str] = None
    risk: Optional[Literal["low", "medium", "high"]] = None
    asks: Literal["fact", "status", "priority", "action"] = "fact"
    proposed_action: Optional[str] = None
    agent_id: Optional[str] = Field(default=None, min_length=1, max_length=256)
    run_id: Optional[str] = Field(default=None, min_length=1, max_length=256)


def _error(status: int, message: str, field: Optional[str] = None) -> JSONResponse:
    """The error body; ``field`` is never null: without one, ``body`` for a 4xx answer (the
    request as a whole) and ``server`` for a 5xx one."""
    field = field or ("body" if status < 500 else "server")
    return JSONResponse(status_code=status, content={"error": {"field": field, "message": message}})


def _field_of(message: str) -> Optional[str]:
    m = _FIELD.search(message)
    if m is None:
        return None
    name = next(g for g in m.groups() if g)
    name = "metadata" + name[len("attributes"):] if name.startswith("attributes") else name
    item = _ITEM.match(message)
    return f"{item.group(1)}.{name}" if item and not name.startswith("items[") else name


def _unparsable(body: bytes) -> str:
    """Why a request body could not be parsed as JSON, in one line."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the body is not UTF-8: byte 0x{body[exc.start]:02x} at position {exc.start} ({exc.reason})"
    try:
        json.loads(text)
    except RecursionError:
        return "the body's JSON nests too deeply to parse"
    except ValueError as exc:
        return f"the body is not valid JSON ({exc})"
    return "the body could not be parsed"


class BodyLimit:
    """ASGI middleware: refuse a request body over ``limit`` bytes (declared or streamed) with
    413. The body is read (at most ``limit`` bytes) before the app sees the request."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = _error(413, f"request body over {self.limit} bytes", "body")
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await too_big(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await too_big(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _hash(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def create_app(memory: Any, api_keys: Mapping[str, str], *, max_body_bytes: int = MAX_BODY_BYTES,
               warmup: Optional[Warmup] = None,
               batch_window_ms: Optional[float] = DEFAULT_WINDOW_MS) -> FastAPI:
    """The app over ``memory`` (a :class:`memgate.Memory`); ``api_keys``: key -> principal;
    ``warmup``: the background load of its encoder and gate (default: one started here);
    ``batch_window_ms``: how long the first of concurrent adds and searches waits for the
    others' texts to embed them in one batch (:mod:`memgate.model.encoder_batching`; ``None``:
    each request embeds alone)."""
    if not api_keys:
        raise ValueError("api_keys must map at least one key to a principal")
    keys = {}
    for key, owner in api_keys.items():
        if not isinstance(key, str) or len(key) < 16:
            raise ValueError("every API key must be a string of at least 16 characters")
        keys[_hash(key)] = check_user_id(owner)

    warm = warmup if warmup is not None else Warmup(memory)
    # concurrent requests' embeddings in one batch, outside Memory's call lock (identical vectors)
    batcher = EmbeddingBatcher(memory.retriever.encoder, batch_window_ms) \
        if batch_window_ms is not None and hasattr(memory.retriever.encoder, "prefetched") else None

    def prefetch(text: str) -> None:
        if batcher is not None:
            batcher.prefetch([text])
    app = FastAPI(title="memgate", version=_version(),
                  description="Gated agent memory: per-principal namespaces, Kleene exclusion, "
                              "allowed actions, forget with a directive, an audit trail.")

    def known(given: str) -> Optional[str]:
        digest = _hash(given)
        found = None
        for key, who in keys.items():  # (every key compared: constant time per request)
            if hmac.compare_digest(key, digest):
                found = who
        return found

    def principal(request: Request) -> str:
        given = []
        if request.headers.get("x-api-key") is not None:
            given.append(request.headers["x-api-key"])
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        if not any(given):
            raise _Auth("an API key is required (Authorization: Bearer <key> or X-API-Key)")
        who = [known(key) for key in given]
        if None in who:
            raise _Auth("unknown API key")
        if len(set(who)) > 1:  # two valid keys of two principals: never pick one
            raise _Auth("X-API-Key and the bearer key name different principals; send one key")
        return cast(str, who[0])  # (None is refused above)

    @app.exception_handler(_Auth)
    async def _on_auth(request: Request, exc: Any) -> JSONResponse:
        return _error(401, str(exc), "authorization")

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: Any) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return _error(422, first.get("msg", "invalid request"), loc or None)

    @app.exception_handler(UnknownMemoryError)
    async def _on_unknown(request: Request, exc: Any) -> JSONResponse:
        return _error(404, str(exc), "memory_id")

    @app.exception_handler(StaleRevisionError)
    async def _on_stale(request: Request, exc: Any) -> JSONResponse:
        return _error(409, str(exc), "expected_revision")

    @app.exception_handler(SuppressedContentError)
    async def _on_suppressed(request: Request, exc: Any) -> JSONResponse:  # the field that repeats forgotten content
        return _error(409, str(exc), _field_of(str(exc)) or "text")

    @app.exception_handler(ForgottenMemoryError)
    async def _on_forgotten(request: Request, exc: Any) -> JSONResponse:
        return _error(409, str(exc), "memory_id")

    @app.exception_handler(WarmingUp)
    async def _on_warming_up(request: Request, exc: Any) -> JSONResponse:
        response = _error(503, str(exc))
        response.headers["Retry-After"] = "2"
        return response

    @app.exception_handler(WarmupFailed)
    async def _on_warmup_failed(request: Request, exc: Any) -> JSONResponse:
        return _error(500, str(exc))

    @app.exception_handler(StoreFullError)
    async def _on_full(request: Request, exc: Any) -> JSONResponse:  # nothing was applied; retry once space is freed
        return _error(507, str(exc), "store")

    @app.exception_handler(DamagedStoreError)
    async def _on_damaged(request: Request, exc: Any) -> JSONResponse:
        return _error(500, str(exc), "store")

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: Any) -> JSONResponse:  # FastAPI's own errors (body parsing, unknown route, method)
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return _error(400, _unparsable(await request.body()), "body")
        response = _error(exc.status_code, str(exc.detail), None)
        response.headers.update(getattr(exc, "headers", None) or {})
        return response

    @app.exception_handler(ValueError)
    async def _on_value(request: Request, exc: Any) -> JSONResponse:
        return _error(400, str(exc), _field_of(str(exc)))

    @app.exception_handler(TypeError)
    async def _on_type(request: Request, exc: Any) -> JSONResponse:
        return _error(400, str(exc), _field_of(str(exc)))

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "ready": warm.ready, "warmup": warm.status(), "version": _version(),
                "store": type(memory.store).__name__,
                "gate": {"on": memory.gate_decision.use, "reason": memory.gate_decision.reason},
                "action_preset": memory.retriever.config.action_preset}

    @app.post("/memories", status_code=201)
    def add(body: AddRequest, who: str = Depends(principal)) -> dict[str, Any]:
        warm.wait()
        prefetch(body.text)
        fields = {k: v for k, v in body.fields.model_dump().items() if v is not None}
        added: dict[str, Any] = memory.add(body.text, user_id=who, metadata=body.metadata,
                                           memory_id=body.memory_id, agent_id=body.agent_id,
                                           run_id=body.run_id, allow_relearn=body.allow_relearn, **fields)
        return added

    @app.post("/memories/batch", status_code=201)
    def add_batch(body: BatchAddRequest, who: str = Depends(principal)) -> dict[str, Any]:
        warm.wait()
        items = [{"text": i.text, "metadata": i.metadata, "memory_id": i.memory_id,
                  **{k: v for k, v in i.fields.model_dump().items() if v is not None}} for i in body.items]
        return {"results": memory.add_many(items, user_id=who, agent_id=body.agent_id, run_id=body.run_id,
                                           allow_relearn=body.allow_relearn)}

    @app.delete("/memories")
    def forget_all(who: str = Depends(principal)) -> dict[str, Any]:
        warm.wait()  # (each forget directive is embedded)
        return {"forgotten": memory.delete_all(user_id=who)}

    @app.get("/memories")
    def list_memories(limit: int = Query(100, ge=1, le=1000), who: str = Depends(principal)) -> dict[str, Any]:
        return {"results": results_of(memory.get_all(user_id=who, limit=limit))}

    @app.post("/search")
    def search(body: SearchRequest, who: str = Depends(principal)) -> dict[str, Any]:
        warm.wait()
        args = body.model_dump()
        query = args.pop("query")
        prefetch(query)
        return dict(memory.search(query, user_id=who, **args))

    @app.get("/memories/{memory_id}")
    def get(memory_id: str, who: str = Depends(principal)) -> dict[str, Any]:
        found = memory.get(memory_id, user_id=who)
        if found is None:
            raise UnknownMemoryError(f"no memory {memory_id!r} for this key")
        return dict(found)

    @app.patch("/memories/{memory_id}")
    def update(memory_id: str, body: UpdateRequest, who: str = Depends(principal)) -> dict[str, Any]:
        warm.wait()
        updated: dict[str, Any] = memory.update(memory_id, user_id=who, text=body.text, metadata=body.metadata,
                                                expected_revision=body.expected_revision,
                                                allow_relearn=body.allow_relearn)
        return updated

    @app.delete("/memories/{memory_id}")
    def forget(memory_id: str, directive: Optional[str] = Query(None, min_length=1, max_length=MAX_TEXT_CHARS),
               who: str = Depends(principal)) -> dict[str, Any]:
        warm.wait()  # (the forget directive is embedded)
        return {"forgotten": memory_id, "directive": memory.delete(memory_id, user_id=who, directive=directive)}

    @app.get("/memories/{memory_id}/history")
    def history(memory_id: str, who: str = Depends(principal)) -> dict[str, Any]:
        return {"memory_id": memory_id, "events": memory.history(memory_id, user_id=who)}

    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.state.warmup = warm
    return app


class _Auth(Exception):
    pass


def _version() -> str:
    try:
        return importlib.metadata.version("memgate")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


__all__ = ["MAX_BATCH", "MAX_BODY_BYTES", "MAX_QUERY_CHARS", "MAX_TEXT_CHARS", "BodyLimit", "create_app"]
