"""Real phrasing for the four risk categories (issue 15) in the generated data: config, candidate
rows in ``train/phrasing_candidates.jsonl`` and their mining into training triples.

Config (``real_phrasing`` in configs/data/*.yaml; every source off by default)::

    real_phrasing:
      sources: {phrasing_cross_domain: false, phrasing_sycophancy: false,
                phrasing_tool_drift: false, phrasing_jailbreak: false}
      split_seed: 0            # the sources' train/select/report split (memgate.datasets.real.phrasing)
      max_positives: 8         # beneficial memories kept per query (seeded sample)
      max_negatives: 16        # trap memories kept per query (seeded sample)
      negatives_per_positive: 1
      max_triples_per_source: 4000
      max_triples_per_memory: 20   # a memory (either side) in at most this many triples of its source
      real_data_root: null     # null: MEMGATE_DATA, else data/real

The natural sources of issue 43 (``natural_*``, ``memgate.datasets.real.natural``) give one
``paired`` row per train case (the admissible memory and the risk memory of one query); mining keeps
them as they are (``paired``), and ``data_gen.natural_card`` drops a triple whose text is within
cosine 0.95 of an evaluation text and writes the data dir's ``sources.json``.

Generation (text only, no encoder) writes one candidate row per train-part query of each enabled
source that has a beneficial and a trap memory in the train part (the biography source: per train
user and question; ``memgate.datasets.real.phrasing.candidate_rows``, its positives raised for a
scarce query kind so that every kind can reach its share of ``max_triples_per_source``); the file
exists only when a source is on, and is then part of ``data_hash``. ``meta.json["real_phrasing"]`` records each source's split seed,
held-out family and counts.

Mining (``data_gen.mine``, with the encoder): per row and positive m+ (in the row's order), the
``negatives_per_positive`` trap memories whose cosine to the query is the closest to cos(q, m+)
(natural similarity, as for GateMem's real text), without reuse inside the row until every
candidate has been used; hard negatives (cos(q, m-) > cos(q, m+)) only for queries whose top-1
over the row's memories is a positive (a hard positive), so per source the queries with a hard
negative never outnumber those with a hard positive. A ``paired`` row (the biography source) is
exempt: its one m+ and one m- are the same user's persona and opinion, and the cosine preferring
the opinion is what the source is about. Per source and query kind the triples follow a seeded
shuffle of the rows; the kinds take one triple each in turn, each kind at most
``max_triples_per_source`` / #kinds; a triple
repeating one already kept (same query, m+ and m- text) is skipped, and so is one whose m+ or m-
already sits in ``max_triples_per_memory`` triples of the source. (Issue 15 kept every kind at the
smallest kind's count; with the templated "tell me what I think" and continuation queries that
capped three sources at 24-114 triples. The per-kind counts and each memory kind's m+ / m- counts
are in ``meta.json["hardness"][<encoder key>]["mined"]["real_phrasing"]``.) ``beneficial`` marks a triple whose m+ is an m-
of another triple (the symmetric control).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract.jsonl import read_jsonl

PHRASING_CANDIDATES = "phrasing_candidates.jsonl"
SOURCES = ("phrasing_cross_domain", "phrasing_sycophancy", "phrasing_sycophancy_bio", "phrasing_tool_drift",
           "phrasing_jailbreak",  # memgate.datasets.real.phrasing_sources.SOURCES (checked by a test)
           # the natural sources of issue 43 (memgate.datasets.real.natural_sources.SOURCES)
           "natural_cross_domain", "natural_sycophancy", "natural_tool_drift", "natural_injection")
DEFAULTS = {
    "sources": {name: False for name in SOURCES},
    "split_seed": 0,
    "max_positives": 8,
    "max_negatives": 16,
    "negatives_per_positive": 1,
    "max_triples_per_source": 4000,
    "max_triples_per_memory": 20,
    "real_data_root": None,
}


def enabled_sources(cfg: dict) -> list[str]:
    spec = cfg.get("real_phrasing") or {}
    return [name for name in SOURCES if (spec.get("sources") or {}).get(name)]


def validate(cfg: dict, error) -> None:
    """Raise ``error`` (the config module's ConfigError) naming the key."""
    spec = cfg["real_phrasing"]
    for name, on in spec["sources"].items():
        if not isinstance(on, bool):
            raise error(f"config key 'real_phrasing.sources.{name}' must be a bool, got {on!r}")
    for key, minimum in (("split_seed", 0), ("max_positives", 1), ("max_negatives", 1), ("negatives_per_positive", 1),
                         ("max_triples_per_source", 1), ("max_triples_per_memory", 1)):
        value = spec[key]
        if type(value) is not int or value < minimum:
            raise error(f"config key 'real_phrasing.{key}' must be an integer >= {minimum}, got {value!r}")
    root = spec["real_data_root"]
    if root is not None and not isinstance(root, str):
        raise error(f"config key 'real_phrasing.real_data_root' must be a path string or null, got {root!r}")


def build_candidates(cfg: dict) -> tuple[list[dict], dict]:
    """(rows of every enabled source, info for meta.json)."""
    from memgate.datasets.real.paths import real_data_root
    from memgate.datasets.real.phrasing import candidate_rows

    spec = cfg["real_phrasing"]
    root = real_data_root(spec["real_data_root"])
    rows, info = [], {"sources": {}, "split_seed": spec["split_seed"]}
    for name in enabled_sources(cfg):
        if name.startswith("natural_"):
            from memgate.datasets.real import natural

            got, meta = natural.candidate_rows(name, root, seed=spec["split_seed"],
                                               max_rows=spec["max_triples_per_source"])
            rows += got
            info["sources"][name] = meta
            continue
        got, meta = candidate_rows(name, root, seed=spec["split_seed"], max_positives=spec["max_positives"],
                                   max_negatives=spec["max_negatives"], max_rows=spec["max_triples_per_source"],
                                   target_triples=spec["max_triples_per_source"])
        rows += got
        info["sources"][name] = meta
    return rows, info


def write_candidates(cfg: dict, out_dir: Path) -> Optional[dict]:
    """Write ``train/phrasing_candidates.jsonl`` when a source is enabled; return the meta info."""
    if not enabled_sources(cfg):
        return None
    rows, info = build_candidates(cfg)
    path = Path(out_dir) / "train" / PHRASING_CANDIDATES
    path.parent.mkdir(parents=True, exist_ok=True)
    encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(encode(r) + "\n" for r in rows)
    info["rows"] = len(rows)
    return info


def read_candidates(data_dir: Path) -> list[dict]:
    path = Path(data_dir) / "train" / PHRASING_CANDIDATES
    if not path.exists():
        return []
    return read_jsonl(path)


def candidate_texts(rows: list[dict]) -> set:
    out: set = set()
    for row in rows:
        out.add(row["query_text"])
        out.update(m["text"] for m in row["positives"] + row["negatives"])
    return out


def mine_phrasing(rows: list[dict], matrix, spec: dict, seed: int = 0) -> tuple[list, dict]:
    """Training triples from the candidate rows (see the module doc); ``matrix(q, texts)`` gives
    the cosines of ``q`` to a list of texts (``data_gen.mine._cos_lookup``)."""
    from memgate.contract.seeding import component_rng

    k = spec.get("negatives_per_positive", 1)
    cap = spec.get("max_triples_per_source", 4000)
    per_memory = spec.get("max_triples_per_memory", 20)
    by_source: dict = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row)
    out: list = []
    for source in sorted(by_source):
        src_rows = by_source[source]
        order = component_rng(seed, f"data_gen/real_phrasing/{source}").permutation(len(src_rows))
        per_kind: dict = {}
        for ri in order:
            row = src_rows[int(ri)]
            per_kind.setdefault(row["query_kind"], []).extend(_row_triples(row, matrix, k))
        share = cap // len(per_kind)
        seen: set = set()
        uses: dict = {}
        kept = {kind: 0 for kind in per_kind}
        cursor = {kind: 0 for kind in per_kind}
        live = sorted(per_kind)
        while live:  # round robin over the kinds, so that no kind spends the memories' budget first
            for kind in list(live):
                pool = per_kind[kind]
                while cursor[kind] < len(pool):
                    t = pool[cursor[kind]]
                    cursor[kind] += 1
                    key = (t["query_text"], t["pos_text"], t["neg_text"])
                    if key in seen or uses.get(t["pos_id"], 0) >= per_memory or uses.get(t["neg_id"], 0) >= per_memory:
                        continue
                    seen.add(key)
                    uses[t["pos_id"]] = uses.get(t["pos_id"], 0) + 1
                    uses[t["neg_id"]] = uses.get(t["neg_id"], 0) + 1
                    out.append(t)
                    kept[kind] += 1
                    break
                if kept[kind] >= share or cursor[kind] >= len(pool):
                    live.remove(kind)
    negatives = {(t["source"], t["neg_id"]) for t in out}
    for t in out:
        t["beneficial"] = (t["source"], t["pos_id"]) in negatives
    return out, phrasing_stats(out)


def _row_triples(row: dict, matrix, k: int) -> list:
    q = row["query_text"]
    pos, neg = row["positives"], row["negatives"]
    cp_all = matrix(q, [m["text"] for m in pos])
    cn_all = matrix(q, [m["text"] for m in neg])
    top = max(float(cp_all.max()), float(cn_all.max()))
    above_ok = float(cp_all.max()) >= top or bool(row.get("paired"))
    used = np.zeros(len(neg), dtype=bool)
    out = []
    for p, cp in zip(pos, cp_all.tolist()):
        allowed = np.ones(len(neg), dtype=bool) if above_ok else cn_all <= cp
        for _ in range(min(k, int(allowed.sum()))):
            if used[allowed].all():
                used[:] = False
            gap = np.abs(cn_all - cp)
            gap[used | ~allowed] = np.inf
            j = int(np.argmin(gap))
            used[j] = True
            cn = float(cn_all[j])
            hardness = "hard_negative" if cn > cp else ("hard_positive" if cp >= top else None)
            n = neg[j]
            out.append({
                "triple_id": f"{row['query_id']}-p{len(out):04d}", "group_id": row["group_id"],
                "query_id": row["query_id"], "scenario": f"real_{row['source'].removeprefix('phrasing_')}",
                "query_text": q, "pos_id": p["memory_id"], "pos_text": p["text"], "neg_id": n["memory_id"],
                "neg_text": n["text"], "pos_kind": p["kind"], "neg_kind": n["kind"], "text_visible": True,
                "metadata_visible": False, "heldout": False, "beneficial": False, "source": row["source"],
                "relation": f"{row['query_kind']}:{n['kind']}", "hardness": hardness,
                "cos_pos": round(cp, 4), "cos_neg": round(cn, 4),
                **({"origin": row["origin"]} if "origin" in row else {}),  # natural sources (issue 43)
            })
    return out


def phrasing_stats(triples: list) -> dict:
    stats: dict = {}
    for src in sorted({t["source"] for t in triples}):
        rows = [t for t in triples if t["source"] == src]
        hn = [t for t in rows if t["hardness"] == "hard_negative"]
        hp = [t for t in rows if t["hardness"] == "hard_positive"]
        kinds: dict = {}
        for t in rows:
            kinds.setdefault(t["pos_kind"], [0, 0])[0] += 1
            kinds.setdefault(t["neg_kind"], [0, 0])[1] += 1
        memories = [t["pos_id"] for t in rows] + [t["neg_id"] for t in rows]
        per_memory: dict = {}
        for mid in memories:
            per_memory[mid] = per_memory.get(mid, 0) + 1
        stats[src] = {
            "triples": len(rows), "queries": len({t["query_id"] for t in rows}),
            "query_texts": len({t["query_text"] for t in rows}), "memories": len(per_memory),
            "max_triples_per_memory": max(per_memory.values()),
            "query_kinds": _counts(t["relation"].split(":")[0] for t in rows),
            "beneficial_controls": sum(t["beneficial"] for t in rows),
            "hard_negative_queries": len({t["query_id"] for t in hn}),
            "hard_positive_queries": len({t["query_id"] for t in hp}),
            "hard_negative_triples": len(hn), "hard_positive_triples": len(hp),
            "kind_as_pos_neg": {k: {"pos": v[0], "neg": v[1]} for k, v in sorted(kinds.items())},
            "mean_cos_pos": round(float(np.mean([t["cos_pos"] for t in rows])), 4),
            "mean_cos_neg": round(float(np.mean([t["cos_neg"] for t in rows])), 4),
        }
    return stats


def _counts(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
