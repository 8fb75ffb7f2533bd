"""The build half of the natural sources' data card (issue 43) and their embedding near-duplicate
filter; called by ``data_gen.mine`` when a ``natural_*`` source is enabled.

``filter_and_card(data_dir, triples, encoder, spec)``:

1. Near duplicates: a natural training triple whose query, admissible or risk memory is within
   cosine ``NEAR_DUP_COS`` (0.95) of an evaluation text — the select and report texts of every
   natural source and the strings in ``examples/`` — is dropped. LoCoMo and GateMem (37k strings)
   are checked by normalised text only (``memgate.datasets.real.natural.guard_texts``, when the
   cases are split): embedding them costs minutes a build on a CPU.
2. ``<data_dir>/sources.json``: per enabled natural source its counts — ``train_triples``
   (distinct), ``distinct_memories``, ``distinct_queries``, ``max_triples_per_memory`` / ``_query``,
   ``origin_triples`` (per vendored origin), ``select_pairs``, ``report_pairs`` (with the held-out
   family's pairs), ``families`` (``{"train", "select", "report"}``), ``one_minus_cos_auc`` per part,
   ``near_duplicates_removed`` (``cross_part``, ``guard_texts``: normalised text; ``embedding``) —
   beside the static half, ``data/real/sources.json`` (``data_gen.natural_vendor``). ``make release``
   copies the file to ``reports/<name>/sources.json``; docs/real_phrasing.md renders both.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

NEAR_DUP_COS = 0.95
CARD = "sources.json"


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a trap > score of a control), ties half."""
    allv = np.concatenate([pos, neg])
    ranks = allv.argsort().argsort().astype(float) + 1
    # average ranks for ties
    order = np.argsort(allv, kind="mergesort")
    sorted_v = allv[order]
    i = 0
    while i < len(sorted_v):
        j = i
        while j + 1 < len(sorted_v) and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        if j > i:
            ranks[order[i:j + 1]] = (i + j + 2) / 2
        i = j + 1
    r = ranks[: len(pos)].sum()
    return float((r - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def one_minus_cos_auc(rows: dict, vec) -> float | None:
    """AUC of ``1 - cos(q, m)`` for traps against controls (0.5: the cosine cannot tell them apart)."""
    if not rows["labels"]:
        return None
    s = np.array([1.0 - float(vec(q) @ vec(m)) for q, m in zip(rows["query_texts"], rows["memory_texts"])])
    lab = np.array(rows["labels"], dtype=bool)
    return round(_auc(s[lab], s[~lab]), 4)


def filter_and_card(data_dir: Path, triples: list, encoder, spec: dict, encode) -> tuple[list, dict]:
    """(triples kept, the card) — see the module doc; ``encode(encoder, texts)`` -> unit vectors."""
    from memgate.datasets.real import natural

    names = sorted({t["source"] for t in triples if t["source"].startswith("natural_")})
    if not names:
        return triples, {}
    root = spec.get("real_data_root")
    seed = spec.get("split_seed", 0)
    evals = {(n, p): natural.eval_rows(n, p, purpose="evaluation", root=root, seed=seed)
             for n in names for p in ("select", "report")}
    guard = sorted({t for rows in evals.values() for t in rows["query_texts"] + rows["memory_texts"]}
                   | set(natural.example_texts()))
    train_texts = sorted({x for t in triples if t["source"] in names for x in (t["query_text"], t["pos_text"],
                                                                              t["neg_text"])})
    everything = sorted(set(guard) | set(train_texts))
    vectors = encode(encoder, everything)
    index = {t: i for i, t in enumerate(everything)}
    g = vectors[[index[t] for t in guard]]
    near: set = set()
    for start in range(0, len(train_texts), 2048):
        chunk = train_texts[start:start + 2048]
        cos = vectors[[index[t] for t in chunk]] @ g.T
        near.update(t for t, m in zip(chunk, cos.max(axis=1)) if m >= NEAR_DUP_COS)
    kept, dropped = [], {n: 0 for n in names}
    for t in triples:
        if t["source"] in names and {t["query_text"], t["pos_text"], t["neg_text"]} & near:
            dropped[t["source"]] += 1
        else:
            kept.append(t)

    def vec(text: str) -> np.ndarray:
        return vectors[index[text]]

    card = {"sources": {}, "near_dup_cos": NEAR_DUP_COS}
    for name in names:
        mine = [t for t in kept if t["source"] == name]
        info = natural.info(name, root, seed)
        per_mem: dict = {}
        per_query: dict = {}
        origins: dict = {}
        for t in mine:
            for mid in (t["pos_text"], t["neg_text"]):
                per_mem[mid] = per_mem.get(mid, 0) + 1
            per_query[t["query_text"]] = per_query.get(t["query_text"], 0) + 1
            origins[t.get("origin", "")] = origins.get(t.get("origin", ""), 0) + 1
        entry = {
            "category": info["category"],
            "train_triples": len({(t["query_text"], t["pos_text"], t["neg_text"]) for t in mine}),
            "distinct_memories": len(per_mem), "distinct_queries": len(per_query),
            "max_triples_per_memory": max(per_mem.values(), default=0),
            "max_triples_per_query": max(per_query.values(), default=0),
            "origin_triples": dict(sorted(origins.items())), "families": info["families"],
            "family_split": info["family_split"],
            "near_duplicates_removed": dict(info["near_duplicates_removed"], embedding=dropped[name]),
            "one_minus_cos_auc": {},
        }
        for part in ("select", "report"):
            rows = evals[(name, part)]
            entry[f"{part}_pairs"] = len(rows["labels"])
            entry[f"{part}_memories"] = len(set(rows["memory_ids"]))
            held = [i for i, h in enumerate(rows["heldout"]) if h]
            entry[f"{part}_heldout_pairs"] = len(held)
            entry[f"{part}_heldout_memories"] = len({rows["memory_ids"][i] for i in held})
            entry["one_minus_cos_auc"][part] = one_minus_cos_auc(rows, vec)
        card["sources"][name] = entry
    path = Path(data_dir) / CARD
    path.write_text(json.dumps(card, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return kept, card


def markdown_table(static: dict, built: dict) -> str:
    """One table of both halves: per vendored source its licence, category and whether it is
    model-written (``data/real/sources.json``), then per natural source the build's counts."""
    lines = ["| vendored source | category | licence | model-written | not PersistBench |",
             "| --- | --- | --- | --- | --- |"]
    for r in static["sources"]:
        lines.append(f"| [`{r['source']}`](https://github.com/{r['repo']}) | {r['category']} | {r['licence']} | "
                     f"{'yes' if r['model_written'] else 'no'} | {'yes' if r['not_persistbench'] else 'NO'} |")
    lines += ["", "| natural source | train triples | memories | queries | max / memory | max / query | origins "
                  "(triples) | select pairs (held-out) | report pairs (held-out) | held out: select / report | "
                  "1 − cos AUC select / report | near-dups removed |",
              "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | --- |"]
    for name, e in sorted(built.get("sources", {}).items()):
        origins = ", ".join(f"{k} {v:,}" for k, v in e["origin_triples"].items())
        held = "; ".join(f"{o}: {s.get('select', '-')} / {s.get('report', '-')}" for o, s in e["family_split"].items())
        auc = e["one_minus_cos_auc"]
        nd = e["near_duplicates_removed"]
        lines.append(f"| `{name}` | {e['train_triples']:,} | {e['distinct_memories']:,} | {e['distinct_queries']:,} | "
                     f"{e['max_triples_per_memory']} | {e['max_triples_per_query']} | {origins} | "
                     f"{e['select_pairs']:,} ({e['select_heldout_pairs']:,}) | "
                     f"{e['report_pairs']:,} ({e['report_heldout_pairs']:,}) | {held} | "
                     f"{auc['select']} / {auc['report']} | text {nd['cross_part'] + nd['guard_texts']:,}, "
                     f"embedding {nd['embedding']:,} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m data_gen.natural_card",
                                     description="print the natural sources' card as one markdown table")
    parser.add_argument("--built", type=Path, required=True, help="a data dir's sources.json (data_gen.mine)")
    parser.add_argument("--static", type=Path, default=Path("data/real/sources.json"))
    args = parser.parse_args(argv)
    static = json.loads(args.static.read_text(encoding="utf-8"))
    built = json.loads(args.built.read_text(encoding="utf-8"))
    print(markdown_table(static, built), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
