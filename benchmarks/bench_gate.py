"""The gate's re-scoring of 100 candidates, side by side with the plain cosine, on real vectors.

    python benchmarks/bench_gate.py [--repeats 3000] [--threads 1,2] [--cache PATH] [--out FILE]

What the retriever runs after its top-100 search: the released gate (``checkpoints/``) through
``FusedGateScorer`` with the write-time split (memory parts precomputed), for one query and its
100 candidates. Queries: 200 MiniLM vectors of the project's embedding cache (seed 0, as in
``benchmarks/bench_ann.py``); candidates: each query's exact top 100 among the other cached
vectors, so the gate sees the near neighbours it re-scores in a real search.

Rows, each timed in one loop over the same (query, candidates) pairs in a fresh process per
thread count (``torch.set_num_threads``): the plain cosine of the 100 unit candidates (the
retriever's ungated arithmetic, ``torch.mv``), ``MemGate.score`` (the unfused reference),
``FusedGateScorer.score``, the same with ``B`` queries per call (per-query time = call / B), and
the fused scorer over a bfloat16 and a float16 copy of the gate (numerics against float32: max
absolute score difference and top-20 agreement). p50 / p99 over ``--repeats`` calls after a
warm-up; the load average is printed. Run as a script so that ``PYTHONPATH`` picks the
``memgate`` being measured (e.g. a previous checkout, for a before/after pair).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TOP = 100


def _data(cache: Path, n_queries: int = 200):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.bench_ann import load_cached

    X = load_cached(cache)
    perm = np.random.default_rng(0).permutation(len(X))  # the query split of bench_ann
    Q, R = X[perm[:n_queries]], X[perm[n_queries:]]
    S = Q @ R.T
    top = np.argpartition(-S, TOP, axis=1)[:, :TOP]
    return Q, R[top]  # (n_q, d), (n_q, 100, d): each query's 100 nearest real vectors


def _timed(fn, n_items: int, repeats: int) -> dict:
    for i in range(min(50, repeats)):
        fn(i % n_items)
    lat = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(i % n_items)
        lat.append((time.perf_counter() - t) * 1e3)
    return {"p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99))}


def _agreement(ref: np.ndarray, got: np.ndarray, k: int = 20) -> dict:
    """Max |score difference|, mean top-k set overlap and the share of identical top-k orders."""
    a, b = np.argsort(-ref, axis=1, kind="stable")[:, :k], np.argsort(-got, axis=1, kind="stable")[:, :k]
    overlap = [len(set(x) & set(y)) / k for x, y in zip(a.tolist(), b.tolist())]
    return {"max_abs_diff": float(np.abs(ref - got).max()), f"top{k}_overlap": float(np.mean(overlap)),
            f"top{k}_same_order": float(np.mean([x == y for x, y in zip(a.tolist(), b.tolist())]))}


def worker(cache: Path, threads: int, repeats: int, batch: int) -> dict:
    import torch

    from memgate.integrations.gate_default import released_gate_dir
    from memgate.model.gate import MemGate
    from memgate.model.scoring import FusedGateScorer

    torch.set_num_threads(threads)
    gate = MemGate.from_pretrained(released_gate_dir()).eval()
    Qn, Vn = _data(cache)
    Q, V = torch.from_numpy(Qn), torch.from_numpy(np.ascontiguousarray(Vn))
    scorer = FusedGateScorer(gate)
    with torch.no_grad():
        vpart = scorer.memory_part(V.reshape(-1, V.shape[-1])).reshape(*V.shape[:2], -1)
        ref = np.stack([gate.score(Q[i], V[i]).numpy() for i in range(len(Q))])
        fused = np.stack([scorer.score(Q[i], V[i], vpart[i]).numpy() for i in range(len(Q))])
    rows = {"plain_cosine": _timed(lambda i: torch.mv(V[i], Q[i]), len(Q), repeats)}
    with torch.no_grad():
        rows["memgate_score"] = _timed(lambda i: gate.score(Q[i], V[i]), len(Q), max(200, repeats // 10))
    rows["fused"] = {**_timed(lambda i: scorer.score(Q[i], V[i], vpart[i]), len(Q), repeats),
                     **_agreement(ref, fused)}
    try:  # B queries per call (the batched form of FusedGateScorer.score)
        nb = len(Q) // batch
        got = np.concatenate([scorer.score(Q[j * batch:(j + 1) * batch], V[j * batch:(j + 1) * batch],
                                           vpart[j * batch:(j + 1) * batch]).numpy() for j in range(nb)])
        t = _timed(lambda j: scorer.score(Q[j * batch:(j + 1) * batch], V[j * batch:(j + 1) * batch],
                                          vpart[j * batch:(j + 1) * batch]), nb, max(100, repeats // batch))
        rows[f"fused_batch{batch}"] = {"per_query_p50_ms": t["p50_ms"] / batch, "call_p50_ms": t["p50_ms"],
                                       "call_p99_ms": t["p99_ms"], **_agreement(ref[: nb * batch], got)}
    except ValueError as exc:  # a memgate without the batched form
        rows[f"fused_batch{batch}"] = {"error": str(exc).splitlines()[0]}
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        low = FusedGateScorer(MemGate.from_pretrained(released_gate_dir()).to(dtype).eval())
        Vl, Ql = V.to(dtype), Q.to(dtype)
        with torch.no_grad():
            vl = low.memory_part(Vl.reshape(-1, V.shape[-1])).reshape(*V.shape[:2], -1)
            got = np.stack([low.score(Ql[i], Vl[i], vl[i]).float().numpy() for i in range(len(Q))])
        rows[f"fused_{name}"] = {**_timed(lambda i: low.score(Ql[i], Vl[i], vl[i]), len(Q), max(200, repeats // 10)),
                                 **_agreement(ref, got)}
    return {"threads": threads, "rows": rows, "memgate_score_vs_fused": _agreement(ref, fused),
            "memgate": str(Path(sys.modules["memgate"].__file__).parent)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3000)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cache = args.cache or Path(os.environ.get(
        "MEMGATE_EMBED_CACHE", Path(__file__).resolve().parent.parent / ".cache/embeddings/embeddings.sqlite"))
    if args.worker is not None:
        print(json.dumps(worker(cache, args.worker, args.repeats, args.batch)))
        return {}
    out = {"load_avg_1m_start": os.getloadavg()[0], "cpu_count": os.cpu_count(), "runs": []}
    for threads in [int(t) for t in args.threads.split(",")]:
        proc = subprocess.run([sys.executable, __file__, "--worker", str(threads), "--repeats", str(args.repeats),
                               "--batch", str(args.batch), "--cache", str(cache)],
                              capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        if proc.returncode != 0:
            raise SystemExit(proc.stderr.strip().splitlines()[-1])
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        out["runs"].append(run)
        rows, plain = run["rows"], run["rows"]["plain_cosine"]["p50_ms"]
        print(f"threads {threads} (memgate from {run['memgate']}), 100 candidates, p50 / p99 ms, ratio to plain cosine:")
        for name, r in rows.items():
            if "error" in r:
                print(f"  {name:<16} not available: {r['error']}")
                continue
            p50 = r.get("p50_ms", r.get("per_query_p50_ms"))
            p99 = r.get("p99_ms", r.get("call_p99_ms"))
            extra = "" if "max_abs_diff" not in r else (f"  max|diff| {r['max_abs_diff']:.1e}, top-20 overlap "
                                                        f"{r['top20_overlap']:.4f}, same order {r['top20_same_order']:.3f}")
            label = "per query" if "per_query_p50_ms" in r else "p50"
            print(f"  {name:<16} {label} {p50:8.4f}  p99 {p99:8.4f}  x{p50 / plain:7.1f}{extra}")
    out["load_avg_1m_end"] = os.getloadavg()[0]
    print(f"load average {out['load_avg_1m_start']:.2f} at the start, {out['load_avg_1m_end']:.2f} at the end, "
          f"{out['cpu_count']} cores")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return out


if __name__ == "__main__":  # pragma: no cover
    main()
