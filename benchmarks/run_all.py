"""``make bench``: every named figure of the benchmark suite, written to reports/bench.md and
reports/bench.json. Each benchmark measures its ratios side by side in one run; absolute
figures are printed beside them. Nothing here is a test: timings depend on the machine.

Figures: gen_triples_per_s; embed_sentences_per_s (cache misses, cache hits) of the default encoder, and the
encoder backends side by side (torch, ONNX Runtime, OpenVINO: warm, fresh process; benchmarks/bench_embed.py); train_triples_per_s (per
width); the paper-scale gate's train and scoring throughput (CPU, and GPU when present); gate_ms_per_100 per width with and without the write-time split;
 retrieval_ms_top100_100k; overhead_ratio; start-up in fresh processes (the public import, every
verb's --help and usage errors, the store verbs, Memory's first add + search and warm calls,
MemgateStore.put, the servers' time to accept: benchmarks/bench_startup.py); the HTTP server's p50 / p99 (benchmarks/bench_http.py), on the embedded store
and on PostgreSQL; PostgresStore's add / search / forget p50 and p99 beside the embedded store's at 100,000, its HNSW recall@100
and per-query refresh cost (benchmarks/bench_postgres.py, the load and index cached in .cache/bench_postgres); the approximate index's top-100 latency, recall
and gated / plain ratio at 100,000 (benchmarks/bench_ann.py); the released gate's re-scoring of the default depth (200) of real
candidates beside the plain cosine, every scorer lever at 1 and 2 threads (benchmarks/bench_gate.py); eval_s per route (from the latest evaluation's
timings.json, if any); one ``GatedRetriever.retrieve`` at 1,000,000 memories gated and ungated, in one
namespace and in all 1,000 (benchmarks/bench_retrieve.py, the store cached in .cache/bench_retrieve); the HTTP server with and without
micro-batched embeddings; the make demo breakdown (from reports/demo/pipeline_timings.json, if any).
"""

from __future__ import annotations

import json
import os
import platform
import time

from memgate.contract.config import REPO_ROOT


def _latest_eval_timings() -> dict:
    for name in ("memgate-minilm-l6", "demo"):
        path = REPO_ROOT / "reports" / name / "timings.json"
        if path.exists():
            return {"report": name, **json.loads(path.read_text())}
    return {}


def main() -> dict:
    from benchmarks import bench_embed, bench_generate, bench_retriever, bench_train

    started = time.perf_counter()
    results: dict = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                                 "load_avg_1m": os.getloadavg()[0]}}
    results["generate"] = bench_generate.bench(REPO_ROOT / "configs/data/default.yaml", repeats=3, audit=False)
    results["embed"] = bench_embed.bench(n=400, rounds=2, cold_repeats=3)  # the backends side by side (~4 min)
    results["train"] = {str(w): bench_train.bench(hidden=w) for w in (256, 512, 1024)}
    results["paper_scale"] = bench_train.paper()
    retriever = bench_retriever.run()
    results["retriever"] = retriever
    from benchmarks import bench_startup  # fresh processes, as a new user starts them

    results["startup"] = bench_startup.bench(repeats=5)
    try:  # the HTTP server (the [serve] extra)
        from benchmarks import bench_http

        http = bench_http.compare(clients=8, requests=200, rounds=1)  # unbatched, then micro-batched
        results["http"] = {**http["runs"]["batched"][0], "unbatched": http["runs"]["unbatched"][0],
                           "batched_over_unbatched_requests_per_s": http["ratio_requests_per_s"]}
    except ImportError:
        results["http"] = None
    try:  # PostgresStore beside the embedded store at 100,000, and the HTTP server on it (the [postgres] extra)
        import pgserver  # noqa: F401

        from benchmarks import bench_postgres

        results["postgres"] = bench_postgres.run()
        results["http_postgres"] = bench_http.bench(clients=8, requests=200, backend="postgres") \
            if results["http"] else None
    except ImportError:
        results["postgres"] = results["http_postgres"] = None
    cache = REPO_ROOT / ".cache" / "embeddings" / "embeddings.sqlite"
    try:  # the embedded store's approximate index (the [ann] extra) on the project's vectors
        import hnswlib  # noqa: F401

        from benchmarks import bench_ann

        results["ann"] = bench_ann.run(100_000, ["hnswlib"], 200, cache, filtered=True) if cache.exists() else None
    except ImportError:
        results["ann"] = None
    try:  # one retrieve() at 1,000,000 memories, gated and not (the store cached in .cache/bench_retrieve)
        import hnswlib  # noqa: F401

        from benchmarks import bench_retrieve

        results["retrieve"] = bench_retrieve.run(cache=cache) if cache.exists() else None
    except ImportError:
        results["retrieve"] = None
    from benchmarks import bench_gate  # the released gate re-scoring real candidates

    results["gate"] = bench_gate.main(["--repeats", "2000", "--cache", str(cache)]) if cache.exists() else None
    results["eval"] = _latest_eval_timings()
    demo = REPO_ROOT / "reports" / "demo" / "pipeline_timings.json"
    results["demo_breakdown_s"] = json.loads(demo.read_text()) if demo.exists() else None
    results["seconds"] = time.perf_counter() - started

    out = REPO_ROOT / "reports"
    out.mkdir(exist_ok=True)
    (out / "bench.json").write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    lines = ["# memgate benchmarks", "",
             f"Machine: {results['machine']['cpu_count']} cores, load average "
             f"{results['machine']['load_avg_1m']:.2f} at the start. Medians over repeats.", "",
             "| figure | value |", "|---|---|",
             f"| gen_triples_per_s ({results['generate'].get('workers', 1)} workers; one worker, interleaved; ratio) | "
             f"{results['generate'].get('gen_triples_per_s', float('nan')):,.0f}; "
             f"{results['generate'].get('gen_triples_per_s_one_worker', float('nan')):,.0f}; "
             f"×{results['generate'].get('workers_speedup', float('nan')):.2f} |",
             f"| gen_triples_per_s_cli (fresh `python -m data_gen` process) | "
             f"{results['generate'].get('gen_triples_per_s_cli', float('nan')):,.0f} |",
             f"| embed_sentences_per_s (cache misses; {results['embed']['backend']} backend) | "
             f"{results['embed']['embed_sentences_per_s_cold']:,.0f} |",
             f"| embed_sentences_per_s (cached) | {results['embed']['embed_sentences_per_s_cached']:,.0f} "
             f"(×{results['embed']['cached_over_cold']:.0f}) |"]
    for backend, r in (results["embed"].get("cold") or {}).items():
        lines.append(f"| encoder {backend}, fresh process (first vector s; sentences/s with start-up; ratio to torch) | "
                     f"{r['first_s']:.2f} s; {r['per_s']:,.0f}/s; ×{r['ratio']:.2f} |")
    for name, by_set in (results["embed"].get("warm") or {}).items():
        if name.endswith(("t2 b64", "t2 tok512", "streams tok512")):
            lines.append(f"| encoder {name}, warm (sentences/s; ratio to torch t2 b64) | " + "; ".join(
                f"{s} {r['per_s']:,.0f} ×{r['ratio']:.2f}" for s, r in by_set.items()) + " |")
    for w, r in results["train"].items():
        lines.append(f"| train_triples_per_s (width {w}) | {r['train_triples_per_s']:,.0f} |")
    for device, r in results["paper_scale"].items():
        if isinstance(r, dict):
            lines.append(f"| paper scale (d 4096, {r['parameters'] / 1e6:.1f} M params, {device}"
                         f"{', bf16' if r['bf16_autocast'] else ''}): train_triples_per_s / "
                         f"score_pairs_per_s / gate_ms_per_100 | {r['train_triples_per_s']:,.0f} / "
                         f"{r['score_pairs_per_s']:,.0f} / {r['gate_ms_per_100']:.2f} |")
    lines.append(f"| retrieval_ms_top100_100k | {retriever['top_ms']:.2f} |")
    for w in retriever["widths"]:
        lines.append(f"| gate_ms_per_100 (width {w['hidden']}; plain / write-time split) | "
                     f"{w['gate_ms_per_100']:.2f} / {w['gate_pre_ms_per_100']:.2f} |")
        lines.append(f"| overhead_ratio (width {w['hidden']}; plain / split) | "
                     f"{w['overhead_ratio']:.3f} / {w['overhead_ratio_pre']:.3f} |")
    if results["http"]:
        h = results["http"]
        lines.append(f"| http_ms p50 / p99 ({h['clients']} clients x {h['requests_per_client']} requests; "
                     f"add, search, get) | {h['add_ms_p50']:.1f} / {h['add_ms_p99']:.1f}, "
                     f"{h['search_ms_p50']:.1f} / {h['search_ms_p99']:.1f}, "
                     f"{h['get_ms_p50']:.1f} / {h['get_ms_p99']:.1f} ({h['requests_per_s']:.1f} req/s) |")
        u = h["unbatched"]
        lines.append(f"| http without micro-batching (same run, before it; add, search p50 / p99) | "
                     f"{u['add_ms_p50']:.1f} / {u['add_ms_p99']:.1f}, {u['search_ms_p50']:.1f} / "
                     f"{u['search_ms_p99']:.1f} ({u['requests_per_s']:.1f} req/s; batched ×"
                     f"{h['batched_over_unbatched_requests_per_s']:.2f}) |")
    for label, row in ((results.get("retrieve") or {}).get("contexts") or {}).items():
        lines.append(f"| retrieve(k=10) at {results['retrieve']['n']:,}, {label} (gated p50 / p99; ungated "
                     f"p50 / p99; gated / ungated p50) | {row['gated_p50_ms']:.1f} / {row['gated_p99_ms']:.1f} ms; "
                     f"{row['plain_p50_ms']:.1f} / {row['plain_p99_ms']:.1f} ms; ×{row['gated_over_plain_p50']:.3f} |")
    if results.get("http_postgres"):
        h = results["http_postgres"]
        lines.append(f"| http_ms p50 / p99 on PostgreSQL ({h['clients']} clients x {h['requests_per_client']} "
                     f"requests; add, search, get) | {h['add_ms_p50']:.1f} / {h['add_ms_p99']:.1f}, "
                     f"{h['search_ms_p50']:.1f} / {h['search_ms_p99']:.1f}, "
                     f"{h['get_ms_p50']:.1f} / {h['get_ms_p99']:.1f} ({h['requests_per_s']:.1f} req/s) |")
    if results.get("postgres"):
        pg = results["postgres"]
        for op in ("add", "search_exact", "search_approx", "forget"):
            e, p = pg["ms"][f"embedded_{op}"], pg["ms"][f"postgres_{op}"]
            lines.append(f"| PostgresStore {op} at {pg['n']:,} (p50 / p99; embedded p50 / p99; ratio of p50s) | "
                         f"{p['p50']:.2f} / {p['p99']:.2f} ms; {e['p50']:.2f} / {e['p99']:.2f} ms; "
                         f"×{pg['ratio_p50'][op]:.2f} |")
        lines.append(f"| PostgresStore HNSW recall@100 vs exact at {pg['n']:,}; per-query refresh p50 "
                     f"(idle; after one write) | {pg['recall_at_100']:.4f}; "
                     f"{pg['ms']['refresh_idle']['p50']:.3f} ms; {pg['ms']['refresh_after_write']['p50']:.3f} ms |")
    if results["ann"]:
        a = results["ann"]
        h = next((r for r in a["rows"] if r.get("engine") == "hnswlib" and not r["filtered"]), None)
        st = a.get("store") or {}
        if h:
            lines.append(f"| ann top-100 at {a['n']:,} (hnswlib p50 / p99, recall@100; exact p50) | "
                         f"{h['p50_ms']:.2f} / {h['p99_ms']:.2f} ms, {h['recall_at_100']:.4f}; "
                         f"{next(r['p50_ms'] for r in a['rows'] if r.get('engine') == 'exact' and not r['filtered']):.2f} ms |")
        if "approx_p50_ms" in st:
            lines.append(f"| EmbeddedStore.search k=100 at {a['n']:,} (approximate / exact p50; recall) | "
                         f"{st['approx_p50_ms']:.2f} / {st['exact_p50_ms']:.2f} ms; {st['approx_recall_at_100']:.4f} |")
        lines.append(f"| gated / plain against the ANN baseline | {a['gated_over_plain'].get('hnswlib', float('nan')):.2f} |")
    gate_run = (results["gate"] or {}).get("run")
    for n in (gate_run or {}).get("threads", []):
        rows = gate_run["rows"]
        f, c, b = rows[f"fused t{n}"], rows[f"plain_cosine t{n}"], rows.get(f"fused_batch8 t{n}", {})
        o = rows.get(f"onnxruntime t{n}", {})
        lines.append(f"| gate re-scoring of {gate_run['depth']} real candidates, released gate, {n} thread(s) "
                     f"(ONNX Runtime graph p50 / p99; torch fused p50 / p99; 8 queries per call, per query; plain cosine p50) | "
                     f"{o.get('p50_ms', float('nan')):.3f} / {o.get('p99_ms', float('nan')):.3f} ms; "
                     f"{f['p50_ms']:.3f} / {f['p99_ms']:.3f} ms; {b.get('per_query_p50_ms', float('nan')):.3f} ms; "
                     f"{c['p50_ms']:.4f} ms |")
    lines += ["", "## Start-up (fresh processes)", "", "```", bench_startup.format_report(results["startup"]),
              "```", ""]
    lines += ["", "## Retriever", "", "```", bench_retriever.format_report(retriever), "```", ""]
    if results.get("postgres"):
        from benchmarks import bench_postgres

        lines += ["## PostgresStore", "", "```", bench_postgres.format_report(results["postgres"]), "```", ""]
    if results["eval"]:
        lines += ["## eval_s per route", "", f"From reports/{results['eval']['report']}/timings.json:", "",
                  "```", json.dumps(results["eval"].get("routes", {}), indent=1), "```", ""]
    if results["demo_breakdown_s"]:
        lines += ["## make demo breakdown (s)", "", "```",
                  json.dumps(results["demo_breakdown_s"], indent=1), "```", ""]
    (out / "bench.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return results


if __name__ == "__main__":
    main()
