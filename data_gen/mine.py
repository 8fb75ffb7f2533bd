"""Hardness mining with a named encoder: ``python -m data_gen.mine --data <dir> [--encoder <id>]``.

Never changes the split files or ``data_hash``. It adds ``hardness["<encoder key>"]`` to
meta.json and writes ``<dir>/mined/<encoder key>/triples.jsonl`` (training triples).

Measured on the fixed test split (cosines rounded to 1e-4 before comparing):

- ``reference_accuracy[s]``: share of text-visible test triples of scenario s with
  cos(q, m+) > cos(q, m-) (a tie counts one half) -- the ungated reference's preference accuracy;
- ``hard_share_tv[s]``: share of text-visible test triples with cos(q, m-) > cos(q, m+);
- ``hard_positive_share_tv[s]``: share of text-visible beneficial-control test queries whose
  cosine top-1 over the whole group store is one of their anchors, of a memory kind that is a
  scenario negative somewhere (``meta["negative_kinds"]``).

Mined training triples = every template train triple, plus text-visible hard triples selected
from all (m+, m-) pairs of each train query, balanced per scenario between *hard negatives*
(m- more similar to the query than m+) and *hard positives* (m+ is the query's top-1 over the
store; paired with its most similar inadmissible memory), so that "suppress the most similar
memory" is never a winning rule.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.admissibility import and3

REPO_ROOT = Path(__file__).resolve().parents[1]


def _read(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_encoder(model: Optional[str], batch_size: int = 64):
    """``memgate.encoder.Encoder`` (cached embeddings); the bundled MiniLM by default."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from memgate.encoder import Encoder, EncoderConfig

    cfg = EncoderConfig(batch_size=batch_size) if model is None else EncoderConfig(model=model, batch_size=batch_size)
    return Encoder(cfg, repo_root=REPO_ROOT)


class SplitView:
    """One split's rows, indexed for mining."""

    def __init__(self, split_dir: Path):
        self.memories = _read(split_dir / "memories.jsonl")
        self.queries = _read(split_dir / "queries.jsonl")
        self.labels = _read(split_dir / "labels.jsonl")
        self.triples = _read(split_dir / "triples.jsonl")
        self.query_meta = {r["query_id"]: r for r in _read(split_dir / "query_meta.jsonl")}
        self.mem = {r["memory_id"]: r for r in self.memories}
        self.qry = {r["query_id"]: r for r in self.queries}
        self.by_group: dict = {}
        for r in self.memories:
            self.by_group.setdefault(r["group_id"], []).append(r["memory_id"])
        self.label: dict = {}
        for r in self.labels:
            self.label.setdefault(r["query_id"], {})[r["memory_id"]] = r

    def texts(self) -> list[str]:
        return sorted({r["text"] for r in self.memories} | {r["text"] for r in self.queries})


def _cos_lookup(texts: list[str], vectors: np.ndarray):
    index = {t: i for i, t in enumerate(texts)}

    def cos(a: str, b: str) -> float:
        return round(float(np.dot(vectors[index[a]], vectors[index[b]])), 4)

    def matrix(q: str, mems: list[str]) -> np.ndarray:
        return np.round(vectors[[index[t] for t in mems]] @ vectors[index[q]], 4)

    return cos, matrix


def measure_test(view: SplitView, cos, matrix, negative_kinds: set, scenarios: list) -> dict:
    ref: dict = {}
    hard: dict = {}
    hard_q: dict = {}
    for t in view.triples:
        if t["text_visible"] is not True:
            continue
        cp, cn = cos(t["query_text"], t["pos_text"]), cos(t["query_text"], t["neg_text"])
        s = t["scenario"]
        ref.setdefault(s, []).append(1.0 if cp > cn else (0.5 if cp == cn else 0.0))
        hard.setdefault(s, []).append(1.0 if cn > cp else 0.0)
        if cn > cp:
            hard_q.setdefault(s, set()).add(t["query_id"])
    hp: dict = {}
    for qid, meta in view.query_meta.items():
        if not (meta.get("beneficial") and meta.get("text_visible") is True):
            continue
        q = view.qry[qid]
        ids = sorted(view.by_group[q["group_id"]])
        sims = matrix(q["text"], [view.mem[i]["text"] for i in ids])
        top = ids[int(np.argmax(sims))]  # ties: the smaller id (stable argmax over sorted ids)
        lab = view.label.get(qid, {}).get(top)
        is_anchor = lab is not None and lab["relevance"] == "required"
        hp.setdefault(meta["scenario"], []).append(
            1.0 if is_anchor and view.mem[top]["kind"] in negative_kinds else 0.0)

    def table(values: dict) -> dict:
        out = {s: (round(float(np.mean(values[s])), 4) if values.get(s) else None) for s in scenarios}
        pooled = [v for vs in values.values() for v in vs]
        out["overall"] = round(float(np.mean(pooled)), 4) if pooled else None
        return out

    ref_table = {s: (round(float(np.mean(ref[s])), 4) if ref.get(s) else None) for s in scenarios}
    pooled = [v for vs in ref.values() for v in vs]
    ref_table["overall"] = round(float(np.mean(pooled)), 4) if pooled else None
    return {
        "reference_accuracy": ref_table,
        "hard_share_tv": table(hard),
        "hard_positive_share_tv": table(hp),
        "hard_negative_queries_tv": {s: len(hard_q.get(s, ())) for s in scenarios},
        "hard_positive_queries_tv": {s: int(sum(hp.get(s, []))) for s in scenarios},
        "n_triples_tv": {s: len(ref.get(s, [])) for s in scenarios},
        "n_beneficial_queries_tv": {s: len(hp.get(s, [])) for s in scenarios},
    }


def mine_train(view: SplitView, cos, matrix, negative_kinds: set, max_mined: int) -> tuple[list, dict]:
    """Template triples + balanced hard negatives / hard positives (text-visible only)."""
    hard_neg: dict = {}
    hard_pos: dict = {}
    for qid, q in sorted(view.qry.items()):
        meta = view.query_meta[qid]
        if meta["scenario"] == "unknown_provenance":
            continue
        labels = view.label.get(qid, {})
        ids = sorted(view.by_group[q["group_id"]])
        texts = [view.mem[i]["text"] for i in ids]
        sims = dict(zip(ids, matrix(q["text"], texts).tolist()))
        pos, neg = [], []
        for mid in ids:
            lab = labels.get(mid)
            if lab is None:
                continue  # outside the readable namespaces: wrong scope, never text-visible
            a = and3(lab["scope"], lab["policy"], lab["lifecycle"])
            if lab["relevance"] == "required" and a is True:
                pos.append(mid)
            elif a is False and lab["text_visible"]:
                neg.append(mid)
        if not pos or not neg:
            continue
        top = max(ids, key=lambda i: (sims[i], -ids.index(i)))
        for p in pos:
            for n in neg:
                if sims[n] > sims[p]:
                    hard_neg.setdefault(meta["scenario"], []).append((sims[n] - sims[p], qid, p, n))
            if p == top and view.mem[p]["kind"] in negative_kinds:
                n = max(neg, key=lambda i: (sims[i], i))
                hard_pos.setdefault(meta["scenario"], []).append((sims[p] - sims[n], qid, p, n))
    selected: list = []
    stats: dict = {}
    scen = sorted(set(hard_neg) | set(hard_pos))
    per = max_mined // max(1, 2 * len(scen))
    for s in scen:
        hn = sorted(hard_neg.get(s, []), key=lambda x: (-x[0], x[1], x[2], x[3]))
        hp = sorted(hard_pos.get(s, []), key=lambda x: (x[0], x[1], x[2], x[3]))
        n = min(len(hn), len(hp), per)
        stats[s] = {"hard_negative_candidates": len(hn), "hard_positive_candidates": len(hp), "selected_each": n}
        selected += [("hard_negative", *x) for x in hn[:n]] + [("hard_positive", *x) for x in hp[:n]]
    rows = [dict(t, hardness=None) for t in view.triples]
    index = {(t["query_id"], t["pos_id"], t["neg_id"]): i for i, t in enumerate(view.triples)}
    added = marked = 0
    for kind, _margin, qid, p, n in selected:
        key = (qid, p, n)
        lab = view.label[qid][n]
        q, pm, nm = view.qry[qid], view.mem[p], view.mem[n]
        if key in index:  # already a template triple: mark it (the balance counts it)
            rows[index[key]].update(hardness=kind, cos_pos=cos(q["text"], pm["text"]),
                                    cos_neg=cos(q["text"], nm["text"]))
            marked += 1
            continue
        index[key] = len(rows)
        meta = view.query_meta[qid]
        rows.append({
            "triple_id": f"{qid}-h{added:05d}", "group_id": q["group_id"], "query_id": qid,
            "scenario": meta["scenario"], "query_text": q["text"], "pos_id": p, "pos_text": pm["text"],
            "neg_id": n, "neg_text": nm["text"], "pos_kind": pm["kind"], "neg_kind": nm["kind"],
            "text_visible": lab["text_visible"], "metadata_visible": lab["metadata_visible"],
            "heldout": meta["heldout"], "beneficial": meta["beneficial"], "source": "mined",
            "hardness": kind, "cos_pos": cos(q["text"], pm["text"]), "cos_neg": cos(q["text"], nm["text"]),
        })
        added += 1
    return rows, {"per_scenario": stats, "template_triples": len(view.triples), "mined_added": added,
                  "template_marked": marked}


def mine(data_dir: Path, encoder_model: Optional[str] = None, max_mined: int = 10000,
         train: bool = True, batch_size: int = 64) -> dict:
    data_dir = Path(data_dir)
    meta_path = data_dir / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    encoder = load_encoder(encoder_model, batch_size)
    key = encoder.key
    negative_kinds = set(meta.get("negative_kinds") or [])
    scenarios = list(meta.get("scenarios") or sorted(meta["counts"]["test"]))
    test = SplitView(data_dir / "test")
    texts = test.texts()
    cos, matrix = _cos_lookup(texts, encoder.encode(texts, desc="embed test"))
    result = measure_test(test, cos, matrix, negative_kinds, scenarios)
    result["encoder"] = encoder.identity
    if train:
        view = SplitView(data_dir / "train")
        texts = view.texts()
        cos, matrix = _cos_lookup(texts, encoder.encode(texts, desc="embed train"))
        rows, stats = mine_train(view, cos, matrix, negative_kinds, max_mined)
        out = data_dir / "mined" / key / "triples.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
        with out.open("w", encoding="utf-8") as handle:
            handle.writelines(encode(r) + "\n" for r in rows)
        result["mined"] = dict(stats, path=out.relative_to(data_dir).as_posix())
    meta.setdefault("hardness", {})[key] = result
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_gen.mine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a data_gen output directory")
    parser.add_argument("--encoder", default=None, help="encoder model id or path (default: bundled MiniLM)")
    parser.add_argument("--max-mined", type=int, default=10000, help="cap on added hard triples")
    parser.add_argument("--test-only", action="store_true", help="measure hardness only; write no triples")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    result = mine(args.data, args.encoder, args.max_mined, train=not args.test_only, batch_size=args.batch_size)
    print(json.dumps({k: result[k] for k in ("hard_share_tv", "hard_positive_share_tv", "reference_accuracy")}
                     | {"mined": result.get("mined", {})}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
