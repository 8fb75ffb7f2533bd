"""The stores' fault suite: ``kill -9`` at random moments and two-process compare-and-set races.

    python -m benchmarks.fault_suite [--kills 200] [--races 20] [--stores embedded,qdrant,postgres] [--disk-full 20]

Kill loop (per store): a writer process runs random writes (add, add_many of 2-20 records,
update, correct, forget) against one store on disk and logs each write's intent before it and
its acknowledgement after it; the loop ``SIGKILL``s it at a random moment, reopens the store and
checks it: ``verify()`` is clean, every acknowledged record is present with its acknowledged
text, revision and vector, the vector mirror maps every slot to its own record's vector, and the
one write in flight is applied entirely or not at all (no torn batch). The next writer continues
on the same store, so the checks cover every earlier round too.

CAS race (per store): two processes read a record at revision 1 and both try
``update(expected_revision=1)`` at once; exactly one may win, the other must get
``StaleRevisionError``. Qdrant local mode admits one process per path, so there the two race
for the storage lock and the loser's CAS runs after the winner's write. PostgreSQL: the two are
two clients of one server (``MEMGATE_POSTGRES_URL``, or a pgserver started in a temporary
folder), each store a schema of its own; a killed writer is a client whose connection drops
mid-transaction.

Disk full and damaged vector files (``--disk-full N`` rounds per store, 0 to skip): see
benchmarks/fault_disk.py.

Writers are forked from one prepared process (the imports cost seconds; a fork milliseconds).
``tests/retriever/test_fault_suite.py`` runs small counts inside ``make test``; this CLI prints the
figures docs/reliability.md reports.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

import numpy as np

from benchmarks.fault_world import IDENT, NAMESPACES, vec

REPO = Path(__file__).resolve().parents[1]


def open_store(kind: str, path: Path):
    if kind == "embedded":
        from memgate.retriever import EmbeddedStore

        return EmbeddedStore(path, IDENT)
    if kind == "postgres":  # the server of MEMGATE_POSTGRES_URL, a schema per store "path"
        from memgate.retriever.stores.postgres.store import URL_ENV, PostgresStore

        schema = "f_" + hashlib.sha256(str(path).encode()).hexdigest()[:20]
        return PostgresStore(os.environ[URL_ENV], IDENT, schema=schema)
    from memgate.retriever.stores.qdrant.store import QdrantStore

    return QdrantStore("mem", IDENT, path=path)


# --------------------------------------------------------------------------- in the child


def _state(memory) -> dict:
    return {"key": [memory.namespace, memory.memory_id], "text": memory.text,
            "revision": memory.revision, "state": memory.lifecycle_state}


def _writer(kind: str, path: str, seed: int, log_path: str) -> None:
    """Random writes until killed; one JSON line before ("begin") and after ("ack") each."""
    from memgate.retriever import StoredMemory

    os.environ["PGAPPNAME"] = _writer_name(seed)  # (libpq's: the parent waits on this name)
    store = open_store(kind, Path(path))
    rng = random.Random(seed)
    log = open(log_path, "a", buffering=1)
    live = [(e.namespace, e.memory_id) for e in store.changes_since(0)[1]
            if e.alive and e.lifecycle_state == "current"]
    n = 0

    def fresh(ns: str) -> "StoredMemory":
        nonlocal n
        n += 1
        mid = f"s{seed}-{n}"
        words = " ".join(rng.choice(("tea", "train", "dentist", "lisbon", "june", "note", "code"))
                         for _ in range(rng.randint(3, 12)))
        marker = f"zq{seed}x{n}"
        return StoredMemory(mid, ns, f"{mid} {words} {marker}", markers=(marker,) if n % 2 else ())

    while True:
        op = rng.choices(("add", "add_many", "update", "correct", "forget"), (3, 3, 2, 2, 2))[0]
        if op in ("update", "correct", "forget") and not live:
            op = "add"
        if op in ("add", "add_many"):
            batch = [fresh(rng.choice(NAMESPACES)) for _ in range(1 if op == "add" else rng.randint(2, 20))]
            post = [{"key": [m.namespace, m.memory_id], "text": m.text, "revision": 1, "state": "current"}
                    for m in batch]
            log.write(json.dumps({"begin": op, "post": post}) + "\n")
            store.add_many(batch, np.stack([vec(m.text) for m in batch]), encoder=IDENT)
            live += [(m.namespace, m.memory_id) for m in batch]
        else:
            ns, mid = rng.choice(live)
            current = store.get(mid, namespace=ns)
            if op == "update":
                post = [dict(_state(current), revision=current.revision + 1)]
                log.write(json.dumps({"begin": op, "post": post}) + "\n")
                store.update(mid, current.revision, namespace=ns, kind=f"k{rng.randint(0, 9)}")
            elif op == "correct":
                # (no record id in the text: a directive's id holds its record's, and a forget
                # refuses later texts holding the forgotten text's identifiers, issue 46)
                text = f"a record of {ns} corrected {rng.randint(0, 10**6)}"
                post = [dict(_state(current), revision=current.revision + 1, text=text)]
                log.write(json.dumps({"begin": op, "post": post}) + "\n")
                store.correct(mid, current.revision, text, vec(text), encoder=IDENT, namespace=ns)
            else:
                text = f"forget request {rng.randint(0, 10**6)}"
                directive = StoredMemory(f"{mid}-f", ns, text)
                post = [{"key": [ns, mid], "text": None, "revision": current.revision + 1, "state": "forgotten"},
                        {"key": [ns, f"{mid}-f"], "text": text, "revision": 1, "state": "current"}]
                log.write(json.dumps({"begin": op, "post": post}) + "\n")
                store.forget(mid, directive, vec(text), encoder=IDENT)
                live.remove((ns, mid))
                live.append((ns, f"{mid}-f"))
        log.write(json.dumps({"ack": op}) + "\n")


def _racer(kind: str, path: str, name: str, go: str, log_path: str) -> None:
    """Wait for ``go``, then CAS-update record 'm' at revision 1; log won / stale."""
    from memgate.retriever import StaleRevisionError

    while not os.path.exists(go):
        time.sleep(0.0005)
    while True:
        try:
            store = open_store(kind, Path(path))
            break
        except RuntimeError as exc:  # Qdrant local mode: the other process holds the path
            if "already accessed" not in str(exc):
                raise
            time.sleep(0.001)
    try:
        store.update("m", 1, namespace="alice", kind=name)
        outcome = "won"
    except StaleRevisionError:
        outcome = "stale"
    store.close()
    with open(log_path, "a") as log:
        log.write(json.dumps({"racer": name, "outcome": outcome}) + "\n")


def _late_opener(path: str, flags: str, log_path: str) -> None:
    """Open a Qdrant local store while another process holds it, pausing qdrant-client between
    reading the points and taking its own lock (where a stale read would slip in), then CAS
    'm' at revision 1."""
    import portalocker

    from memgate.retriever import StaleRevisionError

    real_lock = portalocker.lock

    def paused_lock(*args, **kwargs):
        Path(flags, "loaded").touch()
        while not Path(flags, "go").exists():
            time.sleep(0.001)
        return real_lock(*args, **kwargs)

    portalocker.lock = paused_lock
    while True:
        try:
            store = open_store("qdrant", Path(path))
            break
        except RuntimeError as exc:
            if "already accessed" not in str(exc):
                raise
            Path(flags, "blocked").touch()
            time.sleep(0.005)
    try:
        store.update("m", 1, namespace="alice", kind="late")
        outcome = "won"
    except StaleRevisionError:
        outcome = "stale"
    store.close()
    with open(log_path, "a") as log:
        log.write(json.dumps({"racer": "late", "outcome": outcome}) + "\n")


def zygote() -> None:
    """Read one JSON command per line; fork a child per job and answer its pid; reap on request."""
    import memgate.retriever  # noqa: F401  (the imports the children share)
    import memgate.retriever.stores.postgres.store  # noqa: F401
    import memgate.retriever.stores.qdrant.store  # noqa: F401

    print("ready", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if "reap" in cmd:
            _, status = os.waitpid(cmd["reap"], 0)
            print(json.dumps({"status": status}), flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                if cmd["job"] == "writer":
                    _writer(cmd["kind"], cmd["path"], cmd["seed"], cmd["log"])
                elif cmd["job"] == "late_opener":
                    _late_opener(cmd["path"], cmd["flags"], cmd["log"])
                elif cmd["job"] == "disk_full":
                    from benchmarks.fault_disk import disk_full_child
                    disk_full_child(cmd["kind"], cmd["path"], cmd["result"], cmd["seed"], cmd["size_kib"],
                                    cmd["errors"])
                else:
                    _racer(cmd["kind"], cmd["path"], cmd["name"], cmd["go"], cmd["log"])
                code = 0
            except BaseException:
                with open(cmd["log"], "a") as log:
                    log.write(json.dumps({"error": traceback.format_exc()}) + "\n")
                code = 1
            os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)


class Zygote:
    """The prepared process writers are forked from."""

    def __enter__(self) -> "Zygote":
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from benchmarks.fault_suite import zygote; zygote()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the fault-suite zygote did not start")
        return self

    def _ask(self, cmd: dict) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def start(self, **job) -> int:
        return self._ask(job)["pid"]

    def reap(self, pid: int) -> int:
        return self._ask({"reap": pid})["status"]

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# --------------------------------------------------------------------------- in the parent


def _writer_name(seed: int) -> str:
    return f"memgate-fault-writer-{seed}"


def _wait_backends_gone(name: str, timeout_s: float = 30.0) -> None:
    """Wait until the PostgreSQL server has no session of the killed writer ``name``: a COMMIT
    the writer sent before SIGKILL is still applied by its server process, which then exits, so
    a check that reads before that races the commit (a record visible in one read, missing from
    the one before)."""
    import psycopg

    from memgate.retriever.stores.postgres.store import URL_ENV

    deadline = time.time() + timeout_s
    with psycopg.connect(os.environ[URL_ENV], autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                           (name,)).fetchone()[0]:
            if time.time() > deadline:
                raise AssertionError(f"the killed writer's PostgreSQL session {name} outlived {timeout_s} s")
            time.sleep(0.01)


def _read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # the last line of a killed writer may be cut
    return out


def check_store(kind: str, path: Path, model: dict, in_flight: Optional[list]) -> dict:
    """Reopen and check the store against the acknowledged ``model`` ({key: state}) and the
    write in flight (its post states, or None); returns what was found. Raises AssertionError."""
    store = open_store(kind, path)
    try:
        problems = store.verify()
        assert problems == [], problems
        entries = {(e.namespace, e.memory_id): e for e in store.changes_since(0)[1]}
        matrix = store.vector_matrix()

        def matches(state: dict) -> bool:
            ns, mid = state["key"]
            record = store.get(mid, namespace=ns)
            if record is None or record.revision != state["revision"] or record.text != state["text"] \
                    or record.lifecycle_state != state["state"]:
                return False
            if state["text"] is None:
                return not store.vectors_for([mid], namespace=ns)
            stored = store.vectors_for([mid], namespace=ns).get(mid)
            slot = entries[(ns, mid)].slot
            return (stored is not None and np.allclose(stored, vec(state["text"]), atol=1e-6)
                    and np.allclose(matrix[slot], stored, atol=1e-6))  # the mirror: its own vector

        flight = {tuple(s["key"]): s for s in in_flight or ()}
        for key, state in model.items():
            if key not in flight:
                assert matches(state), f"acknowledged record {key} not intact: {store.get(key[1], namespace=key[0])}"
        applied = None
        if flight:
            post = [matches(s) for s in flight.values()]
            pre = [(model[k] is not None and matches(model[k])) if k in model else
                   store.get(k[1], namespace=k[0]) is None for k in flight]
            assert all(post) or all(pre), f"torn write: post {post}, pre {pre}"
            applied = all(post)
        known = set(model) | (set(flight) if applied else set())
        extra = set(entries) - known
        assert not extra, f"records nobody acknowledged: {sorted(extra)[:5]}"
        slots = [e.slot for e in entries.values() if e.alive]
        assert len(slots) == len(set(slots)), "two records share a slot"
        return {"records": len(model), "applied": applied}
    finally:
        store.close()


def kill_loop(kind: str, root: Path, kills: int, seed: int = 0, zygote: Optional[Zygote] = None,
              min_s: float = 0.15, max_s: float = 1.2) -> dict:
    """``kills`` rounds of write, SIGKILL, reopen, check (module doc); returns the figures."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{kind}-store"
    model: dict = {}
    stats = {"store": kind, "kills": 0, "acknowledged_writes": 0, "records_checked": 0,
             "in_flight_applied": 0, "in_flight_absent": 0}
    own = zygote is None
    z = Zygote().__enter__() if own else zygote
    try:
        for round_ in range(kills):
            log = root / f"{kind}-writer-{round_}.jsonl"
            pid = z.start(job="writer", kind=kind, path=str(path), seed=seed * 100_000 + round_, log=str(log))
            deadline = time.time() + 60
            while not any("ack" in e for e in _read_log(log)):  # at least one write per round
                if any("error" in e for e in _read_log(log)) or time.time() > deadline:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(min_s, max_s))
            os.kill(pid, signal.SIGKILL)
            z.reap(pid)
            if kind == "postgres":
                _wait_backends_gone(_writer_name(seed * 100_000 + round_))
            events = _read_log(log)
            errors = [e["error"] for e in events if "error" in e]
            assert not errors, errors[0]
            in_flight = None
            for e in events:
                if "begin" in e:
                    in_flight = e["post"]
                elif "ack" in e:
                    for state in in_flight:
                        model[tuple(state["key"])] = state
                    stats["acknowledged_writes"] += 1
                    in_flight = None
            found = check_store(kind, path, model, in_flight)
            if in_flight is not None:
                stats["in_flight_applied" if found["applied"] else "in_flight_absent"] += 1
                if found["applied"]:
                    for state in in_flight:
                        model[tuple(state["key"])] = state
            stats["kills"] += 1
            stats["records_checked"] += found["records"]
    finally:
        if own:
            z.__exit__(None, None, None)
    return stats


def cas_races(kind: str, root: Path, races: int, zygote: Optional[Zygote] = None) -> dict:
    """``races`` two-process CAS races on one record; returns the figures (module doc)."""
    from memgate.retriever import StoredMemory

    root.mkdir(parents=True, exist_ok=True)
    own = zygote is None
    z = Zygote().__enter__() if own else zygote
    one_winner = 0
    try:
        for i in range(races):
            path = root / f"{kind}-race-{i}"
            store = open_store(kind, path)
            store.add(StoredMemory("m", "alice", "race target"), vec("race target"), encoder=IDENT)
            store.close()
            go, log = root / f"{kind}-go-{i}", root / f"{kind}-race-{i}.jsonl"
            pids = [z.start(job="racer", kind=kind, path=str(path), name=name, go=str(go), log=str(log))
                    for name in ("a", "b")]
            time.sleep(0.05)
            go.touch()
            for pid in pids:
                z.reap(pid)
            events = _read_log(log)
            errors = [e["error"] for e in events if "error" in e]
            assert not errors, errors[0]
            outcomes = sorted(e["outcome"] for e in events)
            assert outcomes == ["stale", "won"], outcomes
            store = open_store(kind, path)
            final = store.get("m", namespace="alice")
            store.close()
            winner = next(e["racer"] for e in events if e["outcome"] == "won")
            assert final.revision == 2 and final.kind == winner, final
            one_winner += 1
    finally:
        if own:
            z.__exit__(None, None, None)
    return {"store": kind, "races": races, "exactly_one_winner": one_winner}


def late_open(root: Path, zygote: Zygote) -> str:
    """A Qdrant local store written and closed by this process while another process opens it
    (paused inside qdrant-client's open); returns the other's CAS outcome ('stale' is right:
    'won' means it read the points from before this process's write)."""
    from memgate.retriever import StoredMemory
    from memgate.retriever.stores.qdrant.store import QdrantStore

    root.mkdir(parents=True, exist_ok=True)
    flags, log = root / "flags", root / "late.jsonl"
    flags.mkdir()
    store = QdrantStore("mem", IDENT, path=root / "qd")
    store.add(StoredMemory("m", "alice", "race target"), vec("race target"), encoder=IDENT)
    pid = zygote.start(job="late_opener", path=str(root / "qd"), flags=str(flags), log=str(log))
    deadline = time.time() + 60
    while not ((flags / "loaded").exists() or (flags / "blocked").exists()) and time.time() < deadline:
        time.sleep(0.002)
    store.update("m", 1, namespace="alice", kind="first")
    store.close()
    (flags / "go").touch()
    zygote.reap(pid)
    events = _read_log(log)
    errors = [e["error"] for e in events if "error" in e]
    assert not errors, errors[0]
    return events[0]["outcome"]


def main(argv=None) -> int:
    import tempfile


    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=200, help="kill -9 rounds per store")
    parser.add_argument("--races", type=int, default=20, help="two-process CAS races per store")
    parser.add_argument("--stores", default="embedded,qdrant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fresh-every", type=int, default=25,
                        help="start a new store after this many kills (the checks reread every record)")
    parser.add_argument("--disk-full", type=int, default=0, help="disk-full rounds per store (a small tmpfs each)")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        if "postgres" in args.stores.split(",") and not os.environ.get("MEMGATE_POSTGRES_URL"):
            from memgate.retriever.stores.postgres.local import LocalServer

            server = LocalServer(Path(tmp) / "pgdata")
            os.environ["MEMGATE_POSTGRES_URL"] = server.url
        try:
            _run_suite(args, Path(tmp), results)
        finally:
            if server is not None:
                server.stop()
    return 0


def _run_suite(args, tmp: Path, results: list) -> None:
    from benchmarks.fault_disk import FILE_STORES, damaged_vector_file, disk_full

    with Zygote() as z:
        for kind in args.stores.split(","):
            started = time.perf_counter()
            row: dict = {}
            for chunk, start in enumerate(range(0, args.kills, args.fresh_every)):
                part = kill_loop(kind, tmp / kind / f"chunk{chunk}", min(args.fresh_every, args.kills - start),
                                 args.seed * 1000 + chunk, z)
                row = {k: v if isinstance(v, str) else row.get(k, 0) + v for k, v in part.items()}
            row.update(cas_races(kind, tmp / kind, args.races, z))
            if args.disk_full and kind in FILE_STORES:
                rounds = [disk_full(kind, tmp / kind / "disk", args.seed * 1000 + i, z)
                          for i in range(args.disk_full)]
                row["disk_full"] = {
                    "rounds": len(rounds), "refused_writes": sum(r["full_errors"] for r in rounds),
                    "journaled": sum(r.get("journaled", 0) for r in rounds),
                    "acknowledged_writes": sum(r["writes_acked"] for r in rounds),
                    "reads_while_full": sum(r["reads_while_full"] for r in rounds),
                    "recovered_writes": sum(r["recovered_writes"] for r in rounds),
                    "lost": sum(r["lost_through_handle"] + r["lost_after_reopen"] for r in rounds),
                    "messages": sorted({m.split(" (")[0].split(": ", 1)[-1] for r in rounds for m in r["messages"]})}
            row["seconds"] = round(time.perf_counter() - started, 1)
            results.append(row)
            print(json.dumps(row), flush=True)
        if args.disk_full:
            print(json.dumps({"damaged_vector_file": damaged_vector_file(tmp / "damaged")}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
