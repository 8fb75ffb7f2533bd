"""The forget contract as properties (Hypothesis, the profile in tests/conftest.py), over every
surface and every store kind (tests/integrations/surfaces.py; a new store kind joins through
``tests.retriever.store_helpers.KINDS``, a new surface through ``surfaces.SURFACES``):

- for any forgotten detail and any rewrite of it in the normalisation's documented class, the
  detail is never returned, and never re-addable (in the text, the metadata, the markers or an
  update) without ``allow_relearn=True``; with the real encoder, never cached either;
- every id a surface accepts can be read and forgotten through that surface;
- unrelated benign texts are never refused.

Each example runs as a principal of its own (its own namespace), so examples do not interact.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memgate.model.encoder import text_hash
from tests.forget_strategies import SHORT_FORGOTTEN, benign_texts, carriers, details, ids, rewrites
from tests.integrations.surfaces import KINDS, PAIRS, Refused, open_surface, pair_ids

ORDINARY = "An ordinary note about the week."


def holds(hit: dict, detail: str) -> bool:
    from memgate.retriever.records.suppression import entries_for, match_fields
    key = b"p" * 32
    fields = [("text", hit["text"] or "")] + [("metadata", str(v)) for v in (hit.get("metadata") or {}).values()]
    return bool(match_fields({"": key}, fields, entries_for(key, "ns", "m", detail)))


def expect_refused(call, *args, **kwargs) -> None:
    with pytest.raises(Refused) as caught:
        call(*args, **kwargs)
    assert caught.value.reason == "suppressed", caught.value.message


@pytest.mark.parametrize("surface_name, kind", PAIRS, ids=pair_ids(PAIRS))
def test_property_a_forgotten_detail_never_comes_back_through_any_rewrite(surface_name, kind, tmp_path):
    with open_surface(surface_name, kind, tmp_path) as s:
        @given(st.data())
        def prop(data):
            detail = data.draw(details(), "detail")
            user = s.new_user()
            if "markers" in s.caps:  # the detail is a marker of a longer memory
                mid = s.add(user, data.draw(carriers(detail), "original"), markers=[detail])
            else:  # the detail is the memory
                mid = s.add(user, detail)
            other = s.add(user, ORDINARY)
            s.forget(user, mid)
            rewritten = data.draw(rewrites(detail), "rewrite")
            text = data.draw(carriers(rewritten), "text")
            expect_refused(s.add, user, text)
            if "metadata" in s.caps:
                expect_refused(s.add, user, ORDINARY, metadata={"note": text})
            if "markers" in s.caps:
                expect_refused(s.add, user, ORDINARY, markers=[rewritten])
            if "update" in s.caps:
                expect_refused(s.update, user, other, text=text)
            assert s.get(user, mid) is None
            for query in (detail, text):
                assert not any(holds(hit, detail) for hit in s.search(user, query, limit=20)), query
            if "relearn" in s.caps:  # the user's renewed consent stores it again
                again = s.add(user, text, allow_relearn=True)
                assert s.get(user, again)["text"] == text
        prop()


@pytest.mark.parametrize("surface_name, kind", PAIRS, ids=pair_ids(PAIRS))
def test_property_every_accepted_id_can_be_read_and_forgotten(surface_name, kind, tmp_path):
    with open_surface(surface_name, kind, tmp_path) as s:
        @given(ids)
        @example("a/b")  # the audit's: created over HTTP (201), then neither readable nor forgettable
        @example("..")
        @example("")
        @example("a\x00b")
        @example("x" * 201)
        def prop(memory_id):
            user = s.new_user()
            given_id = memory_id if "memory_id" in s.caps else None  # (MCP mints its ids)
            try:
                mid = s.add(user, "A note filed under an id.", memory_id=given_id)
            except Refused as refused:
                assert refused.reason == "invalid" and "memory_id" in refused.message, refused.message
                return
            assert given_id is None or mid == given_id
            assert s.get(user, mid)["text"] == "A note filed under an id."
            s.forget(user, mid)
            assert s.get(user, mid) is None
            assert all(hit["id"] != mid for hit in s.search(user, "A note filed under an id."))
        prop()


@pytest.mark.parametrize("surface_name, kind", PAIRS, ids=pair_ids(PAIRS))
def test_property_unrelated_benign_texts_are_never_refused(surface_name, kind, tmp_path):
    with open_surface(surface_name, kind, tmp_path) as s:
        @given(st.lists(st.sampled_from(SHORT_FORGOTTEN), min_size=1, max_size=3, unique=True),
               details(), st.lists(benign_texts(), min_size=1, max_size=4))
        def prop(short, detail, texts):
            user = s.new_user()
            for word in short:  # one-word memories: only a text that is exactly them is refused
                s.forget(user, s.add(user, word))
            if any(c.isdigit() for c in detail):  # (benign texts have no digits)
                s.forget(user, s.add(user, detail, **({"markers": [detail]} if "markers" in s.caps else {})))
            for text in texts:
                mid = s.add(user, text, **({"metadata": {"note": text}} if "metadata" in s.caps else {}))
                assert s.get(user, mid)["text"] == text
        prop()


# The encoder's cache is written by the retriever's write path before any store is reached, so
# one store kind is enough here (the refusals themselves are checked on every kind above).
CACHE_PAIRS = [(s, k) for s, k in PAIRS if k == KINDS[0]]


@pytest.mark.parametrize("surface_name, kind", CACHE_PAIRS, ids=pair_ids(CACHE_PAIRS))
def test_property_a_forgotten_detail_never_enters_the_disk_cache(surface_name, kind, tmp_path, encoder):
    """The real encoder and its disk cache: the original's embedding is removed at forget, and
    refused rewrites and searches for the detail never add one."""
    cache = encoder._cache._db
    with open_surface(surface_name, kind, tmp_path, encoder=encoder) as s:
        @given(st.data())
        def prop(data):
            detail = data.draw(details(), "detail")
            user = s.new_user()
            mid = s.add(user, detail)
            s.forget(user, mid)
            rows = cache.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
            text = data.draw(carriers(data.draw(rewrites(detail), "rewrite")), "text")
            expect_refused(s.add, user, text)
            s.search(user, text)
            assert cache.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == rows
            for t in (detail, text):
                assert cache.execute("SELECT COUNT(*) FROM emb WHERE h = ?", (text_hash(t),)).fetchone()[0] == 0
        prop()
