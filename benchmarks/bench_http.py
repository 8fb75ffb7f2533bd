"""HTTP server latency under concurrent clients (``python -m benchmarks.bench_http``).

A real uvicorn server on 127.0.0.1 over an embedded store (fsync on, as served) or, with
``--backend postgres``, a PostgreSQL store (a pgserver in a temporary folder), ``clients``
threads each with its own httpx client and API key (its own user), each sending ``requests``
requests in a fixed mix: add (1/3), search (1/3), get by id (1/3). Prints p50 / p99 per request
kind and the throughput; afterwards checks that every acknowledged write is readable. Timings
depend on the machine (the 1-minute load average is printed beside them); nothing is asserted.

``--compare`` runs the server with each request embedding alone and with concurrent requests'
embeddings micro-batched (:mod:`memgate.model.encoder_batching`, the default) side by side, in
ABBA rounds, and prints both and the ratio of their throughputs.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from memgate.model.encoder_batching import DEFAULT_WINDOW_MS


def _memory(backend: str, tmp: Path, fsync: bool):
    """The served Memory over a new store of ``backend``, and what to stop after it."""
    from memgate.integrations.memory import Memory

    if backend == "postgres":
        from memgate.retriever.stores.postgres.local import LocalServer

        server = LocalServer(tmp / "pgdata")
        return Memory(store="postgres", url=server.url, path=tmp / "audit"), server
    return Memory(path=tmp / "store", fsync=fsync), None


def _serve(mem, keys: dict, clients: int, requests: int, lat: dict, acked: dict, errors: list,
           lock, batch_window_ms=DEFAULT_WINDOW_MS) -> tuple[float, int]:
    """Run the clients against a server over ``mem``; (wall seconds, acknowledged writes missing)."""
    import httpx

    from memgate.integrations.http_server import create_app
    from memgate.integrations.uvicorn_thread import ServerThread

    mem.retriever.encoder.encode(["warm up"], progress=False)
    with ServerThread(create_app(mem, keys, batch_window_ms=batch_window_ms)) as url:
        def run(i: int) -> None:
            headers = {"X-API-Key": f"bench-client-{i}-0123456789"}
            with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
                c.post("/memories", json={"text": f"User {i} seed memory."})
                for j in range(requests):
                    kind = ("add", "search", "get")[j % 3]
                    t = time.perf_counter()
                    if kind == "add":
                        r = c.post("/memories", json={"text": f"User {i} note {j}: the parcel is in locker {j}.",
                                                      "metadata": {"j": j}})
                    elif kind == "search":
                        r = c.post("/search", json={"query": f"where is parcel {j}?", "limit": 5})
                    else:
                        r = c.get(f"/memories/{acked[i][-1]}")
                    dt = (time.perf_counter() - t) * 1e3
                    with lock:
                        lat[kind].append(dt)
                        if r.status_code >= 300:
                            errors.append(f"{kind} {r.status_code}")
                    if kind == "add" and r.status_code == 201:
                        acked[i].append(r.json()["id"])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        missing = 0
        for i in range(clients):
            with httpx.Client(base_url=url, headers={"X-API-Key": f"bench-client-{i}-0123456789"}) as c:
                listed = {m["id"] for m in c.get("/memories", params={"limit": 1000}).json()["results"]}
                missing += len(set(acked[i]) - listed)
    return wall, missing


def bench(clients: int = 8, requests: int = 200, fsync: bool = True, backend: str = "embedded",
          batch_window_ms=DEFAULT_WINDOW_MS) -> dict:
    keys = {f"bench-client-{i}-0123456789": f"user-{i}" for i in range(clients)}
    lat: dict[str, list[float]] = {"add": [], "search": [], "get": []}
    acked: dict[int, list[str]] = {i: [] for i in range(clients)}
    errors: list[str] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        mem, server = _memory(backend, Path(tmp), fsync)
        try:
            wall, missing = _serve(mem, keys, clients, requests, lat, acked, errors, lock, batch_window_ms)
        finally:
            mem.close()
            if server is not None:
                server.stop()
    out = {"backend": backend, "clients": clients, "requests_per_client": requests, "fsync": fsync,
           "batch_window_ms": batch_window_ms,
           "load_avg_1m": os.getloadavg()[0], "cpu_count": os.cpu_count(),
           "wall_s": wall, "requests_per_s": clients * requests / wall,
           "errors": len(errors), "acknowledged_writes": sum(len(v) for v in acked.values()),
           "acknowledged_missing": missing}
    for kind, values in lat.items():
        a = np.asarray(values)
        out[f"{kind}_ms_p50"] = float(np.percentile(a, 50))
        out[f"{kind}_ms_p99"] = float(np.percentile(a, 99))
        out[f"{kind}_n"] = int(len(a))
    return out


def compare(clients: int = 8, requests: int = 200, fsync: bool = True, backend: str = "embedded",
            rounds: int = 2) -> dict:
    """Unbatched and micro-batched embeddings side by side: ABBA rounds (off, on, on, off, ...)
    so that background load hits both alike; per variant the median over its runs of req/s and
    of each kind's p50 / p99, and the batched / unbatched ratios."""
    runs: dict[str, list] = {"unbatched": [], "batched": []}
    for r in range(rounds):
        for name in (("unbatched", "batched") if r % 2 == 0 else ("batched", "unbatched")):
            runs[name].append(bench(clients, requests, fsync, backend,
                                    None if name == "unbatched" else DEFAULT_WINDOW_MS))
    out: dict = {"rounds": rounds, "load_avg_1m": os.getloadavg()[0], "runs": runs}
    for name, rows in runs.items():
        out[name] = {key: float(np.median([row[key] for row in rows]))
                     for key in rows[0] if key.endswith(("_p50", "_p99", "per_s"))}
    out["ratio_requests_per_s"] = out["batched"]["requests_per_s"] / out["unbatched"]["requests_per_s"]
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--backend", choices=("embedded", "postgres"), default="embedded")
    parser.add_argument("--compare", action="store_true", help="unbatched vs micro-batched embeddings, ABBA")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.compare:
        res = compare(args.clients, args.requests, fsync=not args.no_fsync, backend=args.backend, rounds=args.rounds)
        for name in ("unbatched", "batched"):
            v = res[name]
            print(f"{name:<9}: {v['requests_per_s']:.1f} req/s; " + "; ".join(
                f"{k} p50 {v[f'{k}_ms_p50']:.1f} ms p99 {v[f'{k}_ms_p99']:.1f} ms" for k in ("add", "search", "get")))
        print(f"batched / unbatched req/s x{res['ratio_requests_per_s']:.2f} (load {res['load_avg_1m']:.2f})")
        print(json.dumps({k: v for k, v in res.items() if k != "runs"}, sort_keys=True))
        return res
    r = bench(args.clients, args.requests, fsync=not args.no_fsync, backend=args.backend)
    print(f"{r['backend']}: {r['clients']} clients x {r['requests_per_client']} requests (fsync={r['fsync']}), "
          f"load {r['load_avg_1m']:.1f} on {r['cpu_count']} cores: {r['requests_per_s']:.1f} req/s, "
          f"{r['errors']} errors, {r['acknowledged_writes']} acknowledged writes, "
          f"{r['acknowledged_missing']} missing afterwards")
    for kind in ("add", "search", "get"):
        print(f"  {kind:<7} p50 {r[f'{kind}_ms_p50']:7.1f} ms   p99 {r[f'{kind}_ms_p99']:7.1f} ms   (n={r[f'{kind}_n']})")
    print(json.dumps(r, sort_keys=True))
    return r


if __name__ == "__main__":  # pragma: no cover
    main()
