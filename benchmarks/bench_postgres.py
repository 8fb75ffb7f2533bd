"""PostgresStore beside EmbeddedStore at 100,000 memories (issue 37; part of ``make bench``).

    python -m benchmarks.bench_postgres [--n 100000] [--repeats 100] [--forgets 30] [--out FILE]

Both stores hold the same N unit vectors (dim 384, the bundled encoder's width): the project's
cached MiniLM vectors padded with perturbed copies, as benchmarks/bench_ann.py (``--vectors
cached``, the default when the embedding cache exists), or random ones (``--vectors random``: no
structure, the hardest case for an HNSW graph), spread round-robin over 4 namespaces; a query
reads 2 of them. The load goes through each store's own
``add_many`` (batches of 1,000); PostgreSQL's HNSW index is then built in one ``CREATE INDEX``.
Both are cached between runs in ``.cache/bench_postgres/<key>`` (key: N, dim, seed, the vectors,
the store formats), the PostgreSQL data folder included (its server is started for the run and stopped
after); each run's writes go to a namespace of their own, so the cached 100,000 stay as they are
apart from the tombstones of earlier runs' forgets.

Measured in one run, the two stores interleaved per repetition (so background load hits both
alike), p50 and p99 in ms:

- ``add``: ``store.add`` of one new record (PostgreSQL: one transaction, committed durably);
- ``search_exact``: ``store.search(q, 2 namespaces, 100)``, exact on both;
- ``search_approx``: ``exact=False``: the embedded store's hnswlib graphs (the ``[ann]`` extra)
  and pgvector's HNSW index with the iterative scan;
- ``forget``: ``store.forget`` of one record (its tombstone, the directive, the suppression
  entries); on PostgreSQL the default erasure window (the table pass that prunes the erased row
  versions runs in the background, within 5 s of the commit) and, measured after it, the same
  with ``erase_in_background=False`` (the pass inside the forget: the old behaviour);
- ``refresh``: what a retriever pays per query to stay current: ``version()`` when nothing
  changed, and ``version()`` + ``changes_since()`` after another process's one write;
- ``recall_at_100``: |HNSW top-100 & exact top-100| / 100 on PostgreSQL, mean over the queries
  (and over 30 queries for ``hnsw_ef`` 100, 200, 400);
- ``erasure``: the seconds from the last forget's return until the eraser's pass is done
  (``clean_after_s``; the contract: within 5 s), then a byte search of every data file of the
  store's relations (after a ``CHECKPOINT``) for the forgotten texts and vectors (both forget
  forms' records), and again after ``compact()`` (``VACUUM FULL``, timed).

Ratios are PostgreSQL / embedded of the p50s. Timings depend on the machine; nothing is asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

DIM = 384
K = 100
NAMESPACES = ("ns0", "ns1", "ns2", "ns3")
READABLE = ["ns0", "ns1"]
IDENT = {"id": "bench-random-unit", "revision": "1", "normalize": True, "dim": DIM}
REPO = Path(__file__).resolve().parents[1]


EMBED_CACHE = Path(os.environ.get("MEMGATE_EMBED_CACHE", REPO / ".cache" / "embeddings" / "embeddings.sqlite"))


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _data(n: int, repeats: int, seed: int, source: str) -> tuple[np.ndarray, np.ndarray]:
    """(base vectors, queries): the project's cached MiniLM vectors padded to ``n`` with perturbed
    copies (bench_ann's data, so the recall is comparable to the embedded store's) or random unit
    vectors (no structure: the hardest case for an HNSW graph)."""
    if source == "cached":
        from benchmarks.bench_ann import make_data

        if not EMBED_CACHE.exists():
            raise SystemExit(f"{EMBED_CACHE}: no embedding cache (run make demo first)")
        base, queries, _ = make_data(EMBED_CACHE, n, repeats, seed)
        return base, queries
    return _vectors(n, seed), _vectors(repeats, seed + 2)


def _pct(xs: list) -> dict:
    a = np.asarray(xs, dtype=np.float64)
    return {"p50": round(float(np.percentile(a, 50)), 3), "p99": round(float(np.percentile(a, 99)), 3),
            "n": int(len(a))}


def _timed(fn, *args, **kwargs) -> float:
    t = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - t) * 1e3


def _load(store, vectors: np.ndarray) -> float:
    from memgate.retriever import StoredMemory

    n = len(vectors)
    t = time.perf_counter()
    for start in range(0, n, 1000):
        ids = range(start, min(n, start + 1000))
        store.add_many([StoredMemory(f"m{i:06d}", NAMESPACES[i % len(NAMESPACES)], f"memory number {i}")
                        for i in ids], vectors[start:start + len(ids)], encoder=IDENT)
    return time.perf_counter() - t


def _open(cache: Path, vectors: np.ndarray, log, hnsw: bool = True) -> tuple:
    """(embedded store, local server, postgres store, setup figures), loading what is not cached."""
    from memgate.retriever import EmbeddedStore
    from memgate.retriever.stores.embedded import ann
    from memgate.retriever.stores.postgres.local import LocalServer
    from memgate.retriever.stores.postgres.store import PostgresStore
    from memgate.retriever.stores.postgres.tables import _HNSW, statement

    setup: dict = {}
    cache.mkdir(parents=True, exist_ok=True)
    threshold = 20_000 if ann.available() else None
    emb = EmbeddedStore(cache / "embedded", IDENT, ann_threshold=threshold)
    if (cache / "embedded.done").exists():
        setup["embedded_load_s"] = json.loads((cache / "embedded.done").read_text())["load_s"]
    else:
        log(f"loading {len(vectors):,} memories into the embedded store ...")
        setup["embedded_load_s"] = round(_load(emb, vectors), 1)
        (cache / "embedded.done").write_text(json.dumps({"load_s": setup["embedded_load_s"]}))
    server = LocalServer(cache / "pgdata")
    pg = PostgresStore(server.url, IDENT, schema="bench")
    done = cache / "postgres.done"
    if done.exists():
        setup.update(json.loads(done.read_text()))
    else:
        log(f"loading {len(vectors):,} memories into PostgreSQL (index dropped for the load) ...")
        with pg._backend.db.session("bench load") as conn:
            conn.execute(statement("DROP INDEX IF EXISTS {s}.records_embedding", "bench"))
        setup["postgres_load_s"] = round(_load(pg, vectors), 1)
        log("building the HNSW index ..." if hnsw else "no HNSW index (--no-hnsw)")
        t = time.perf_counter()
        with pg._backend.db.session("bench index") as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            if hnsw:
                conn.execute(statement(_HNSW, "bench"))
            conn.execute(statement("ANALYZE {s}.records", "bench"))
        setup["postgres_index_build_s"] = round(time.perf_counter() - t, 1)
        done.write_text(json.dumps(setup | {"embedded_load_s": None}))
    return emb, server, pg, setup


def _erasure_check(pg, server, erased: list[tuple[bytes, bytes]]) -> dict:
    """After the forgets: the data files of every relation of the store's schema (table,
    indexes, TOAST), searched for the forgotten records' texts and vectors (``erased``)."""
    with pg._backend.db.session("bench erasure check") as conn:
        conn.execute("CHECKPOINT")
        rels = [r for (r,) in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'bench' AND c.relkind IN ('r', 'i', 't') UNION SELECT pg_relation_filepath(t.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid "
            "WHERE n.nspname = 'bench'").fetchall() if r]
    files = [p for rel in rels for p in (server.pgdata / rel).parent.glob(Path(rel).name + "*")
             if p.is_file() and (p.name == Path(rel).name or p.name[len(Path(rel).name)] in "._")]
    texts = vectors = 0
    where: dict = {}
    for path in files:
        data = path.read_bytes()
        hits = sum(t in data for t, _ in erased), sum(v in data for _, v in erased)
        texts, vectors = texts + hits[0], vectors + hits[1]
        if any(hits):
            where[path.name] = {"texts": hits[0], "vectors": hits[1], "pages": sorted(
                {data.find(n) // 8192 for pair in erased for n in pair if n in data})[:10]}
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "forgotten": len(erased),
            "texts_found": texts, "vectors_found": vectors, "found_in": where}


def run(n: int = 100_000, repeats: int = 100, forgets: int = 30, seed: int = 0,
        cache_root: Path | None = None, log=print, vectors: str | None = None,
        compact: bool = True, hnsw: bool = True) -> dict:
    import torch

    torch.set_num_threads(2)
    from memgate.retriever import StoredMemory
    from memgate.retriever.stores.embedded.layout import STORE_FORMAT
    from memgate.retriever.stores.postgres.store import PostgresStore
    from memgate.retriever.stores.postgres.tables import POSTGRES_FORMAT

    source = vectors or "cached"
    try:
        base, queries = _data(n, repeats, seed, source)
    except SystemExit as exc:  # (no cache, or no vectors of the bundled encoder in it)
        if vectors == "cached":
            raise
        log(f"{exc}: random vectors instead")
        source = "random"
        base, queries = _data(n, repeats, seed, source)
    if not hnsw:  # (a CPU pgserver's pgvector build cannot run HNSW on: no index, no approximate search)
        from memgate.retriever.stores.postgres import tables

        tables.HNSW_MAX_DIM = 0
    key = hashlib.sha256(json.dumps([n, DIM, seed, source, POSTGRES_FORMAT, STORE_FORMAT]
                                    + ([] if hnsw else ["no-hnsw"])).encode()).hexdigest()[:12]
    # (a cached format 1 schema would be migrated on open; the key names the format it was built as)
    cache = (cache_root or REPO / ".cache" / "bench_postgres") / key
    emb, server, pg, setup = _open(cache, base, log, hnsw)
    try:
        run_id = f"r{time.time_ns()}"
        # per-run vectors: the cached schema keeps earlier runs' records, whose vectors the erasure
        # check would otherwise find (live, legitimately) as this run's forgotten ones
        rng = np.random.default_rng([seed + 1, time.time_ns() % 2**32])
        lat: dict = {f"{s}_{op}": [] for s in ("embedded", "postgres")
                     for op in ("add", "search_exact", "search_approx", "forget")}
        lat.update(postgres_forget_in_line=[], refresh_idle=[], refresh_after_write=[])
        emb.search(queries[0], READABLE, K, exact=False)  # (builds the embedded store's graphs)
        if hnsw:
            pg.search(queries[0], READABLE, K, exact=False)
        other = PostgresStore(server.url, IDENT, schema="bench")  # "another process"
        other.changes_since(0)  # (the first refresh reads every vector: measured below, once)
        recall = []
        for i in range(repeats):
            v = rng.normal(size=DIM).astype(np.float32)
            for name, store in (("embedded", emb), ("postgres", pg)):
                lat[f"{name}_add"].append(_timed(store.add, StoredMemory(f"{run_id}-{i}", run_id, f"bench note {i} of {run_id}."),
                                                 v, encoder=IDENT))
                lat[f"{name}_search_exact"].append(_timed(store.search, queries[i], READABLE, K))
                if hnsw or name == "embedded":
                    lat[f"{name}_search_approx"].append(_timed(store.search, queries[i], READABLE, K, exact=False))
            if hnsw:
                exact = {h[0] for h in pg.search(queries[i], READABLE, K)}
                approx = {h[0] for h in pg.search(queries[i], READABLE, K, exact=False)}
                recall.append(len(exact & approx) / K)
            seen = other.version()
            lat["refresh_idle"].append(_timed(other.version))
            pg.add(StoredMemory(f"{run_id}-w{i}", run_id, f"another process's note {i}."),  # (a vector and a
                   rng.normal(size=DIM).astype(np.float32), encoder=IDENT)  # text of its own: the erasure check)
            t = time.perf_counter()
            if other.version() != seen:
                other.changes_since(seen)
            lat["refresh_after_write"].append((time.perf_counter() - t) * 1e3)
        erased = []
        for i in range(forgets):
            mid = f"{run_id}-{i}"
            erased.append((f"bench note {i} of {run_id}.".encode(),
                           pg.vectors_for([mid], namespace=run_id)[mid].astype("<f4").tobytes()))
            for name, store in (("embedded", emb), ("postgres", pg)):
                directive = StoredMemory(f"{run_id}-{i}-f", run_id, "forget that note")
                lat[f"{name}_forget"].append(_timed(store.forget, f"{run_id}-{i}", directive,
                                                    rng.normal(size=DIM), encoder=IDENT))
        returned = time.perf_counter()
        pg.wait_erased(30.0)  # the eraser's account (VACUUM's report: no dead version left) ...
        clean_after = time.perf_counter() - returned
        erasure = _erasure_check(pg, server, erased)  # ... checked against the data files' bytes
        erasure.update(clean_after_s=round(clean_after, 2), passes=pg._backend.eraser.passes,
                       within_window=clean_after <= 5.0)
        in_line = PostgresStore(server.url, IDENT, schema="bench", erase_in_background=False)
        erased_in_line = []
        for i in range(forgets):  # the pass inside the forget (the old behaviour), for comparison
            mid = f"{run_id}-w{i}"
            erased_in_line.append((f"another process's note {i}.".encode(),
                                   in_line.vectors_for([mid], namespace=run_id)[mid].astype("<f4").tobytes()))
            directive = StoredMemory(f"{run_id}-w{i}-f", run_id, "forget that note")
            lat["postgres_forget_in_line"].append(_timed(in_line.forget, mid, directive,
                                                         rng.normal(size=DIM), encoder=IDENT))
        in_line.close()
        after_in_line = _erasure_check(pg, server, erased_in_line)
        erasure.update(in_line_texts_found=after_in_line["texts_found"],
                       in_line_vectors_found=after_in_line["vectors_found"])
        if compact:
            t = time.perf_counter()
            pg.compact()
            erasure["compact_s"] = round(time.perf_counter() - t, 1)
            after = _erasure_check(pg, server, erased)
            erasure.update(after_compact_texts_found=after["texts_found"],
                           after_compact_vectors_found=after["vectors_found"])
        ef_recall = {}
        for ef in (100, 200, 400) if hnsw else ():
            hits = [len({h[0] for h in pg.search(q, READABLE, K)} & {h[0] for h in pg.search(
                q, READABLE, K, exact=False, hnsw_ef=ef)}) / K for q in queries[:30]]
            ef_recall[ef] = round(float(np.mean(hits)), 4)
        t = time.perf_counter()
        cold = PostgresStore(server.url, IDENT, schema="bench")
        cold.changes_since(0)
        first_refresh_s = time.perf_counter() - t
        cold.close()
        other.close()
        out = {"n": n, "dim": DIM, "vectors": source, "repeats": repeats, "forgets": forgets, "k": K,
               "readable_namespaces": len(READABLE), "namespaces": len(NAMESPACES),
               "records_now": {"embedded": len(emb), "postgres": len(pg)},
               "load_avg_1m": os.getloadavg()[0], "cpu_count": os.cpu_count(), "cache": str(cache),
               "setup": setup, "hnsw": hnsw, "recall_at_100": round(float(np.mean(recall)), 4) if recall else None,
               "recall_at_100_by_ef_search": ef_recall, "erasure": erasure,
               "first_refresh_s": round(first_refresh_s, 2),
               "ms": {name: _pct(xs) for name, xs in lat.items() if xs}}
        out["ratio_p50"] = {op: round(out["ms"][f"postgres_{op}"]["p50"] / out["ms"][f"embedded_{op}"]["p50"], 2)
                            for op in ("add", "search_exact", "search_approx", "forget")
                            if f"postgres_{op}" in out["ms"]}
        out["ratio_p50"]["forget_in_line"] = round(out["ms"]["postgres_forget_in_line"]["p50"]
                                                   / out["ms"]["embedded_forget"]["p50"], 2)
        return out
    finally:
        pg.close()
        emb.close()
        server.stop()


def format_report(r: dict) -> str:
    lines = [f"PostgresStore vs EmbeddedStore at {r['n']:,} memories ({r['vectors']} vectors, dim {r['dim']}, k={r['k']}, "
             f"{r['readable_namespaces']} of {r['namespaces']} namespaces read; load {r['load_avg_1m']:.1f} "
             f"on {r['cpu_count']} cores)",
             f"{'':<22}{'embedded p50 / p99':>22}{'postgres p50 / p99':>22}{'ratio p50':>11}"]
    for op in ("add", "search_exact", "search_approx", "forget"):
        if f"postgres_{op}" not in r["ms"]:
            lines.append(f"{op:<22}(no HNSW index: --no-hnsw)")
            continue
        e, p = r["ms"][f"embedded_{op}"], r["ms"][f"postgres_{op}"]
        lines.append(f"{op:<22}{e['p50']:>12.2f} / {e['p99']:<8.2f}{p['p50']:>12.2f} / {p['p99']:<8.2f}"
                     f"{r['ratio_p50'][op]:>10.2f}")
    nv, idle, after = (r["ms"][k] for k in ("postgres_forget_in_line", "refresh_idle", "refresh_after_write"))
    er = r["erasure"]
    lines += [f"forget with the table pass inside it (postgres, erase_in_background=False): "
              f"{nv['p50']:.2f} / {nv['p99']:.2f} ms",
              f"erasure window: pages clean {er['clean_after_s']:.2f} s after the last of "
              f"{er['forgotten']} forgets ({er['passes']} background passes; "
              f"{'within' if er['within_window'] else 'OUTSIDE'} the 5 s window); in-line forgets "
              f"left {er['in_line_texts_found']} texts, {er['in_line_vectors_found']} vectors",
              f"per-query refresh (postgres): version() {idle['p50']:.3f} / {idle['p99']:.3f} ms idle; "
              f"version() + changes_since() after one write {after['p50']:.3f} / {after['p99']:.3f} ms; "
              f"first refresh of a new process (every vector) {r['first_refresh_s']:.2f} s",
              (f"HNSW recall@100 vs exact (postgres): {r['recall_at_100']:.4f} at the default ef_search; "
               f"by hnsw_ef {json.dumps(r['recall_at_100_by_ef_search'])}" if r["hnsw"] else "no HNSW index"),
              f"after {r['erasure']['forgotten']} forgets: their texts found in {r['erasure']['texts_found']}, "
              f"their vectors in {r['erasure']['vectors_found']} places of the schema's "
              f"{r['erasure']['files']} data files ({r['erasure']['bytes'] / 1e6:.0f} MB)" + (
                  f"; after compact() ({r['erasure']['compact_s']:.1f} s): {r['erasure']['after_compact_texts_found']} "
                  f"and {r['erasure']['after_compact_vectors_found']}" if "compact_s" in r["erasure"] else ""),
              f"setup (cached): {json.dumps(r['setup'], sort_keys=True)}"]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--forgets", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vectors", choices=("cached", "random"), default=None,
                        help="the project's cached MiniLM vectors (default when cached) or random ones")
    parser.add_argument("--no-compact", action="store_true", help="skip the VACUUM FULL measurement")
    parser.add_argument("--no-hnsw", action="store_true",
                        help="no HNSW index (a CPU without AVX-512: pgserver's pgvector cannot run it)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    r = run(args.n, args.repeats, args.forgets, args.seed, vectors=args.vectors, compact=not args.no_compact,
            hnsw=not args.no_hnsw)
    print(format_report(r))
    if args.out:
        args.out.write_text(json.dumps(r, indent=2, sort_keys=True) + "\n")
    return r


if __name__ == "__main__":  # pragma: no cover
    main()
