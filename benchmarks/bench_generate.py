"""Generator throughput: triples per second for a data config, excluding embedding.

    python -m benchmarks.bench_generate [--config configs/data/default.yaml] [--repeats 3] [--out FILE]

One timed run = ``data_gen.generate.generate`` (groups, instances, labels, triples, in memory)
plus writing the split files and hashing them (``write_splits``), i.e. everything
``python -m data_gen`` does except the artefact audit (timed separately, once, as ``audit_s``).
``gen_triples_per_s`` = triples of all splits / run time, median over ``--repeats`` runs, with the
default worker count (2 where a second CPU and ``os.fork`` exist); ``gen_triples_per_s_one_worker``
is measured interleaved with it (``MEMGATE_DATAGEN_WORKERS=1``) and ``workers_speedup`` is the ratio.
Target (issue 3): >= 10,000 triples/s on the default config. The machine is shared, so the
load average at the start is printed beside the figures. With ``real_text.enabled`` a run also
reads the GateMem generator episodes (checksums, splits and files are cached per process, so the
first repeat pays the reading); ``real_text_queries`` says how many candidate rows it produced.

What a user waits for is a fresh process, so ``gen_triples_per_s_cli`` times the whole command
``python -m data_gen --out <tmp> --no-audit --quiet`` (interpreter start, imports, the real-text
reading, the leak check and meta.json included; median over ``--repeats`` runs) beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from data_gen.config import load_config
from data_gen.forked import WORKERS_ENV, worker_count
from data_gen.generate import generate, write_splits

ROOT = Path(__file__).resolve().parents[1]


def _set_env(name: str, value) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _timed_run(cfg: dict) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        splits, heldout = generate(cfg)
        mid = time.perf_counter()
        write_splits(splits, Path(tmp))
        end = time.perf_counter()
    return splits, heldout, end - start, mid - start


def bench(config: Path, repeats: int = 3, audit: bool = True) -> dict:
    cfg = load_config(config)
    times, gen_times, one_worker = [], [], []
    splits = heldout = None
    saved = os.environ.get(WORKERS_ENV)
    try:
        for _ in range(repeats):  # the default worker count and one worker, interleaved
            _set_env(WORKERS_ENV, saved)
            splits, heldout, total, gen = _timed_run(cfg)
            times.append(total)
            gen_times.append(gen)
            _set_env(WORKERS_ENV, "1")
            one_worker.append(_timed_run(cfg)[2])
    finally:
        _set_env(WORKERS_ENV, saved)
    n_triples = sum(len(s.triples) for s in splits.values())
    cli_times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "data_gen", "--config", str(config), "--out", tmp,
                            "--no-audit", "--quiet"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            cli_times.append(time.perf_counter() - start)
    result = {
        "config": str(config),
        "repeats": repeats,
        "triples": n_triples,
        "triples_by_split": {k: len(s.triples) for k, s in splits.items()},
        "queries_by_split": {k: len(s.queries) for k, s in splits.items()},
        "labels": sum(len(s.labels) for s in splits.values()),
        "real_text_queries": len(splits["train"].real_candidates),
        "run_s_median": round(statistics.median(times), 3),
        "generate_s_median": round(statistics.median(gen_times), 3),
        "gen_triples_per_s": round(n_triples / statistics.median(times), 1),
        "gen_triples_per_s_in_memory": round(n_triples / statistics.median(gen_times), 1),
        "workers": worker_count(),
        "gen_triples_per_s_one_worker": round(n_triples / statistics.median(one_worker), 1),
        "workers_speedup": round(statistics.median(one_worker) / statistics.median(times), 3),
        "cli_s_median": round(statistics.median(cli_times), 3),
        "gen_triples_per_s_cli": round(n_triples / statistics.median(cli_times), 1),
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    if audit:
        from data_gen.audit import run_audit

        start = time.perf_counter()
        run_audit(splits, heldout, cfg)
        result["audit_s"] = round(time.perf_counter() - start, 2)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_generate", description=__doc__)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "data" / "default.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-audit", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = bench(args.config, args.repeats, audit=not args.no_audit)
    print(f"gen_triples_per_s {result['gen_triples_per_s']} with {result['workers']} worker(s), "
          f"{result['gen_triples_per_s_one_worker']} with one (x{result['workers_speedup']}; "
          f"fresh CLI process: {result['gen_triples_per_s_cli']})")
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
