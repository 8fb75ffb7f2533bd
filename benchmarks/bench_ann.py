"""Approximate nearest-neighbour engines for the embedded store, on the project's own vectors.

    python -m benchmarks.bench_ann [--n 100000] [--libs hnswlib,usearch,faiss,qdrant-edge]
                                   [--queries 200] [--cache PATH] [--out FILE]

Vectors. Every MiniLM embedding in the project's embedding cache (``.cache/embeddings``, written
by ``make demo`` / ``make release``: every generated and real text they embedded, memories and
queries; 39,312 on the measured tree). ``--queries`` of them (seed 0) are held out as queries;
the rest are the base, extended to ``--n`` by small perturbations of real vectors: each added
vector is ``normalize(v + 0.025 g)`` for a uniformly drawn base vector ``v`` and
``g ~ N(0, I_384)`` (mean cosine to its source 0.90). Random unit vectors, an ANN worst case,
are not used.

Per engine, in a fresh subprocess (so its memory is its own): build time, resident memory added
by the index (RSS after the build minus RSS with the base loaded), single-query top-100 latency
p50 / p99 over the held-out queries, and recall@100 against the exact top-100 (float64 scores).
The exact scan (torch matrix-vector product + top-100, what the store runs today) is the
reference row. With ``--filtered`` the engines that filter inside the search (hnswlib's filter
callback, faiss's ID selector, Qdrant Edge's payload filter) search a store where 30 % of the
ids are excluded (as Kleene exclusions are), against the exact filtered top-100; beside them,
"post-filter" truncates to 100 first and filters after (what an index without in-search
filtering does), to show what truncation before filtering costs.

Parameters: HNSW M = 16, construction ef = 100, search ef = 200 for every engine; 2 threads.
Timings depend on the machine (the load average is printed); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM, TOP, M, EF_C, EF_S, SIGMA = 384, 100, 16, 100, 200, 0.025
CACHE_KEY = "all-MiniLM-L6-v2-84cb80e7"
# the same vectors under the fast backends' cache keys (within 1 - cos <= 1e-5 of torch's): a
# tree whose encoder ran on OpenVINO or ONNX Runtime holds only those
CACHE_KEYS = (CACHE_KEY, f"{CACHE_KEY}-openvino", f"{CACHE_KEY}-onnx")


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_cached(path: Path) -> np.ndarray:
    """The MiniLM vectors of the embedding cache at ``path``: those of the first key of
    ``CACHE_KEYS`` that has any (torch's, else a fast backend's), ordered by text hash."""
    if not Path(path).is_file():
        raise SystemExit(f"{path}: no embedding cache (run make demo first)")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for key in CACHE_KEYS:
        rows = db.execute("SELECT v FROM emb WHERE key = ? ORDER BY h", (key,)).fetchall()
        if rows:
            return np.stack([np.frombuffer(v, dtype=np.float32) for (v,) in rows])
    raise SystemExit(f"{path}: no vectors under {', '.join(CACHE_KEYS)} (run make demo first)")


def make_data(cache: Path, n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict]:
    rng = np.random.default_rng(seed)
    X = load_cached(cache)
    perm = rng.permutation(len(X))
    Q, R = X[perm[:n_queries]], X[perm[n_queries:]]
    extra = max(0, n - len(R))
    src = rng.integers(0, len(R), extra)
    P = R[src] + SIGMA * rng.standard_normal((extra, DIM)).astype(np.float32)
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    B = np.ascontiguousarray(np.concatenate([R, P])[:n], dtype=np.float32)
    info = {"cached_vectors": int(len(X)), "real_in_base": int(min(len(R), n)), "perturbed": int(extra),
            "mean_cos_perturbed_to_source": float((P[:2000] * R[src[:2000]]).sum(1).mean()) if extra else None}
    return B, Q, info


def exact_topk(B: np.ndarray, Q: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    out = np.empty((len(Q), TOP), dtype=np.int64)
    for i, q in enumerate(Q):
        s = B.astype(np.float64) @ q.astype(np.float64) if len(B) <= 200_000 else (B @ q).astype(np.float64)
        if allowed is not None:
            s[~allowed] = -np.inf
        top = np.argpartition(-s, TOP)[:TOP]
        out[i] = top[np.argsort(-s[top], kind="stable")]
    return out


# ------------------------------------------------------------------------------ engines (workers)


def _build(lib: str, B: np.ndarray, workdir: Path, allowed: np.ndarray | None):
    n = len(B)
    if lib == "exact":
        import torch

        torch.set_num_threads(2)
        Bt = torch.from_numpy(B)
        mask = None if allowed is None else torch.from_numpy(~allowed)

        def search(q, k=TOP):
            s = torch.mv(Bt, torch.from_numpy(q))
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            return torch.topk(s, k).indices.numpy()
        return search, None
    if lib == "hnswlib":
        import hnswlib

        idx = hnswlib.Index(space="ip", dim=DIM)
        idx.init_index(max_elements=n, ef_construction=EF_C, M=M)
        idx.add_items(B, np.arange(n), num_threads=2)
        idx.set_ef(EF_S)
        idx.set_num_threads(1)
        ok = None if allowed is None else allowed

        def search(q, k=TOP):
            if ok is None:
                return idx.knn_query(q, k=k)[0][0]
            return idx.knn_query(q, k=k, filter=lambda label: bool(ok[label]))[0][0]

        def post(q, k=TOP):
            labels = idx.knn_query(q, k=k)[0][0]
            return labels[ok[labels]]
        return search, (post if ok is not None else None)
    if lib == "usearch":
        from usearch.index import Index

        idx = Index(ndim=DIM, metric="ip", dtype="f32", connectivity=M, expansion_add=EF_C,
                    expansion_search=EF_S)
        idx.add(np.arange(n), B, threads=2)

        def search(q, k=TOP):
            return np.asarray(idx.search(q, k, threads=1).keys)
        return search, None
    if lib == "faiss":
        import faiss

        faiss.omp_set_num_threads(2)
        idx = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
        idx.hnsw.efConstruction = EF_C
        idx.add(B)
        faiss.omp_set_num_threads(1)
        params = faiss.SearchParametersHNSW(efSearch=EF_S)
        if allowed is not None:
            bits = np.packbits(allowed, bitorder="little")  # kept alive beside the selector
            sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
            params = faiss.SearchParametersHNSW(efSearch=EF_S, sel=sel)
            params.bits = bits

        def search(q, k=TOP):
            return idx.search(q[None], k, params=params)[1][0]
        return search, None
    if lib == "qdrant-edge":
        import qdrant_edge as qe

        cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Dot),
                            hnsw_config=qe.HnswIndexConfig(m=M, ef_construct=EF_C, full_scan_threshold=10,
                                                           max_indexing_threads=2))
        shard = qe.EdgeShard.create(str(workdir / "shard"), cfg)
        if allowed is not None:  # a keyword field (qdrant-edge 0.9 matches no point on a bool MatchValue)
            shard.update(qe.UpdateOperation.create_field_index("ok", qe.PayloadSchemaType.Keyword))
        for s in range(0, n, 5000):
            pts = [qe.Point(i, B[i].tolist(), None if allowed is None else {"ok": "y" if allowed[i] else "n"})
                   for i in range(s, min(n, s + 5000))]
            shard.update(qe.UpdateOperation.upsert_points(pts))
        shard.optimize()
        flt = None if allowed is None else qe.Filter(must=[qe.FieldCondition(key="ok", match=qe.MatchValue("y"))])
        params = qe.SearchParams(hnsw_ef=EF_S)

        def search(q, k=TOP):
            hits = shard.query(qe.QueryRequest(limit=k, query=qe.Query.Nearest(q.tolist()), filter=flt,
                                               params=params))
            return np.asarray([h.id for h in hits])
        return search, None
    raise SystemExit(f"unknown engine {lib!r}")


def worker(lib: str, data: Path, filtered: bool) -> dict:
    B = np.load(data / "base.npy")
    Q = np.load(data / "queries.npy")
    if lib == "gate":  # in its own process: no numpy BLAS pool spinning beside torch's
        return gate_ms_per_100(B, Q)
    if lib == "store":
        return store_search(B, Q, np.load(data / "gt.npy"))
    gt = np.load(data / ("gt_filtered.npy" if filtered else "gt.npy"))
    allowed = np.load(data / "allowed.npy") if filtered else None
    rss0 = _rss_mb()
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        search, post = _build(lib, B, Path(tmp), allowed)
        build_s = time.perf_counter() - t
        rss1 = _rss_mb()
        for q in Q[:5]:
            search(q)  # warm up
        out = {"engine": lib, "n": int(len(B)), "filtered": filtered, "build_s": build_s,
               "index_mb": rss1 - rss0, "base_mb": B.nbytes / 2**20}
        for name, fn in (("", search), ("post_", post)):
            if fn is None:
                continue
            lat, rec, got = [], [], []
            for i, q in enumerate(Q):
                t = time.perf_counter()
                ids = np.asarray(fn(q))
                lat.append((time.perf_counter() - t) * 1e3)
                rec.append(len(set(ids.tolist()) & set(gt[i].tolist())) / TOP)
                got.append(len(ids))
            out.update({f"{name}p50_ms": float(np.percentile(lat, 50)), f"{name}p99_ms": float(np.percentile(lat, 99)),
                        f"{name}recall_at_100": float(np.mean(rec)), f"{name}mean_returned": float(np.mean(got))})
    return out


def store_search(B: np.ndarray, Q: np.ndarray, gt: np.ndarray) -> dict:
    """EmbeddedStore.search end to end (one namespace, k = 100): exact vs the store's approximate
    index (build on the first approximate search), with the exact cosines and id ties the store
    returns; recall against the exact ranking."""
    import torch

    from memgate.retriever import EmbeddedStore, StoredMemory
    from memgate.retriever.stores.embedded.store import DEFAULT_THRESHOLD

    torch.set_num_threads(2)
    ident = {"id": "bench/minilm-cache", "revision": "r", "normalize": True, "dim": DIM}
    out = {"engine": "store", "n": int(len(B)), "ann_threshold": DEFAULT_THRESHOLD}
    with tempfile.TemporaryDirectory() as tmp:
        store = EmbeddedStore(Path(tmp) / "s", ident, fsync=False, audit=None, ann_threshold=DEFAULT_THRESHOLD)
        t = time.perf_counter()
        for start in range(0, len(B), 20_000):
            chunk = range(start, min(len(B), start + 20_000))
            store.add_many([StoredMemory(f"m{i:07d}", "ns", "x") for i in chunk], B[chunk.start:chunk.stop], encoder=ident)
        out["write_s"] = time.perf_counter() - t
        t = time.perf_counter()
        store.search(Q[0], ["ns"], TOP, exact=False)
        out["first_approx_search_s"] = time.perf_counter() - t  # builds the graph
        for name, exact in (("exact", True), ("approx", False)):
            lat, rec = [], []
            for i, q in enumerate(Q):
                t = time.perf_counter()
                ids = [int(m[1:]) for m, _ in store.search(q, ["ns"], TOP, exact=exact)]
                lat.append((time.perf_counter() - t) * 1e3)
                rec.append(len(set(ids) & set(gt[i].tolist())) / TOP)
            out.update({f"{name}_p50_ms": float(np.percentile(lat, 50)), f"{name}_p99_ms": float(np.percentile(lat, 99)),
                        f"{name}_recall_at_100": float(np.mean(rec))})
        store.close()
    return out


def gate_ms_per_100(B: np.ndarray, Q: np.ndarray, repeats: int = 200) -> dict:
    """The gate's share of a gated query: re-scoring 100 candidates with the released gate
    through the retriever's fused scorer (memory parts precomputed, as the retriever does)."""
    import torch

    from memgate.integrations.gate_default import released_gate_dir
    from memgate.model.gate import MemGate
    from memgate.model.scoring import FusedGateScorer

    torch.set_num_threads(2)
    scorer = FusedGateScorer(MemGate.from_pretrained(released_gate_dir()).eval())
    V = torch.from_numpy(np.ascontiguousarray(B[:TOP]))
    with torch.no_grad():
        vpart = scorer.memory_part(V)
        lat = []
        for i in range(repeats):
            q = torch.from_numpy(Q[i % len(Q)])
            t = time.perf_counter()
            scorer.score(q, V, vpart)
            lat.append((time.perf_counter() - t) * 1e3)
    return {"gate_ms_p50": float(np.percentile(lat, 50)), "gate_ms_p99": float(np.percentile(lat, 99))}


# ------------------------------------------------------------------------------ driver


def run(n: int, libs: list[str], n_queries: int, cache: Path, filtered: bool) -> dict:
    started = time.perf_counter()
    B, Q, info = make_data(cache, n, n_queries)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        np.save(data / "base.npy", B)
        np.save(data / "queries.npy", Q)
        np.save(data / "gt.npy", exact_topk(B, Q))
        if filtered:
            allowed = np.random.default_rng(1).random(len(B)) >= 0.30
            np.save(data / "allowed.npy", allowed)
            np.save(data / "gt_filtered.npy", exact_topk(B, Q, allowed))
        for lib in ["exact", *libs]:
            for flt in ((False, True) if filtered and lib in ("exact", "hnswlib", "faiss", "qdrant-edge") else (False,)):
                proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_ann", "--worker", lib,
                                       "--data", str(data)] + (["--filtered"] if flt else []),
                                      capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
                if proc.returncode != 0:
                    rows.append({"engine": lib, "filtered": flt, "error": proc.stderr.strip().splitlines()[-1:]})
                    continue
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(format_row(rows[-1]), flush=True)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_ann", "--worker", "store", "--data", str(data)],
                              capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        store = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {"error": proc.stderr[-300:]}
        if "error" not in store:
            print(f"EmbeddedStore.search, k=100: exact p50 {store['exact_p50_ms']:.2f} ms p99 {store['exact_p99_ms']:.2f} ms; "
                  f"approximate p50 {store['approx_p50_ms']:.2f} ms p99 {store['approx_p99_ms']:.2f} ms, recall@100 "
                  f"{store['approx_recall_at_100']:.4f} (graph built on the first search in "
                  f"{store['first_approx_search_s']:.1f} s)", flush=True)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_ann", "--worker", "gate", "--data", str(data)],
                              capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        gate = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {
            "gate_ms_p50": float("nan"), "gate_ms_p99": float("nan"), "error": proc.stderr[-300:]}
    print(f"gate re-scoring of 100 candidates (released gate, FusedGateScorer, write-time split): "
          f"p50 {gate['gate_ms_p50']:.3f} ms, p99 {gate['gate_ms_p99']:.3f} ms", flush=True)
    ratios = {f"{r['engine']}{'_filtered' if r['filtered'] else ''}": (r["p50_ms"] + gate["gate_ms_p50"]) / r["p50_ms"]
              for r in rows if "p50_ms" in r}
    print("gated / plain query time (p50 top-100 + p50 gate) / p50 top-100: "
          + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()), flush=True)
    return {"n": n, "queries": n_queries, "data": info, "gate": gate, "gated_over_plain": ratios, "store": store,
            "params": {"M": M, "ef_construction": EF_C, "ef_search": EF_S},
            "load_avg_1m": os.getloadavg()[0], "cpu_count": os.cpu_count(), "rows": rows,
            "seconds": time.perf_counter() - started}


def format_row(r: dict) -> str:
    if "error" in r:
        return f"{r['engine']:<12} {'filtered' if r['filtered'] else '':<8} failed: {r['error']}"
    line = (f"{r['engine']:<12} {'filtered' if r['filtered'] else '':<8} n={r['n']:>8,} build {r['build_s']:7.1f} s  "
            f"+{r['index_mb']:7.1f} MB  top-100 p50 {r['p50_ms']:7.3f} ms  p99 {r['p99_ms']:7.3f} ms  "
            f"recall@100 {r['recall_at_100']:.4f}")
    if "post_p50_ms" in r:
        line += (f"  | post-filter: recall {r['post_recall_at_100']:.4f}, "
                 f"{r['post_mean_returned']:.1f} of 100 returned")
    return line


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--libs", default="hnswlib,usearch,faiss,qdrant-edge")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--filtered", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.data, args.filtered)))
        return {}
    from memgate.contract.config import REPO_ROOT

    cache = args.cache or Path(os.environ.get("MEMGATE_EMBED_CACHE", REPO_ROOT / ".cache/embeddings/embeddings.sqlite"))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; vectors from {cache}")
    res = run(args.n, [x for x in args.libs.split(",") if x], args.queries, cache, args.filtered)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, sort_keys=True))
    if args.out:
        args.out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    return res


if __name__ == "__main__":  # pragma: no cover
    main()
