"""``memgate store sweep`` at scale (issue 47): an embedded store of ``--n`` memories (default
100,000) over 100 users, ``--expired`` of them (default 10 %) with an ``expiration_date`` in the
past, the rest half without one and half expiring next year; then, each in a fresh process:

- ``open``: ``Memory(path=...)`` opened and closed (p50 of ``--repeats``): the open does no
  expiry work (the catalog loads at the first read), so this is the figure to compare with a
  store without expiries (``--expired 0``);
- ``sweep``: ``Memory.sweep()`` as ``memgate store sweep`` runs it (a fresh process: the catalog
  loads first, then every expired record goes through the erasure path, audit event
  ``expired``): wall time, the catalog's share, peak RSS over the RSS before the call (Linux
  ``VmHWM`` reset through ``/proc/self/clear_refs``) and the Python allocation peak
  (tracemalloc).

    python -m benchmarks.bench_sweep [--n 100000] [--expired 0.1] [--repeats 5]

The vectors are random unit float32 rows (d = 384, the bundled encoder's width) written with
``EmbeddedStore.add_many`` (no text is encoded: the sweep embeds nothing); the encoder is the
bundled one, never loaded. Timing only: nothing is asserted (tests assert behaviour).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

DIM = 384
CHILD = r"""
import json, sys, time, tracemalloc
from pathlib import Path
from memgate import Memory
from memgate.model.encoder import Encoder, EncoderConfig

def rss(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # MiB
    return float("nan")

path, what, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}
if what == "open":
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        Memory(path=path, gate=None, encoder=Encoder(EncoderConfig(cache_dir=None))).close()
        times.append((time.perf_counter() - t) * 1e3)
    out["open_ms"] = sorted(times)[len(times) // 2]
else:
    m = Memory(path=path, gate=None, encoder=Encoder(EncoderConfig(cache_dir=None)))
    before = rss("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    tracemalloc.start()
    t = time.perf_counter()
    m.catalog.refresh()
    catalog_s = time.perf_counter() - t
    n = m.sweep()
    total_s = time.perf_counter() - t
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out.update(swept=n, sweep_s=total_s, catalog_s=catalog_s, rss_before_mib=before,
               peak_rss_mib=rss("VmHWM"), py_peak_mib=py_peak / 2**20, again=m.sweep())
    m.close()
print(json.dumps(out))
"""


def build(path: Path, n: int, expired: float, seed: int = 0) -> int:
    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.retriever import EmbeddedStore, StoredMemory

    ident = Encoder(EncoderConfig(cache_dir=None)).identity
    now = datetime.now(timezone.utc)
    past = (now - timedelta(days=1)).isoformat(timespec="microseconds")
    future = (now + timedelta(days=365)).isoformat(timespec="microseconds")
    rng = np.random.default_rng(seed)
    n_expired = 0
    with EmbeddedStore(path, ident, fsync=False) as store:
        for start in range(0, n, 5000):
            size = min(5000, n - start)
            v = rng.normal(size=(size, DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            records = []
            for i in range(start, start + size):
                due = past if rng.random() < expired else (future if i % 2 else None)
                n_expired += due is past
                attrs = {"topic": f"t{i % 7}", **({"expiration_date": due} if due else {})}
                records.append(StoredMemory(f"mem-{i:07d}", f"user:u{i % 100}", f"memory number {i}",
                                            principal=f"u{i % 100}", attributes=attrs, policy_tags=("general",),
                                            provenance="user_stated"))
            store.add_many(records, v, encoder=ident)
    return n_expired


def child(path: Path, what: str, repeats: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), what, str(repeats)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--expired", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memgate-sweep-") as tmp:
        path = Path(tmp) / "store"
        t = time.perf_counter()
        n_expired = build(path, args.n, args.expired)
        built_s = time.perf_counter() - t
        opened = [child(path, "open", args.repeats)["open_ms"] for _ in range(3)]
        swept = child(path, "sweep", 1)
        after = [child(path, "open", args.repeats)["open_ms"] for _ in range(3)]
        print(json.dumps({"n": args.n, "expired": n_expired, "build_s": round(built_s, 1),
                          "open_ms_p50": round(statistics.median(opened), 1),
                          "open_ms_p50_after_sweep": round(statistics.median(after), 1),
                          **{k: round(v, 3) if isinstance(v, float) else v for k, v in swept.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
