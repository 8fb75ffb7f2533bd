"""Expiry as a property over every store kind (embedded, Qdrant local mode, PostgreSQL; issue 47):
a memory expired at the read's time is never returned by get, get_all or search; the reads
erase the expired ones they meet, so a sweep after them finds none, and their texts may be
added again (expiry is not a forget).
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
