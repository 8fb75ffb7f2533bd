"""Start-up as a new user meets it (``python -m benchmarks.bench_startup [--root DIR]``): every
figure is the wall time of fresh processes, started the way a user starts them, median of
``--repeats`` runs (5), with the 1-minute load average beside it. ``--root`` measures another
checkout of memgate (e.g. the tree before a change, extracted with ``git archive``) with the
same method, so two trees can be put side by side; ``--json FILE`` writes the figures.

Figures (issue 35's targets in brackets):

- ``python -c pass`` (the interpreter alone) and ``from memgate import Memory, MemGate,
  QueryContext`` (a fresh process, and the import alone inside it) [<= 0.3 s]; ``import torch``
  and ``import sentence_transformers`` alone (the floor under a first encode);
- ``memgate <verb> --help`` for every verb and ten usage errors (worst and median) [<= 0.5 s];
- ``memgate store list / get / history / verify / export`` on a small store, and ``forget``;
- ``Memory(path=...)``: a fresh process that opens a new store, adds one memory and searches
  (cold, to the search's answer) [<= 3 s]; then, warm, ms per add and per search (fsync on, as
  the default, and off) [<= 30 ms];
- ``MemgateStore.put`` warm (fsync on and off; LangGraph's ``InMemoryStore.put`` beside it)
  [<= 30 ms];
- the servers, from the process start: ``memgate serve http`` answering ``/health`` and saying
  ``ready``; ``memgate serve mcp`` over stdio answering ``initialize`` + ``tools/list`` (the SDK's
  client) and over streamable HTTP [<= 2 s to accept].

Timings depend on the machine; nothing here is asserted (the behaviour is tested in
tests/integrations/test_cold_start.py, tests/commands/test_startup_cli.py and
tests/integrations/test_warmup.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USAGE_ERRORS = [["train", "--no-such-flag"], ["train", "optim.no_such_key=1"], ["evaluate", "--n-boot", "many"],
                ["evaluate", "routes=[no_such_route]"], ["targets"], ["store", "search"], ["store", "list"],
                ["serve", "--transport", "carrier-pigeon"], ["verifiers", "--dev", "3"], ["trian"]]
API_KEY = "bench-startup-key-0123456789"


def env_for(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGATE_QUIET", "WANDB_MODE")}
    env.update(PYTHONPATH=str(root), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    return env


def timed(cmd: list[str], root: Path, cwd: Path) -> tuple[float, int, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env_for(root), capture_output=True, text=True, timeout=600)
    return time.perf_counter() - started, proc.returncode, proc.stdout + proc.stderr


def median_of(cmd: list[str], root: Path, cwd: Path, repeats: int) -> dict:
    runs = [timed(cmd, root, cwd) for _ in range(repeats)]
    return {"median_s": statistics.median(t for t, _, _ in runs), "runs_s": [round(t, 3) for t, _, _ in runs],
            "exit": runs[-1][1]}


def memgate(*argv: str) -> list[str]:
    return [sys.executable, "-m", "memgate", *argv]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROBE_MEMORY = """
import json, sys, time
t0 = time.perf_counter()
from memgate import Memory, MemGate, QueryContext
t_import = time.perf_counter() - t0
m = Memory(path=sys.argv[1])
t_open = time.perf_counter() - t0
m.add("I park on level 3 of the north garage.", user_id="alice")
t_add = time.perf_counter() - t0
hits = m.search("where did I park?", user_id="alice")
t_first = time.perf_counter() - t0
print(json.dumps({"import_s": t_import, "open_s": t_open - t_import, "first_add_s": t_add - t_open,
                  "first_search_s": t_first - t_add, "first_add_search_s": t_first,
                  "top": hits["results"][0]["memory"]}))
"""

PROBE_WARM = """
import json, shutil, statistics, sys, time
from pathlib import Path
from memgate import Memory
out = {}
for fsync in (True, False):
    path = Path(sys.argv[1]) / f"warm-{fsync}"
    with Memory(path=path, fsync=fsync) as m:
        m.add("warm up", user_id="a"); m.search("warm up", user_id="a")
        adds, searches = [], []
        for i in range(int(sys.argv[2])):
            t = time.perf_counter(); m.add(f"I like thing number {i}.", user_id="a"); adds.append(time.perf_counter() - t)
            t = time.perf_counter(); m.search(f"what do I like, {i}?", user_id="a"); searches.append(time.perf_counter() - t)
    out[f"memory_add_ms_fsync_{fsync}"] = 1e3 * statistics.median(adds)
    out[f"memory_search_ms_fsync_{fsync}"] = 1e3 * statistics.median(searches)
try:
    from langgraph.store.memory import InMemoryStore
    from memgate.integrations.langgraph_store import MemgateStore
except ImportError:
    pass
else:
    for fsync in (True, False):
        store = MemgateStore(path=Path(sys.argv[1]) / f"lg-{fsync}", fsync=fsync)
        store.put(("users", "alice"), "warm", {"text": "warm up"})
        puts = []
        for i in range(int(sys.argv[2])):
            t = time.perf_counter(); store.put(("users", "alice"), f"k{i}", {"text": f"Alice likes thing {i}."})
            puts.append(time.perf_counter() - t)
        out[f"memgatestore_put_ms_fsync_{fsync}"] = 1e3 * statistics.median(puts)
        store.close()
    mem = InMemoryStore()
    puts = []
    for i in range(int(sys.argv[2])):
        t = time.perf_counter(); mem.put(("users", "alice"), f"k{i}", {"text": f"Alice likes thing {i}."})
        puts.append(time.perf_counter() - t)
    out["inmemorystore_put_ms"] = 1e3 * statistics.median(puts)
print(json.dumps(out))
"""


def populated_store(root: Path, work: Path, extra: int = 0) -> tuple[Path, str, list[str]]:
    """A store with alice's memories and one search: (path, a memory's id, ``extra`` more ids)."""
    store = work / "store"
    code = ("import sys; from memgate import Memory\n"
            "with Memory(path=sys.argv[1]) as m:\n"
            "    a = m.add('I park on level 3.', user_id='alice'); m.search('where?', user_id='alice')\n"
            "    more = [m.add(f'Note {i}: the parcel is in locker {i}.', user_id='alice')['id'] for i in range(int(sys.argv[2]))]\n"
            "    print(' '.join([a['id'], *more]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(store), str(extra)], env=env_for(root), cwd=work,
                          capture_output=True, text=True, timeout=600, check=True)
    ids = proc.stdout.strip().splitlines()[-1].split()
    return store, ids[0], ids[1:]


def server_http(root: Path, work: Path, store: Path) -> dict:
    import httpx

    keys = work / "keys.json"
    keys.write_text(json.dumps({API_KEY: "alice"}))
    port = _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(memgate("serve", "http", "--store", str(store), "--api-keys", str(keys),
                                    "--port", str(port)), cwd=work, env=env_for(root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    accepted = ready = None
    try:
        while time.perf_counter() - started < 300 and proc.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            except httpx.HTTPError:
                time.sleep(0.02)
                continue
            accepted = accepted or time.perf_counter() - started
            if health.json().get("ready", True):  # (a server without "ready" is ready once it answers)
                ready = time.perf_counter() - started
                break
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
    return {"accept_s": accepted, "ready_s": ready}


def server_mcp_stdio(root: Path, work: Path, store: Path) -> dict:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, cwd=str(work), env=env_for(root),
                                   args=["-m", "memgate", "serve", "mcp", "--store", str(store),
                                         "--principal", "alice"])

    async def run() -> float:
        started = time.perf_counter()
        async with Client(params, read_timeout_seconds=300) as client:
            await client.list_tools()
            return time.perf_counter() - started

    return {"initialize_tools_list_s": asyncio.run(run())}


def server_mcp_http(root: Path, work: Path, store: Path) -> dict:
    import httpx2  # the mcp SDK's HTTP client
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    env = {**env_for(root), "MEMGATE_MCP_KEY": API_KEY}
    started = time.perf_counter()
    proc = subprocess.Popen(memgate("serve", "mcp", "--store", str(store), "--principal", "alice",
                                    "--transport", "http", "--port", str(port)), cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def run() -> float:
        while time.perf_counter() - started < 300 and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                await asyncio.sleep(0.02)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {API_KEY}"}, timeout=300)
        async with http:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                await client.list_tools()
        return time.perf_counter() - started

    try:
        return {"initialize_tools_list_s": asyncio.run(run())}
    finally:
        proc.terminate()
        proc.wait(30)


def _servers(root: Path, work: Path, store: Path, repeats: int) -> dict:
    out: dict = {}
    for name, fn in (("http", server_http), ("mcp_stdio", server_mcp_stdio), ("mcp_http", server_mcp_http)):
        try:
            runs = [fn(root, work, store) for _ in range(repeats)]
        except ImportError as exc:  # the [serve] extra
            out[name] = {"error": str(exc)}
            continue
        except Exception as exc:  # noqa: BLE001 -- a tree that cannot serve: recorded, not fatal
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        out[name] = {k: statistics.median(r[k] for r in runs if r[k] is not None) if any(
            r[k] is not None for r in runs) else None for k in runs[0]}
        out[name]["runs"] = runs
    return out


def bench(root: Path = REPO, repeats: int = 5, warm_calls: int = 20) -> dict:
    from memgate.commands.cli import VERBS

    root = Path(root).resolve()
    out: dict = {"root": str(root), "repeats": repeats, "cpu_count": os.cpu_count(),
                 "load_avg_1m_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out["python_pass"] = median_of([sys.executable, "-c", "pass"], root, work, repeats)
        for name in ("torch", "sentence_transformers"):  # the floors under a first encode
            out[f"import_{name}"] = median_of([sys.executable, "-c", f"import {name}"], root, work, repeats)
        out["import_public_names"] = median_of(
            [sys.executable, "-c", "from memgate import Memory, MemGate, QueryContext"], root, work, repeats)
        out["help"] = {verb: median_of(memgate(verb, "--help"), root, work, repeats) for verb in VERBS}
        out["usage_errors"] = {" ".join(a): median_of(memgate(*a), root, work, repeats) for a in USAGE_ERRORS}
        store, mid, extra = populated_store(root, work, extra=repeats)
        s = str(store)
        verbs = {"list": ["list", "--store", s], "get": ["get", mid, "--user", "alice", "--store", s],
                 "history": ["history", mid, "--user", "alice", "--store", s], "verify": ["verify", "--store", s]}
        out["store_verbs"] = {name: median_of(memgate("store", *argv), root, work, repeats)
                              for name, argv in verbs.items()}
        exports = [timed(memgate("store", "export", "--store", s, "--out", str(work / f"export{i}")), root, work)
                   for i in range(repeats)]  # a new directory each time: export refuses an existing one
        out["store_verbs"]["export"] = {"median_s": statistics.median(t for t, _, _ in exports),
                                        "runs_s": [round(t, 3) for t, _, _ in exports], "exit": exports[-1][1]}
        forgets = [timed(memgate("store", "forget", one, "--user", "alice", "--store", s), root, work)
                   for one in extra]  # another memory each time: forget is a write
        out["store_verbs"]["forget"] = {"median_s": statistics.median(t for t, _, _ in forgets),
                                        "runs_s": [round(t, 3) for t, _, _ in forgets], "exit": forgets[-1][1]}
        cold = []
        for i in range(repeats):
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", PROBE_MEMORY, str(work / f"cold{i}")], cwd=work,
                                  env=env_for(root), capture_output=True, text=True, timeout=600, check=True)
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["process_s"] = time.perf_counter() - started
            cold.append(row)
        out["memory_cold"] = {k: statistics.median(r[k] for r in cold if k in r) for k in (
            "import_s", "open_s", "first_add_s", "first_search_s", "first_add_search_s", "process_s")
            if any(k in r for r in cold)}
        out["memory_cold"]["runs"] = cold
        proc = subprocess.run([sys.executable, "-c", PROBE_WARM, str(work), str(warm_calls)], cwd=work,
                              env=env_for(root), capture_output=True, text=True, timeout=900, check=True)
        out["warm"] = json.loads(proc.stdout.strip().splitlines()[-1])
        out["servers"] = _servers(root, work, store, repeats)
    out["load_avg_1m_end"] = os.getloadavg()[0]
    return out


def _s(x) -> str:
    return "—" if x is None else f"{x:.2f} s"


def format_report(r: dict) -> str:
    help_times = {v: h["median_s"] for v, h in r["help"].items()}
    worst_help = max(help_times, key=help_times.get)
    errors = {a: e["median_s"] for a, e in r["usage_errors"].items()}
    worst_error = max(errors, key=errors.get)
    w = r["warm"]
    lines = [f"root {r['root']}; {r['cpu_count']} cores; load average {r['load_avg_1m_start']:.2f} -> "
             f"{r['load_avg_1m_end']:.2f}; medians of {r['repeats']} fresh processes",
             f"python -c pass                                  {_s(r['python_pass']['median_s'])}",
             f"from memgate import Memory, MemGate, QueryContext {_s(r['import_public_names']['median_s'])}"
             f" (the import alone, in the Memory probe: {_s(r['memory_cold']['import_s'])})",
             f"import torch {_s(r['import_torch']['median_s'])}; import sentence_transformers "
             f"{_s(r['import_sentence_transformers']['median_s'])} (what a first encode pays before the model loads)",
             f"memgate <verb> --help: worst {worst_help} {_s(help_times[worst_help])}, median "
             f"{_s(statistics.median(help_times.values()))}",
             f"usage errors: worst `{worst_error}` {_s(errors[worst_error])}, median {_s(statistics.median(errors.values()))}",
             "store verbs: " + ", ".join(f"{k} {_s(v['median_s'])}" for k, v in r["store_verbs"].items()),
             f"Memory(path=...) cold, first add + search: {_s(r['memory_cold']['first_add_search_s'])} "
             f"(process start to answer: {_s(r['memory_cold']['process_s'])}; open "
             f"{_s(r['memory_cold'].get('open_s'))}, first add {_s(r['memory_cold'].get('first_add_s'))}, "
             f"first search {_s(r['memory_cold'].get('first_search_s'))})",
             f"Memory warm, ms per add / search: fsync on {w['memory_add_ms_fsync_True']:.1f} / "
             f"{w['memory_search_ms_fsync_True']:.1f}; fsync off {w['memory_add_ms_fsync_False']:.1f} / "
             f"{w['memory_search_ms_fsync_False']:.1f}"]
    if "memgatestore_put_ms_fsync_True" in w:
        lines.append(f"MemgateStore.put warm: fsync on {w['memgatestore_put_ms_fsync_True']:.1f} ms, off "
                     f"{w['memgatestore_put_ms_fsync_False']:.1f} ms (InMemoryStore.put {w['inmemorystore_put_ms']:.3f} ms)")
    sv = r["servers"]
    if "accept_s" in sv.get("http", {}):
        lines.append(f"memgate serve http: /health answers {_s(sv['http']['accept_s'])}, ready {_s(sv['http']['ready_s'])}")
    for name in ("mcp_stdio", "mcp_http"):
        if "initialize_tools_list_s" in sv.get(name, {}):
            lines.append(f"memgate serve mcp ({name[4:]}): initialize + tools/list {_s(sv[name]['initialize_tools_list_s'])}")
        elif name in sv:
            lines.append(f"memgate serve mcp ({name[4:]}): {sv[name].get('error')}")
    lines.append("help per verb: " + ", ".join(f"{v} {t:.2f}" for v, t in help_times.items()))
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the memgate checkout to measure")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warm-calls", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    result = bench(args.root, args.repeats, args.warm_calls)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(format_report(result))
    return result


if __name__ == "__main__":
    main()
