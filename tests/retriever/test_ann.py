"""The embedded store's approximate index: namespace partitions, exclusions inside the graph
search (never truncation before filtering), forget leaves the graph, exact below the threshold."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("hnswlib")

from memgate.retriever import EmbeddedStore, StoredMemory  # noqa: E402

DIM = 32
IDENT = {"id": "test/enc", "revision": "r1", "normalize": True, "dim": DIM}


def unit(x):
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.fixture()
def store(tmp_path):
    rng = np.random.default_rng(0)
    centre = unit(rng.standard_normal(DIM))
    # namespace "big": 1,500 records, many close to the query; "small": 40 records, farther away
    big = unit(centre + 0.35 * rng.standard_normal((1500, DIM)))
    small = unit(centre + 1.5 * rng.standard_normal((40, DIM)))
    s = EmbeddedStore(tmp_path / "s", IDENT, fsync=False, audit=None, ann_threshold=500)
    s.add_many([StoredMemory(f"b{i:04d}", "big", f"big {i}") for i in range(len(big))], big, encoder=IDENT)
    s.add_many([StoredMemory(f"s{i:03d}", "small", f"small {i}") for i in range(len(small))], small, encoder=IDENT)
    yield s, centre
    s.close()


def _recall(got, want):
    return len({g for g, _ in got} & {w for w, _ in want}) / len(want)


def test_partitions_and_in_search_filtering_never_truncate_first(store):
    s, q = store
    exact = s.search(q, ["big"], 50)
    approx = s.search(q, ["big"], 50, exact=False)
    assert list(s._backend.ann.parts) and _recall(approx, exact) >= 0.95
    assert all(a[1] == pytest.approx(dict(exact).get(a[0], a[1])) for a in approx)  # exact cosines
    # the small namespace has no graph and is searched exactly; its records never lose to "big"
    assert s.search(q, ["small"], 10, exact=False) == s.search(q, ["small"], 10)
    assert all(i.startswith("s") for i, _ in s.search(q, ["small"], 10, exact=False))
    # exclude the 300 best matches of "big": a post-filter of the top 100 would return nothing
    top300 = [i for i, _ in s.search(q, ["big"], 300)]
    got = s.search(q, ["big"], 100, exact=False, exclude_ids=top300)
    want = s.search(q, ["big"], 100, exclude_ids=top300)
    assert len(got) == 100 and not {i for i, _ in got} & set(top300)
    assert _recall(got, want) >= 0.95
    # a filter that keeps few records of the partition: every allowed record, scanned exactly
    keep = {f"b{i:04d}" for i in range(0, 1500, 100)}
    few = s.search(q, ["big"], 10, exact=False, exclude_ids=[f"b{i:04d}" for i in range(1500) if f"b{i:04d}" not in keep])
    assert few == s.search(q, ["big"], 10, exclude_ids=[f"b{i:04d}" for i in range(1500) if f"b{i:04d}" not in keep])
    # both namespaces together: the union, ranked by exact cosine
    both = s.search(q, ["big", "small"], 20, exact=False)
    assert _recall(both, s.search(q, ["big", "small"], 20)) >= 0.95
    with pytest.raises(PermissionError):
        s.search(q, [], 5, exact=False)


def test_forget_and_update_leave_the_graph(store):
    s, q = store
    best = s.search(q, ["big"], 1, exact=False)[0][0]
    part = s._backend.ann.parts[s._backend.search_index.ns_code["big"]]
    label = s._backend.search_index.pos[("big", best)]
    directive = StoredMemory("d1", "big", "forget directive")
    s.forget(best, directive, unit(np.ones(DIM)), encoder=IDENT)
    with pytest.raises(RuntimeError):  # the label is gone from the graph right after the write
        part.graph.get_items([label])
    assert best not in [i for i, _ in s.search(q, ["big"], 100, exact=False)]
    # an updated text brings a new vector: the graph follows it
    other = s.search(q, ["big"], 1, exact=False)[0][0]
    far = unit(-q)
    s.update(other, s.get(other).revision, vector=far, encoder=IDENT, text="moved away")
    assert other not in [i for i, _ in s.search(q, ["big"], 100, exact=False)]
    assert s.search(far, ["big"], 1, exact=False)[0][0] == other
    stored = part.graph.get_items([s._backend.search_index.pos[("big", other)]])[0]
    assert np.allclose(stored, far, atol=1e-6)


def test_exact_stays_the_default(tmp_path):
    s = EmbeddedStore(tmp_path / "e", IDENT, fsync=False, audit=None, ann_threshold=10)
    rng = np.random.default_rng(1)
    V = unit(rng.standard_normal((50, DIM)))
    s.add_many([StoredMemory(f"m{i}", "n", "t") for i in range(50)], V, encoder=IDENT)
    assert s.search(V[0], ["n"], 5)[0][0] == "m0" and not s._backend.ann.parts  # exact: no graph built
    s.close()


def test_approximate_search_reads_only_its_namespaces_metadata(store):
    """The approximate path never builds the whole-store support mask: per-namespace positions
    and live counts per lifecycle state, kept up to date through adds, state changes, updates
    and forget, give the same support as the full scan, and a state or id exclusion still
    filters inside the graph search."""
    s, q = store
    stale = [i for i, _ in s.search(q, ["big"], 200)][::2]  # 100 of the best 200 become stale
    for memory_id in stale:
        s.update(memory_id, s.get(memory_id).revision, lifecycle_state="stale")
    s.forget("b1499", StoredMemory("d2", "big", "forget directive"), unit(np.ones(DIM)), encoder=IDENT)
    index = s._backend.refresh_search_index()
    states = [index.state_code["stale"]]
    for name in ("big", "small"):
        code = index.ns_code[name]
        full = index.support([name], {"forgotten", "stale"}, ["b0001", ("small", "s001")])
        local = index.namespace_support(code, states + [index.state_code["forgotten"]],
                                        index.positions_of(["b0001", ("small", "s001")]))
        assert local.tolist() == full.tolist()
        assert index.live_count(code) == len(index.support([name]))
    assert index.live_count(index.ns_code["big"], states) == 100
    got = s.search(q, ["big"], 100, exact=False, exclude_states=["stale"])
    want = s.search(q, ["big"], 100, exclude_states=["stale"])
    assert len(got) == 100 and not {i for i, _ in got} & set(stale) and _recall(got, want) >= 0.95
    plain = s.search(q, ["big", "small"], 100, exact=False)  # no exclusion: the stale ones come back
    assert set(stale) & {i for i, _ in plain} and "b1499" not in {i for i, _ in plain}
    assert _recall(plain, s.search(q, ["big", "small"], 100)) >= 0.95


def test_graphs_catch_up_with_writes_through_the_change_log(store, monkeypatch):
    """A graph synced after writes (through SupportIndex.changed_since, or in full once the
    bounded log no longer reaches back) holds exactly the namespace's live vectors, as a graph
    built from scratch does; another process's forget leaves it too."""
    from memgate.retriever.records import index as support

    s, centre = store
    s.search(centre, ["big"], 10, exact=False)  # builds the graph
    index, ann = s._backend.search_index, s._backend.ann  # noqa: SLF001
    code = index.ns_code["big"]
    other = EmbeddedStore(s.path, IDENT, fsync=False, audit=None)  # another handle: another process
    directive = StoredMemory("b0001-forget", "big", "a forget directive", source_type="correction")
    other.forget("b0001", directive, unit(np.ones(DIM)), encoder=IDENT)
    s.add_many([StoredMemory("b9999", "big", "a late record")], unit(centre[None]), encoder=IDENT)
    monkeypatch.setattr(support, "LOG_KEEP", 1)  # the next catch-up finds the log too short
    s.add_many([StoredMemory("b9998", "big", "one more")], unit(centre[None] + 0.01), encoder=IDENT)
    part = ann.partition(code, s._backend.refresh_search_index(), s.vector_matrix())  # noqa: SLF001
    live = index.namespace_positions(code)
    live = live[index.alive[live]]
    held = np.flatnonzero(part.slots >= 0)
    assert set(held.tolist()) == set(live.tolist())
    assert np.array_equal(part.slots[live], index.slot[live])
    got = [m for m, _ in s.search(centre, ["big"], 20, exact=False)]
    assert "b0001" not in got and "b9999" in got
    other.close()
