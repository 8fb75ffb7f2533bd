"""Splits, evaluation pairs and training rows of the natural sources (issue 43; the cases:
``memgate.datasets.real.natural_sources``).

Families (per source and risk origin, ``family_split``): the families with at least
``MIN_HELDOUT_CASES`` cases, the smaller half of them by size (at least two), permuted by ``component_rng(seed, "natural/<source>/<origin>/families")``:
the first is held out to ``report`` (absent from train and select), the second to ``select``
(absent from train); an origin with fewer than three families holds none out. Every other case goes
by its query text, ``u = sha256("<seed>/natural/<query>")``: ``u < 0.15`` select, ``u < 0.3``
report, else train. So a query never serves two parts, select sees a family that never trained and
report one that neither trained nor selected.

Leakage (item 5 of the issue): a text of a select or report case never trains, and a report text
never selects: a lower-part case that shares a normalised text (``normalise``: lower case, runs
of non-alphanumerics to one space) with a higher part is dropped, and so is a train case that
matches an evaluation text outside the natural sources (LoCoMo, GateMem, ``examples/``: ``guard_texts``);
the counts are in ``info()["near_duplicates_removed"]``. The embedding half (cosine >= 0.95) runs
at mining time (``data_gen.real_phrasing``), where the encoder is loaded.

Pairs: each case gives two pairs with one query, the admissible memory (control) and the risk
memory (trap): perfectly paired, clusters = the case's admissible memory. A select / report part
keeps at most ``MAX_EVAL_CASES`` cases per scope (seen families, held-out family; seeded sample).
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import Optional

from memgate.contract.seeding import component_rng
from memgate.datasets.real.io_guard import check_part_access
from memgate.datasets.real.natural_sources import BUILDERS, CATEGORY, FOLDERS_OF, SOURCES, Case, folder
from memgate.datasets.real.paths import real_data_root, repo_root

PARTS = ("train", "select", "report")
FRACTIONS = {"select": 0.15, "report": 0.15}
MIN_HELDOUT_CASES = 300
MAX_EVAL_CASES = 400
RANK = {"train": 0, "select": 1, "report": 2}


class FamilySplitError(ValueError):
    """A family split leaves a part of a natural source empty."""


def normalise(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


@functools.lru_cache(maxsize=1 << 17)
def text_part(text: str, seed: int = 0) -> str:
    u = int.from_bytes(hashlib.sha256(f"{seed}/natural/{text}".encode()).digest()[:8], "big") / 2 ** 64
    return "select" if u < FRACTIONS["select"] else ("report" if u < FRACTIONS["select"] + FRACTIONS["report"]
                                                     else "train")


def _root_key(root) -> str:
    return str((real_data_root() if root is None else Path(root)).resolve())


@functools.lru_cache(maxsize=8)
def _family_split(name: str, root_key: str, seed: int) -> dict:
    counts: dict = {}
    for case in BUILDERS[name](lambda o, f, t: text_part(t, seed), Path(root_key)):
        counts.setdefault(case.origin, {}).setdefault(case.family, 0)
        counts[case.origin][case.family] += 1
    out = {}
    for origin, fams in sorted(counts.items()):
        big = sorted((n, f) for f, n in fams.items() if n >= MIN_HELDOUT_CASES)
        big = sorted(f for _, f in big[:max(2, len(big) // 2)])  # the smaller half: train keeps the bulk
        held = {}
        if len(fams) >= 3 and len(big) >= 2:
            order = component_rng(seed, f"natural/{name}/{origin}/families").permutation(len(big))
            held = {"report": big[int(order[0])], "select": big[int(order[1])]}
        out[origin] = {"families": dict(sorted(fams.items())), **held}
    return out


def family_split(name: str, root=None, seed: int = 0) -> dict:
    """``{origin: {"families": {family: cases}, "report": family, "select": family}}``."""
    return _family_split(name, _root_key(root), seed)


def guard_texts(root=None) -> frozenset:
    """Normalised evaluation texts outside the natural sources: LoCoMo, GateMem and ``examples/``."""
    return _guard_texts(_root_key(root))


@functools.lru_cache(maxsize=2)
def _guard_raw(root_key: str) -> tuple:
    import json

    out: set = set()
    root = Path(root_key)
    for path in sorted(root.glob("locomo/*.json")) + sorted(root.glob("gatemem/*/*.jsonl")):
        data = (json.loads(path.read_text(encoding="utf-8")) if path.suffix == ".json"
                else [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line])
        out.update(s for s in _strings(data) if len(s) >= 20)
    out.update(example_texts())
    return tuple(sorted(out))


def example_texts() -> tuple:
    """The strings (>= 20 characters) quoted in ``examples/``."""
    out: set = set()
    for path in sorted((repo_root() / "examples").rglob("*")):
        if path.suffix in (".py", ".md", ".json", ".jsonl", ".txt"):
            out.update(re.findall(r"[\"']([^\"'\n]{20,})[\"']", path.read_text(encoding="utf-8", errors="replace")))
    return tuple(sorted(out))


def guard_raw_texts(root=None) -> tuple:
    """The LoCoMo, GateMem and ``examples/`` strings (>= 20 characters) as they are."""
    return _guard_raw(_root_key(root))


@functools.lru_cache(maxsize=2)
def _guard_texts(root_key: str) -> frozenset:
    return frozenset(normalise(s) for s in _guard_raw(root_key))


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


@functools.lru_cache(maxsize=8)
def _cases(name: str, root_key: str, seed: int) -> tuple:
    for f in FOLDERS_OF[name]:
        folder(f, Path(root_key))
    split = _family_split(name, root_key, seed)
    held = {(o, s[p]): p for o, s in split.items() for p in ("report", "select") if p in s}

    def part_of(origin: str, family: str, text: str) -> str:
        return held.get((origin, family)) or text_part(text, seed)

    part_of.held = held  # type: ignore[attr-defined]  # builders may steer held-out families to their part

    raw = []
    for case in BUILDERS[name](part_of, Path(root_key)):
        part = held.get((case.origin, case.family)) or text_part(case.query, seed)
        raw.append((case, part))
    top: dict = {}
    for case, part in raw:
        for t in (case.query, case.pos, case.neg):
            key = normalise(t)
            if RANK[part] > RANK.get(top.get(key, "train"), 0):
                top[key] = part
    guard = _guard_texts(root_key)
    kept, removed = [], {"cross_part": 0, "guard_texts": 0}
    for case, part in raw:
        keys = [normalise(t) for t in (case.query, case.pos, case.neg)]
        if any(RANK[top.get(k, "train")] > RANK[part] for k in keys):
            removed["cross_part"] += 1
        elif part == "train" and any(k in guard for k in keys):
            removed["guard_texts"] += 1
        else:
            kept.append((case, part))
    check_parts(name, kept, split)
    return tuple(kept), removed


def check_parts(name: str, kept: list, split: dict) -> None:
    """Every origin that has cases has them in all three parts, else one line naming the source."""
    for origin in sorted(split):
        parts = {p for c, p in kept if c.origin == origin}
        if parts and not set(PARTS) <= parts:
            missing = sorted(set(PARTS) - parts)
            raise FamilySplitError(f"natural source {name}: origin {origin} has no {', '.join(missing)} case after "
                                   "the family split; lower natural.MIN_HELDOUT_CASES or add families to the source")


def cases(name: str, root=None, seed: int = 0) -> list:
    """``[(Case, part)]`` after the family split and the leakage filter."""
    if name not in BUILDERS:
        raise ValueError(f"unknown natural source {name!r}; expected one of {SOURCES}")
    return list(_cases(name, _root_key(root), seed)[0])


def _sample(items: list, k: int, seed: int, key: str) -> list:
    if len(items) <= k:
        return list(items)
    picks = sorted(int(i) for i in component_rng(seed, key).choice(len(items), size=k, replace=False))
    return [items[i] for i in picks]


def _heldout(name: str, case: Case, root, seed: int) -> bool:
    s = family_split(name, root, seed).get(case.origin, {})
    return case.family in (s.get("report"), s.get("select"))


def part_cases(name: str, part: str, root=None, seed: int = 0) -> list:
    got = [c for c, p in cases(name, root, seed) if p == part]
    if part == "train":
        return got
    out = []
    for scope in (False, True):
        pool = [c for c in got if _heldout(name, c, root, seed) == scope]
        out += _sample(pool, MAX_EVAL_CASES, seed, f"natural/{name}/{part}/{'heldout' if scope else 'seen'}")
    return out


def eval_rows(name: str, part: str, *, purpose: Optional[str] = None, root=None, seed: int = 0,
              embed=None, k: int = 0) -> dict:
    """The pairs of ``part`` as parallel lists, the keys of ``phrasing.eval_rows`` plus ``heldout``
    (the pair's family is held out from train) and ``origins``. ``embed`` and ``k`` are accepted for
    the same call shape: the pairs are matched by construction (one query for both memories)."""
    check_part_access(name, part, purpose)
    chosen = part_cases(name, part, root, seed)
    out: dict = {key: [] for key in ("query_ids", "query_texts", "memory_ids", "memory_texts", "labels", "clusters",
                                     "families", "query_natural", "heldout", "origins")}
    for c in chosen:
        held = _heldout(name, c, root, seed)
        for mid, text, trap in ((c.pos_id, c.pos, False), (c.neg_id, c.neg, True)):
            out["query_ids"].append(c.query_id)
            out["query_texts"].append(c.query)
            out["memory_ids"].append(mid)
            out["memory_texts"].append(text)
            out["labels"].append(trap)
            out["clusters"].append(c.pos_id)
            out["families"].append(c.family)
            out["query_natural"].append(True)
            out["heldout"].append(held)
            out["origins"].append(c.origin)
    out["info"] = {"source": name, "part": part, "seed": seed, "pairs": len(out["labels"]), "cases": len(chosen),
                   "memories_used": len(set(out["memory_ids"])), "queries_used": len(set(out["query_ids"])),
                   "heldout_pairs": sum(out["heldout"]), "matched": True,
                   "heldout_family": {o: s.get(part) for o, s in family_split(name, root, seed).items()}}
    return out


def candidate_rows(name: str, root=None, seed: int = 0, max_rows: Optional[int] = None,
                   max_per_query: int = 10) -> tuple[list, dict]:
    """Train rows for ``data_gen.real_phrasing.mine_phrasing``: one ``paired`` row per train case
    (m+ the admissible memory, m- the risk memory), at most ``max_per_query`` per query text."""
    per_query: dict = {}
    rows = []
    dropped = 0
    for c in part_cases(name, "train", root, seed):
        if per_query.get(c.query, 0) >= max_per_query:
            dropped += 1
            continue
        per_query[c.query] = per_query.get(c.query, 0) + 1
        rows.append({"query_id": f"{name}:{c.query_id}#{len(rows):05d}", "group_id": c.family, "source": name,
                     "query_kind": c.kind, "query_text": c.query, "query_natural": True, "paired": True,
                     "origin": c.origin,
                     "positives": [{"memory_id": c.pos_id, "text": c.pos, "kind": "admissible", "family": c.family}],
                     "negatives": [{"memory_id": c.neg_id, "text": c.neg, "kind": c.kind, "family": c.family}]})
    eligible = len(rows)
    if max_rows is not None and len(rows) > max_rows:
        rows = _sample(rows, max_rows, seed, f"natural/{name}/rows")
    return rows, dict(info(name, root, seed), queries=len(rows), eligible_queries=eligible,
                      dropped_per_query=dropped)


def info(name: str, root=None, seed: int = 0) -> dict:
    """Sizes, families per part and the leakage counts (no texts): meta.json and the card."""
    got = cases(name, root, seed)
    removed = _cases(name, _root_key(root), seed)[1]
    fams: dict = {p: sorted({c.family for c, q in got if q == p}) for p in PARTS}
    origins: dict = {}
    for c, p in got:
        origins.setdefault(c.origin, {"train": 0, "select": 0, "report": 0})[p] += 1
    return {"source": name, "category": CATEGORY[name], "cases": {p: sum(1 for _, q in got if q == p) for p in PARTS},
            "families": fams, "family_split": {o: {k: v for k, v in s.items() if k != "families"}
                                               for o, s in family_split(name, root, seed).items()},
            "origin_cases": origins, "near_duplicates_removed": dict(removed), "split_seed": seed,
            "min_heldout_cases": MIN_HELDOUT_CASES, "select_fraction": FRACTIONS["select"],
            "report_fraction": FRACTIONS["report"], "max_eval_cases": MAX_EVAL_CASES}
