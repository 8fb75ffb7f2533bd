"""QdrantStore beside EmbeddedStore: filtered top-100 latency, recall against exact search, and the
gate's overhead ratio on each (issue 9; a member of the ablations suite).

    python -m benchmarks.bench_qdrant [--n 100000] [--repeats 20] [--namespaces 4] [--readable 2]
                                      [--threads 2] [--url URL] [--out FILE]

N random unit vectors (dim 384, the bundled encoder's width) are stored in both stores, spread
round-robin over ``--namespaces`` namespaces; each query reads ``--readable`` of them, so the
namespace restriction removes part of the collection. Measured in one run, interleaved round-robin
per query so background load hits every variant alike; medians (p90 beside them):

- ``embedded_top_ms``: the embedded store's path: exact cosine over the support's rows of the
  memory-mapped matrix (numpy) + top-100 selection.
- ``qdrant_top_ms``: ``QdrantStore.search(q, readable, 100)``: the namespace restriction as a
  payload filter inside Qdrant's search (HNSW on a server; local mode is always exhaustive).
- ``qdrant_exact_ms``: the same with ``exact=True`` (differs from the above only on a server).
- ``recall_at_100``: |Qdrant top-100 & exact top-100| / 100, mean over queries (1.0 in local
  mode, which has no approximate index).
- ``gate_ms_per_100``: the retriever's fused gate (``FusedGateScorer``, width 512, write-time
  split) re-scoring the 100 candidates; ``overhead_ratio_*`` = median(top-100 + gate) /
  median(top-100) for each store (embedded: timed as one block; Qdrant: the search's time plus
  the gate on its hits, timed separately, since a local-mode search is too slow to run twice).

Local mode (``QdrantClient(":memory:")``, the default) evaluates payload filters in Python and is
meant for tests and laptops, not for 100,000 memories; ``--url`` points at a server (API key from
``QDRANT_API_KEY``). Nothing is written unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

DIM = 384
K = 100


def _stats(xs: list[float]) -> dict:
    a = np.asarray(xs, dtype=np.float64)
    return {"median": round(float(np.median(a)), 3), "p90": round(float(np.percentile(a, 90)), 3)}


def _timed(fn, *args, **kwargs):
    c = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, (time.perf_counter() - c) * 1e3


def run(n: int = 100_000, repeats: int = 20, namespaces: int = 4, readable: int = 2,
        threads: int = 2, url: str | None = None, seed: int = 0) -> dict:
    import torch

    torch.set_num_threads(threads)
    from memgate.model.gate import MemGate, MemGateConfig
    from memgate.model.scoring import FusedGateScorer
    from memgate.retriever import EmbeddedStore, StoredMemory
    from memgate.retriever.stores.qdrant.store import QdrantStore

    ident = {"id": "bench-random", "revision": "1", "normalize": True, "dim": DIM}
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(n, DIM)).astype(np.float32)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    ns_names = [f"ns{i}" for i in range(namespaces)]
    ns_of = np.arange(n) % namespaces
    read = ns_names[:readable]
    mems = [StoredMemory(f"m{i:07d}", ns_names[ns_of[i]], f"memory {i}") for i in range(n)]

    tmp = tempfile.TemporaryDirectory()
    t0 = time.perf_counter()
    emb = EmbeddedStore(os.path.join(tmp.name, "emb"), ident, audit=None, fsync=False)
    for s in range(0, n, 10_000):
        emb.add_many(mems[s:s + 10_000], V[s:s + 10_000], encoder=ident)
    build_emb = time.perf_counter() - t0
    t0 = time.perf_counter()
    kw = {"url": url} if url else {"location": ":memory:"}
    qd = QdrantStore(f"bench_{n}", ident, **kw)
    for s in range(0, n, 2_000):
        qd.add_many(mems[s:s + 2_000], V[s:s + 2_000], encoder=ident)
    build_qd = time.perf_counter() - t0

    # the embedded path as the retriever runs it: support positions from its index, exact cosine
    matrix = emb.vector_matrix()
    _, entries = emb.changes_since(0)
    support = np.asarray([e.slot for e in entries if e.namespace in read], dtype=np.int64)
    ids = np.asarray([e.memory_id for e in entries], dtype=object)
    id_by_slot = {e.slot: e.memory_id for e in entries}

    gate = MemGate(MemGateConfig(dim=DIM)).eval()
    scorer = FusedGateScorer(gate)
    with torch.no_grad():
        vpart = scorer.memory_part(torch.from_numpy(np.ascontiguousarray(V))).numpy()
    slot_of = {e.memory_id: e.slot for e in entries}

    def embedded_top(q):
        cos = np.asarray(matrix[support]) @ q
        top = np.argpartition(-cos, K)[:K]
        return support[top[np.argsort(-cos[top])]]

    def gate_score(q, slots):
        with torch.no_grad():
            scorer.score(torch.from_numpy(q), torch.from_numpy(V[slots]), torch.from_numpy(vpart[slots]))

    t = {k: [] for k in ("embedded_top_ms", "qdrant_top_ms", "qdrant_exact_ms", "gate_ms_per_100",
                         "embedded_top_gate_ms", "qdrant_top_gate_ms")}
    recalls = []
    for r in range(repeats + 2):  # two warm-up rounds
        q = rng.normal(size=DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        exact, e_ms = _timed(embedded_top, q)
        hits, q_ms = _timed(qd.search, q, read, K, exact=False)
        _, qx_ms = _timed(qd.search, q, read, K, exact=True)
        _, g_ms = _timed(gate_score, q, exact)
        _, eg_ms = _timed(lambda: gate_score(q, embedded_top(q)))
        c = time.perf_counter()
        gate_score(q, np.asarray([slot_of[m] for m, _ in hits], dtype=np.int64))
        qg_ms = q_ms + (time.perf_counter() - c) * 1e3  # (local search is too slow to time twice)
        if r < 2:
            continue
        for key, val in zip(t, (e_ms, q_ms, qx_ms, g_ms, eg_ms, qg_ms)):
            t[key].append(val)
        truth = {id_by_slot[int(s)] for s in exact}
        recalls.append(len(truth & {m for m, _ in hits}) / K)
    out = {key: _stats(v) for key, v in t.items()}
    out["overhead_ratio_embedded"] = round(out["embedded_top_gate_ms"]["median"] / out["embedded_top_ms"]["median"], 3)
    out["overhead_ratio_qdrant"] = round(out["qdrant_top_gate_ms"]["median"] / out["qdrant_top_ms"]["median"], 3)
    out["qdrant_over_embedded"] = round(out["qdrant_top_ms"]["median"] / out["embedded_top_ms"]["median"], 2)
    out["recall_at_100"] = round(float(np.mean(recalls)), 4)
    out.update(n=n, support=int(len(support)), repeats=repeats, threads=threads,
               mode="server" if url else "local (:memory:)", build_s={"embedded": round(build_emb, 1),
                                                                    "qdrant": round(build_qd, 1)})
    del ids
    qd.close()
    emb.close()
    tmp.cleanup()
    return out


def format_report(r: dict) -> str:
    lines = [f"n={r['n']} support={r['support']} mode={r['mode']} repeats={r['repeats']} "
             f"threads={r['threads']} build_s={r['build_s']}",
             f"{'':24s}{'median ms':>12s}{'p90 ms':>10s}"]
    for key in ("embedded_top_ms", "qdrant_top_ms", "qdrant_exact_ms", "gate_ms_per_100",
                "embedded_top_gate_ms", "qdrant_top_gate_ms"):
        lines.append(f"{key:24s}{r[key]['median']:12.3f}{r[key]['p90']:10.3f}")
    lines.append(f"overhead ratio (top+gate)/top: embedded {r['overhead_ratio_embedded']}  "
                 f"qdrant {r['overhead_ratio_qdrant']};  qdrant/embedded top-100: "
                 f"{r['qdrant_over_embedded']}x;  recall@100 vs exact: {r['recall_at_100']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--namespaces", type=int, default=4)
    ap.add_argument("--readable", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--url", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    r = run(a.n, a.repeats, a.namespaces, a.readable, a.threads, a.url)
    print(format_report(r))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(r, f, indent=2)


if __name__ == "__main__":
    main()
