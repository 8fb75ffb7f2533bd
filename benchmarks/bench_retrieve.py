"""What a user waits for: one ``GatedRetriever.retrieve(text, ctx, k=10)`` at 1,000,000 memories.

    python -m benchmarks.bench_retrieve [--n 1000000] [--queries 60] [--rebuild] [--out FILE]

Store. The ``--n`` vectors of :mod:`benchmarks.bench_ann` (the project's cached MiniLM vectors,
extended by small perturbations) in an :class:`memgate.retriever.EmbeddedStore` with realistic
metadata, built once and kept in ``.cache/bench_retrieve/`` (ignored by git; ``--rebuild``
builds it again): 1,000 namespaces of Zipf-distributed sizes (the largest ones above the
approximate index's threshold, so they are searched in their HNSW graph), 20 % of the records
tagged ``personal`` (readable for task execution), 4 % ``roleplay`` (denied for task execution:
a jailbreak-shaped policy exclusion), 3 % superseded from 2024-05-01 by a later record of their
namespace, 0.5 % forgotten (``store.forget``, tombstones). Every query of the ``task_execution``
purpose at 2024-06-01 so excludes something in most namespaces.

Queries. Real LoCoMo questions with a unique suffix (never in the encoder's cache; the retriever
never caches query embeddings), embedded by the default encoder inside ``retrieve``.

Measured side by side, interleaved per query, in one process: the released gate and
``gate=None`` over the same store with the agent defaults (``exact_search=False``, rerank depth
200), in two contexts: a principal reading the largest namespace, and one reading all 1,000.
p50 / p99 of the wall time of ``retrieve`` and the per-stage medians (``timings_ms``), the
gated / ungated ratio of the p50s, and the load average. Nothing is asserted: timings depend on
the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from memgate.contract.config import REPO_ROOT

N_NAMESPACES = 1000
ZIPF = 1.0
SEED = 0
CACHE_DIR = REPO_ROOT / ".cache" / "bench_retrieve"
POLICY = {"personal": {}, "roleplay": {"reason": "jailbreak", "deny": ["task_execution"]}}
FRACTIONS = {"personal": 0.20, "roleplay": 0.04, "superseded": 0.03, "forgotten": 0.005}


def namespace_of(n: int, seed: int = SEED) -> np.ndarray:
    """Zipf-distributed namespace codes (0 = the largest) for ``n`` records."""
    rng = np.random.default_rng(seed + 7)
    p = 1.0 / np.arange(1, N_NAMESPACES + 1) ** ZIPF
    return rng.choice(N_NAMESPACES, size=n, p=p / p.sum())


def _params(n: int) -> dict:
    return {"n": n, "namespaces": N_NAMESPACES, "zipf": ZIPF, "seed": SEED, "fractions": FRACTIONS,
            "format": 1}


def build_store(path: Path, n: int, encoder_identity: dict, cache: Path) -> dict:
    """Write the store at ``path`` (an existing complete one with the same parameters is kept)."""
    from benchmarks.bench_ann import make_data
    from memgate.contract.admissibility import SupersessionScope
    from memgate.retriever import EmbeddedStore, StoredMemory, Supersedes

    done = path / "built.json"
    if done.exists() and json.loads(done.read_text()).get("params") == _params(n):
        return json.loads(done.read_text())
    if path.exists():
        import shutil

        shutil.rmtree(path)
    path.mkdir(parents=True)
    t0 = time.perf_counter()
    B, _, info = make_data(cache, n, 0)
    rng = np.random.default_rng(SEED + 11)
    ns = namespace_of(n)
    draw = rng.random(n)
    tag = np.where(draw < FRACTIONS["roleplay"], 1, np.where(draw < FRACTIONS["roleplay"] + FRACTIONS["personal"], 2, 0))
    supersedes = rng.random(n) < FRACTIONS["superseded"]
    store = EmbeddedStore(path / "store", encoder_identity, fsync=False, audit=None)
    last: dict[int, str] = {}  # namespace -> an earlier record id (what a superseding record replaces)
    scope = SupersessionScope(valid_from="2024-05-01")
    chunk = 20_000
    for start in range(0, n, chunk):
        memories = []
        pending: dict[int, str] = {}
        for i in range(start, min(n, start + chunk)):
            c = int(ns[i])
            sup = ()
            if supersedes[i] and c in last:
                sup = (Supersedes(last.pop(c), scope),)
            tags = (None, ["roleplay"], ["personal"])[int(tag[i])]
            mid = f"m{i:07d}"
            memories.append(StoredMemory(mid, f"ns{c:04d}", f"note {i} kept for namespace {c}", policy_tags=tags,
                                   supersedes=sup))
            pending[c] = mid
        store.add_many(memories, B[start:start + len(memories)], encoder=encoder_identity)
        last.update(pending)  # (a supersedes link names a record of an earlier batch)
    forget = np.sort(rng.choice(n, size=int(n * FRACTIONS["forgotten"]), replace=False))
    for i in forget.tolist():
        directive = StoredMemory(f"f{i:07d}", f"ns{int(ns[i]):04d}", "a forget directive",
                           source_type="correction", epistemic_status="verified", evidence_strength=1.0)
        try:
            store.forget(f"m{i:07d}", directive, B[(i + 1) % n], encoder=encoder_identity)
        except Exception:  # noqa: BLE001 - a record superseded away or forgotten with its parent
            continue
    store.close()
    built = {"params": _params(n), "build_s": time.perf_counter() - t0, "data": info}
    done.write_text(json.dumps(built, indent=2) + "\n")
    return built


def _query_texts(count: int) -> list[str]:
    from benchmarks.project_texts import locomo_texts

    texts = [t for t in locomo_texts() if t.rstrip().endswith("?")] or locomo_texts()
    rng = np.random.default_rng(SEED + 3)
    picked = rng.choice(len(texts), size=count, replace=len(texts) < count)
    stamp = time.time_ns()  # a suffix no cache has seen
    return [f"{texts[j]} (bench {stamp} #{i})" for i, j in enumerate(picked.tolist())]


def run(n: int = 1_000_000, queries: int = 60, rebuild: bool = False, warmup: int = 5,
        cache: Path | None = None) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    from memgate.contract.records import QueryContext
    from memgate.integrations.gate_default import released_gate_dir
    from memgate.model.encoder import Encoder
    from memgate.retriever import EmbeddedStore, GatedRetriever, RetrieverConfig
    from memgate.retriever.stores.embedded.store import DEFAULT_THRESHOLD

    torch.set_num_threads(2)
    cache = cache or Path(os.environ.get("MEMGATE_EMBED_CACHE", REPO_ROOT / ".cache/embeddings/embeddings.sqlite"))
    encoder = Encoder()
    path = CACHE_DIR / f"n{n}"
    if rebuild and (path / "built.json").exists():
        (path / "built.json").unlink()
    built = build_store(path, n, encoder.identity, cache)
    t0 = time.perf_counter()
    store = EmbeddedStore(path / "store", encoder.identity, fsync=False, audit=None,
                          ann_threshold=DEFAULT_THRESHOLD)
    opened = {"store_s": time.perf_counter() - t0}
    config = RetrieverConfig(policy_rules=POLICY, exact_search=False)
    t0 = time.perf_counter()
    gated = GatedRetriever(store, encoder, gate=released_gate_dir(), config=config)
    gated.warm_up()
    opened["gated_retriever_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain = GatedRetriever(store, encoder, gate=None, config=config)
    opened["plain_retriever_s"] = time.perf_counter() - t0
    names = sorted(set(plain._index.namespaces))  # noqa: SLF001 - a bench reads the layout
    largest = "ns0000"
    contexts = {"one namespace": frozenset({largest}), f"all {len(names)} namespaces": frozenset(names)}
    texts = _query_texts(queries + warmup)
    t0 = time.perf_counter()
    for ctx_ns in contexts.values():  # builds the HNSW graphs of the large namespaces
        plain.retrieve(texts[0], QueryContext(query_id=f"graphs-{len(ctx_ns)}", text="", principal="u",
                                              namespaces=ctx_ns, purpose="task_execution",
                                              intent="current_state", time="2024-06-01"), k=10)
    opened["graphs_s"] = time.perf_counter() - t0
    out: dict = {"n": n, "k": 10, "rerank_depth": config.rerank_depth, "built": built, "open": opened,
                 "encoder_backend": encoder.backend, "gate_version": gated.gate_version,
                 "largest_namespace_records": int(plain._index.live_count(plain._index.ns_code[largest])),  # noqa: SLF001
                 "load_avg_start": os.getloadavg()[0], "contexts": {}}
    for label, ctx_ns in contexts.items():
        lat: dict[str, list] = {"plain": [], "gated": []}
        stages: dict[str, dict[str, list]] = {"plain": {}, "gated": {}}
        excluded = []
        for r, text in enumerate(texts):
            for name, retriever in (("plain", plain), ("gated", gated)) if r % 2 else (("gated", gated), ("plain", plain)):
                ctx = QueryContext(query_id=f"{label}-{name}-{r}", text="", principal="u", namespaces=ctx_ns,
                                   purpose="task_execution", intent="current_state", time="2024-06-01")
                t = time.perf_counter()
                result = retriever.retrieve(text, ctx, k=10)
                ms = (time.perf_counter() - t) * 1e3
                if r < warmup:
                    continue
                lat[name].append(ms)
                for stage, v in result.timings_ms.items():
                    stages[name].setdefault(stage, []).append(v)
                if name == "plain":
                    excluded.append(sum(result.excluded_counts.values()))
        row = {"readable_namespaces": len(ctx_ns), "queries": queries,
               "excluded_per_query_median": float(np.median(excluded)),
               "queries_excluding_something": float(np.mean(np.asarray(excluded) > 0))}
        for name in lat:
            row[f"{name}_p50_ms"] = float(np.percentile(lat[name], 50))
            row[f"{name}_p99_ms"] = float(np.percentile(lat[name], 99))
            row[f"{name}_stages_ms"] = {s: float(np.median(v)) for s, v in stages[name].items()}
        row["gated_over_plain_p50"] = row["gated_p50_ms"] / row["plain_p50_ms"]
        out["contexts"][label] = row
        print(format_row(label, row), flush=True)
    out["load_avg_end"] = os.getloadavg()[0]
    store.close()
    return out


def format_row(label: str, row: dict) -> str:
    st = " ".join(f"{k[:-3]} {v:.1f}" for k, v in row["gated_stages_ms"].items())
    sp = " ".join(f"{k[:-3]} {v:.1f}" for k, v in row["plain_stages_ms"].items())
    return (f"{label}: gated p50 {row['gated_p50_ms']:.1f} ms p99 {row['gated_p99_ms']:.1f} ms; ungated p50 "
            f"{row['plain_p50_ms']:.1f} ms p99 {row['plain_p99_ms']:.1f} ms; gated/ungated p50 "
            f"x{row['gated_over_plain_p50']:.3f}; excluded per query {row['excluded_per_query_median']:.0f} "
            f"({row['queries_excluding_something']:.0%} of queries)\n  gated stages: {st}\n  ungated stages: {sp}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    res = run(args.n, args.queries, args.rebuild)
    print(json.dumps({k: v for k, v in res.items() if k != "contexts"}, sort_keys=True, default=str))
    if args.out:
        args.out.write_text(json.dumps(res, indent=2, sort_keys=True, default=str) + "\n")
    return res


if __name__ == "__main__":  # pragma: no cover
    main()
