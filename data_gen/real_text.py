"""Real phrasing (issue 5): GateMem ``generator``-episode turns as training candidates.

At generation (text only, deterministic, no encoder) this module reads the GateMem checkpoints and
turns of the ``generator`` episodes through ``memgate.datasets.real.gatemem.generator_turn_pairs``
(which refuses select and report episodes; LoCoMo text is never read) and writes one candidate row
per checkpoint that has at least one include-matched turn, to ``train/real_candidates.jsonl``
(part of the train split and of ``data_hash``), sorted by query id::

    {"query_id": <checkpoint id>, "group_id": <episode id>, "domain", "query_type", "query_text",
     "positives": [{"memory_id", "text"}],   # the checkpoint's include-matched turns (m+)
     "protected": [{"memory_id", "text"}],   # its leak_targets / not_include turns (never m-)
     "query_names": [...]}                   # names the query shares with its positives

- positives (m+): the checkpoint's own include-matched turns up to ``as_of`` that are not
  protected (at most ``max_positives``, a seeded sample kept in turn order when there are more);
- candidate negatives (m-) are the positives of the *other* rows, by relation:
  ``other_domain`` = rows of generator episodes of another domain (cross-domain leakage),
  ``other_episode`` = rows of another generator episode of the same domain (another
  organisation's store: wrong scope). A turn whose text equals one of the row's own positive or
  protected turns is never a candidate. Every candidate is therefore also a positive for its own
  checkpoint's query (the symmetric beneficial control), so "this turn is bad" is never learnable
  without the query.

Visibility: an ``other_domain`` m- is text-visible (the turn's subject matter belongs to another
domain). An ``other_episode`` m- is text-visible only when the query names something of its own
episode (``query_names``: capitalised words that also occur in one of its positives, not
sentence-initial, not "I", not a weekday or month; possessive 's dropped, lower-cased) that the m-
text does not contain; otherwise
("give me the current date and room") another organisation's turn cannot be told apart by text
and is not a candidate: ``data_gen.mine`` only draws text-visible negatives.

``data_gen.mine`` chooses the negatives at natural similarity with the encoder (see its docstring)
and counts the resulting training triples in meta.json ``real_text_triples``.

Benign lists (``train/benign_lists.jsonl``, part of ``data_hash``) feed the ranking-preservation
term of the training objective (docs/design.md section 4). One list per candidate row, built from
the rows alone (nothing new is read or embedded)::

    {"query_id", "group_id", "query_text", "items": [{"memory_id", "text"}]}

``items`` = every turn of the row's own episode that is a positive of some row of that episode,
minus the row's protected turns (by id and by text), one item per distinct text, sorted by memory
id; lists with fewer than two items are left out (a one-item list has no ranking). Every item is
therefore a generator-episode GateMem turn admissible for some query of its own organisation: a
benign list on which the gate should keep the cosine's ranking. This is ``real_text.benign_lists:
probe`` (the default: the definition of the probe that motivated the term).

``real_text.benign_lists: wide`` (an ablation row, ``configs/ablations/wide_lists.yaml``) takes
instead every turn of the checkpoint's own episode up to its ``as_of_turn_id`` that is not one of
its protected turns (by id and by text), whether or not any checkpoint matched it: the memory a
deployed store would hold for that query, minus what the query must not see. The rows then carry
that ``history`` while lists are built; ``real_candidates.jsonl`` never holds it (the candidates,
and so the mined triples, are the same under both definitions).

When the real data is absent (no ``SHA256SUMS`` under the real-data root), generation proceeds
without real text: no candidates, no benign lists, ``real_splits`` null and a note in meta.json
``real_text``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Optional

SOURCE = "gatemem"
RELATIONS = ("other_domain", "other_episode")
SCENARIO_OF = {"other_domain": "real_cross_domain", "other_episode": "real_wrong_scope"}
CANDIDATES_FILE = "real_candidates.jsonl"
BENIGN_LISTS_FILE = "benign_lists.jsonl"
LIST_DEFINITIONS = ("probe", "wide")  # real_text.benign_lists
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")


def _norm(word: str) -> str:
    """Lower case, possessive 's dropped."""
    word = word.lower()
    return word[:-2] if word.endswith("'s") else word


@functools.lru_cache(maxsize=1 << 16)
def words_of(text: str) -> frozenset:
    """Lower-cased words of ``text``, possessive 's dropped (memoised: mining asks per candidate)."""
    return frozenset(_norm(w) for w in _WORD.findall(text))


# Capitalised without being a name of anything: the pronoun, and calendar words every episode shares.
_NOT_NAMES = frozenset(
    "i i'm i've i'd i'll monday tuesday wednesday thursday friday saturday sunday january february "
    "march april may june july august september october november december".split())
_SENTENCE_END = frozenset(".?!")
_HONORIFICS = ("Dr.", "Mr.", "Mrs.", "Ms.", "Mx.", "Prof.", "St.")  # a "." that ends no sentence


def query_names(query: str, positives: list[dict]) -> list[str]:
    """Capitalised words of the query that also occur in a positive, except sentence-initial
    words (after . ? !, but not after an honorific such as "Dr."), "I" and weekday / month names
    (capitalised everywhere, naming nothing of an episode)."""
    pos_words = set().union(*(words_of(p["text"]) for p in positives)) if positives else set()
    names = set()
    for match in _WORD.finditer(query):
        word = match.group()
        before = query[:match.start()].rstrip()
        starts_sentence = not before or (before[-1] in _SENTENCE_END and not before.endswith(_HONORIFICS))
        if not word[0].isupper() or starts_sentence:
            continue
        names.add(_norm(word))
    return sorted((names - _NOT_NAMES) & pos_words)


def text_visible(relation: str, names: list[str], neg_text: str) -> bool:
    """Whether the violation of (query, m-) is recoverable from the texts (see the module doc)."""
    if relation == "other_domain":
        return True
    return bool(set(names) - words_of(neg_text))


def check_real_text(cfg: dict) -> None:
    spec = cfg["real_text"]
    if spec["source"] != SOURCE:
        raise ValueError(f"config key 'real_text.source': only 'gatemem' is supported, got {spec['source']!r}")
    if spec["benign_lists"] not in LIST_DEFINITIONS:
        raise ValueError(f"config key 'real_text.benign_lists' must be one of {list(LIST_DEFINITIONS)}, "
                         f"got {spec['benign_lists']!r}")


def _sample(rng, items: list, k: int) -> list:
    """``k`` items of ``items`` without replacement, in their original order (all when fewer)."""
    if len(items) <= k:
        return list(items)
    picks = sorted(int(i) for i in rng.choice(len(items), size=k, replace=False))
    return [items[i] for i in picks]


def real_root(cfg: dict) -> Path:
    from memgate.datasets.real.paths import real_data_root

    return real_data_root(cfg["real_text"]["real_data_root"])


def build_real_candidates(cfg: dict, root: Optional[Path] = None) -> tuple[list[dict], dict]:
    """(candidate rows, info for meta.json). Rows are sorted by query id; see the module doc."""
    from memgate.contract.seeding import component_rng
    from memgate.datasets.real.gatemem import generator_turn_pairs
    from memgate.datasets.real.paths import real_data_available
    from memgate.datasets.real.splits import make_real_splits

    check_real_text(cfg)
    spec = cfg["real_text"]
    root = (real_root(cfg) if root is None else Path(root)).resolve()
    if not real_data_available(root):
        return [], {
            "enabled": True, "available": False, "source": SOURCE, "queries": 0,
            "note": (f"real data not found at {root} (no SHA256SUMS; set MEMGATE_DATA or "
                     f"real_text.real_data_root): generated without real text"),
        }
    splits = make_real_splits(root)
    raw = generator_turn_pairs(root, splits=splits, n_other_domain=0, seed=cfg["seed"], prefix_role=True)
    seed = cfg["seed"]
    out = []
    for r in raw:
        if not r["positives"]:
            continue
        rng = component_rng(seed, f"data_gen/real_text/positives/{r['checkpoint_id']}")
        out.append({
            "query_id": r["checkpoint_id"], "group_id": r["episode_id"], "domain": r["domain"],
            "query_type": r["query_type"], "query_text": r["query_text"],
            "positives": _sample(rng, r["positives"], spec["max_positives"]),
            "protected": list(r["protected"]),
            "query_names": query_names(r["query_text"], r["positives"]),
            **({"history": r["history"]} if spec["benign_lists"] == "wide" else {}),
        })
    out.sort(key=lambda row: row["query_id"])
    pools = candidate_pools(out)
    info = {
        "enabled": True, "available": True, "source": SOURCE,
        "episodes": len({r["episode_id"] for r in raw}),
        "checkpoints_read": len(raw),
        "queries": len(out),
        "positives": sum(len(r["positives"]) for r in out),
        "turns": len(pools["turns"]),
        "mean_candidates": {rel: round(sum(len(p) for p in pools[rel].values()) / max(1, len(out)), 1)
                            for rel in RELATIONS},
        "real_splits": splits,
        "note": ("candidate rows in train/" + CANDIDATES_FILE + " from GateMem generator episodes only; "
                 "data_gen.mine selects the negatives and sets real_text_triples"),
    }
    return out, info


def candidate_pools(rows: list[dict]) -> dict:
    """``{"turns": sorted [(memory id, text, domain, episode, owner query ids)], "other_domain":
    {query id: [turn index]}, "other_episode": {...}}``: the candidate negatives of each row (the
    other rows' positives of that relation, minus the row's own positive and protected texts)."""
    turns: dict = {}
    for row in rows:
        for p in row["positives"]:
            entry = turns.setdefault(p["memory_id"], [p["text"], row["domain"], row["group_id"], []])
            entry[3].append(row["query_id"])
    ordered = [(mid, *turns[mid]) for mid in sorted(turns)]
    by_text: dict = {}
    for i, t in enumerate(ordered):
        by_text.setdefault(t[1], []).append(i)
    in_relation = {
        "other_domain": lambda t, row: t[2] != row["domain"],
        "other_episode": lambda t, row: t[2] == row["domain"] and t[3] != row["group_id"],
    }
    keys = {"other_domain": lambda row: row["domain"], "other_episode": lambda row: (row["domain"], row["group_id"])}
    # The candidates of a relation depend only on the row's domain (and episode), so they are built
    # once per key; a row filters its own texts out only when one of them is among the candidates.
    base: dict = {rel: {} for rel in RELATIONS}
    pools: dict = {"turns": ordered, "other_domain": {}, "other_episode": {}}
    for row in rows:
        own = {t["text"] for t in row["positives"]} | {t["text"] for t in row["protected"]}
        own_idx = {i for text in own for i in by_text.get(text, ())}
        for rel in RELATIONS:
            test, key = in_relation[rel], keys[rel](row)
            cand = base[rel].get(key)
            if cand is None:
                cand = base[rel][key] = [i for i, t in enumerate(ordered) if test(t, row)]
            if any(test(ordered[i], row) for i in own_idx):
                pools[rel][row["query_id"]] = [i for i in cand if i not in own_idx]
            else:
                pools[rel][row["query_id"]] = list(cand)
    return pools


def benign_lists(rows: list[dict], definition: str = "probe") -> list[dict]:
    """The benign candidate lists of the candidate ``rows`` (see the module doc), by query id:
    ``definition`` "probe" (positives of the episode's checkpoints) or "wide" (the row's own
    ``history``: every non-protected own-episode turn up to its as_of)."""
    if definition not in LIST_DEFINITIONS:
        raise ValueError(f"config key 'real_text.benign_lists' must be one of {list(LIST_DEFINITIONS)}, "
                         f"got {definition!r}")
    by_episode: dict = {}
    for row in rows:
        items = by_episode.setdefault(row["group_id"], {})
        for p in row["positives"]:
            items.setdefault(p["memory_id"], p["text"])
    sorted_pools: dict = {}  # per episode, its pool sorted once (every row of it reads the same)
    out = []
    for row in sorted(rows, key=lambda r: r["query_id"]):
        protected_ids = {t["memory_id"] for t in row["protected"]}
        protected_texts = {t["text"] for t in row["protected"]}
        if definition == "wide":
            if "history" not in row:
                raise ValueError(f"benign_lists(definition='wide'): row {row['query_id']} has no 'history' "
                                 "(built without real_text.benign_lists: wide)")
            ordered = sorted({t["memory_id"]: t["text"] for t in row["history"]}.items())
        else:
            ordered = sorted_pools.get(row["group_id"])
            if ordered is None:
                ordered = sorted_pools[row["group_id"]] = sorted(by_episode[row["group_id"]].items())
        seen: set = set()
        items = []
        for mid, text in ordered:
            if mid in protected_ids or text in protected_texts or text in seen:
                continue
            seen.add(text)
            items.append({"memory_id": mid, "text": text})
        if len(items) >= 2:
            out.append({"query_id": row["query_id"], "group_id": row["group_id"],
                        "query_text": row["query_text"], "items": items})
    return out
