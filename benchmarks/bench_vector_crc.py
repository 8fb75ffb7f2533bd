"""What the read-time CRC check costs (issue 34): ``EmbeddedStore.search`` and ``vectors_for``
with the check of the rows they return against their CRC-32 (``memgate.retriever.stores.embedded.vector_file``)
and without it (the same code with the check replaced by a no-op: the code before the change),
interleaved call by call in one process.

    python -m benchmarks.bench_vector_crc [--sizes 1000,20000,100000] [--ks 10,100,200] [--repeats 200]

Random unit float32 vectors (d = 384, the bundled encoder's width) in one namespace; exact
search (the path every store size below the approximate index's threshold takes); a query is a
random unit vector. Prints one JSON line per (size, k): p50 / p90 in microseconds with and
without the check and their ratio; then ``GatedRetriever.retrieve(k=10)`` with the released gate
(re-scoring depth 200, so the store returns 200 rows) on the largest store, the query vectors
given (no text encoding): what a gated agent search pays. Timing only: nothing is asserted
(tests assert behaviour). Run with ``OMP_NUM_THREADS=1`` for stable figures on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384


def identity() -> dict:
    """The bundled encoder's identity (the released gate's; the model is not loaded)."""
    from memgate.model.encoder import Encoder, EncoderConfig

    return Encoder(EncoderConfig(cache_dir=None)).identity


class GivenQueries:
    """An encoder stand-in for the timing loop only: returns the next prepared query vector (the
    figure measured is the search after encoding)."""

    def __init__(self, ident: dict, vectors: np.ndarray):
        self.identity, self._it = ident, iter(list(vectors) * 4)

    def encode(self, texts, progress=False):
        return np.stack([next(self._it) for _ in texts])


def build(path: Path, n: int, seed: int = 0):
    from memgate.retriever import EmbeddedStore, StoredMemory

    ident = identity()
    store = EmbeddedStore(path, ident, fsync=False)
    rng = np.random.default_rng(seed)
    for start in range(0, n, 5000):
        size = min(5000, n - start)
        v = rng.normal(size=(size, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        store.add_many([StoredMemory(f"m{start + i}", "ns", f"record {start + i}") for i in range(size)], v,
                       encoder=ident)
    return store


def timed(call, repeats: int, off, on) -> tuple[list, list]:
    """Interleaved timings (µs) of ``call`` with the check off and on."""
    without, with_ = [], []
    for _ in range(repeats):
        for switch, out in ((off, without), (on, with_)):
            switch()
            t = time.perf_counter()
            call()
            out.append((time.perf_counter() - t) * 1e6)
    return without, with_


def main(argv=None) -> int:
    from memgate.retriever.stores.embedded.vector_file import VectorFile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,20000,100000")
    parser.add_argument("--ks", default="10,100,200")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    checked_rows = VectorFile.check_returned
    checked_row = VectorFile.checked_row

    def off():
        VectorFile.check_returned = lambda self, positions, index, matrix: None
        VectorFile.checked_row = lambda self, matrix, slot, crc, name: matrix[slot]

    def on():
        VectorFile.check_returned, VectorFile.checked_row = checked_rows, checked_row

    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            store = build(Path(tmp) / f"s{n}", n)
            store.search(np.ones(DIM, dtype=np.float32) / DIM ** 0.5, ["ns"], 1)  # (index built)
            for k in (int(x) for x in args.ks.split(",")):
                queries = rng.normal(size=(args.repeats, DIM)).astype(np.float32)
                it = iter(list(queries) * 2)
                without, with_ = timed(lambda: store.search(next(it), ["ns"], k), args.repeats, off, on)
                row = {"what": "search", "records": n, "k": k,
                       "p50_us_without": round(statistics.median(without), 1),
                       "p50_us_with": round(statistics.median(with_), 1),
                       "p90_us_without": round(np.percentile(without, 90), 1),
                       "p90_us_with": round(np.percentile(with_, 90), 1)}
                row["ratio_p50"] = round(row["p50_us_with"] / row["p50_us_without"], 3)
                print(json.dumps(row), flush=True)
            ids = [f"m{i}" for i in rng.choice(n, size=min(n, 100), replace=False)]
            without, with_ = timed(lambda: store.vectors_for(ids, namespace="ns"), max(20, args.repeats // 10), off, on)
            print(json.dumps({"what": "vectors_for", "records": n, "ids": len(ids),
                              "p50_us_without": round(statistics.median(without), 1),
                              "p50_us_with": round(statistics.median(with_), 1),
                              "ratio_p50": round(statistics.median(with_) / statistics.median(without), 3)}),
                  flush=True)
            if n == max(int(x) for x in args.sizes.split(",")):
                retrieval(store, rng, args.repeats, off, on)
            store.close()
    on()
    return 0


def retrieval(store, rng, repeats: int, off, on) -> None:
    from memgate.contract.records import QueryContext
    from memgate.integrations.gate_default import released_gate_dir
    from memgate.retriever import GatedRetriever, RetrieverConfig

    queries = rng.normal(size=(repeats * 2 + 1, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    r = GatedRetriever(store, GivenQueries(store.encoder_identity, queries), gate=released_gate_dir(),
                       config=RetrieverConfig(acl=None))
    count = iter(range(10**9))

    def one():
        ctx = QueryContext(query_id=f"b{next(count)}", text="", principal="p", namespaces=frozenset({"ns"}))
        r.retrieve("q", ctx, k=10)
    one()
    without, with_ = timed(one, repeats, off, on)
    print(json.dumps({"what": "GatedRetriever.retrieve (released gate, depth 200)", "records": len(store),
                      "k": 10, "p50_us_without": round(statistics.median(without), 1),
                      "p50_us_with": round(statistics.median(with_), 1),
                      "ratio_p50": round(statistics.median(with_) / statistics.median(without), 3)}), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
