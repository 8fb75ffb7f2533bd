"""The one normalisation (memgate.contract.text_normal) and the matching over it
(memgate.retriever.records.suppression): what version 2 catches, what it does not, the vendored Unicode
data, the whole-text rule for short content, and version-1 entries of older stores."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memgate.contract import text_normal
from memgate.contract.text_normal import fold, normal_tokens, tokens_v1, v1_views
from memgate.retriever.records.markers import derived_markers
from memgate.retriever.records.suppression import (
    Suppressed,
    digest,
    entries_for,
    is_whole_only,
    match_fields,
    matching,
)
from tests.forget_strategies import SHORT_FORGOTTEN, benign_texts, carriers, details, rewrites

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "memgate" / "contract" / "unicode_data"
KEY = b"k" * 32
KEYS = {"": KEY}


def forgotten(text: str, markers=()) -> list[Suppressed]:
    """The entries a forget makes: the text, the caller's markers and those derived from the
    text (as ``memgate.retriever.records.forgetting.forget_plan`` passes them)."""
    return entries_for(KEY, "ns", "m", text, [*markers, *derived_markers(text)])


def test_the_vendored_confusables_are_the_recorded_file_with_licence_and_source():
    raw = (DATA / "confusables.txt").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == text_normal.CONFUSABLES_SHA256
    assert f"# Version: {text_normal.CONFUSABLES_VERSION}" in raw.decode("utf-8")[:600]
    assert "UNICODE LICENSE V3" in (DATA / "LICENSE.txt").read_text(encoding="utf-8")
    source = (DATA / "SOURCE.md").read_text(encoding="utf-8")
    assert text_normal.CONFUSABLES_SHA256 in source and "confusables.txt" in source
    assert '"memgate.contract" = ["unicode_data/*"]' in (ROOT / "pyproject.toml").read_text()  # in the wheel
    assert len(text_normal.confusable_prototypes()) == len(re.findall(r"(?m)^[0-9A-F]{4,6} ;", raw.decode()))


def test_a_changed_table_is_refused_not_used(monkeypatch, tmp_path):
    (tmp_path / "unicode_data").mkdir()
    (tmp_path / "unicode_data" / "confusables.txt").write_text("0430 ;\t0061 ;\tMA\n")
    monkeypatch.setattr(text_normal.resources, "files", lambda package: tmp_path)
    text_normal.confusable_prototypes.cache_clear()
    try:
        with pytest.raises(text_normal.NormalisationDataError, match="sha256 differs"):
            text_normal.confusable_prototypes()
    finally:
        text_normal.confusable_prototypes.cache_clear()


@pytest.mark.parametrize("rewrite", [
    "My locker code is 4417.", "MY LOCKER CODE IS 4417", "my_locker_code_is_4417", "my-locker-code-is-4417",
    "mylockercode is 44 17", "my lo\u200bcker co\u00adde is 4\u200d417", "my l\u043ecker c\u043ede is 4417",
    "my locker code is \u0664\u0664\u0661\u0667", "my locker code is \uff14\uff14\uff11\uff17",
    "my l\u00f3cker c\u00f6de is 4417", "𝐦𝐲 locker code is 4417", "my locker code is 4417\ufe0f",
    "my locker code is 44.17 (new)",
])
def test_every_documented_rewrite_of_a_forgotten_text_matches(rewrite):
    assert matching(KEYS, f"Note: {rewrite}", forgotten("My locker code is 4417.")), rewrite


@pytest.mark.parametrize("text", ["X4417", "code4417", "4417B", "PIN: 4 4 1 7", "44-17", "nr. ٤٤١٧"])
def test_a_letter_glued_to_a_forgotten_number_still_holds_it(text):
    assert matching(KEYS, text, forgotten("locker", ["4417"]))


def test_a_longer_number_is_another_number():
    entries = forgotten("4417")
    assert matching(KEYS, "call 44 17", entries) and matching(KEYS, "X4417", entries)
    for text in ("14417", "44170", "room 4 4 1 8"):
        assert not matching(KEYS, text, entries), text
    assert matching(KEYS, "4417.5", entries)  # (a separator ends a number: 4417, then 5)


def test_the_inverse_glue_is_a_longer_detail():
    """Forgetting ``X4417`` forgets the letter and the number together: ``X 4417`` and ``x-4417``
    match, the bare number does not (it is less than what was forgotten)."""
    entries = forgotten("x", ["X4417"])
    assert matching(KEYS, "the code X 4417", entries) and matching(KEYS, "x-4417", entries)
    assert not matching(KEYS, "the code 4417", entries)


@pytest.mark.parametrize("text", [
    "My cabinet number is 4417.",  # another detail around the number: only the marker would catch it
    "The code of my locker: four four one seven",  # spelled-out digits
    "Mein Schließfachcode ist 4 4 1 8",  # a translation (and another number)
    "my locker code is 44I7",  # ASCII I for the digit 1: look-alikes inside ASCII are not folded
    "my locker c0de is 4417",  # ASCII 0 for o
])
def test_what_the_normalisation_does_not_catch_is_not_matched(text):
    """The normalisation alone (the text's own entry; since issue 46 the number derived from it
    as a marker refuses the first and last of these, tests/integrations/test_forget_secrets.py)."""
    assert not matching(KEYS, text, entries_for(KEY, "ns", "m", "My locker code is 4417."))


def test_boundaries_keep_unrelated_words_apart():
    entries = forgotten("green tea with two sugars")
    assert matching(KEYS, "Green-tea, with two SUGARS", entries)
    assert not matching(KEYS, "evergreen tea with two sugars", entries)  # not on a word boundary
    assert not matching(KEYS, "green tea with two sugarsticks", entries)
    assert not matching(KEYS, "concatenate", forgotten("cat", ["cat"]))


def test_short_content_matches_whole_texts_only():
    entries = forgotten("yes", ["Ana"])
    assert all(e.whole for e in entries)
    assert matching(KEYS, "Yes!", entries) and matching(KEYS, " ana ", entries)
    for text in ("yes please", "Yes, Ana will come", "I said yes", "Anatomy"):
        assert not matching(KEYS, text, entries), text
    # labels and metadata are never compared with whole entries (forgetting "general" does not
    # refuse the default policy tag); a longer marker is looked for inside every field
    assert not match_fields(KEYS, [("policy_tags[0]", "general")], forgotten("general"))
    assert match_fields(KEYS, [("attributes.note", "she lives in Porto now")], forgotten("x", ["Porto"]))
    assert is_whole_only(normal_tokens("vegetarian"), "text") and not is_whole_only(normal_tokens("vegetarian"), "marker")
    assert not is_whole_only(normal_tokens("4417"), "text")  # entries made before issue 46: a number is a detail
    assert is_whole_only(normal_tokens("4417"), "text", words=1)  # since: a text under 3 words is whole-only,
    assert not is_whole_only(normal_tokens("4417"), "marker")  # its number a marker derived from it
    assert is_whole_only(normal_tokens("thank you"), "text", words=2)
    assert not is_whole_only(normal_tokens("my pin is here"), "text", words=4)
    assert is_whole_only(normal_tokens("417"), "text") and is_whole_only(normal_tokens("ok"), "marker")


def test_version_2_tokens_and_folding():
    assert normal_tokens("X4417") == ["x", "4417"] and normal_tokens("44-17") == ["44", "17"]
    assert normal_tokens("Alice_phone") == ["alice", "phone"]
    assert normal_tokens("кеу ІD") == ["key", "id"]  # lowercase Cyrillic via its capital; І is an I
    assert normal_tokens("我的密码") == ["我", "的", "密", "码"]  # wide letters one by one
    assert fold("ﬁ\u00adne ß É") == "fine ss e"
    assert normal_tokens("") == [] and normal_tokens("?!") == []
    with pytest.raises(ValueError, match="normalisation version"):
        normal_tokens("x", version=3)


def test_version_1_entries_still_match_and_also_catch_folded_rewrites():
    """A store written before version 2 holds token-run hashes of NFKC, case-folded \\w+ tokens:
    they match as they did, and (for plain-ASCII content) the folded view catches version 2's
    rewrites too."""
    old = [Suppressed("ns", digest(KEY, tokens_v1(t)), len(tokens_v1(t)), kind, "m")
           for t, kind in (("My locker code is 4417.", "text"), ("4417", "marker"))]
    assert tokens_v1("Alice's phone_no") == ["alice", "s", "phone_no"]  # unchanged
    for text in ("my LOCKER code is 4417!", "note: X4417", "my l\u043ecker code is \u0664\u0664\u0661\u0667",
                 "4\u200b417", "pin_4417"):
        assert matching(KEYS, text, old), text
    assert not matching(KEYS, "4418 is free", old)
    assert v1_views("plain text") == [["plain", "text"]]


@given(st.data())
def test_property_any_rewrite_in_the_class_of_a_forgotten_detail_matches(data):
    detail = data.draw(details())
    text = data.draw(carriers(data.draw(rewrites(detail))))
    assert matching(KEYS, text, forgotten(detail)), (detail, text)
    assert matching(KEYS, text, forgotten("unrelated words", [detail])), (detail, text)


@given(st.lists(st.sampled_from(SHORT_FORGOTTEN), min_size=1, max_size=4, unique=True),
       st.lists(details(), min_size=1, max_size=3), st.lists(benign_texts(), min_size=1, max_size=5))
def test_property_unrelated_benign_texts_never_match(short, codes, texts):
    """Short forgotten memories ("yes") match only a text that is exactly them; forgotten codes
    only texts holding their digits (a one-word *marker* is looked for inside texts: chosen)."""
    entries = [e for i, w in enumerate(short) for e in entries_for(KEY, "ns", f"s{i}", w)]
    entries += [e for i, c in enumerate(codes) if any(ch.isdigit() for ch in c)
                for e in entries_for(KEY, "ns", f"c{i}", c, [c])]
    for text in texts:
        assert not match_fields(KEYS, [("text", text), ("attributes.note", text)], entries), text
