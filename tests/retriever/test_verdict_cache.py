"""The retriever's cached Kleene verdicts (memgate.retriever.query.verdicts) equal uncached ones.

A long-lived retriever answers every query through its cache while another retriever on the same
store (another process, as far as the first can tell: the first learns of its writes only through
``changes_since``) adds, supersedes, retags, retires and forgets records; after each step a fresh
retriever (an empty cache) answers the same query, and every Kleene-dependent part of the two
results must agree: the items, the excluded ids with their reasons and ranks, the counts by
reason, the support size and the unresolved records kept. On every store kind."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memgate.contract.admissibility import SupersessionScope
from memgate.contract.records import QueryContext
from memgate.retriever import Supersedes
from memgate.retriever.records.memory import Applicability
from tests.retriever.store_helpers import KINDS, make_retriever, make_store

POLICY = {"personal": {}, "roleplay": {"reason": "jailbreak", "deny": ["task_execution"]}}
NAMESPACES = ("alice", "bob")
TIMES = (None, "2024-01-01", "2024-05-01", "2024-06-15", "2025-01-01")
TAGS = (None, ("personal",), ("roleplay",))

_examples = itertools.count()

contexts = st.fixed_dictionaries({
    "namespaces": st.sampled_from([("alice",), ("bob",), ("alice", "bob")]),
    "purpose": st.sampled_from([None, "task_execution", "chat"]),
    "intent": st.sampled_from(["current_state", "history", "unknown"]),
    "subject": st.sampled_from([None, "trip"]),
    "time": st.sampled_from(TIMES),
})
writes = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NAMESPACES), st.sampled_from(TAGS),
              st.sampled_from([None, "2024-03-01"]), st.sampled_from([None, "2024-09-01"])),
    st.tuples(st.just("supersede"), st.integers(0, 30), st.sampled_from([None, "trip"]),
              st.sampled_from([None, "2024-05-01"])),
    st.tuples(st.just("retag"), st.integers(0, 30), st.sampled_from(TAGS)),
    st.tuples(st.just("retire"), st.integers(0, 30)),
    st.tuples(st.just("forget"), st.integers(0, 30)),
)
steps = st.lists(st.tuples(writes, contexts), min_size=3, max_size=8)


def _view(result) -> dict:
    return {
        "items": [(i.namespace, i.memory_id, i.rank, i.lifecycle, i.admissible, i.unresolved) for i in result.items],
        "excluded": sorted((e.namespace, e.memory_id, e.reasons, e.unresolved, e.lifecycle, e.cosine_rank)
                           for e in result.excluded),
        "counts": dict(sorted(result.excluded_counts.items())),
        "candidates": result.candidates,
        "unresolved_kept": result.unresolved_kept,
    }


def _write(writer, op, live: list) -> None:
    kind = op[0]
    if kind == "add":
        _, ns, tags, vf, vt = op
        applicability = Applicability(valid_from=vf, valid_to=vt) if vf or vt else None
        extra = {"applicability": applicability} if applicability else {}
        live.append(writer.add(f"note {len(live)} in {ns}", namespace=ns, principal="team",
                               policy_tags=None if tags is None else list(tags), **extra))
        return
    if not live:
        return
    record = live[op[1] % len(live)]
    current = writer.store.get(record.memory_id, namespace=record.namespace)
    if current is None or current.forgotten:
        return
    if kind == "supersede":
        scope = SupersessionScope(subject=op[2], valid_from=op[3]) if op[2] or op[3] else None
        live.append(writer.add(f"newer {len(live)} in {record.namespace}", namespace=record.namespace,
                               principal="team", supersedes=[Supersedes(record.memory_id, scope)]))
    elif kind == "retag":
        writer.update(record.memory_id, current.revision, principal="team", namespace=record.namespace,
                      policy_tags=None if op[2] is None else list(op[2]))
    elif kind == "retire" and current.lifecycle_state == "current":
        writer.retire(record.memory_id, current.revision, principal="team", namespace=record.namespace)
    elif kind == "forget":
        writer.forget(record.memory_id, principal="team", namespace=record.namespace,
                      directive_id=f"{record.memory_id}-forget-{len(live)}")


@pytest.mark.parametrize("kind", KINDS)
@given(plan=steps, fail_mode=st.sampled_from(["open", "closed"]))
def test_cached_verdicts_equal_uncached(kind, tmp_path, plan, fail_mode):
    n = next(_examples)
    store = make_store(kind, tmp_path, name=f"s{n}")
    try:
        config = {"policy_rules": POLICY, "fail_mode": fail_mode, "rerank_depth": 8, "log_excluded_depth": 50}
        writer = make_retriever(store, **config)
        cached = make_retriever(store, **config)
        live: list = []
        for ns in NAMESPACES:  # something in each namespace from the start
            _write(writer, ("add", ns, None, None, None), live)
            _write(writer, ("add", ns, ("roleplay",), None, None), live)
        for q, (op, ctx) in enumerate(plan):
            _write(writer, op, live)
            for r, retriever in enumerate((cached, make_retriever(store, **config))):
                context = QueryContext(query_id=f"q{q}-{r}", text="", principal="team",
                                       namespaces=frozenset(ctx["namespaces"]), purpose=ctx["purpose"],
                                       intent=ctx["intent"], time=ctx["time"], subject=ctx["subject"])
                got = _view(retriever.retrieve(f"note {q}", context, k=5))
                if r == 0:
                    first = got
            assert first == got, (op, ctx)
    finally:
        store.close()
