"""The servers accept calls while the encoder and the gate load in the background: /health says
``ready``; a call that embeds or scores before then gets a clear "warming up" answer (HTTP 503
with Retry-After, an MCP tool error) after a bounded wait; calls that embed nothing never wait.
The warm-up here is held back by an event and then runs the real load (a fresh encoder)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from memgate import Memory
from memgate.integrations.warmup import Warmup, WarmupFailed
from memgate.model.encoder import Encoder, EncoderConfig


def held_warmup(memory, release: threading.Event) -> Warmup:
    def load():
        release.wait(120)
        memory.warm_up()  # the real load: the fresh encoder's model and the released gate

    return Warmup(load=load, wait_seconds=0.3)


@pytest.fixture
def fresh_memory(tmp_path):
    # the released gate, named (the default is off: docs/design.md section 4): warm-up loads it
    with Memory(path=tmp_path / "store", encoder=Encoder(EncoderConfig(cache_dir=None)),
                fsync=False, gate="released") as m:
        yield m


def _until(check, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the warm-up did not finish"
        time.sleep(0.05)


def test_http_answers_while_warming_up(fresh_memory):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from memgate.integrations.http_server import create_app
    from memgate.integrations.uvicorn_thread import ServerThread

    release = threading.Event()
    warm = held_warmup(fresh_memory, release)
    key = "alice-key-0123456789"
    with ServerThread(create_app(fresh_memory, {key: "alice"}, warmup=warm)) as url:
        with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120) as http:
            health = http.get("/health").json()
            assert health["status"] == "ok" and health["ready"] is False
            assert health["warmup"] == {"ready": False, "seconds": None, "error": None}
            assert health["gate"]["on"] is True  # said without loading it
            assert http.get("/memories").json() == {"results": []}  # embeds nothing: no wait
            r = http.post("/memories", json={"text": "I park on level 3."})
            assert r.status_code == 503 and r.headers["retry-after"] == "2"
            assert "warming up" in r.json()["error"]["message"]
            assert http.post("/search", json={"query": "where?"}).status_code == 503
            assert fresh_memory.retriever.encoder._model is None  # nothing loaded meanwhile
            release.set()
            _until(lambda: http.get("/health").json()["ready"])
            assert fresh_memory.retriever._gate is not None  # the warm-up loaded the gate too
            added = http.post("/memories", json={"text": "I park on level 3."})
            assert added.status_code == 201, added.text
            hits = http.post("/search", json={"query": "where did I park?"}).json()
            assert hits["results"][0]["id"] == added.json()["id"] and hits["route"].startswith("hybrid")


def test_mcp_initializes_and_lists_tools_while_warming_up(fresh_memory):
    pytest.importorskip("mcp")
    from mcp import Client

    from memgate.integrations.mcp_server import create_mcp_server

    release = threading.Event()
    server = create_mcp_server(fresh_memory, "alice", warmup=held_warmup(fresh_memory, release))

    async def run():
        async with Client(server) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            early = await client.call_tool("add_memory", {"text": "I park on level 3."})
            history = await client.call_tool("memory_history", {"memory_id": "mem-none"})
            release.set()
            await asyncio.to_thread(_until, lambda: server.warmup.ready)
            later = await client.call_tool("add_memory", {"text": "I park on level 3."})
            return tools, early, history, later

    tools, early, history, later = asyncio.run(run())
    assert {"add_memory", "search_memory", "forget_memory", "memory_history"} <= tools
    assert early.is_error and "warming up" in early.content[0].text
    assert history.is_error and "no memory" in history.content[0].text  # answered, no wait
    assert not later.is_error


def test_a_failed_load_is_reported_not_retried_as_warming_up():
    def load():
        raise ValueError("no checkpoint at /nowhere")

    warm = Warmup(load=load)
    with pytest.raises(WarmupFailed, match="no checkpoint at /nowhere"):
        warm.wait(30)
    assert warm.status()["ready"] is False and "no checkpoint" in warm.status()["error"]
