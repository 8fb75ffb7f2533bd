"""Issue 47's properties over every store kind (embedded, Qdrant local mode, PostgreSQL):

- scopes: whatever mix of user / agent / run adds, a call with some ids sees exactly the
  memories of the namespace its first id selects that carry its other ids (an agent-only call
  never a user's memory, a run-only call never an agent's), through get_all and search alike;
- expiry: a memory expired at the read's time is never returned by get, get_all or search;
  the sweep erases exactly the expired ones, and their texts may be added again.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memgate import Memory
from memgate.contract.defaults import MAX_LIMIT
from tests.retriever.store_helpers import KINDS, HashEncoder, memory_args

TEXTS = ("My locker code is 4417.", "I prefer tea to coffee.", "The gym opens at six.",
         "Book the train for Friday.")
# (user_id, agent_id, run_id): the scopes both draws and queries use
SCOPES = (("a", None, None), ("b", None, None), ("a", "x", None), ("a", None, "r"), (None, "x", None),
          (None, "y", None), (None, "x", "r"), (None, None, "r"))


def _namespace(user, agent, run):
    return f"user:{user}" if user else f"agent:{agent}" if agent else f"run:{run}"


def _sees(query, added) -> bool:
    """Does a call with ids ``query`` see a memory added with ids ``added``?"""
    if _namespace(*query) != _namespace(*added):
        return False
    return all(q is None or q == a for q, a in zip(query[1:], added[1:]))


def _ids(**scope):
    return {k: v for k, v in zip(("user_id", "agent_id", "run_id"), scope["s"]) if v is not None}


@pytest.mark.parametrize("kind", KINDS)
def test_property_a_scope_sees_exactly_its_namespace_narrowed(kind, tmp_path):
    with Memory(**memory_args(kind, tmp_path / "scopes"), encoder=HashEncoder(), gate=None, fsync=False) as m:
        counter = iter(range(10**6))

        @given(st.lists(st.tuples(st.sampled_from(SCOPES), st.sampled_from(TEXTS)), min_size=1, max_size=8),
               st.sampled_from(SCOPES))
        def prop(adds, query):
            n = next(counter)
            tag = lambda s: tuple(None if v is None else f"{v}{n}" for v in s)  # noqa: E731 (fresh ids per example)
            added = {}
            for scope, text in adds:
                got = m.add(text, **_ids(s=tag(scope)))
                added[got["id"]] = scope
            expected = {i for i, scope in added.items() if _sees(query, scope)}
            ids = _ids(s=tag(query))
            listed = m.get_all(**ids)["results"]
            assert {x["id"] for x in listed} == expected
            if query[0] is None:
                assert all(x["user_id"] is None for x in listed)
            hits = m.search("my locker code and the train", limit=MAX_LIMIT, **ids)["results"]
            assert {h["id"] for h in hits} == expected
        prop()


@pytest.mark.parametrize("kind", KINDS)
def test_property_an_expired_memory_is_never_returned_and_the_sweep_erases_it(kind, tmp_path):
    now = datetime.now(timezone.utc)
    when = {"past": (now - timedelta(hours=1)).isoformat(), "future": (now + timedelta(days=7)).isoformat(),
            None: None}
    with Memory(**memory_args(kind, tmp_path / "expiry"), encoder=HashEncoder(), gate=None, fsync=False) as m:
        counter = iter(range(10**6))

        @given(st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from(("past", "future", None))),
                        min_size=1, max_size=6))
        def prop(adds):
            user = f"u{next(counter)}"
            expiry = {}
            for text, due in adds:
                got = m.add(f"{text} ({due})", user_id=user, expiration_date=when[due])
                expiry[got["id"]] = due
            live = {i for i, due in expiry.items() if due != "past"}
            assert {x["id"] for x in m.get_all(user_id=user)["results"]} == live
            assert {i for i in expiry if m.get(i, user_id=user) is not None} == live
            found = m.search("locker tea gym train", user_id=user, limit=MAX_LIMIT)["results"]
            assert {h["id"] for h in found} == live
            later = (now + timedelta(days=30)).isoformat()  # a query time past the future expiries
            found = m.search("locker tea gym train", user_id=user, limit=MAX_LIMIT, time=later)["results"]
            assert {h["id"] for h in found} == {i for i in live if expiry[i] is None}
            assert m.sweep() == 0  # the reads above erased what they met
            for i, due in expiry.items():
                record = m.store.get(i, namespace=f"user:{user}")
                assert (record.text is None) == (due == "past")
            for text, due in adds:  # expiry is not a forget: the text may come back
                if due == "past":
                    assert m.add(f"{text} ({due})", user_id=user)["id"] not in expiry
        prop()
