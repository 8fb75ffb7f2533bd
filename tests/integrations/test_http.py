"""The HTTP server, tested over a real uvicorn server on 127.0.0.1 with httpx (one server for the
module)."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from memgate import Memory  # noqa: E402
from memgate.commands.serve import check_loopback  # noqa: E402
from memgate.integrations.gate_default import gate_default  # noqa: E402
from memgate.integrations.http_server import create_app  # noqa: E402
from memgate.integrations.uvicorn_thread import ServerThread  # noqa: E402

KEYS = {"alice-key-0123456789": "alice", "bob-key-0123456789ab": "bob", "carol-key-0123456789": "carol"}
for i in range(8):
    KEYS[f"client-{i}-key-0123456789"] = f"client-{i}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with Memory(path=tmp_path_factory.mktemp("http") / "store", fsync=False) as mem:
        with ServerThread(create_app(mem, KEYS, max_body_bytes=8192)) as url:
            yield url


def client(url, key="alice-key-0123456789"):
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_openapi_health_and_auth(server):
    with httpx.Client(base_url=server) as anon:
        paths = anon.get("/openapi.json").json()["paths"]
        assert {"/memories", "/search", "/memories/{memory_id}", "/memories/{memory_id}/history",
                "/health"} <= set(paths)
        assert {"post", "get"} <= set(paths["/memories"]) and {"get", "patch", "delete"} <= set(
            paths["/memories/{memory_id}"])
        health = anon.get("/health").json()
        assert health["status"] == "ok" and health["gate"]["reason"] == gate_default().reason
        r = anon.post("/memories", json={"text": "x"})
        assert r.status_code == 401 and r.json()["error"]["field"] == "authorization"
        r = anon.post("/memories", json={"text": "x"}, headers={"X-API-Key": "wrong-key-0123456789"})
        assert r.status_code == 401 and r.json()["error"]["message"] == "unknown API key"


def test_round_trip_and_isolation(server):
    with client(server) as alice, client(server, "bob-key-0123456789ab") as bob:
        r = alice.post("/memories", json={"text": "My locker code is 4417.", "metadata": {"place": "gym"},
                                          "fields": {"observed_at": "2024-06-01"}})
        assert r.status_code == 201, r.text
        mid = r.json()["id"]
        hits = alice.post("/search", json={"query": "What is my locker code?", "filters": {"place": "gym"}}).json()
        assert hits["results"][0]["id"] == mid and hits["query_id"].startswith("q-")
        assert hits["results"][0]["action"] != "verify_first"
        assert bob.get(f"/memories/{mid}").status_code == 404  # same answer as an unknown id
        assert bob.get("/memories/nope").status_code == 404
        assert mid not in [h["id"] for h in bob.post("/search", json={"query": "locker code 4417"}).json()["results"]]
        assert bob.delete(f"/memories/{mid}").status_code == 404
        up = alice.patch(f"/memories/{mid}", json={"text": "My locker code is 5521.", "expected_revision": 1})
        assert up.status_code == 200 and up.json()["revision"] == 2
        stale = alice.patch(f"/memories/{mid}", json={"text": "again", "expected_revision": 1})
        assert stale.status_code == 409 and stale.json()["error"]["field"] == "expected_revision"
        gone = alice.delete(f"/memories/{mid}")
        assert gone.status_code == 200 and gone.json()["directive"]["kind"] == "forget_directive"
        assert alice.get(f"/memories/{mid}").status_code == 404
        events = [e["event"] for e in alice.get(f"/memories/{mid}/history").json()["events"]]
        assert events[0] == "stored" and events[-1] == "forgotten" and "retrieved" in events
        assert alice.patch(f"/memories/{mid}", json={"text": "back"}).status_code == 404
        after = alice.post("/search", json={"query": "What is my locker code?"}).json()
        assert after["forgotten_relevant"] is True  # the directive took no slot, and is flagged
        assert all(h["kind"] == "memory" for h in after["results"])
        assert alice.get("/memories").json()["results"] == []  # memories only


def test_batch_add_and_delete_all_for_the_caller(server):
    with client(server, "carol-key-0123456789") as carol, client(server, "bob-key-0123456789ab") as bob:
        kept = bob.post("/memories", json={"text": "Bob waters the ferns on Sundays."}).json()["id"]
        r = carol.post("/memories/batch", json={"items": [{"text": "I take the 8:10 train."},
                                                          {"text": "I'm learning Portuguese.", "metadata": {"t": 1}}],
                                                "agent_id": "tutor"})
        assert r.status_code == 201, r.text
        added = r.json()["results"]
        assert [a["agent_id"] for a in added] == ["tutor", "tutor"] and added[1]["metadata"] == {"t": 1}
        assert {m["id"] for m in carol.get("/memories").json()["results"]} == {a["id"] for a in added}
        bad = carol.post("/memories/batch", json={"items": [{"text": "ok"}, {"text": ""}]})
        assert bad.status_code == 422 and bad.json()["error"]["field"].startswith("body.items.1")
        assert len(carol.get("/memories").json()["results"]) == 2  # all or none
        tutor = carol.post("/search", json={"query": "train", "agent_id": "tutor"}).json()["results"]
        assert {h["id"] for h in tutor} == {a["id"] for a in added}
        assert carol.post("/search", json={"query": "train", "agent_id": "other"}).json()["results"] == []
        gone = carol.delete("/memories")
        assert gone.status_code == 200 and sorted(gone.json()["forgotten"]) == sorted(a["id"] for a in added)
        assert carol.get("/memories").json()["results"] == []
        assert bob.get(f"/memories/{kept}").status_code == 200  # another caller's memories stay


def test_errors_name_the_field_and_bodies_are_limited(server):
    with client(server) as alice:
        cases = [
            ({"text": "ok", "colour": "red"}, 422, "body.colour"),
            ({}, 422, "body.text"),
            ({"text": "ok", "fields": {"risk": "extreme"}}, 400, "risk"),
            ({"text": "ok", "metadata": {"x": [1, {"y": None, "": 2}]}}, 400, "metadata.x[1]"),
            ({"text": "x" * 9000}, 413, "body"),
        ]
        for body, status, field in cases:
            r = alice.post("/memories", json=body)
            assert (r.status_code, r.json()["error"]["field"]) == (status, field), (body, r.text)
        r = alice.post("/search", json={"query": "q", "filters": {"n": {"near": 1}}})
        assert r.status_code == 400 and r.json()["error"]["field"] == "filters['n']"
        r = alice.post("/search", json={"query": "q", "limit": 0})
        assert r.status_code == 422 and r.json()["error"]["field"] == "body.limit"
        chunks = (b"{" + b" " * 4096 for _ in range(3))  # streamed, no declared length
        r = alice.post("/memories", content=chunks, headers={"Content-Type": "application/json"})
        assert r.status_code == 413


def test_concurrent_clients_every_acknowledged_write_is_readable(server):
    """8 clients x 50 requests (adds, searches, reads) at once; afterwards every write the server
    acknowledged is readable by its owner and by nobody else."""
    acked: dict[int, list[str]] = {i: [] for i in range(8)}
    failures: list[str] = []

    def run(i: int) -> None:
        with client(server, f"client-{i}-key-0123456789") as c:
            for j in range(50):
                if j % 3 == 0:
                    r = c.post("/memories", json={"text": f"Client {i} note {j}: the parcel is in locker {j}.",
                                                  "metadata": {"j": j}})
                    if r.status_code == 201:
                        acked[i].append(r.json()["id"])
                    else:
                        failures.append(r.text)
                elif j % 3 == 1:
                    r = c.post("/search", json={"query": f"where is parcel {j}?", "limit": 5})
                    if r.status_code != 200 or any(h["id"] not in acked[i] for h in r.json()["results"]):
                        failures.append(f"search {r.status_code} {r.text[:200]}")
                else:
                    r = c.get("/memories", params={"limit": 1000})
                    if r.status_code != 200:
                        failures.append(r.text)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    for i in range(8):
        with client(server, f"client-{i}-key-0123456789") as c:
            listed = {m["id"] for m in c.get("/memories", params={"limit": 1000}).json()["results"]}
            assert listed == set(acked[i]) and len(acked[i]) == 17
            for mid in acked[i][:3]:
                assert c.get(f"/memories/{mid}").status_code == 200
            other = acked[(i + 1) % 8][0]
            assert c.get(f"/memories/{other}").status_code == 404


def test_loopback_only_by_default():
    for host in ("127.0.0.1", "::1", "localhost"):
        check_loopback(host)
    with pytest.raises(ValueError, match="not a loopback"):
        check_loopback("0.0.0.0")
    check_loopback("0.0.0.0", allow_remote=True)
    with pytest.raises(ValueError, match="16 characters"):
        create_app(object(), {"short": "alice"})
