"""Micro-batched embeddings (memgate.model.encoder_batching) give what each request gets alone:
the same vector bits, the same stored vectors and the same search answers, over a real uvicorn
server with concurrent httpx clients."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from memgate import Memory  # noqa: E402
from memgate.integrations.http_server import create_app  # noqa: E402
from memgate.integrations.uvicorn_thread import ServerThread  # noqa: E402
from memgate.model.encoder_batching import EmbeddingBatcher  # noqa: E402

CLIENTS = 8
KEYS = {f"batch-client-{i}-0123456789": f"user-{i}" for i in range(CLIENTS)}
TEXTS = [f"User {i} keeps the spare key {'under the blue flower pot by the back door' if i % 2 else 'here'}."
         for i in range(CLIENTS)]  # two token widths


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    with Memory(path=tmp_path_factory.mktemp("batching") / "store", fsync=False) as m:
        m.warm_up()
        yield m


def _together(fn, n: int) -> list:
    barrier, out = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        barrier.wait()
        out[i] = fn(i)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_prefetched_vectors_are_the_bits_each_text_gets_alone(mem):
    encoder = mem.retriever.encoder
    if encoder.backend == "torch":
        pytest.skip("only the fast encoder backends batch")
    texts = [f"where did user {i} put the {'key' if i % 3 else 'spare key to the garden shed'}?" for i in range(CLIENTS)]
    alone = np.stack([encoder.model.encode([t])[0] for t in texts])
    batcher = EmbeddingBatcher(encoder, window_ms=5)
    try:
        _together(lambda i: batcher.prefetch([texts[i]]), CLIENTS)
        assert batcher.texts == CLIENTS and batcher.batches < CLIENTS  # batched, per width
        taken_before = batcher.vectors.taken
        got = np.stack([encoder.encode([t], progress=False, cache=False)[0] for t in texts])
        assert batcher.vectors.taken - taken_before == CLIENTS  # encode took the batched vectors
        assert np.array_equal(got, alone)
    finally:
        encoder.prefetched = None


def test_concurrent_adds_and_searches_answer_as_unbatched(mem):
    encoder = mem.retriever.encoder
    app = create_app(mem, KEYS, batch_window_ms=5)
    with ServerThread(app) as url:
        def client(i: int):
            return httpx.Client(base_url=url, headers={"X-API-Key": f"batch-client-{i}-0123456789"}, timeout=60)

        def add(i: int) -> str:
            with client(i) as c:
                r = c.post("/memories", json={"text": TEXTS[i]})
                assert r.status_code == 201, r.text
                return r.json()["id"]

        def search(i: int) -> list:
            with client(i) as c:
                r = c.post("/search", json={"query": f"where is the key of user {i}?", "limit": 3})
                assert r.status_code == 200, r.text
                return [(h["id"], h["score"]) for h in r.json()["results"]]

        ids = _together(add, CLIENTS)
        served = _together(search, CLIENTS)
    assert encoder.prefetched.taken >= CLIENTS  # the requests' encodes took batched vectors
    encoder.prefetched = None  # from here on: each embeds alone
    matrix = mem.store.vector_matrix()
    for i, memory_id in enumerate(ids):  # the stored vectors are the unbatched ones
        record = mem.store.get(memory_id, namespace=mem.retriever._index.namespaces[  # noqa: SLF001
            mem.retriever._index.by_id[memory_id][0]])  # noqa: SLF001
        slot = int(mem.retriever._index.slot[mem.retriever._index.pos[(record.namespace, memory_id)]])  # noqa: SLF001
        assert np.array_equal(matrix[slot], encoder.model.encode([TEXTS[i]])[0])
    for i in range(CLIENTS):  # and the searches answer as unbatched ones
        hits = mem.search(f"where is the key of user {i}?", user_id=f"user-{i}", limit=3)
        assert [(h["id"], h["score"]) for h in hits["results"]] == served[i]
