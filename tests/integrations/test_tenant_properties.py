"""Tenant isolation as a property (Hypothesis, the profile in tests/conftest.py), over every
surface and every store kind (tests/integrations/surfaces.py; a new store kind joins through
``tests.retriever.store_helpers.KINDS``, a new surface through ``surfaces.SURFACES``):

for any two tenants and any sequence of add / update / forget / search / get / history calls
(each surface's own calls; ids drawn so that the tenants collide: the same caller-chosen ids,
each other's minted ids, the same texts), nothing of one tenant is observable by the other
through results, error messages, status codes, ids or audit history. Checked two ways:

- non-interference: what tenant A observes is the same whether tenant B made its calls or not
  (the same calls of A replayed on a second store of the same surface and kind, B silent);
  minted ids, query ids and timestamps are compared by their place, not their value (timing
  channels are out of scope);
- no trace: neither tenant's observations name the other tenant or carry its tag.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memgate.contract.defaults import MAX_LIMIT
from tests.integrations.surfaces import PAIRS, NotFound, Refused, open_surface, pair_ids
from tests.retriever.store_helpers import KINDS, HashEncoder, memory_args

POOL_IDS = ("m-1", "m-2", "m-3")  # caller-chosen ids both tenants use
TEXTS = ("My locker code is 4417.", "I'm vegetarian and allergic to peanuts.",
         "My sister Ana lives in Porto.", "The gym opens at six.", "I prefer tea to coffee.")
TAGS = {"A": "alpha-tag", "B": "bravo-tag"}  # marks a text as one tenant's own
MAX_CALLS = 12
_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")
_FORGET = re.compile(r"-forget-[0-9a-f]{6}\b")
_USER = re.compile(r"(?<![\w-])u\d+(?![\w-])")


@dataclass(frozen=True)
class Call:
    who: str  # "A" or "B"
    op: str
    text: str
    target: Any  # add: a pool id or None (minted); else ("pool", id) / ("own", k) / ("other", k)


def _ops(caps) -> list[str]:
    return ["add", "search", "get", "forget"] + (["update"] if "update" in caps else []) + (
        ["history", "history"] if "history" in caps else [])


@st.composite
def call_sequences(draw, caps) -> list[Call]:
    """A few adds by both tenants, then any calls (ids: their own, each other's, the pool's)."""
    refs = [st.tuples(st.sampled_from(("own", "own", "other")), st.integers(0, 3))]
    if "memory_id" in caps:
        refs.append(st.tuples(st.just("pool"), st.sampled_from(POOL_IDS)))
    out = []
    opening = draw(st.lists(st.sampled_from("AB"), min_size=2, max_size=4), "adds")
    for i in range(len(opening) + draw(st.integers(2, MAX_CALLS), "calls")):
        who = opening[i] if i < len(opening) else draw(st.sampled_from("AB"))
        op = "add" if i < len(opening) else draw(st.sampled_from(_ops(caps)))
        text = draw(st.sampled_from(TEXTS))
        if draw(st.booleans()):
            text = f"{text} ({TAGS[who]})"
        if op == "add":
            target = draw(st.sampled_from(POOL_IDS + (None,))) if "memory_id" in caps else None
        else:
            target = draw(st.one_of(*refs))
        out.append(Call(who, op, text, target))
    return out


class Run:
    """One replay of the calls on one surface: the ids each tenant added (in order), a symbol
    per minted id (``A#0`` ...; a caller-chosen id is its own symbol), what each tenant
    observed, and the symbol each by-id call named."""

    def __init__(self, surface, users: dict[str, str]):
        self.s, self.users = surface, users
        self.added: dict[str, list[str]] = {"A": [], "B": []}
        self.minted = {"A": 0, "B": 0}
        self.symbols: dict[str, str] = {}
        self.seen: dict[str, list] = {"A": [], "B": []}
        self.named: list[Optional[str]] = []  # per call: the symbol of the id it named (None: add)

    def _id_of(self, symbol: str) -> str:
        """The id a symbol stands for in this run (a replay: a placeholder for an id only the
        silent tenant minted, or one this replay did not mint)."""
        for memory_id, known in self.symbols.items():
            if known == symbol:
                return memory_id
        if "#" not in symbol:
            return symbol  # a caller-chosen id
        self.symbols[f"gone-{symbol}"] = symbol
        return f"gone-{symbol}"

    def resolve(self, call: Call) -> str:
        if call.target[0] == "pool":
            return call.target[1]
        tenant = call.who if call.target[0] == "own" else ("B" if call.who == "A" else "A")
        ids = self.added[tenant]
        if ids:
            return ids[call.target[1] % len(ids)]
        return self._id_of(f"{tenant}#none{call.target[1]}")

    def play(self, calls: list[Call], names: Optional[list] = None) -> None:
        """Run ``calls``; ``names``: the symbols a first run's by-id calls named (a replay names
        the same records)."""
        for i, call in enumerate(calls):
            user, s = self.users[call.who], self.s
            target = None
            if call.op != "add":
                target = self.resolve(call) if names is None else self._id_of(names[i])
            self.named.append(None if target is None else self.symbols.get(target, target))
            try:
                if call.op == "add":
                    got: Any = s.add(user, call.text, memory_id=call.target)
                    # (a minted add may return a memory it repeats: de-duplication, issue 47)
                    if call.target is None and got not in self.symbols and got not in POOL_IDS:
                        self.symbols[got] = f"{call.who}#{self.minted[call.who]}"
                        self.minted[call.who] += 1
                    self.added[call.who].append(got)
                elif call.op == "search":  # (every hit: ties between minted ids order by id)
                    got = {"hits": s.search(user, call.text, limit=MAX_LIMIT)}
                elif call.op == "get":
                    got = s.get(user, target)
                elif call.op == "update":
                    got = s.update(user, target, text=call.text)
                elif call.op == "forget":
                    got = s.forget(user, target)
                else:
                    got = s.history(user, target)
            except (Refused, NotFound) as exc:
                got = [type(exc).__name__, str(exc)]
            self.seen[call.who].append([call.op, got])

    def view(self, tenant: str) -> str:
        """What ``tenant`` observed, with minted ids as symbols, query ids by first appearance
        and no timestamps."""
        order = sorted(self.symbols, key=len, reverse=True)
        ids = re.compile("|".join(rf"(?<![\w]){re.escape(i)}(?![\w])" for i in order)) if order else None
        queries: dict[str, str] = {}

        def norm(value: Any, key: str = "") -> Any:
            if isinstance(value, dict):
                return {k: norm(v, k) for k, v in sorted(value.items())
                        if k not in ("ts", "created_at", "updated_at")}
            if isinstance(value, (list, tuple)):
                items = [norm(v) for v in value]
                return sorted(items, key=json.dumps) if key == "hits" else items
            if isinstance(value, float):
                return None if not math.isfinite(value) else round(value, 6)
            if isinstance(value, str):
                if key == "query_id":
                    return queries.setdefault(value, f"q#{len(queries)}")
                value = _FORGET.sub("-forget-*", _TS.sub("<ts>", value))
                return ids.sub(lambda m: self.symbols[m.group(0)], value) if ids else value
            return value
        return json.dumps(norm(self.seen[tenant]), sort_keys=True)


@pytest.mark.parametrize("surface_name, kind", PAIRS, ids=pair_ids(PAIRS))
def test_property_nothing_of_one_tenant_is_observable_by_another(surface_name, kind, tmp_path):
    with open_surface(surface_name, kind, tmp_path / "both") as both, \
            open_surface(surface_name, kind, tmp_path / "alone") as alone:
        @given(call_sequences(both.caps))
        def prop(calls):
            users = {"A": both.new_user(), "B": both.new_user()}
            assert {"A": alone.new_user(), "B": alone.new_user()} == users  # the same names in both
            together = Run(both, users)
            together.play(calls)
            by_itself = Run(alone, users)  # A's calls alone, naming the same records
            by_itself.play([c for c in calls if c.who == "A"],
                           names=[n for c, n in zip(calls, together.named) if c.who == "A"])
            assert together.view("A") == by_itself.view("A")
            for tenant, other in (("A", "B"), ("B", "A")):
                text = json.dumps(together.seen[tenant])
                assert TAGS[other] not in text, text
                assert users[other] not in _USER.findall(text), text
        prop()



SCOPES = (None, "agent-1", "agent-2")  # agent_id / run_id values both tenants use


@st.composite
def scoped_adds(draw) -> list[tuple]:
    """Adds by both tenants, each with an agent_id and a run_id drawn from the same small pools."""
    return draw(st.lists(st.tuples(st.sampled_from("AB"), st.sampled_from(TEXTS), st.sampled_from(SCOPES),
                                   st.sampled_from(SCOPES)), min_size=1, max_size=8))


@pytest.mark.parametrize("kind", KINDS)
def test_property_agent_and_run_ids_narrow_within_the_user_never_widen(kind, tmp_path):
    """agent_id / run_id narrow within the user's namespace: what a scoped search, get_all or
    delete_all sees is exactly the user's own memories carrying those values (the unscoped
    answer filtered), never another tenant's, whatever the other tenant added with the same
    agent and run ids."""
    from memgate import Memory

    with Memory(**memory_args(kind, tmp_path / "scoped"), encoder=HashEncoder(), gate=None, fsync=False) as m:
        counter = iter(range(10**6))

        @given(scoped_adds(), st.sampled_from(SCOPES), st.sampled_from(SCOPES))
        def prop(adds, agent, run):
            n = next(counter)
            users = {"A": f"a{n}", "B": f"b{n}"}
            mine = {}
            for who, text, agent_id, run_id in adds:
                added = m.add(text, user_id=users[who], agent_id=agent_id, run_id=run_id)
                if who == "A":
                    mine[added["id"]] = (agent_id, run_id)
            scope = {k: v for k, v in (("agent_id", agent), ("run_id", run)) if v is not None}
            expected = {i for i, (a, r) in mine.items()
                        if (agent is None or a == agent) and (run is None or r == run)}
            listed = m.get_all(user_id=users["A"], **scope)["results"]
            assert {x["id"] for x in listed} == expected
            assert all(x["user_id"] == users["A"] and all(x[k] == v for k, v in scope.items()) for x in listed)
            hits = m.search("my locker code and the gym", user_id=users["A"], limit=MAX_LIMIT, **scope)["results"]
            assert {h["id"] for h in hits} == expected
            assert set(m.delete_all(user_id=users["A"], **scope)) == expected
            assert {x["id"] for x in m.get_all(user_id=users["A"])["results"]} == set(mine) - expected
        prop()


SCOPE_TEXTS = ("My locker code is 4417.", "I prefer tea to coffee.", "The gym opens at six.",
               "Book the train for Friday.")
# (user_id, agent_id, run_id): the scopes both draws and queries use
MEM0_SCOPES = (("a", None, None), ("b", None, None), ("a", "x", None), ("a", None, "r"), (None, "x", None),
               (None, "y", None), (None, "x", "r"), (None, None, "r"))


def _namespace(user, agent, run):
    return f"user:{user}" if user else f"agent:{agent}" if agent else f"run:{run}"


def _sees(query, added) -> bool:
    """Does a call with ids ``query`` see a memory added with ids ``added``?"""
    if _namespace(*query) != _namespace(*added):
        return False
    return all(q is None or q == a for q, a in zip(query[1:], added[1:]))


def _ids(scope) -> dict:
    return {k: v for k, v in zip(("user_id", "agent_id", "run_id"), scope) if v is not None}


@pytest.mark.parametrize("kind", KINDS)
def test_property_a_scope_sees_exactly_its_namespace_narrowed(kind, tmp_path):
    """Mem0's three ids (issue 47): whatever mix of user / agent / run adds, a call with some ids
    sees exactly the memories of the namespace its first id selects that carry its other ids (an
    agent-only call never a user's memory, a run-only call never an agent's), through get_all
    and search alike."""
    from memgate import Memory

    with Memory(**memory_args(kind, tmp_path / "scopes"), encoder=HashEncoder(), gate=None, fsync=False) as m:
        counter = iter(range(10**6))

        @given(st.lists(st.tuples(st.sampled_from(MEM0_SCOPES), st.sampled_from(SCOPE_TEXTS)),
                        min_size=1, max_size=6),
               st.sampled_from(MEM0_SCOPES))
        def prop(adds, query):
            n = next(counter)
            tag = lambda s: tuple(None if v is None else f"{v}{n}" for v in s)  # noqa: E731 (fresh ids per example)
            added = {}
            for scope, text in adds:
                got = m.add(text, **_ids(tag(scope)))
                added[got["id"]] = scope
            expected = {i for i, scope in added.items() if _sees(query, scope)}
            ids = _ids(tag(query))
            listed = m.get_all(**ids)["results"]
            assert {x["id"] for x in listed} == expected
            if query[0] is None:
                assert all(x["user_id"] is None for x in listed)
            hits = m.search("my locker code and the train", limit=MAX_LIMIT, **ids)["results"]
            assert {h["id"] for h in hits} == expected
        prop()
