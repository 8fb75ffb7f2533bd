"""The MCP server with the official SDK's client: over stdio (a real subprocess,
``python -m memgate.commands.serve mcp``) and over streamable HTTP (uvicorn, in-process)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from memgate import Memory  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"add_memory", "search_memory", "list_memories", "get_memory", "update_memory",
         "forget_memory", "memory_history"}


def _data(result):
    assert not result.is_error if hasattr(result, "is_error") else not result.isError, result
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if structured is not None:
        return structured.get("result", structured)
    return json.loads(result.content[0].text)


def _is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


async def _exercise(client, other_ids):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():  # the principal is never a tool argument
        schema = getattr(tool, "input_schema", None) or tool.inputSchema
        assert not {"user_id", "principal", "namespace", "user"} & set(schema.get("properties", {}))
    added = _data(await client.call_tool("add_memory", {"text": "I keep my spare key under the blue pot.",
                                                        "metadata": {"room": "garden"}}))
    hits = _data(await client.call_tool("search_memory", {"query": "where is the spare key?"}))
    ids = [h["id"] for h in hits["results"]]
    assert ids[0] == added["id"] and not set(ids) & set(other_ids)
    assert hits["results"][0]["action"] != "verify_first"
    leak = _data(await client.call_tool("search_memory", {"query": "Bob's safe combination 7-3-9", "limit": 20}))
    assert not {h["id"] for h in leak["results"]} & set(other_ids)
    for tool in ("forget_memory", "memory_history"):  # another principal's id: "no memory"
        result = await client.call_tool(tool, {"memory_id": other_ids[0]})
        assert _is_error(result) and "no memory" in result.content[0].text
    listed = _data(await client.call_tool("list_memories", {}))["results"]
    assert [m["id"] for m in listed] == [added["id"]]
    assert _data(await client.call_tool("get_memory", {"memory_id": added["id"]}))["metadata"] == {"room": "garden"}
    fixed = _data(await client.call_tool("update_memory", {"memory_id": added["id"], "expected_revision": 1,
                                                           "text": "I keep my spare key under the green pot."}))
    assert fixed["revision"] == 2 and "green" in fixed["memory"]
    stale = await client.call_tool("update_memory", {"memory_id": added["id"], "text": "x", "expected_revision": 1})
    assert _is_error(stale) and "revision" in stale.content[0].text
    for tool, args in (("get_memory", {"memory_id": other_ids[0]}),
                       ("update_memory", {"memory_id": other_ids[0], "text": "mine"})):
        result = await client.call_tool(tool, args)  # another principal's id: "no memory"
        assert _is_error(result) and "no memory" in result.content[0].text
    extra = await client.call_tool("search_memory", {"query": "spare key", "principal": "bob"})
    assert _is_error(extra) and "unknown argument(s) ['principal']" in extra.content[0].text
    forgotten = _data(await client.call_tool("forget_memory", {"memory_id": added["id"]}))
    assert forgotten["directive"]["kind"] == "forget_directive"
    after = _data(await client.call_tool("search_memory", {"query": "where is the spare key?"}))
    assert all(h["kind"] == "memory" for h in after["results"])  # the directive takes no slot
    assert forgotten["directive"]["id"] not in [h["id"] for h in after["results"]]
    assert after["forgotten_relevant"] is True and _data(await client.call_tool("list_memories", {}))["results"] == []
    events = [e["event"] for e in _data(await client.call_tool("memory_history", {"memory_id": added["id"]}))["events"]]
    assert events[0] == "stored" and events[-1] == "forgotten"
    bad = await client.call_tool("search_memory", {"query": "x", "filters": {"n": {"near": 1}}})
    assert _is_error(bad) and "unknown operator" in bad.content[0].text
    return added["id"]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "store"
    with Memory(path=path, fsync=False) as m:
        bob = [m.add("Bob's safe combination is 7-3-9.", user_id="bob")["id"],
               m.add("Bob keeps his spare key in the mailbox.", user_id="bob")["id"]]
    return path, bob


def test_stdio_server_lists_and_calls_every_tool_and_isolates_principals(shared_store):
    path, bob_ids = shared_store
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memgate.commands.serve", "mcp", "--store", str(path), "--principal", "alice"],
        cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})

    async def run():
        async with Client(params, read_timeout_seconds=180) as client:
            return await _exercise(client, bob_ids)

    added = asyncio.run(run())
    with Memory(path=path, fsync=False) as m:  # the server's writes are the store's
        assert m.get(bob_ids[0], user_id="bob") is not None
        assert m.get(added, user_id="alice") is None
        assert [e["event"] for e in m.history(added, user_id="alice")][-1] == "forgotten"


def test_streamable_http_server_requires_its_key(shared_store):
    import httpx

    from memgate.integrations.mcp_server import create_mcp_server, http_app
    from memgate.integrations.uvicorn_thread import ServerThread

    path, bob_ids = shared_store
    key = "mcp-test-key-0123456789"
    with Memory(path=path, fsync=False) as m:
        with ServerThread(http_app(create_mcp_server(m, "carol"), key), lifespan="on") as url:
            assert httpx.post(f"{url}/mcp", json={}).status_code == 401

            async def run():
                import httpx2  # the SDK's HTTP client (a dependency of mcp)
                from mcp.client.streamable_http import streamable_http_client

                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
                async with http:
                    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                        return await _exercise(client, bob_ids)

            asyncio.run(run())
