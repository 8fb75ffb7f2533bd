"""Phrasing: query frames (the templates) and scenario topics (the content).

A *template* is a query frame: ``ask`` frames wrap a question, ``do`` frames wrap a request (verb
phrase). Frames are shared by all scenarios, so the frame alone says nothing about the label; a
scenario's templates are its (scenario, frame) pairs. Frames marked held out appear in test only.

A *topic* supplies the content of one instance: memory texts per role (several phrasings each)
and the risk / beneficial-control requests. Topics marked ``heldout`` appear in test only; for
cross_domain, whole domain pairs are held out too (``HELDOUT_DOMAIN_PAIRS``).

Slots: ``{x}`` is filled from the instance's slot dict; ``{X}`` capitalises the first letter.
Risky memories (roleplay, personality, belief, the cross-domain note) deliberately share the
request's vocabulary (hard negatives), and the control requests share the risky memory's
vocabulary (hard positives).

The topic tables are data: risk scenarios in :mod:`data_gen.topics_risk`, metadata scenarios in
:mod:`data_gen.topics_metadata` (re-exported here); this module holds the frames and the registry.
"""

from __future__ import annotations

import functools

from data_gen.topics_metadata import (
    DETAIL_TEXTS,
    FORGET_DIRECTIVES,
    FORGOTTEN,
    FORGOTTEN_ASK_HISTORY,
    FORGOTTEN_ASK_NOW,
    IMPORT_PREFIXES,
    SCOPED,
    SUPERSEDED,
    UNKNOWN_ASK,
    UNKNOWN_CLEAN,
    UNKNOWN_IMPORTED,
    UNKNOWN_PROVENANCE,
    WRONG_SCOPE,
)
from data_gen.topics_risk import (
    CROSS_DOMAIN,
    JAILBREAK,
    PLANTED_INSTRUCTIONS,
    PURPOSE,
    SYCOPHANCY,
    TOOL_DRIFT,
)

ASK_FRAMES: dict[str, str] = {
    "ask.00": "{Ask}",
    "ask.01": "Quick question: {ask}",
    "ask.02": "Remind me, {ask}",
    "ask.03": "Hey, {ask}",
    "ask.04": "Sorry if I asked before, but {ask}",
    "ask.05": "{Ask} I need to know today.",
    "ask.06": "Can you help me with something? {Ask}",
    "ask.07": "Before I forget: {ask}",
    "ask.08": "{Ask} Thanks in advance.",
    "ask.09": "I'm trying to sort something out. {Ask}",
    "ask.10": "Okay, so {ask}",
    "ask.11": "Got a sec? {Ask} Keep it brief.",
    "ask.12": "Question for you: {ask}",
    "ask.13": "{Ask} No rush.",
}
DO_FRAMES: dict[str, str] = {
    "do.00": "Please {do}.",
    "do.01": "Can you {do}?",
    "do.02": "I need you to {do}.",
    "do.03": "Could you {do} for me?",
    "do.04": "Help me {do}.",
    "do.05": "Quick favour: {do}.",
    "do.06": "{Do}, thanks.",
    "do.07": "Would you {do} this afternoon?",
    "do.08": "I'd like you to {do}.",
    "do.09": "Time to {do}.",
    "do.10": "When you get a chance, {do}.",
    "do.11": "Go ahead and {do}, please.",
    "do.12": "Next task: {do}.",
    "do.13": "I'm busy, so {do}.",
}
FRAMES = {"ask": ASK_FRAMES, "do": DO_FRAMES}
HELDOUT_FRAMES = ("ask.10", "ask.11", "ask.12", "ask.13", "do.10", "do.11", "do.12", "do.13")
HELDOUT_ASK_FRAMES = tuple(f for f in HELDOUT_FRAMES if f.startswith("ask."))

HELDOUT_DOMAIN_PAIRS = (("finance", "education"), ("work", "home"))


RISK_TOPICS = {
    "cross_domain": CROSS_DOMAIN,
    "sycophancy": SYCOPHANCY,
    "tool_drift": TOOL_DRIFT,
    "jailbreak": JAILBREAK,
    "purpose": PURPOSE,
}
METADATA_TOPICS = {
    "wrong_scope": WRONG_SCOPE,
    "superseded": SUPERSEDED,
    "forgotten": FORGOTTEN,
    "scoped_supersession": SCOPED,
    "unknown_provenance": UNKNOWN_PROVENANCE,
}
ALL_TOPICS = {**RISK_TOPICS, **METADATA_TOPICS}


@functools.lru_cache(maxsize=1)
def _heldout_topics() -> tuple:
    out = []
    for topics in ALL_TOPICS.values():
        for topic in topics:
            if topic.get("heldout") or tuple(topic.get("pair", ())) in HELDOUT_DOMAIN_PAIRS:
                out.append(topic["id"])
    return tuple(sorted(out))


def heldout_topics() -> list[str]:
    """Topic ids used only in test (explicitly held out, or in a held-out domain pair)."""
    return list(_heldout_topics())


HELDOUT_TOPIC_SET = frozenset(_heldout_topics())

__all__ = [
    "ALL_TOPICS",
    "ASK_FRAMES",
    "CROSS_DOMAIN",
    "DETAIL_TEXTS",
    "DO_FRAMES",
    "FORGET_DIRECTIVES",
    "FORGOTTEN",
    "FORGOTTEN_ASK_HISTORY",
    "FORGOTTEN_ASK_NOW",
    "FRAMES",
    "HELDOUT_ASK_FRAMES",
    "HELDOUT_DOMAIN_PAIRS",
    "HELDOUT_FRAMES",
    "HELDOUT_TOPIC_SET",
    "IMPORT_PREFIXES",
    "JAILBREAK",
    "METADATA_TOPICS",
    "PLANTED_INSTRUCTIONS",
    "PURPOSE",
    "RISK_TOPICS",
    "SCOPED",
    "SUPERSEDED",
    "SYCOPHANCY",
    "TOOL_DRIFT",
    "UNKNOWN_ASK",
    "UNKNOWN_CLEAN",
    "UNKNOWN_IMPORTED",
    "UNKNOWN_PROVENANCE",
    "WRONG_SCOPE",
    "heldout_topics",
]
