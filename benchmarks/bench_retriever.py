"""Retriever latency: what the gate adds to an exact top-100 over 100,000 in-memory vectors.

    python -m benchmarks.bench_retriever [--n 100000] [--repeats 30] [--threads 2] [--out FILE]

Measured side by side in one run, interleaved round-robin so that background load hits every
variant alike; every figure is a median over ``--repeats`` (p90 beside it):

- ``top_ms``: exact cosine of one query against N unit vectors (float32 matrix-vector product)
  plus top-100 selection (argpartition + sort of the 100). No record fetch.
- per width in {256, 512, 1024} (512 is the default ``MemGate``):
  ``gate_ms_per_100``: ``MemGate.score(q, V)`` for the 100 candidates (plain, no precomputation);
  ``gate_pre_ms_per_100``: ``MemGate.score_precomputed(q, V, v_part)`` with the memory part
  ``W_v v`` computed once per memory beforehand (the write-time split);
  ``overhead_ratio`` / ``overhead_ratio_pre``: median(top-100 + gate, timed as one block) /
  median(top-100).
- ``gate_fused_ms_per_100`` / ``overhead_ratio_fused``: the retriever's
  :class:`memgate.model.scoring.FusedGateScorer` (the same function with the split, in a
  dozen large operations instead of MemGate.forward's many small ones).
- ``cpu1_*``: the same gate and top-100 figures as single-thread CPU time of the calling
  thread (``time.thread_time``), a companion that a busy machine inflates far less than wall
  time; (top + gate) / top from them.
- ``precomputed_mb``: memory held by the precomputed first-layer parts of N memories
  (N x hidden x 4 bytes) beside ``vectors_mb`` (N x d x 4 bytes), and the one-off cost of
  computing them (``precompute_s``).

With ``--e2e`` (default on) it also times ``GatedRetriever.retrieve`` end to end over an
``EmbeddedStore`` of N records in one namespace (a mix of current, scoped-superseded,
role-play-tagged and untagged records), k = 10, re-scoring depth 100: the plain-cosine route vs
the gated route with the write-time split, with the per-stage breakdown (query embedding is
excluded: a fixed vector per query; the store is built without fsync and the audit log is on).

On a shared machine, run it with ``OMP_WAIT_POLICY=PASSIVE`` too: torch's worker threads spin
after each parallel region, and on two busy cores the spinning, not the arithmetic, sets the
latency (the setting is recorded in the output).

Targets from issue 8 (default width, 2 threads): gate_ms_per_100 <= 2 ms and
overhead_ratio <= 1.2. Torch and the BLAS behind numpy are both limited to ``--threads``.
Nothing is written unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from memgate.model.gate import MemGate, MemGateConfig
from memgate.model.scoring import FusedGateScorer

WIDTHS = (256, 512, 1024)
DEFAULT_WIDTH = MemGateConfig().hidden
TOP = 100


def _limit_threads(threads: int):
    torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=threads)
    except ImportError:  # pragma: no cover
        return None


def _top(M: torch.Tensor, q: torch.Tensor, k: int) -> torch.Tensor:
    """Exact cosine (unit rows) and the k best, in torch's thread pool like the gate (a second
    pool, numpy's BLAS, spinning beside it on 2 cores slows both down several times)."""
    return torch.topk(torch.mv(M, q), k).indices


def run(n: int = 100_000, dim: int = 384, repeats: int = 30, threads: int = 2,
        widths=WIDTHS, seed: int = 0, warmup: int = 3) -> dict:
    limiter = _limit_threads(threads)
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, dim), dtype=np.float32)
    M /= np.linalg.norm(M, axis=1, keepdims=True)
    queries = rng.standard_normal((repeats + warmup, dim), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    gates, vparts, scorers, info = {}, {}, {}, {}
    for h in widths:
        torch.manual_seed(seed)
        gate = MemGate(MemGateConfig(dim=dim, hidden=h)).eval()
        with torch.no_grad():
            t0 = time.perf_counter()
            vpart = np.concatenate([
                gate.precompute_memory(M[i : i + 8192]).numpy() for i in range(0, n, 8192)])
            precompute_s = time.perf_counter() - t0
        gates[h], vparts[h], scorers[h] = gate, vpart, FusedGateScorer(gate)
        info[h] = {
            "hidden": h,
            "parameters": gate.num_parameters(),
            "precomputed_mb": vpart.nbytes / 1e6,
            "precompute_s": precompute_s,
        }

    timings: dict[str, list[float]] = {"top": []}
    for h in widths:
        for key in ("gate", "gate_pre", "gate_fused", "top_gate", "top_gate_pre", "top_gate_fused"):
            timings[f"{key}@{h}"] = []

    def clock(fn):
        t0 = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - t0) / 1e6

    Mt = torch.from_numpy(M)
    with torch.no_grad():
        for r in range(warmup + repeats):
            qt = torch.from_numpy(queries[r])
            idx = _top(Mt, qt, TOP)
            row = {"top": clock(lambda: _top(Mt, qt, TOP))}
            for h in widths:
                gate, vpart, fused = gates[h], torch.from_numpy(vparts[h]), scorers[h]

                def plain():
                    gate.score(qt, Mt[idx])

                def pre():
                    gate.score_precomputed(qt, Mt[idx], vpart[idx])

                def top_plain():
                    i = _top(Mt, qt, TOP)
                    gate.score(qt, Mt[i])

                def top_pre():
                    i = _top(Mt, qt, TOP)
                    gate.score_precomputed(qt, Mt[i], vpart[i])

                def fused_only():
                    fused.score(qt, Mt[idx], vpart[idx])

                def top_fused():
                    i = _top(Mt, qt, TOP)
                    fused.score(qt, Mt[i], vpart[i])

                row[f"gate@{h}"] = clock(plain)
                row[f"gate_pre@{h}"] = clock(pre)
                row[f"top_gate@{h}"] = clock(top_plain)
                row[f"top_gate_pre@{h}"] = clock(top_pre)
                row[f"gate_fused@{h}"] = clock(fused_only)
                row[f"top_gate_fused@{h}"] = clock(top_fused)
            if r >= warmup:
                for key, value in row.items():
                    timings[key].append(value)

    # Contention-robust companion: single-thread CPU time of the calling thread (all the work
    # runs on it with one torch thread), which a busy machine inflates far less than wall time.
    cpu: dict[str, list[float]] = {}
    torch.set_num_threads(1)
    with torch.no_grad():
        for r in range(warmup + repeats):
            qt = torch.from_numpy(queries[r])
            idx = _top(Mt, qt, TOP)
            steps = {"top": lambda: _top(Mt, qt, TOP)}
            for h in widths:
                steps[f"gate@{h}"] = (lambda g: lambda: g.score(qt, Mt[idx]))(gates[h])
                steps[f"gate_pre@{h}"] = (lambda g, vp: lambda: g.score_precomputed(
                    qt, Mt[idx], vp[idx]))(gates[h], torch.from_numpy(vparts[h]))
                steps[f"gate_fused@{h}"] = (lambda f, vp: lambda: f.score(
                    qt, Mt[idx], vp[idx]))(scorers[h], torch.from_numpy(vparts[h]))
            for key, fn in steps.items():
                t0 = time.thread_time_ns()
                fn()
                if r >= warmup:
                    cpu.setdefault(key, []).append((time.thread_time_ns() - t0) / 1e6)
    torch.set_num_threads(threads)
    cpu_med = {k: float(np.median(v)) for k, v in cpu.items()}

    med = {k: float(np.median(v)) for k, v in timings.items()}
    p90 = {k: float(np.percentile(v, 90)) for k, v in timings.items()}
    low = {k: float(np.min(v)) for k, v in timings.items()}
    widths_out = []
    for h in widths:
        entry = dict(info[h])
        for name, key in (("", "gate"), ("_pre", "gate_pre"), ("_fused", "gate_fused")):
            entry[f"gate{name}_ms_per_100"] = med[f"{key}@{h}"]
            entry[f"gate{name}_ms_per_100_p90"] = p90[f"{key}@{h}"]
            entry[f"gate{name}_ms_per_100_min"] = low[f"{key}@{h}"]
            entry[f"top_plus_gate{name}_ms"] = med[f"top_{key}@{h}"]
            entry[f"overhead_ratio{name}"] = med[f"top_{key}@{h}"] / med["top"]
            entry[f"overhead_ratio{name}_min"] = low[f"top_{key}@{h}"] / low["top"]
            entry[f"cpu1_gate{name}_ms_per_100"] = cpu_med[f"{key}@{h}"]
            entry[f"cpu1_overhead_ratio{name}"] = (cpu_med["top"] + cpu_med[f"{key}@{h}"]) / cpu_med["top"]
        widths_out.append(entry)
    if limiter is not None:
        limiter.unregister() if hasattr(limiter, "unregister") else None
    return {
        "n": n,
        "dim": dim,
        "top": TOP,
        "threads": threads,
        "repeats": repeats,
        "top_ms": med["top"],
        "top_ms_p90": p90["top"],
        "top_ms_min": low["top"],
        "cpu1_top_ms": cpu_med["top"],
        "vectors_mb": M.nbytes / 1e6,
        "default_width": DEFAULT_WIDTH,
        "widths": widths_out,
        "targets": {"gate_ms_per_100": 2.0, "overhead_ratio": 1.2},
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
    }


class _FixedEncoder:
    """Stands in for the sentence encoder: a known vector per query text (no model time)."""

    def __init__(self, identity: dict, vectors: dict):
        self.identity = identity
        self._vectors = vectors

    def encode(self, texts, progress=False):
        return np.stack([self._vectors[t] for t in texts])


def run_e2e(n: int = 100_000, dim: int = 384, repeats: int = 30, threads: int = 2, seed: int = 0,
            k: int = 10, depth: int = 100, workdir: Path | None = None) -> dict:
    """End-to-end retrieve() latency over an EmbeddedStore of n records."""
    import tempfile

    from memgate.contract.admissibility import SupersessionScope
    from memgate.contract.records import QueryContext
    from memgate.retriever import EmbeddedStore, GatedRetriever, RetrieverConfig, StoredMemory, Supersedes

    _limit_threads(threads)
    rng = np.random.default_rng(seed + 1)
    ident = {"id": "bench-encoder", "revision": "1", "normalize": True, "dim": dim}
    workdir = Path(workdir or tempfile.mkdtemp(prefix="memgate-bench-"))
    store = EmbeddedStore(workdir / "store", ident, fsync=False)
    t0 = time.perf_counter()
    batch = 5000
    for start in range(0, n, batch):
        memories, vectors = [], rng.standard_normal((min(batch, n - start), dim), dtype=np.float32)
        for i in range(start, start + len(vectors)):
            r = i % 20
            tags = None if r == 19 else (["roleplay"] if r == 18 else ["personal"])
            sup = ()
            if r == 1 and i >= 20:  # every 20th record supersedes an older one from a date on
                sup = (Supersedes(f"m{i - 20:06d}", SupersessionScope(valid_from="2024-05-01")),)
            memories.append(StoredMemory(f"m{i:06d}", "user", f"memory {i}", policy_tags=tags,
                                   supersedes=sup, evidence_strength=0.9, risk="low",
                                   epistemic_status="verified", source_type="source_document"))
        store.add_many(memories, vectors, encoder=ident)
    build_s = time.perf_counter() - t0
    texts = [f"query {r}" for r in range(repeats + 3)]
    qv = rng.standard_normal((len(texts), dim), dtype=np.float32)
    encoder = _FixedEncoder(ident, dict(zip(texts, qv / np.linalg.norm(qv, axis=1, keepdims=True))))
    torch.manual_seed(seed)
    gate = MemGate(MemGateConfig(dim=dim, encoder_id=ident["id"], encoder_revision=ident["revision"],
                                 encoder_normalize=True)).eval()
    policy = {"personal": {}, "roleplay": {"reason": "jailbreak", "deny": ["task_execution"]}}
    t0 = time.perf_counter()
    gated = GatedRetriever(store, encoder, gate=gate,
                           config=RetrieverConfig(policy_rules=policy, rerank_depth=depth))
    open_gated_s = time.perf_counter() - t0
    plain = GatedRetriever(store, encoder, gate=None, config=RetrieverConfig(policy_rules=policy))
    rows: dict[str, list] = {"plain": [], "gated": []}
    stages: dict[str, dict[str, list]] = {"plain": {}, "gated": {}}
    for r, text in enumerate(texts):
        for name, retriever in (("plain", plain), ("gated", gated)):
            ctx = QueryContext(query_id=f"{name}-{r}", text="", principal="u",
                               namespaces={"user"}, purpose="task_execution",
                               intent="current_state", time="2024-06-01")
            t = time.perf_counter()
            result = retriever.retrieve(text, ctx, k=k)
            ms = (time.perf_counter() - t) * 1e3
            if r >= 3:
                rows[name].append(ms)
                for stage, v in result.timings_ms.items():
                    stages[name].setdefault(stage, []).append(v)
    out = {"n": n, "k": k, "rerank_depth": depth, "build_s": build_s,
           "open_with_gate_s": open_gated_s, "precomputed_mb": gated.precomputed_bytes / 1e6}
    for name in rows:
        out[f"{name}_ms"] = float(np.median(rows[name]))
        out[f"{name}_stages_ms"] = {s: float(np.median(v)) for s, v in stages[name].items()}
    out["gated_over_plain"] = out["gated_ms"] / out["plain_ms"]
    store.close()
    return out


def format_report(res: dict) -> str:
    t = res["targets"]
    lines = [
        f"retriever latency: top-{res['top']} over {res['n']:,} x {res['dim']} float32 vectors, "
        f"{res['threads']} threads, medians of {res['repeats']} interleaved repeats "
        f"(1-min load average {res['machine']['load_avg_1m']:.2f} on {res['machine']['cpu_count']} cores, "
        f"OMP_WAIT_POLICY={res['machine']['omp_wait_policy'] or 'unset'})",
        f"  top-{res['top']} exact cosine (no gate, no record fetch): {res['top_ms']:.2f} ms "
        f"(p90 {res['top_ms_p90']:.2f}, min {res['top_ms_min']:.2f})",
        "",
        "  medians, [min] = the least-disturbed repeat; cpu1 = single-thread CPU time (thread_time),",
        "  which a busy machine inflates far less than wall time",
        "",
        "  width  params  variant                                gate ms/100 [min]    overhead ratio [min]"
        "   cpu1 gate ms  cpu1 ratio",
    ]
    variants = (("", "MemGate.score (plain)"), ("_pre", "MemGate.score_precomputed (split)"),
                ("_fused", "FusedGateScorer (split, retriever)"))
    for w in res["widths"]:
        for i, (name, label) in enumerate(variants):
            head = f"  {w['hidden']:>5}  {w['parameters'] / 1e6:5.2f}M" if i == 0 else " " * 15
            mark = "  <- default width" if i == 0 and w["hidden"] == res["default_width"] else ""
            lines.append(
                f"{head}  {label:<37}  {w[f'gate{name}_ms_per_100']:7.2f} [{w[f'gate{name}_ms_per_100_min']:5.2f}]"
                f"      {w[f'overhead_ratio{name}']:6.3f} [{w[f'overhead_ratio{name}_min']:5.3f}]"
                f"     {w[f'cpu1_gate{name}_ms_per_100']:7.2f}      {w[f'cpu1_overhead_ratio{name}']:6.3f}{mark}"
            )
        lines.append(
            f"{' ' * 15}  precomputed first-layer parts for {res['n']:,} memories: "
            f"{w['precomputed_mb']:.1f} MB (vectors: {res['vectors_mb']:.1f} MB), computed in "
            f"{w['precompute_s']:.2f} s")
    default = next(w for w in res["widths"] if w["hidden"] == res["default_width"])

    def verdict(value, target):
        return f"{value:.3g} ({'met' if value <= target else 'NOT met'})"

    lines += [
        "",
        f"  targets at the default width (gate_ms_per_100 <= {t['gate_ms_per_100']} ms, overhead_ratio <= "
        f"{t['overhead_ratio']}):",
        f"    plain MemGate.score: {verdict(default['gate_ms_per_100'], t['gate_ms_per_100'])} ms, ratio "
        f"{verdict(default['overhead_ratio'], t['overhead_ratio'])}",
        f"    write-time split, MemGate.score_precomputed: "
        f"{verdict(default['gate_pre_ms_per_100'], t['gate_ms_per_100'])} ms, ratio "
        f"{verdict(default['overhead_ratio_pre'], t['overhead_ratio'])}",
        f"    write-time split, FusedGateScorer (what the retriever runs): "
        f"{verdict(default['gate_fused_ms_per_100'], t['gate_ms_per_100'])} ms, ratio "
        f"{verdict(default['overhead_ratio_fused'], t['overhead_ratio'])}",
    ]
    return "\n".join(lines)


def format_e2e(e2e: dict) -> str:
    def stages(d):
        return ", ".join(f"{k.removesuffix('_ms')} {v:.2f}" for k, v in d.items())

    lines = [
        f"  end to end: GatedRetriever.retrieve over an EmbeddedStore of {e2e['n']:,} records "
        f"(k={e2e['k']}, re-scoring depth {e2e['rerank_depth']}, audit log on, "
        f"store built in {e2e['build_s']:.1f} s, gate parts precomputed in "
        f"{e2e['open_with_gate_s']:.1f} s, {e2e['precomputed_mb']:.1f} MB)",
        f"    plain cosine route: {e2e['plain_ms']:.2f} ms  ({stages(e2e['plain_stages_ms'])})",
        f"    gated route:        {e2e['gated_ms']:.2f} ms  ({stages(e2e['gated_stages_ms'])})",
        f"    gated / plain: {e2e['gated_over_plain']:.3f}",
    ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-e2e", dest="e2e", action="store_false",
                   help="skip the end-to-end retrieve() measurement")
    p.add_argument("--e2e-only", action="store_true", help="only the end-to-end measurement")
    p.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    args = p.parse_args(argv)
    res = {}
    if not args.e2e_only:
        res = run(n=args.n, dim=args.dim, repeats=args.repeats, threads=args.threads,
                  widths=tuple(args.widths), seed=args.seed)
        print(format_report(res))
    if args.e2e or args.e2e_only:
        res["e2e"] = run_e2e(n=args.n, dim=args.dim, repeats=args.repeats, threads=args.threads,
                             seed=args.seed)
        print(format_e2e(res["e2e"]))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    return res


if __name__ == "__main__":
    main()
