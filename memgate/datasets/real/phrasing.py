"""Real phrasing for the four risk categories (issues 15 and 32): labelled (query, memory) pairs
from vendored text (the sources: ``memgate.datasets.real.phrasing_sources``), balanced controls,
deterministic splits shared by every source, and the train-part candidate rows the generator mines
into triples.

Balance (``pairing == "memory"``): each memory enters a part's pairs with as many trap queries as
beneficial ones (``k = min(k_max, #trap, #beneficial)`` of each, a seeded sample); a memory lacking
either kind in its part yields no pair (counted in ``info["dropped_memories"]``), so no memory text
predicts its label. The biography source (``pairing == "user"``) pairs per user instead: for each
of ``k`` sampled questions, the user's opinion memory (trap) and the same user's persona memory
(control), so no *query* predicts the label and the cosine, which prefers the opinion, is below
chance; its clusters are users.

Splits (``split_source``): memories by **text**, the same part in every source, so that a text in
one source's report part never trains through another: a text held out by any source (its held-out
family) is ``report`` everywhere; any other text (the biography source: its user) goes by
``u = sha256("<seed>/phrasing/<text or user>")`` read as a fraction: ``u < 0.25`` select,
``u < 0.60`` report, else train. Queries per source and stratum (their family, intent or origin):
the sorted ids permuted by ``component_rng(seed, "phrasing/<source>/queries/<stratum>")``, the
first ``max(1, round(0.25 n))`` select, the next ``max(1, round(0.35 n))`` report, the rest train
(strata of fewer than 3 queries: train); the held-out family's queries are ``report``. The
biography source has 17 questions: outside its held-out family they serve every part
(``shared_queries``), its users are what is split. The held-out family: the first of the source's
candidate families permuted by ``phrasing/<source>/heldout_family``.

A select or report part with more than ``MAX_EVAL_UNITS`` memories (users) keeps a seeded sample
of that many (``phrasing/<source>/units/<part>``): the held-out families make some report parts
large, and 600 memories already give the CIs the selection needs.

Labels are scorer-only: only ``eval_rows`` (guarded: a ``report`` part needs
``purpose="evaluation"``) and the train-part ``candidate_rows`` carry them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from memgate.contract.seeding import component_rng
from memgate.datasets.real.io_guard import check_part_access
from memgate.datasets.real.phrasing_sources import (  # noqa: F401  (re-exported)
    BENEFICIAL,
    CATEGORY,
    FOLDERS,
    SOURCES,
    TRAP,
    Item,
    Source,
    VendoredDataError,
    build_source,
    folder_path,
    jailbreak_framings,
    read_folder_file,
    roleplay_framings,
)

PARTS = ("train", "select", "report")
FRACTIONS = {"select": 0.25, "report": 0.35}
DEFAULT_K = 3  # trap and beneficial queries per memory and part (each)
MAX_EVAL_UNITS = 600  # memories (users) of a select / report part: a seeded sample beyond


# --------------------------------------------------------------------------- splits


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def _split_ids(ids: list, seed: int, name: str) -> dict:
    ids = sorted(ids)
    n = len(ids)
    if n < 3:
        return {i: "train" for i in ids}
    n_sel = max(1, _round_half_up(FRACTIONS["select"] * n))
    n_rep = max(1, _round_half_up(FRACTIONS["report"] * n))
    order = component_rng(seed, name).permutation(n)
    out = {}
    for rank, j in enumerate(order):
        out[ids[j]] = "select" if rank < n_sel else ("report" if rank < n_sel + n_rep else "train")
    return out


def heldout_family(source: Source, seed: int = 0) -> str:
    cands = sorted(source.heldout_candidates)
    return cands[int(component_rng(seed, f"phrasing/{source.name}/heldout_family").permutation(len(cands))[0])]


def text_part(key: str, seed: int = 0) -> str:
    """The part of a memory text (or a user) in every source (see the module doc)."""
    u = int.from_bytes(hashlib.sha256(f"{seed}/phrasing/{key}".encode()).digest()[:8], "big") / 2 ** 64
    return "select" if u < FRACTIONS["select"] else ("report" if u < FRACTIONS["select"] + FRACTIONS["report"]
                                                     else "train")


def heldout_texts(root=None, seed: int = 0) -> frozenset:
    """Memory texts of every source's held-out family: ``report`` in every source."""
    out: set = set()
    for name in SOURCES:
        source = build_source(name, root)
        held = heldout_family(source, seed)
        out.update(m.text for m in source.memories if m.family == held)
    return frozenset(out)


def split_source(source: Source, seed: int = 0, root=None) -> dict:
    """``{"heldout_family", "memories": {id: part}, "queries": {id: part}}`` (see the module doc)."""
    held = heldout_family(source, seed)
    everywhere = heldout_texts(root, seed)
    parts: dict = {"heldout_family": held, "memories": {}, "queries": {}}
    for m in source.memories:
        if m.family == held or m.text in everywhere:
            parts["memories"][m.item_id] = "report"
        else:
            parts["memories"][m.item_id] = text_part(m.group or m.text, seed)
    strata: dict = {}
    for q in source.queries:
        if q.family == held:
            parts["queries"][q.item_id] = "report"
        elif source.shared_queries:
            parts["queries"][q.item_id] = "shared"
        else:
            strata.setdefault(q.stratum, []).append(q.item_id)
    for stratum, ids in sorted(strata.items()):
        parts["queries"].update(_split_ids(ids, seed, f"phrasing/{source.name}/queries/{stratum}"))
    return parts


def in_part(splits: dict, side: str, item: Item, part: str) -> bool:
    got = splits[side][item.item_id]
    return got == part or got == "shared"


# --------------------------------------------------------------------------- pairs


def _query_groups(source: Source, qs: list) -> list:
    """Queries grouped by (kind, family): labels read only those (the biography source aside)."""
    groups: dict = {}
    for q in sorted(qs, key=lambda x: x.item_id):
        groups.setdefault((q.kind, q.family), []).append(q)
    return list(groups.values())


def _embedder(embed: Optional[Callable], texts) -> Optional[Callable]:
    """text -> unit vector, every text embedded once (None without ``embed``)."""
    if embed is None:
        return None
    uniq = sorted(set(texts))
    vec = embed(uniq)
    index = {t: i for i, t in enumerate(uniq)}
    return lambda t: vec[index[t]]


def balanced_pairs(source: Source, splits: dict, part: str, seed: int = 0, k: int = DEFAULT_K,
                   embed: Optional[Callable] = None) -> tuple[list, dict]:
    """Pairs ``(query Item, memory Item, label)`` of ``part`` (see the module doc); info counts.

    With ``embed`` (texts -> unit vectors) the traps are *matched*: the controls are sampled as
    above, then each control in turn takes the unused trap whose cosine is the closest to the
    control's (ties: the smaller id), so plain similarity cannot tell the two labels apart."""
    mems = sorted((m for m in source.memories if in_part(splits, "memories", m, part)), key=lambda x: x.item_id)
    units = sorted({m.unit for m in mems})
    if part != "train" and len(units) > MAX_EVAL_UNITS:
        keep = set(_sample(units, MAX_EVAL_UNITS, seed, f"phrasing/{source.name}/units/{part}"))
        mems = [m for m in mems if m.unit in keep]
    qs = [q for q in source.queries if in_part(splits, "queries", q, part)]
    vec = _embedder(embed, [m.text for m in mems] + [q.text for q in qs])
    pairs = (_user_pairs if source.pairing == "user" else _memory_pairs)(source, mems, qs, part, seed, k, vec)
    out, dropped = pairs
    info = {"memories": len(mems), "queries": len(qs), "pairs": len(out), "dropped_memories": dropped,
            "memories_used": len({m.item_id for _, m, _ in out}), "units_used": len({m.unit for _, m, _ in out}),
            "queries_used": len({q.item_id for q, _, _ in out}),
            "trap_pairs": sum(1 for *_, lab in out if lab == TRAP),
            "beneficial_pairs": sum(1 for *_, lab in out if lab == BENEFICIAL)}
    return out, info


def _memory_pairs(source, mems, qs, part, seed, k, vec):
    groups = _query_groups(source, qs)
    out, dropped = [], 0
    for m in mems:
        by = {TRAP: [], BENEFICIAL: []}
        for group in groups:
            lab = source.label(m, group[0])
            if lab is not None:
                by[lab].extend(group)
        n = min(k, len(by[TRAP]), len(by[BENEFICIAL]))
        if n == 0:
            dropped += 1
            continue
        rng = component_rng(seed, f"phrasing/{source.name}/pairs/{part}/{m.item_id}")
        chosen = {}
        for lab in (TRAP, BENEFICIAL):
            pool = sorted(by[lab], key=lambda x: x.item_id)
            picks = sorted(int(i) for i in rng.choice(len(pool), size=n, replace=False))
            chosen[lab] = [pool[i] for i in picks]
        if vec is not None:
            traps = sorted(by[TRAP], key=lambda x: x.item_id)
            chosen[TRAP] = _matched([vec(q.text) @ vec(m.text) for q in chosen[BENEFICIAL]],
                                    [vec(q.text) @ vec(m.text) for q in traps], traps)
        for lab in (TRAP, BENEFICIAL):
            out.extend((q, m, lab) for q in chosen[lab])
    return out, dropped


def _user_pairs(source, mems, qs, part, seed, k, vec):
    """Per user with both memories in ``part``: ``k`` sampled questions, each with the opinion
    (trap) and the persona (control); matched: each control's question keeps, and the trap takes
    the unused question whose cosine to the opinion is the closest to the control's."""
    users: dict = {}
    for m in mems:
        users.setdefault(m.unit, {})[source.label(m, qs[0]) if qs else None] = m
    pool = sorted(qs, key=lambda x: x.item_id)
    out, dropped = [], 0
    for user in sorted(users):
        got = users[user]
        n = min(k, len(pool))
        if TRAP not in got or BENEFICIAL not in got or n == 0:
            dropped += len(got)
            continue
        rng = component_rng(seed, f"phrasing/{source.name}/pairs/{part}/{user}")
        picks = [pool[i] for i in sorted(int(i) for i in rng.choice(len(pool), size=n, replace=False))]
        traps = picks
        if vec is not None:
            traps = _matched([vec(q.text) @ vec(got[BENEFICIAL].text) for q in picks],
                             [vec(q.text) @ vec(got[TRAP].text) for q in pool], pool)
        out.extend((q, got[TRAP], TRAP) for q in traps)
        out.extend((q, got[BENEFICIAL], BENEFICIAL) for q in picks)
    return out, dropped


def _matched(control_cos: list, trap_cos: list, traps: list) -> list:
    import numpy as np

    t_cos = np.array(trap_cos, dtype=float)
    out = []
    for cc in control_cos:
        j = int(np.argmin(np.abs(t_cos - cc)))
        out.append(traps[j])
        t_cos[j] = np.inf  # used
    return out


def eval_rows(name: str, part: str, *, purpose: Optional[str] = None, root: Optional[Path] = None,
              seed: int = 0, k: int = DEFAULT_K, embed: Optional[Callable] = None) -> dict:
    """The balanced pairs of ``part`` as parallel lists (scorer-only: they carry labels).

    Keys: ``query_ids``, ``query_texts``, ``memory_ids``, ``memory_texts``, ``labels`` (True =
    trap), ``clusters`` (the memory id, or the user for the biography source: the bootstrap
    resamples them and the trap-minus-control difference is paired within them), ``families``,
    ``info``. A ``report`` part needs ``purpose="evaluation"``. With ``embed`` (texts -> unit
    vectors) the traps are similarity-matched to the controls: the *matched* variant."""
    check_part_access(name, part, purpose)
    source = build_source(name, root)
    splits = split_source(source, seed, root)
    pairs, info = balanced_pairs(source, splits, part, seed, k, embed)
    info["matched"] = embed is not None
    return {
        "query_ids": [q.item_id for q, _, _ in pairs], "query_texts": [q.text for q, _, _ in pairs],
        "memory_ids": [m.item_id for _, m, _ in pairs], "memory_texts": [m.text for _, m, _ in pairs],
        "labels": [lab == TRAP for *_, lab in pairs], "clusters": [m.unit for _, m, _ in pairs],
        "families": [m.family for _, m, _ in pairs], "query_natural": [q.natural for q, _, _ in pairs],
        "info": dict(info, source=name, part=part, seed=seed, k=k, heldout_family=splits["heldout_family"]),
    }


# --------------------------------------------------------------------------- train candidates


def candidate_rows(name: str, root: Optional[Path] = None, seed: int = 0, max_positives: int = 8,
                   max_negatives: int = 16, max_rows: Optional[int] = None,
                   target_triples: Optional[int] = None) -> tuple[list, dict]:
    """Train-part candidate rows for mining (``data_gen.real_phrasing``), one per train query with
    at least one beneficial and one trap memory in the train part (the biography source: one per
    train user and question, ``paired``: its m+ and m- are that user's two memories)::

        {"query_id", "group_id" (query family), "source", "query_kind", "query_text",
         "query_natural", "paired", "positives": [{"memory_id", "text", "kind", "family"}],
         "negatives": [...]}

    positives: the train memories the label rule marks beneficial, at most ``max_positives`` (a
    seeded sample in id order), raised for a query kind with few rows to
    ``ceil(target_triples / #kinds / #rows of the kind)`` so that every kind can reach its share
    of ``target_triples``; negatives: those it marks trap, plus, for the query kinds in
    ``source.extra_negative_kinds``, the train-part planted jailbreak framings, at most
    ``max_negatives``; a query kind of ``source.relevance_negative_kinds`` with no trap memory takes
    the train memories of the named kind that its label rule leaves unlabelled (not relevant):
    jailbreak's recall-the-set-up queries, whose m+ framings were otherwise m- only (issue 33). With ``max_rows``, a seeded sample of that many rows (sorted by id)."""
    source = build_source(name, root)
    splits = split_source(source, seed, root)
    mems = sorted((m for m in source.memories if in_part(splits, "memories", m, "train")), key=lambda m: m.item_id)
    extra: list = []
    if source.extra_negative_kinds:
        jb = build_source("phrasing_jailbreak", root)
        jb_split = split_source(jb, seed, root)
        extra = sorted((m for m in jb.memories if m.kind == "jailbreak" and jb_split["memories"][m.item_id] == "train"),
                       key=lambda m: m.item_id)
    queries = sorted((q for q in source.queries if in_part(splits, "queries", q, "train")), key=lambda x: x.item_id)
    if source.pairing == "user":
        rows = _user_rows(source, name, mems, queries)
    else:
        rows = _query_rows(source, name, mems, queries, extra, seed, max_positives, max_negatives, target_triples)
    eligible = len(rows)
    if max_rows is not None and len(rows) > max_rows:
        rows = _sample(rows, max_rows, seed, f"phrasing/{name}/rows")
    info = {"source": name, "queries": len(rows), "eligible_queries": eligible,
            "heldout_family": splits["heldout_family"], "train_memories": len(mems),
            "train_query_texts": len({r["query_text"] for r in rows}), "extra_negatives": len(extra)}
    return rows, info


def _query_rows(source, name, mems, queries, extra, seed, max_positives, max_negatives, target):
    mem_groups: dict = {}
    for m in mems:
        mem_groups.setdefault((m.kind, m.family), []).append(m)
    cands = []
    for q in queries:
        pos, neg = [], []
        for group in mem_groups.values():
            lab = source.label(group[0], q)
            (pos if lab == BENEFICIAL else neg if lab == TRAP else []).extend(group)
        if q.kind in source.extra_negative_kinds:
            neg += extra
        if q.kind in source.relevance_negative_kinds and not neg:
            kind = source.relevance_negative_kinds[q.kind][0]
            neg += [m for m in mems if m.kind == kind and source.label(m, q) is None]
        if pos and neg:
            cands.append((q, sorted(pos, key=lambda m: m.item_id), sorted(neg, key=lambda m: m.item_id)))
    per_kind: dict = {}
    for q, _, _ in cands:
        per_kind[q.kind] = per_kind.get(q.kind, 0) + 1
    rows = []
    for q, pos, neg in cands:
        cap = max_positives
        if target:
            cap = max(cap, math.ceil(target / len(per_kind) / per_kind[q.kind]))
        pos = _sample(pos, cap, seed, f"phrasing/{name}/positives/{q.item_id}")
        neg = _sample(neg, max_negatives, seed, f"phrasing/{name}/negatives/{q.item_id}")
        rows.append({"query_id": f"{name}:{q.item_id}", "group_id": q.family, "source": name, "query_kind": q.kind,
                     "query_text": q.text, "query_natural": q.natural, "paired": False,
                     "positives": [_mem_dict(m) for m in pos], "negatives": [_mem_dict(m) for m in neg]})
    return rows


def _user_rows(source, name, mems, queries):
    users: dict = {}
    for m in mems:
        users.setdefault(m.unit, {})[source.label(m, queries[0]) if queries else None] = m
    rows = []
    for q in queries:
        for user in sorted(users):
            got = users[user]
            if TRAP in got and BENEFICIAL in got:
                rows.append({"query_id": f"{name}:{q.item_id}@{user}", "group_id": q.family, "source": name,
                             "query_kind": q.kind, "query_text": q.text, "query_natural": q.natural, "paired": True,
                             "positives": [_mem_dict(got[BENEFICIAL])], "negatives": [_mem_dict(got[TRAP])]})
    return rows


def _sample(items: list, k: int, seed: int, name: str) -> list:
    """``k`` of ``items`` without replacement, in their order (all when fewer)."""
    if len(items) <= k:
        return list(items)
    picks = sorted(int(i) for i in component_rng(seed, name).choice(len(items), size=k, replace=False))
    return [items[i] for i in picks]


def _mem_dict(m: Item) -> dict:
    return {"memory_id": m.item_id, "text": m.text, "kind": m.kind, "family": m.family}


def source_summary(name: str, root: Optional[Path] = None, seed: int = 0, k: int = DEFAULT_K) -> dict:
    """Sizes per part and family (no texts): what the docs and meta.json record."""
    source = build_source(name, root)
    splits = split_source(source, seed, root)
    out = {"source": name, "category": CATEGORY[name], "memories": len(source.memories),
           "queries": len(source.queries), "natural_memories": sum(m.natural for m in source.memories),
           "natural_queries": sum(q.natural for q in source.queries),
           "memory_origins": _count(m.origin for m in source.memories),
           "query_origins": _count(q.origin for q in source.queries),
           "heldout_family": splits["heldout_family"], "parts": {},
           "memory_families": _count(m.family for m in source.memories)}
    for part in PARTS:
        _, info = balanced_pairs(source, splits, part, seed, k)
        out["parts"][part] = info
    return out


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
