"""Tenants on every surface (issue 34): one tenant's audit trail never shows another tenant's
events, and one result-size cap (``memgate.contract.defaults.MAX_LIMIT``) holds on every
surface. The property version (any sequence of calls by two tenants) is
tests/integrations/test_tenant_properties.py."""

from __future__ import annotations

import json
import re

import pytest

from memgate.contract.defaults import MAX_LIMIT
from tests.integrations.surfaces import PAIRS, NotFound, Refused, open_surface, pair_ids, pairs

HISTORY = pairs("history")


def _names(value) -> set[str]:
    """Every principal name (``u<n>``) a JSON value mentions."""
    return set(re.findall(r"(?<![\w-])u\d+(?![\w-])", json.dumps(value)))


@pytest.mark.parametrize("surface_name, kind", HISTORY, ids=pair_ids(HISTORY))
def test_a_history_shows_only_the_callers_record_and_queries(surface_name, kind, tmp_path):
    """The audit's probe: Bob adds a memory under Alice's id (accepted: ids are scoped per
    namespace); his history of it returned Alice's stored, retrieved and exposed events with her
    namespace, principal, query ids, ranks and scores, and later her forget."""
    with open_surface(surface_name, kind, tmp_path) as s:
        alice, bob = s.new_user(), s.new_user()
        mid = s.add(alice, "Alice's locker code is 4417.")
        s.expose(alice, "locker code")
        if "memory_id" in s.caps:
            assert s.add(bob, "Bob's own note.", memory_id=mid) == mid
        else:  # (the MCP server mints its ids: Bob's record with the same id comes through Memory)
            s.m.add("Bob's own note.", user_id=bob, memory_id=mid)
        s.search(bob, "Bob's own note.")
        s.forget(alice, mid)
        mine = s.history(bob, mid)
        assert [e["event"] for e in mine] == ["stored", "retrieved"], mine
        assert _names(mine) == {bob}, mine
        theirs = s.history(alice, mid)
        assert [e["event"] for e in theirs] == ["stored", "retrieved", "exposed", "forgotten"], theirs
        assert _names(theirs) == {alice}, theirs
        assert not {e["query_id"] for e in mine} & {e["query_id"] for e in theirs if e["query_id"]}
        with pytest.raises(NotFound):  # an id only another tenant has: the answer for an unknown id
            s.history(bob, s.add(alice, "Another note of Alice's."))
        with pytest.raises(NotFound):
            s.history(bob, "never-used")


@pytest.mark.parametrize("surface_name, kind", PAIRS, ids=pair_ids(PAIRS))
def test_every_surface_caps_the_result_size_at_max_limit(surface_name, kind, tmp_path):
    """MCP accepted limit=10**9 where HTTP capped at 100: one cap, MAX_LIMIT, everywhere."""
    with open_surface(surface_name, kind, tmp_path) as s:
        user = s.new_user()
        s.add(user, "A note about the weather.")
        assert len(s.search(user, "weather", limit=MAX_LIMIT)) == 1
        for limit in (MAX_LIMIT + 1, 10**9, 0):
            with pytest.raises(Refused) as refused:
                s.search(user, "weather", limit=limit)
            assert refused.value.reason == "invalid", refused.value.message
            assert re.search(r"\blimit\b|'k'", refused.value.message), refused.value.message  # names the field
