"""The fault suite's file faults (issue 34): a full disk and a damaged vector file.

Full disk (per store kind): a writer forked from the suite's zygote enters a user and mount
namespace of its own and mounts a small tmpfs (a real file system that answers ENOSPC; nothing
outside the process sees it), opens a store there, fills part of the disk with a filler file
and runs random writes (add, add_many, update, correct, forget) until the disk has said it is
full several times. Each refused write must say so (``StoreFullError``) and leave the records
it touched as they were, reads must keep working through the same handle, and once the filler
is deleted the same handle must write again. At the end every acknowledged write is checked
through the handle and after reopening (``verify()`` clean, every acknowledged record with its
text, revision and vector, every acknowledged write's audit event in the log).

Damaged vector file (embedded store): a file cut short is refused at open naming the file and
the fix; a flipped byte is refused by ``vectors_for`` and by a search that would return the
row; a file cut short while the store is open is refused by the next search.

``benchmarks/fault_suite.py --disk-full N`` runs N rounds per store; ``tests/retriever/
test_fault_suite.py`` one.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
from pathlib import Path

import numpy as np

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
DISK_KIB = 640
FILE_STORES = ("embedded", "qdrant")  # the store kinds that keep their files in a directory


def small_disk(target: Path, size_kib: int) -> None:
    """Mount a ``size_kib`` tmpfs at ``target`` inside a new user + mount namespace (this
    process only; call it in a forked child). Raises OSError where the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER | CLONE_NEWNS) refused")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making the mounts private refused")
    target.mkdir(parents=True, exist_ok=True)
    if libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", 0, f"size={size_kib}k".encode()) != 0:
        raise OSError(ctypes.get_errno(), f"mounting a tmpfs at {target} refused")


def _snapshot(store, keys) -> dict:
    out = {}
    for ns, mid in keys:
        r = store.get(mid, namespace=ns)
        out[(ns, mid)] = None if r is None else (r.text, r.revision, r.lifecycle_state)
    return out


def disk_full_child(kind: str, mount: str, result: str, seed: int, size_kib: int, errors: int) -> None:
    """The job (in a zygote child): see the module docstring; writes its findings to ``result``."""
    from benchmarks.fault_world import IDENT, NAMESPACES, vec
    from memgate.retriever import EmbeddedStore, StoredMemory
    from memgate.retriever.errors import StoreFullError
    from memgate.retriever.stores.qdrant.store import QdrantStore

    def open_store(kind: str, path: Path):  # (with the audit log: its appends meet the full disk too)
        return EmbeddedStore(path, IDENT) if kind == "embedded" else QdrantStore("mem", IDENT, path=path, audit=True)

    out: dict = {"kind": kind, "full_errors": 0, "writes_acked": 0, "other_errors": [], "messages": [],
                 "untouched_after_refusal": 0, "reads_while_full": 0, "recovered_writes": 0}
    small_disk(Path(mount), size_kib)
    path = Path(mount) / "store"
    store = open_store(kind, path)
    filler = Path(mount) / "filler"
    filler.write_bytes(b"\0" * (size_kib * 1024 // 3))
    rng = random.Random(seed)
    model: dict = {}  # (ns, id) -> (text, revision, state) of every acknowledged write
    live: list = []
    n = 0

    def fresh(ns: str) -> StoredMemory:
        nonlocal n
        n += 1
        words = " ".join(rng.choice(("tea", "train", "dentist", "lisbon", "june", "note")) for _ in range(40))
        return StoredMemory(f"d{seed}-{n}", ns, f"d{seed}-{n} {words}")

    journaled: list = []  # keys of refused writes a Qdrant journal completes later
    expected: list = []  # (key, revision before) each journaled write must have moved on

    def refused(exc: Exception, keys: list, before: dict, op: str) -> None:
        if "journal" in str(exc):  # (QdrantStore: completed, all of it, by the next write or open)
            journaled.extend(keys)
            wanted = keys if op in ("add", "add_many") else keys[1:] if op == "forget" else keys[:1]
            expected.extend((k, before[k][1] if before[k] else 0) for k in wanted)
            out["journaled"] = out.get("journaled", 0) + 1
        else:
            assert _snapshot(store, keys) == before, f"a refused {op} changed a record"

    def write(op: str) -> None:
        if op in ("add", "add_many"):
            batch = [fresh(rng.choice(NAMESPACES)) for _ in range(1 if op == "add" else rng.randint(2, 8))]
            keys = [(m.namespace, m.memory_id) for m in batch]
            before = _snapshot(store, keys)
            try:
                store.add_many(batch, np.stack([vec(m.text) for m in batch]), encoder=IDENT)
            except StoreFullError as exc:
                refused(exc, keys, before, op)
                raise
            live.extend(keys)
        else:
            ns, mid = rng.choice(live)
            current = store.get(mid, namespace=ns)
            keys = [(ns, mid), (ns, f"{mid}-f")]
            before = _snapshot(store, keys)
            try:
                if op == "update":
                    store.update(mid, current.revision, namespace=ns, kind=f"k{rng.randint(0, 9)}")
                elif op == "correct":
                    text = f"{mid} corrected {rng.randint(0, 10**6)} " + "note " * 30
                    store.correct(mid, current.revision, text, vec(text), encoder=IDENT, namespace=ns)
                else:
                    text = f"forget request {rng.randint(0, 10**6)}"
                    store.forget(mid, StoredMemory(f"{mid}-f", ns, text), vec(text), encoder=IDENT)
            except StoreFullError as exc:
                refused(exc, keys, before, op)
                if "journal" in str(exc):
                    live.remove((ns, mid))  # (its revision moves on when the journal completes)
                raise
            if op == "forget":
                live.remove((ns, mid))
                live.append((ns, f"{mid}-f"))
        for key, state in _snapshot(store, keys + journaled).items():
            if state is not None:
                model[key] = state
        out["writes_acked"] += 1

    attempts = 0
    while out["full_errors"] < errors and attempts < 5000:
        attempts += 1
        op = rng.choices(("add", "add_many", "update", "correct", "forget"), (3, 2, 2, 2, 1))[0]
        if op not in ("add", "add_many") and not live:
            op = "add"
        try:
            write(op)
        except StoreFullError as exc:
            out["full_errors"] += 1
            out["untouched_after_refusal"] += 1
            if len(out["messages"]) < 3:
                out["messages"].append(str(exc))
            if model:  # reads go on through the same handle while the disk is full
                key = rng.choice(sorted(model))
                got = store.get(key[1], namespace=key[0])
                assert (got.text, got.revision, got.lifecycle_state) == model[key], key
                store.search(vec(model[key][0] or "x"), [key[0]], 3)
                out["reads_while_full"] += 1
        except Exception as exc:  # anything but "the disk is full" is a finding
            out["other_errors"].append(f"{op}: {type(exc).__name__}: {exc}")
            if len(out["other_errors"]) > 3:
                break
    filler.unlink()
    for _ in range(5):  # the same handle, once space is freed
        write("add")
        out["recovered_writes"] += 1

    def check(handle) -> int:
        bad = 0
        for (ns, mid), state in model.items():
            r = handle.get(mid, namespace=ns)
            if r is None or (r.text, r.revision, r.lifecycle_state) != state:
                bad += 1
            elif state[0] is not None and not np.allclose(handle.vectors_for([mid], namespace=ns)[mid],
                                                          vec(state[0]), atol=1e-6):
                bad += 1
        return bad

    done = _snapshot(store, [k for k, _ in expected])
    out["journaled_incomplete"] = sum(1 for k, rev in expected if done[k] is None or done[k][1] <= rev)
    out["lost_through_handle"] = check(store)
    store.flush_outbox()
    out["verify_through_handle"] = store.verify()
    store.close()
    again = open_store(kind, path)
    out["lost_after_reopen"] = check(again)
    out["verify_after_reopen"] = again.verify()
    out["acked_without_stored_event"] = None  # (a store without an audit log)
    if again.audit is not None:
        from memgate.retriever.audit import iter_events
        logged = {(e.get("namespace"), e.get("memory_id")) for e in iter_events(again.audit.path)
                  if e.get("event") == "stored"}
        out["acked_without_stored_event"] = len({k for k in model} - logged)
    out["records"] = len(model)
    again.close()
    Path(result).write_text(json.dumps(out))


def disk_full(kind: str, root: Path, seed: int, zygote, size_kib: int = DISK_KIB, errors: int = 6) -> dict:
    """One disk-full round (the parent side); returns the child's findings, raising
    AssertionError where a guarantee broke and OSError where the machine cannot mount one."""
    root.mkdir(parents=True, exist_ok=True)
    result, log = root / f"disk-{kind}-{seed}.json", root / f"disk-{kind}-{seed}.log"
    pid = zygote.start(job="disk_full", kind=kind, path=str(root / f"mnt-{kind}-{seed}"), result=str(result),
                       seed=seed, size_kib=size_kib, errors=errors, log=str(log))
    zygote.reap(pid)
    if not result.exists():
        failure = log.read_text() if log.exists() else "no log"
        if "refused" in failure and "OSError" in failure:
            raise OSError(failure.strip().splitlines()[-1])
        raise AssertionError(f"the disk-full writer failed: {failure}")
    out = json.loads(result.read_text())
    assert out["other_errors"] == [], out["other_errors"]
    assert out["full_errors"] >= errors, out
    assert out["recovered_writes"] == 5
    assert out["lost_through_handle"] == out["lost_after_reopen"] == 0, out
    assert out["verify_through_handle"] == out["verify_after_reopen"] == [], out
    assert out["acked_without_stored_event"] in (0, None), out
    assert out.get("journaled_incomplete", 0) == 0, out
    return out


def damaged_vector_file(root: Path) -> dict:
    """The three damage cases on an embedded store; returns what each call answered."""
    from benchmarks.fault_world import IDENT, vec
    from memgate.retriever import EmbeddedStore, StoredMemory
    from memgate.retriever.errors import DamagedStoreError

    def fresh(name: str) -> tuple[EmbeddedStore, list]:
        store = EmbeddedStore(root / name, IDENT, fsync=False)
        mems = [StoredMemory(f"m{i}", "alice", f"note number {i}") for i in range(6)]
        store.add_many(mems, np.stack([vec(m.text) for m in mems]), encoder=IDENT)
        return store, mems

    def answer(call) -> str:
        try:
            call()
            return "ok"
        except DamagedStoreError as exc:
            return f"DamagedStoreError: {exc}"
        except Exception as exc:  # the old answer: a raw IndexError, or nothing at all
            return f"{type(exc).__name__}: {exc}"

    out = {}
    store, mems = fresh("truncated")
    store.close()
    vfile = root / "truncated" / "vectors.f32"
    os.truncate(vfile, vfile.stat().st_size - 10)
    out["open_truncated"] = answer(lambda: EmbeddedStore(root / "truncated", IDENT).close())
    damaged = EmbeddedStore(root / "truncated", IDENT, allow_damaged=True)
    out["verify_truncated"] = damaged.verify()
    damaged.close()

    store, mems = fresh("flipped")
    slot = store.changes_since(0)[1][2].slot
    with open(root / "flipped" / "vectors.f32", "r+b") as handle:  # one byte of m2's vector
        handle.seek(slot * IDENT["dim"] * 4 + 5)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0x10]))
    out["vectors_for_flipped"] = answer(lambda: store.vectors_for(["m2"]))
    out["search_returning_flipped"] = answer(lambda: store.search(vec("note number 2"), ["alice"], 6))
    out["search_not_returning_it"] = answer(lambda: store.search(vec("note number 4"), ["alice"], 1))
    out["verify_flipped"] = store.verify()
    store.close()

    store, mems = fresh("cut-while-open")
    store.search(vec("note number 1"), ["alice"], 3)
    os.truncate(root / "cut-while-open" / "vectors.f32", 3 * IDENT["dim"] * 4)
    out["search_after_cut"] = answer(lambda: store.search(vec("note number 5"), ["alice"], 6))
    out["vectors_for_after_cut"] = answer(lambda: store.vectors_for(["m5"]))
    store.close()
    return out


__all__ = ["DISK_KIB", "FILE_STORES", "damaged_vector_file", "disk_full", "disk_full_child", "small_disk"]
