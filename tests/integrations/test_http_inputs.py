"""Bad input over HTTP fails fast in the documented shape (issue 34): a time that is not one, a
body that is not UTF-8 JSON or nests too deeply, metadata nested beyond the limit (refused before
anything is stored), FastAPI's own errors, and two valid keys naming two principals. A real
uvicorn server on 127.0.0.1 with httpx; the hash encoder (no model: these are input checks)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from memgate import Memory  # noqa: E402
from memgate.integrations.http_server import create_app  # noqa: E402
from memgate.integrations.uvicorn_thread import ServerThread  # noqa: E402
from memgate.retriever.records.memory import MAX_ATTRIBUTES_DEPTH  # noqa: E402
from tests.retriever.store_helpers import HashEncoder  # noqa: E402

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789ab"
KEYS = {ALICE: "alice", BOB: "bob"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with Memory(path=tmp_path_factory.mktemp("http-inputs") / "store", encoder=HashEncoder(), gate=None,
                fsync=False) as mem:
        with ServerThread(create_app(mem, KEYS)) as url:
            yield url


@pytest.fixture
def alice(server):
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {ALICE}"}, timeout=60) as c:
        yield c


def error_of(response, status: int) -> dict:
    """The documented error shape, and only it."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"field", "message"}, body
    return body["error"]


def test_search_refuses_a_time_that_is_not_a_time(alice):
    alice.post("/memories", json={"text": "The gym opens at six."}).raise_for_status()
    for bad in ("not-a-time", "2026-13-45", "yesterday"):
        error = error_of(alice.post("/search", json={"query": "gym", "time": bad}), 400)
        assert error["field"] == "time" and bad in error["message"], error
    for good in ("2026-05-01", "2026-05-01T12:00:00+00:00"):
        assert alice.post("/search", json={"query": "gym", "time": good}).status_code == 200


@pytest.mark.parametrize("body, says", [
    (b"[" * 5000 + b"]" * 5000, "nests too deeply"),
    (b'{"query": ' + b"[" * 2000 + b"]" * 2000 + b"}", "nests too deeply"),
    (b'{"query": "caf\xe9"}', "not UTF-8"),
    (b'{"query": "\xff\xfe"}', "not UTF-8"),
], ids=["deep-array", "deep-field", "latin-1", "invalid-bytes"])
def test_an_unparsable_body_answers_the_documented_error(alice, body, says):
    error = error_of(alice.post("/search", content=body, headers={"Content-Type": "application/json"}), 400)
    assert error["field"] == "body" and says in error["message"], error


def test_fastapis_own_errors_answer_the_documented_shape(alice):
    assert error_of(alice.get("/no-such-path"), 404)["message"] == "Not Found"
    assert error_of(alice.put("/memories"), 405)["message"] == "Method Not Allowed"
    assert error_of(alice.post("/search", content=b'{"query": ', headers={"Content-Type": "application/json"}),
                    422)["field"].startswith("body")


def test_metadata_nested_beyond_the_limit_is_refused_before_it_is_stored(alice):
    before = alice.get("/memories").json()["results"]
    for depth in (MAX_ATTRIBUTES_DEPTH + 1, 300):  # (300 used to be stored, then fail to serialise: a 400 after a write)
        nested = "[" * depth + "]" * depth
        body = f'{{"text": "A deeply nested note.", "metadata": {{"a": {nested}}}}}'.encode()
        error = error_of(alice.post("/memories", content=body, headers={"Content-Type": "application/json"}), 400)
        assert error["field"].startswith("metadata.a") and "nests deeper" in error["message"], error
    assert alice.get("/memories").json()["results"] == before
    ok = "[" * (MAX_ATTRIBUTES_DEPTH - 1) + "]" * (MAX_ATTRIBUTES_DEPTH - 1)
    body = f'{{"text": "A nested note.", "metadata": {{"a": {ok}}}}}'.encode()
    assert alice.post("/memories", content=body, headers={"Content-Type": "application/json"}).status_code == 201


def test_two_valid_keys_of_two_principals_are_refused(server):
    with httpx.Client(base_url=server, timeout=60) as anon:
        both = {"Authorization": f"Bearer {ALICE}", "X-API-Key": BOB}
        error = error_of(anon.get("/memories", headers=both), 401)
        assert error["field"] == "authorization" and "different principals" in error["message"]
        one_unknown = {"Authorization": "Bearer unknown-key-0123456789", "X-API-Key": BOB}
        assert error_of(anon.get("/memories", headers=one_unknown), 401)["message"] == "unknown API key"
        same = {"Authorization": f"Bearer {ALICE}", "X-API-Key": ALICE}
        assert anon.get("/memories", headers=same).status_code == 200
        assert anon.get("/memories", headers={"X-API-Key": BOB}).status_code == 200
