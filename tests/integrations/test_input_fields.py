"""Every input error names its field (issue 46 item 3: R3-R9): timestamps parsed on write, a
filter nested past the metadata cap, lone surrogates, metadata that is not a mapping, a bad
``add_many`` item, blank text and reserved keys, on ``Memory``, over HTTP (a real uvicorn server
and httpx) and MCP (the SDK's client), and the store layer refusing what ``Memory`` refuses."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from memgate import Memory
from memgate.retriever import StoredMemory
from memgate.retriever.records.memory import MAX_ATTRIBUTES_DEPTH
from tests.retriever.store_helpers import IDENT, HashEncoder, make_store, vec

KEY = "alice-key-0123456789"
MAX_FILTER_DEPTH = MAX_ATTRIBUTES_DEPTH  # (memgate.integrations.filters.MAX_FILTER_DEPTH)


def deep_filter(depth: int) -> dict:
    flt: dict = {"topic": "food"}
    for _ in range(depth):
        flt = {"AND": [flt]}
    return flt


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    with Memory(path=tmp_path_factory.mktemp("inputs") / "store", encoder=HashEncoder(), gate=None,
                fsync=False) as m:
        yield m


def test_parse_timestamp_is_timezone_aware_and_names_the_field():
    from memgate.contract.dates import parse_timestamp
    from memgate.integrations.filters import MAX_FILTER_DEPTH as cap
    assert cap == MAX_FILTER_DEPTH
    assert parse_timestamp("2026-05-01", "valid_from") == datetime(2026, 5, 1, tzinfo=timezone.utc)
    assert parse_timestamp("2026-05-01T12:00:00Z", "x").tzinfo is not None
    assert parse_timestamp(datetime(2026, 5, 1), "x").tzinfo == timezone.utc
    for bad in ("not-a-date", "whenever", "", " 2026-05-01", 20260501, None, "2026-13-45"):
        with pytest.raises(ValueError, match="^field 'expiration_date' must be an ISO 8601") as caught:
            parse_timestamp(bad, "expiration_date")
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize("call, field", [
    (dict(applicability={"valid_from": "not-a-date"}), "applicability.valid_from"),
    (dict(applicability={"valid_to": "soon"}), "applicability.valid_to"),
    (dict(observed_at="whenever"), "observed_at"),
    (dict(metadata=[1, 2]), "metadata"),
    (dict(metadata={"agent_id": "x"}), "metadata.agent_id"),
    (dict(metadata={"k": "a\ud800b"}), "metadata.k"),
    (dict(text="   "), "text"),
    (dict(text="a lone \udc00 surrogate"), "text"),
    (dict(user_id="al\ud800ice"), "user_id"),
], ids=["valid_from", "valid_to", "observed_at", "metadata-list", "reserved", "metadata-surrogate",
        "blank", "text-surrogate", "user-surrogate"])
def test_memory_add_names_the_field_and_stores_nothing(mem, call, field):
    args = {"text": "A note about the gym.", "user_id": "alice", **call}
    before = len(mem.get_all(user_id="alice"))
    with pytest.raises((ValueError, TypeError), match=f"field '{field}'") as caught:
        mem.add(args.pop("text"), **args)
    assert "\n" not in str(caught.value)
    assert len(mem.get_all(user_id="alice")) == before


def test_add_many_names_the_bad_items_index(mem):
    for items, says in ((["fine", 3], r"items\[1\]: field 'items\[1\]'"),
                        (["fine", {"text": "ok", "metadata": [1]}], r"items\[1\]: field 'metadata'"),
                        ([{"text": "ok", "observed_at": "whenever"}], r"items\[0\]: field 'observed_at'")):
        with pytest.raises(ValueError, match=says):
            mem.add_many(items, user_id="alice")


def test_a_filter_nested_past_the_cap_names_filters(mem):
    mem.search("food", user_id="alice", filters=deep_filter(MAX_FILTER_DEPTH))  # at the cap: fine
    for depth in (MAX_FILTER_DEPTH + 1, 350):
        for call in (lambda f: mem.search("food", user_id="alice", filters=f),
                     lambda f: mem.get_all(user_id="alice", filters=f)):
            with pytest.raises(ValueError, match="^field 'filters' nests"):
                call(deep_filter(depth))


@pytest.mark.parametrize("kind", ["embedded", "qdrant"])
def test_the_store_layer_refuses_what_memory_refuses(tmp_path, kind):
    store = make_store(kind, tmp_path)
    try:
        for memory, field in ((StoredMemory("m1", "alice", ""), "text"),
                              (StoredMemory("m2", "alice", "  "), "text"),
                              (StoredMemory("m3", "alice", "x", observed_at="whenever"), "observed_at"),
                              (StoredMemory("m4", "alice", "x", applicability={"valid_from": "nope"}),
                               "applicability.valid_from")):
            with pytest.raises(ValueError, match=f"field '{field}'"):
                store.add(memory, vec("x"), encoder=IDENT)
        stored = store.add(StoredMemory("ok", "alice", "x", observed_at="2026-05-01"), vec("x"), encoder=IDENT)
        with pytest.raises(ValueError, match="field 'observed_at'"):
            store.update("ok", stored.revision, observed_at="whenever")
        assert store.get("m1", namespace="alice") is None
    finally:
        store.close()


def test_http_errors_name_the_field_and_never_null(mem):
    import httpx

    from memgate.integrations.http_server import create_app
    from memgate.integrations.uvicorn_thread import ServerThread
    with ServerThread(create_app(mem, {KEY: "alice"})) as url, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        cases = [
            (c.post("/search", json={"query": "food", "filters": deep_filter(350)}), 400, "filters"),
            (c.post("/memories", json={"text": "   "}), 400, "text"),
            (c.post("/memories", json={"text": "gym", "metadata": {"run_id": "r"}}), 400, "metadata.run_id"),
            (c.post("/memories", json={"text": "gym", "fields": {"observed_at": "whenever"}}), 400, "observed_at"),
            (c.post("/memories", content=b'{"text": "gym \\ud800"}',
                    headers={"Content-Type": "application/json"}), 422, "body.text"),  # (pydantic)
            (c.post("/memories/batch", json={"items": [{"text": "ok"}, {"text": " "}]}), 400, "items[1].text"),
            (c.post("/memories", json={"text": "ok", "memory_id": "a/b"}), 400, "memory_id"),
            (c.get("/no-such-path"), 404, "body"),
        ]
        for response, status, field in cases:
            assert response.status_code == status, response.text
            error = response.json()["error"]
            assert error["field"] == field and "\n" not in error["message"], error


def test_mcp_names_filters_for_a_filter_nested_past_the_cap(mem):
    from mcp import Client

    from memgate.integrations.mcp_server import create_mcp_server

    server = create_mcp_server(mem, "alice")

    async def run():
        async with Client(server) as client:  # (the SDK's client serialises up to ~100 levels)
            result = await client.call_tool("search_memory", {"query": "food", "filters": deep_filter(60)})
            assert result.is_error and "field 'filters' nests" in result.content[0].text
            result = await client.call_tool("add_memory", {"text": "gym", "metadata": {"agent_id": "x"}})
            assert result.is_error and "field 'metadata.agent_id'" in result.content[0].text

    asyncio.run(run())
    from mcp.server.mcpserver.exceptions import ToolError  # the audit's 350 levels, called in process
    with pytest.raises(ToolError, match="field 'filters' nests"):
        asyncio.run(server.call_tool("search_memory", {"query": "food", "filters": deep_filter(350)}))
