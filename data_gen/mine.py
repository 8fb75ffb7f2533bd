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

Plus real phrasing (``train/real_candidates.jsonl``, ``data_gen.real_text``; GateMem generator
episodes only), ``source: "gatemem"``, scenarios ``real_cross_domain`` (m- from another domain)
and ``real_wrong_scope`` (m- from another episode of the same domain). Rule for m-, per (query,
m+) and relation: **natural similarity**, i.e. the candidate whose cosine to the query is the
closest to cos(q, m+), not the hardest: m- and m+ then sit at the same similarity, so the cosine
alone does not separate them and the gate has to read the text (domain, organisation) instead of
learning "suppress the most similar memory". Hard negatives (cos(q, m-) > cos(q, m+)) are allowed
only for queries whose top-1 over their pool is one of their positives (a hard positive), so per
real scenario the queries with a hard negative never outnumber those with a hard positive. Every
m- is the m+ of its own checkpoint's triples (flagged ``beneficial``: the symmetric controls).
meta.json ``real_text_triples`` = the number of these training triples.

Plus real phrasing for the four risk categories (``train/phrasing_candidates.jsonl``, only when a
``real_phrasing`` source is enabled; ``data_gen.real_phrasing`` has the rule), meta.json
``real_phrasing_triples``; with a natural source (issue 43) ``data_gen.natural_card`` drops its
near-duplicates of evaluation texts and writes the data dir's ``sources.json``.

Only the texts these figures read are embedded (test: text-visible triples and text-visible
beneficial queries with their group store; train: queries that can yield a mined triple with their
group store; the real-text queries and turns), in one length-sorted pass through the encoder's
on-disk cache; ``hardness[enc]["timing"]`` records the parts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Optional

import numpy as np

from data_gen.generate import REAL_CANDIDATES
from data_gen.real_phrasing import candidate_texts as phrasing_texts
from data_gen.real_phrasing import mine_phrasing
from data_gen.real_phrasing import read_candidates as read_phrasing_candidates
from data_gen.real_text import RELATIONS, SCENARIO_OF, candidate_pools, text_visible
from memgate.contract.admissibility import and3
from memgate.contract.jsonl import read_jsonl
from memgate.contract.progress import progress

REPO_ROOT = Path(__file__).resolve().parents[1]


def _read(path: Path) -> list[dict]:
    return read_jsonl(path)


def load_encoder(model: Optional[str], batch_size: int = 64):
    """``memgate.model.encoder.Encoder`` (cached embeddings); the bundled MiniLM by default."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from memgate.model.encoder import Encoder, EncoderConfig

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

    def group_texts(self, group_id: str) -> list[str]:
        return [self.mem[i]["text"] for i in self.by_group[group_id]]

    def test_texts(self) -> set:
        """What ``measure_test`` reads: text-visible triples' texts, and each text-visible
        beneficial query with its whole group store."""
        out: set = set()
        for t in self.triples:
            if t["text_visible"] is True:
                out.update((t["query_text"], t["pos_text"], t["neg_text"]))
        for qid, meta in self.query_meta.items():
            if meta.get("beneficial") and meta.get("text_visible") is True:
                q = self.qry[qid]
                out.add(q["text"])
                out.update(self.group_texts(q["group_id"]))
        return out

    def train_candidates(self) -> list[tuple]:
        """(query id, group memory ids, positive ids, text-visible negative ids) of every train
        query that can yield a mined triple (no encoder needed)."""
        out = []
        for qid, q in sorted(self.qry.items()):
            if self.query_meta[qid]["scenario"] == "unknown_provenance":
                continue
            labels = self.label.get(qid, {})
            ids = sorted(self.by_group[q["group_id"]])
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
            if pos and neg:
                out.append((qid, ids, pos, neg))
        return out

    def train_texts(self, candidates: list) -> set:
        out: set = set()
        for qid, ids, _pos, _neg in candidates:
            out.add(self.qry[qid]["text"])
            out.update(self.mem[i]["text"] for i in ids)
        return out


def _cos_lookup(texts: list[str], vectors: np.ndarray):
    index = {t: i for i, t in enumerate(texts)}

    def cos(a: str, b: str) -> float:
        return round(float(np.dot(vectors[index[a]], vectors[index[b]])), 4)

    def matrix(q: str, mems) -> np.ndarray:
        """Cosines of ``q`` to ``mems``: a list of texts, or a (n, d) block from ``matrix.block``."""
        block = mems if isinstance(mems, np.ndarray) else vectors[[index[t] for t in mems]]
        return np.round(block @ vectors[index[q]], 4)

    matrix.block = lambda mems: vectors[[index[t] for t in mems]]
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


def mine_train(view: SplitView, cos, matrix, negative_kinds: set, max_mined: int,
               candidates: Optional[list] = None) -> tuple[list, dict]:
    """Template triples + balanced hard negatives / hard positives (text-visible only)."""
    hard_neg: dict = {}
    hard_pos: dict = {}
    candidates = view.train_candidates() if candidates is None else candidates
    bar = progress("mine template triples", total=len(candidates), unit="query")
    for qid, ids, pos, neg in candidates:
        bar.update()
        meta = view.query_meta[qid]
        q = view.qry[qid]
        sims = dict(zip(ids, matrix(q["text"], [view.mem[i]["text"] for i in ids]).tolist()))
        top = max(ids, key=lambda i: (sims[i], -ids.index(i)))
        for p in pos:
            for n in neg:
                if sims[n] > sims[p]:
                    hard_neg.setdefault(meta["scenario"], []).append((sims[n] - sims[p], qid, p, n))
            if p == top and view.mem[p]["kind"] in negative_kinds:
                n = max(neg, key=lambda i: (sims[i], i))
                hard_pos.setdefault(meta["scenario"], []).append((sims[p] - sims[n], qid, p, n))
    bar.close()
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


def encode_chunked(encoder, texts: list[str], chunk: int = 2048) -> np.ndarray:
    """``encoder.encode`` in chunks: each chunk's embeddings reach the on-disk cache as soon as it
    is done, so an interrupted first run keeps its work. Texts are sorted by length first
    (similar lengths share a batch, less padding) and returned in the input order."""
    if not texts:
        return encoder.encode(texts, progress=False)
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), texts[i]))
    parts = []
    for start in range(0, len(order), chunk):
        idx = order[start:start + chunk]
        parts.append(encoder.encode([texts[i] for i in idx], desc=f"embed (mine) {start}/{len(texts)}"))
    stacked = np.concatenate(parts)
    out = np.empty_like(stacked)
    out[np.asarray(order)] = stacked
    return out


def read_real_candidates(data_dir: Path) -> list[dict]:
    path = Path(data_dir) / "train" / REAL_CANDIDATES
    return _read(path) if path.exists() else []


def real_texts(rows: list[dict]) -> set:
    out: set = set()
    for row in rows:
        out.add(row["query_text"])
        out.update(p["text"] for p in row["positives"])
    return out


def mine_real(rows: list[dict], matrix, spec: dict) -> tuple[list, dict]:
    """Real-phrasing training triples from ``train/real_candidates.jsonl`` (see the module doc).

    Candidates of a row are the other rows' positives (``data_gen.real_text.candidate_pools``).
    For each row (a GateMem generator checkpoint), each positive m+ (in the row's order) and each
    relation (``other_domain``, ``other_episode``): the ``negatives_per_positive`` candidates of
    that relation whose cosine to the query is the closest to cos(q, m+) (ties: the smaller
    memory id), without reuse inside the row and relation until every candidate has been used.
    Only candidates whose violation the texts reveal are eligible (``real_text.text_visible``:
    an other-episode turn only when the query names something of its own episode that the turn
    does not contain), so every real triple is text-visible.
    When none of the row's positives is the query's top-1 over its pool, only candidates with
    cos(q, m-) <= cos(q, m+) are eligible (hard negatives only where the query also has a hard
    positive; a positive with no eligible candidate yields no triple).
    Each chosen m- is a positive of its own checkpoint, whose triples are mined the same way, so
    it also appears as m+ there: those triples are flagged ``beneficial`` (symmetric controls).
    """
    pools = candidate_pools(rows)
    turns = pools["turns"]
    turn_block = matrix.block([t[1] for t in turns])  # gathered once, reused for every query
    index = {t[0]: i for i, t in enumerate(turns)}
    k = spec["negatives_per_positive"]
    out: list = []
    bar = progress("mine real-phrasing triples", total=len(rows), unit="checkpoint")
    for row in rows:
        bar.update()
        q, qid = row["query_text"], row["query_id"]
        sims = matrix(q, turn_block)
        pos_idx = [index[p["memory_id"]] for p in row["positives"]]
        everything = pos_idx + pools["other_domain"][qid] + pools["other_episode"][qid]
        top = float(sims[everything].max())
        if "query_names" not in row:
            raise ValueError(f"real candidate {qid!r} has no 'query_names' (written before the "
                             "other-episode rule): regenerate the data with `python -m data_gen`")
        names = row["query_names"] or []
        # Hard negatives only beside a hard positive: when no positive is the query's top-1, m- is
        # drawn from the candidates at or below cos(q, m+), so per relation the queries with a hard
        # negative are a subset of the queries with a hard positive.
        above_ok = max(float(sims[i]) for i in pos_idx) >= top
        n = 0
        for relation in RELATIONS:
            # only candidates whose violation the texts reveal (data_gen.real_text.text_visible)
            cand = np.asarray([i for i in pools[relation][qid] if text_visible(relation, names, turns[i][1])],
                              dtype=np.int64)
            if not len(cand):
                continue
            cs = sims[cand]
            used = np.zeros(len(cand), dtype=bool)
            for pos, pi in zip(row["positives"], pos_idx):
                cp = float(sims[pi])
                allowed = np.ones(len(cand), dtype=bool) if above_ok else cs <= cp
                for _ in range(min(k, int(allowed.sum()))):
                    if used[allowed].all():
                        used[:] = False
                    gap = np.abs(cs - cp)
                    gap[used | ~allowed] = np.inf
                    j = int(np.argmin(gap))  # ties: the first, i.e. the smaller memory id
                    used[j] = True
                    mid, text = turns[cand[j]][0], turns[cand[j]][1]
                    cn = float(cs[j])
                    if cn > cp:
                        hardness = "hard_negative"
                    elif cp >= top:
                        hardness = "hard_positive"  # m+ is the query's top-1 over its whole pool
                    else:
                        hardness = None
                    out.append({
                        "triple_id": f"{qid}-r{n:04d}", "group_id": row["group_id"], "query_id": qid,
                        "scenario": SCENARIO_OF[relation], "query_text": q, "pos_id": pos["memory_id"],
                        "pos_text": pos["text"], "neg_id": mid, "neg_text": text,
                        "pos_kind": "turn", "neg_kind": "turn", "text_visible": True,
                        "metadata_visible": True, "heldout": False, "beneficial": False,
                        "source": "gatemem", "relation": relation, "hardness": hardness,
                        "cos_pos": round(cp, 4), "cos_neg": round(cn, 4),
                        "control_query_id": turns[cand[j]][4][0],
                    })
                    n += 1
    bar.close()
    negatives = {t["neg_id"] for t in out}
    for t in out:
        t["beneficial"] = t["pos_id"] in negatives
    return out, real_stats(out)


def real_stats(triples: list) -> dict:
    """Per real scenario: triples, hard-negative / hard-positive triples and queries, mean cosines."""
    stats: dict = {}
    for scen in sorted({t["scenario"] for t in triples}):
        rows = [t for t in triples if t["scenario"] == scen]
        hn = [t for t in rows if t["hardness"] == "hard_negative"]
        hp = [t for t in rows if t["hardness"] == "hard_positive"]
        stats[scen] = {
            "triples": len(rows),
            "beneficial_controls": sum(t["beneficial"] for t in rows),
            "queries": len({t["query_id"] for t in rows}),
            "hard_share": round(len(hn) / len(rows), 4),
            "hard_negative_triples": len(hn),
            "hard_positive_triples": len(hp),
            "hard_negative_queries": len({t["query_id"] for t in hn}),
            "hard_positive_queries": len({t["query_id"] for t in hp}),
            "mean_cos_pos": round(float(np.mean([t["cos_pos"] for t in rows])), 4),
            "mean_cos_neg": round(float(np.mean([t["cos_neg"] for t in rows])), 4),
        }
    return stats


def mine(data_dir: Path, encoder_model: Optional[str] = None, max_mined: int = 10000,
         train: bool = True, batch_size: int = 64) -> dict:
    """Hardness on test, mined training triples (template + real phrasing) for one encoder.

    Embeds only the texts the figures and the selection read (one batched call; the encoder's
    on-disk cache makes a re-run cheap); ``timing`` in the result has the wall-clock parts."""
    t_start = time.perf_counter()
    data_dir = Path(data_dir)
    meta_path = data_dir / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    encoder = load_encoder(encoder_model, batch_size)
    key = encoder.key
    negative_kinds = set(meta.get("negative_kinds") or [])
    scenarios = list(meta.get("scenarios") or sorted(meta["counts"]["test"]))
    real_spec = (meta.get("config") or {}).get("real_text") or {}
    test = SplitView(data_dir / "test")
    needed = test.test_texts()
    view = candidates = None
    real_rows: list = []
    if train:
        view = SplitView(data_dir / "train")
        candidates = view.train_candidates()
        needed |= view.train_texts(candidates)
        real_rows = read_real_candidates(data_dir)
        needed |= real_texts(real_rows)
        phrasing_rows = read_phrasing_candidates(data_dir)
        needed |= phrasing_texts(phrasing_rows)
    t_read = time.perf_counter()
    texts = sorted(needed)
    before = encoder.encoded_count
    vectors = encode_chunked(encoder, texts)
    t_embed = time.perf_counter()
    cos, matrix = _cos_lookup(texts, vectors)
    result = measure_test(test, cos, matrix, negative_kinds, scenarios)
    result["encoder"] = encoder.identity
    if train:
        rows, stats = mine_train(view, cos, matrix, negative_kinds, max_mined, candidates)
        real, rstats = mine_real(real_rows, matrix, real_spec) if real_rows else ([], {})
        rows += real
        phrasing, pstats = (mine_phrasing(phrasing_rows, matrix, meta["config"]["real_phrasing"])
                            if phrasing_rows else ([], {}))
        if any(r["source"].startswith("natural_") for r in phrasing_rows):
            from data_gen.natural_card import filter_and_card

            phrasing, card = filter_and_card(data_dir, phrasing, encoder, meta["config"]["real_phrasing"],
                                             encode_chunked)
            pstats["natural_card"] = card
        rows += phrasing
        out = data_dir / "mined" / key / "triples.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
        with out.open("w", encoding="utf-8") as handle:
            handle.writelines(encode(r) + "\n" for r in rows)
        result["mined"] = dict(stats, path=out.relative_to(data_dir).as_posix(), real_text=rstats,
                               real_text_triples=len(real), real_candidate_queries=len(real_rows))
        result["mined"].update(real_phrasing=pstats, real_phrasing_triples=len(phrasing),
                               sha256=hashlib.sha256(out.read_bytes()).hexdigest())  # checked by train.py
        meta["real_text_triples"] = len(real)
        meta["real_phrasing_triples"] = len(phrasing)
    t_end = time.perf_counter()
    result["timing"] = {
        "texts_embedded": len(texts), "encoded_uncached": encoder.encoded_count - before,
        "read_s": round(t_read - t_start, 2), "embed_s": round(t_embed - t_read, 2),
        "select_s": round(t_end - t_embed, 2), "total_s": round(t_end - t_start, 2),
    }
    meta.setdefault("hardness", {})[key] = result
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog or "python -m data_gen.mine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a data_gen output directory")
    parser.add_argument("--encoder", default=None, help="encoder model id or path (default: bundled MiniLM)")
    parser.add_argument("--max-mined", type=int, default=10000, help="cap on added hard triples")
    parser.add_argument("--test-only", action="store_true", help="measure hardness only; write no triples")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    if not (args.data / "meta.json").is_file():
        parser.error(f"--data {args.data}: no meta.json there (write one with python -m data_gen --out {args.data})")
    result = mine(args.data, args.encoder, args.max_mined, train=not args.test_only, batch_size=args.batch_size)
    print(json.dumps({k: result[k] for k in ("hard_share_tv", "hard_positive_share_tv", "reference_accuracy",
                                             "timing")}
                     | {"mined": result.get("mined", {})}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
