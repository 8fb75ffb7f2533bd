"""Opening a large embedded store, this tree against another checkout (issue 47's bound: opening
a 100,000-memory store stays within 50 ms of the tree before it).

    python -m benchmarks.bench_open --other-tree /path/to/old/checkout [--n 100000] [--rounds 20]
                                    [--store DIR]

One store of ``--n`` memories (``benchmarks.bench_sweep.build``, nothing expired; kept in
``--store`` and reused when it exists), opened and closed by ``Memory(path=..., gate=None)`` in a
fresh process per open, this tree and the other alternating (the other imported through
``PYTHONPATH``; a git worktree of an older commit will do), the order swapped every round. Prints
each open, the p50 of each tree and the paired median difference (this tree - the other) with a
95 % bootstrap CI. Timing only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = r"""
import json, sys, time
import memgate
from memgate import Memory
from memgate.model.encoder import Encoder, EncoderConfig
t = time.perf_counter()
Memory(path=sys.argv[1], gate=None, encoder=Encoder(EncoderConfig(cache_dir=None))).close()
print(json.dumps({"ms": (time.perf_counter() - t) * 1e3, "package": memgate.__file__}))
"""


def open_once(store: Path, pythonpath: str | None) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", CHILD, str(store)], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir())
    if done.returncode:
        raise SystemExit(f"open failed ({pythonpath or 'this tree'}): {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other-tree", required=True, help="a checkout whose memgate/ is imported for the comparison")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "memgate-bench-open")
    args = parser.parse_args(argv)
    other = Path(args.other_tree).resolve()
    if not (other / "memgate" / "__init__.py").is_file():
        parser.error(f"--other-tree: no memgate/ package in {other}")
    from benchmarks.bench_sweep import build

    store = args.store / f"store-{args.n}"
    if not store.exists():
        t = time.perf_counter()
        build(store, args.n, 0.0)
        print(f"built {args.n:,} memories in {time.perf_counter() - t:.1f} s", flush=True)
    trees = (("this", None), ("other", str(other)))
    times: dict = {"this": [], "other": []}
    for r in range(args.rounds):
        for name, path in (trees if r % 2 == 0 else trees[::-1]):
            out = open_once(store, path)
            times[name].append(out["ms"])
            print(f"round {r}: {name:<5} {out['ms']:8.1f} ms  ({out['package']})", flush=True)
    d = np.array(times["this"]) - np.array(times["other"])
    rng = np.random.default_rng(0)
    boot = [float(np.median(rng.choice(d, len(d)))) for _ in range(5000)]
    result = {"n": args.n, "rounds": args.rounds, "p50_ms": {k: statistics.median(v) for k, v in times.items()},
              "paired_median_diff_ms": float(np.median(d)),
              "ci95_ms": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
              "load_avg_end": os.getloadavg()[0], "times_ms": times}
    print(f"p50 this {result['p50_ms']['this']:.1f} ms, other {result['p50_ms']['other']:.1f} ms; paired median "
          f"difference {result['paired_median_diff_ms']:+.1f} ms [{result['ci95_ms'][0]:+.1f}, {result['ci95_ms'][1]:+.1f}]")
    return result


if __name__ == "__main__":
    main()
