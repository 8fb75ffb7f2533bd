"""Forget covers the secret, and only the secret (issue 46 item 2: G1, G2, R1, R2): markers
derived from the text being forgotten refuse the secret on its own, on every surface; a short
forgotten text refuses only an equal text; a field is also read decoded (HTML entities,
percent-encoding) and as displayed (right-to-left overrides)."""

from __future__ import annotations

import asyncio
import json

import pytest

from memgate import Memory
from tests.integrations.surfaces import PAIRS, Refused, open_surface, pair_ids
from tests.retriever.store_helpers import HashEncoder

EMBEDDED = [p for p in PAIRS if p[1] == "embedded"]

# (forgotten, refused, accepted): the cases
CASES = [
    ("Alice's passport number is X99812345", ["X99812345", "passport X99812345"], ["Alice has a passport"]),
    ("Alice's bank PIN is 3390", ["PIN 33 90", "3390"], ["Alice's bank is in Porto"]),
    ("thank you", ["thank you", "Thank you!"], ["thank you for the help"]),
    ("2024", ["2024"], ["In 2024 I moved to Porto"]),
    ("My email is ana.p@example.com", ["write to ana.p@example.com"], ["write to ana.q@example.com"]),
    # R1, R2: a right-to-left override that displays the secret, entities, percent-encoding
    ("My locker code is 4417.", ["code \u202e7144\u202c", "&#52;&#52;&#49;&#55;", "%34%34%31%37",
                                 "&amp;#52;&amp;#52;&amp;#49;&amp;#55;"], ["code 7144"]),
    ("The door code is 7144.", ["code \u202e7144\u202c", "code 7144"], ["code 4417"]),
]


def _refused(surface, user, text):
    with pytest.raises(Refused) as caught:
        surface.add(user, text)
    assert caught.value.reason == "suppressed", caught.value.message


@pytest.mark.parametrize("pair", EMBEDDED, ids=pair_ids(EMBEDDED))
def test_forget_refuses_the_secret_and_accepts_the_small_talk(pair, tmp_path):
    with open_surface(*pair, tmp_path) as s:
        for forgotten, refused, accepted in CASES:
            user = s.new_user()
            s.forget(user, s.add(user, forgotten))
            for text in refused:
                _refused(s, user, text)
            for text in accepted:
                s.add(user, text)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_ids(PAIRS))
def test_a_forgotten_pin_is_refused_alone_on_every_surface_and_store(pair, tmp_path):
    with open_surface(*pair, tmp_path) as s:
        user = s.new_user()
        s.forget(user, s.add(user, "Alice's bank PIN is 3390"))
        for text in ("PIN 33 90", "3390", "my code: 3-3-9-0"):
            _refused(s, user, text)
        s.add(user, "Alice changed banks in 2023.")


def test_the_mcp_sdk_client_is_refused_the_forgotten_pin(tmp_path):
    """The official SDK's client over the server in memory (the same tools as stdio)."""
    from mcp import Client

    from memgate.integrations.mcp_server import create_mcp_server

    async def run(server):
        async with Client(server) as client:
            added = await client.call_tool("add_memory", {"text": "Alice's bank PIN is 3390"})
            mid = (added.structured_content or json.loads(added.content[0].text))["id"]
            assert not (await client.call_tool("forget_memory", {"memory_id": mid})).is_error
            for text in ("PIN 33 90", "3390"):
                result = await client.call_tool("add_memory", {"text": text})
                assert result.is_error and "repeats content forgotten" in result.content[0].text
            assert not (await client.call_tool("add_memory", {"text": "thank you for the help"})).is_error

    with Memory(path=tmp_path / "store", encoder=HashEncoder(), gate=None, fsync=False) as m:
        asyncio.run(run(create_mcp_server(m, "alice")))


def test_derived_markers_are_the_secret_shaped_parts():
    from memgate.retriever.records.markers import derived_markers
    assert derived_markers("Alice's passport number is X99812345") == ["x99812345"]
    # the numbers inside an identifier or an address are theirs (the fault suite's ids share one)
    assert derived_markers("s700001-10 tea zq700001x10 ana7001@example.com") == [
        "ana7001@example.com", "s700001-10", "zq700001x10"]
    assert derived_markers("Alice's bank PIN is 3390") == ["3390"]
    assert derived_markers("In 2024 I moved to Porto, on 2024-06-01") == []  # years, dates
    assert derived_markers("thank you") == []
    assert "ana.p@example.com" in derived_markers("My email is ana.p@example.com")
    assert "15551234567" in derived_markers("call +1 (555) 123-4567")
    assert "4111111111111111" in derived_markers("card 4111 1111 1111 1111")
    assert derived_markers("code \u202e7144\u202c") == ["7144", "4417"]  # logical and displayed


def test_directives_written_before_keep_their_whole_text_protection(tmp_path):
    """An entry made under the earlier rule (a two-word text, contained) keeps matching inside
    longer texts: the stored entry says how it matches, not the code that reads it."""
    from memgate.retriever.records.suppression import Suppressed, digest_v2, match_fields
    with Memory(path=tmp_path / "store", encoder=HashEncoder(), gate=None, fsync=False) as m:
        key = m.store._backend.suppression_key()
        old = Suppressed("user:alice", digest_v2(key, "thankyou"), 8, "text", "mem-old", 2, "", False)
        assert match_fields({"": key}, [("text", "thank you for the help")], [old])
        new = Suppressed(**(old.to_dict() | {"whole": True}))
        assert not match_fields({"": key}, [("text", "thank you for the help")], [new])
