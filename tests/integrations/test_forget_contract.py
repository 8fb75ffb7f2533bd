"""One forget contract for every surface (issue 31), one test per failure of the second audit,
each over every surface (tests/integrations/surfaces.py) and store kind where it applies: trivial
rewrites, metadata and markers, LangGraph values, short content, ids, export / import and the
encoder's disk cache. The properties behind them are test_forget_properties.py."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from memgate import Memory
from memgate.integrations.transfer import export_store, import_store
from memgate.model.encoder import text_hash
from memgate.retriever.errors import RepeatedDetailError
from tests.integrations.surfaces import PAIRS, Refused, open_surface, pair_ids, pairs
from tests.retriever.store_helpers import KINDS, HashEncoder, memory_args

DETAIL = "My locker code is 4417."
# the audit's bypasses: underscores, a zero-width space, a soft hyphen, a Cyrillic o, Arabic-Indic
# digits, a letter glued to the number
REWRITES = ("my_locker_code_is_4417", "my locker code is 44\u200b17", "my lo\u00adcker code is 4417",
            "my l\u043ecker code is 4417", "my locker code is \u0664\u0664\u0661\u0667")
GLUED = ("X4417", "code4417x", "PIN X-4417 ok", "\u0664\u0664\u0661\u0667B")


@pytest.fixture(params=PAIRS, ids=pair_ids(PAIRS))
def surface(request, tmp_path):
    with open_surface(*request.param, tmp_path) as s:
        yield s


def on(*caps):
    """Parametrise a test over the surfaces (and store kinds) that have ``caps``."""
    chosen = pairs(*caps)
    return pytest.mark.parametrize("surface", chosen, ids=pair_ids(chosen), indirect=True)


def forgotten(surface, detail=DETAIL, **fields):
    user = surface.new_user()
    mid = surface.add(user, detail, **fields)
    surface.forget(user, mid)
    return user, mid


def refused(call, *args, **kwargs) -> Refused:
    with pytest.raises(Refused) as caught:
        call(*args, **kwargs)
    assert caught.value.reason == "suppressed", caught.value.message
    return caught.value


def test_trivial_rewrites_of_a_forgotten_detail_are_refused(surface):
    user, mid = forgotten(surface, markers=["4417"] if "markers" in surface.caps else None)
    for text in REWRITES:
        refused(surface.add, user, text)
    assert surface.get(user, mid) is None
    assert not any("4417" in (h["text"] or "") for h in surface.search(user, "locker code 4417"))
    number, _ = forgotten(surface, "4417")  # a letter glued to a forgotten number
    for text in GLUED:
        refused(surface.add, number, text)


@on("metadata")
def test_the_detail_is_refused_in_metadata_and_markers_too(surface):
    user, _ = forgotten(surface, "Alice's PIN is 4417 at the gym")
    refused(surface.add, user, "A note about the gym.", metadata={"pin": "alice's pin is 4417 at the gym"})
    refused(surface.add, user, "A note about the gym.", metadata={"Alice’s PIN is 4417 at the gym": True})
    refused(surface.add, user, "A note about the gym.", metadata={"nested": [{"n": "alice s pin is 4417 at the gym"}]})
    if "markers" in surface.caps:
        refused(surface.add, user, "A note about the gym.", markers=["Alice's PIN is 4417 at the gym"])
    if "update" in surface.caps:
        other = surface.add(user, "A plain note.")
        refused(surface.update, user, other, metadata={"x": "ALICE-S PIN IS 4417 AT THE GYM"})
        refused(surface.update, user, other, text="alice_s_pin_is_4417_at_the_gym")
        assert surface.get(user, other)["text"] == "A plain note."
    assert [h["text"] for h in surface.search(user, "alice pin 4417", limit=20)
            if "4417" in json.dumps(h)] == []


@on("markers")
def test_a_forgotten_marker_passed_alone_is_refused(surface):
    user, _ = forgotten(surface, "The spare key is under the pot.", markers=["blue pot 7731"])
    refused(surface.add, user, "Garden notes.", markers=["BLUE POT 7731"])
    refused(surface.add, user, "Garden notes.", markers=["the blue-pot 7731 one"])
    surface.add(user, "The pot is blue, 7731.")  # the words, not in the forgotten order
    surface.add(user, "Garden notes, nothing else.", markers=["green pot"])


def test_short_forgotten_content_matches_whole_texts_only(surface):
    """Issue 46 changed this rule: a forgotten text of fewer than 3 words (not only one word
    without digits) is whole-only, so "thank you" no longer refuses a longer text holding it."""
    user, _ = forgotten(surface, "yes")
    surface.add(user, "yes please, book the table")  # refused by the code before issue 31
    surface.add(user, "I said yes to the offer.")
    refused(surface.add, user, "Yes!")
    user, _ = forgotten(surface, "thank you")
    surface.add(user, "thank you for the help")  # refused by the code before issue 46
    refused(surface.add, user, "Thank you!")


@on("memory_id")
def test_ids_a_surface_accepts_can_be_read_and_forgotten_there(surface):
    user = surface.new_user()
    bad = ("a/b", "..", "", "a\x00b") if surface.name != "langgraph" else ()
    for memory_id in bad:  # (LangGraph items are addressed by key, which any string may be)
        with pytest.raises(Refused) as caught:
            surface.add(user, "A note with an odd id.", memory_id=memory_id)
        assert caught.value.reason == "invalid" and "memory_id" in caught.value.message
        assert surface.get(user, memory_id) is None if memory_id else True
    for memory_id in ("a?b#c", "100%", "a b", "日本", "x" * 200):
        surface.add(user, f"A note filed as {memory_id[:8]}.", memory_id=memory_id)
        assert surface.get(user, memory_id)["id"] == memory_id
        surface.forget(user, memory_id)
        assert surface.get(user, memory_id) is None


@pytest.mark.parametrize("kind", KINDS)
def test_memory_add_refuses_an_empty_id_instead_of_replacing_it(tmp_path, kind):
    with Memory(**memory_args(kind, tmp_path / "m"), encoder=HashEncoder(), gate=None, fsync=False) as m:
        for bad in ("", "a/b"):
            with pytest.raises(ValueError, match="field 'memory_id'"):
                m.add("A note.", user_id="alice", memory_id=bad)
        assert m.get_all(user_id="alice")["results"] == []


@pytest.mark.parametrize("kind", KINDS)
def test_langgraph_suppresses_the_values_content_not_its_serialisation(tmp_path, kind):
    from memgate.integrations.langgraph_store import MemgateStore
    from memgate.retriever.errors import SuppressedContentError
    with MemgateStore(**memory_args(kind, tmp_path / "lg"), encoder=HashEncoder(), gate=None, fsync=False) as s:
        ns = ("users", "alice")
        s.put(ns, "phone", {"text": "My phone number is 555-0199.", "ts": "2024-06-01T10:00:00"})
        s.delete(ns, "phone")
        for key, value, index in (
                ("phone", {"text": "My phone number is 555-0199.", "ts": "2024-06-02T09:00:00"}, None),
                ("phone2", {"note": "my phone number is 555 0199", "ts": 3}, None),  # a renamed field
                ("raw", {"text": "unrelated", "extra": {"deep": "My phone number is 5550199"}}, ["text"]),
                ("flat", {"text": "My phone number is 555-0199."}, False)):  # not indexed
            with pytest.raises(SuppressedContentError):
                s.put(ns, key, value, index=index)
            assert s.get(ns, key) is None
        assert s.search(ns, query="phone number") == []
        s.put(ns, "phone", {"text": "My phone number is 555-0142.", "ts": "2024-06-03T09:00:00"})
        assert s.get(ns, "phone").value["text"].endswith("0142.")


@pytest.mark.parametrize("kind", KINDS)
def test_export_and_import_carry_the_suppression_list(tmp_path, kind):
    with Memory(**memory_args(kind, tmp_path / "src"), encoder=HashEncoder(), gate=None, fsync=False) as m:
        mid = m.add(DETAIL, user_id="alice", markers=["4417"])["id"]
        m.add("Bob's locker code is 4417.", user_id="bob")
        m.delete(mid, user_id="alice")
        manifest = export_store(m.store, tmp_path / "export")
    assert manifest["suppressed"] == 2
    dumped = (tmp_path / "export" / "suppression.json").read_text()
    listed = json.loads(dumped)  # hashes, versions and keys only
    hex_fields = ("digest", "key_id", "memory_id")  # random hex may spell "4417" by chance
    assert all(re.fullmatch(r"(mem-)?[0-9a-f]+", e[f]) for e in listed["entries"] for f in hex_fields)
    assert all(re.fullmatch(r"[0-9a-f]+", k + v) for k, v in listed["keys"].items())
    readable = json.dumps([{f: v for f, v in e.items() if f not in hex_fields} for e in listed["entries"]])
    assert "4417" not in readable and "locker" not in dumped
    for target_kind in KINDS:  # the list survives a move to either backend
        with Memory(**memory_args(target_kind, tmp_path / f"dst-{target_kind}"), encoder=HashEncoder(),
                    gate=None, fsync=False) as m:
            import_store(m.store, tmp_path / "export")
            for text in (DETAIL, "locker code X4417", "my l\u043ecker code is 4417"):
                with pytest.raises(ValueError, match="repeats content forgotten"):
                    m.add(text, user_id="alice")
            m.add("Bob's locker code is still 4417.", user_id="bob")  # per namespace, as before
            m.add("A new note for alice.", user_id="alice")
            # a second export of the imported store names both keys and still refuses
            export_store(m.store, tmp_path / f"again-{target_kind}")
        again = json.loads((tmp_path / f"again-{target_kind}" / "suppression.json").read_text())
        assert len(again["keys"]) == 2 and len(again["entries"]) == 2


def test_a_refused_write_or_directive_never_reaches_the_disk_cache(tmp_path, encoder):
    """The real encoder with its disk cache: the re-add, the update and the directive that
    repeat the detail are refused before they are embedded, and a search for it is never
    cached."""
    cache = encoder._cache._db
    with open_surface("retriever", "embedded", tmp_path, encoder=encoder) as s:
        user = s.new_user()
        mid = s.add(user, DETAIL, markers=["4417"])
        other = s.add(user, "An ordinary note about the gym.")
        with pytest.raises(RepeatedDetailError):
            s.r.forget(mid, principal=user, namespace=user, directive_text="Forget the code 4417.")
        s.forget(user, mid)
        before = cache.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
        refused(s.add, user, "Note: my locker code is 4417!")  # refused before this change too, but cached
        assert cache.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == before
        attempts = ["Note: my locker code is 4417!", "my l\u043ecker code is 4417", "X4417"]
        for text in attempts[1:]:
            refused(s.add, user, text)
        refused(s.update, user, other, text="the code is 4417")
        s.search(user, "what is my locker code 4417?")
        assert cache.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == before
        for text in attempts + [DETAIL, "Forget the code 4417.", "the code is 4417", "what is my locker code 4417?"]:
            assert cache.execute("SELECT COUNT(*) FROM emb WHERE h = ?", (text_hash(text),)).fetchone()[0] == 0, text
    assert isinstance(cache, sqlite3.Connection)
