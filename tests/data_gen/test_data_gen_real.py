"""Real phrasing in the generator (issue 5): GateMem generator episodes only, deterministic, counted.

Data-free tests use hand-built candidate rows and a hashing encoder; the tests that read the real
data skip with the reason when it is absent (and fail under ``CI=true``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from data_gen.config import ConfigError, resolve
from data_gen.generate import SPLITS, data_hash, run
from data_gen.mine import _cos_lookup, mine, mine_real
from data_gen.real_text import (
    RELATIONS,
    SCENARIO_OF,
    benign_lists,
    build_real_candidates,
    candidate_pools,
    text_visible,
    words_of,
)
from memgate.datasets.real.testing import require_real_data

SMALL = {
    "splits": {"train": {"groups": 3}, "dev": {"groups": 1}, "test": {"groups": 2}},
    "group": {"instances": [6, 6]},
    "audit": {"enabled": False},
}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class HashEncoder:
    """Deterministic stand-in for ``memgate.model.encoder.Encoder``: a unit vector per text hash."""

    key = "hash-encoder-test"
    identity = {"id": "hash-encoder-test", "revision": None, "normalize": True, "dim": 16}

    def __init__(self, *args, **kwargs):
        self.encoded_count = 0
        self.seen: list[str] = []

    def encode(self, texts, progress: bool = True, desc: str = "") -> np.ndarray:
        self.seen.extend(texts)
        self.encoded_count += len(texts)
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int(hashlib.sha256(t.encode()).hexdigest()[:16], 16)
            v = np.random.default_rng(seed).normal(size=16)
            out[i] = v / np.linalg.norm(v)
        return out


def _fake_rows() -> list[dict]:
    """Two domains x two episodes x three checkpoints, three positives each; checkpoint 2 of each
    episode names nothing (its other-episode negatives are not text-visible)."""
    from data_gen.real_text import query_names

    rows = []
    for dom in ("medical", "office"):
        for e in range(2):
            ep = f"{dom}_ep{e}"
            name = f"Project {dom.title()}{e}"
            for c in range(3):
                qid = f"{ep}_ckpt_{c}"
                query = f"What about {name} item {c}?" if c < 2 else f"what is the current {dom} item {e}?"
                positives = [{"memory_id": f"{ep}:t{c}{j}", "text": f"role: {name} {dom} turn {c}{j}"}
                             for j in range(3)]
                rows.append({
                    "query_id": qid, "group_id": ep, "domain": dom, "query_type": "utility",
                    "query_text": query, "positives": positives, "protected": [],
                    "query_names": query_names(query, positives),
                })
    return sorted(rows, key=lambda r: r["query_id"])


def _vector_matrix(rows):
    texts = sorted({r["query_text"] for r in rows} | {p["text"] for r in rows for p in r["positives"]})
    return _cos_lookup(texts, HashEncoder().encode(texts))


# --------------------------------------------------------------------------- data-free


def test_candidate_pools_follow_the_relations():
    rows = _fake_rows()
    pools = candidate_pools(rows)
    turns = pools["turns"]
    for row in rows:
        own = {p["memory_id"] for p in row["positives"]}
        od = [turns[i] for i in pools["other_domain"][row["query_id"]]]
        oe = [turns[i] for i in pools["other_episode"][row["query_id"]]]
        assert od and all(t[2] != row["domain"] for t in od)
        assert oe and all(t[2] == row["domain"] and t[3] != row["group_id"] for t in oe)
        assert not own & {t[0] for t in od + oe}
        # every candidate is some other checkpoint's positive (its symmetric control exists)
        assert all(t[4] and row["query_id"] not in t[4] for t in od + oe)


def _pools_by_definition(rows: list[dict]) -> dict:
    """The relations written out literally: for each row, every turn (another row's positive) of
    the relation whose text is none of the row's own positive or protected texts."""
    turns = candidate_pools(rows)["turns"]
    out: dict = {rel: {} for rel in RELATIONS}
    for row in rows:
        own = {t["text"] for t in row["positives"] + row["protected"]}
        for rel in RELATIONS:
            out[rel][row["query_id"]] = [
                i for i, t in enumerate(turns) if t[1] not in own and (
                    t[2] != row["domain"] if rel == "other_domain" else
                    t[2] == row["domain"] and t[3] != row["group_id"])]
    return out


def test_candidate_pools_drop_the_rows_own_texts_wherever_they_occur():
    """A row's own positive and protected texts are removed from its candidates even when the same
    text is another turn of another domain or episode (repeated boilerplate), and the pools equal
    the relations written out literally."""
    rows = _fake_rows()
    shared = rows[0]["positives"][0]["text"]
    other = next(r for r in rows if r["domain"] != rows[0]["domain"])
    same_domain = next(r for r in rows if r["domain"] == rows[0]["domain"] and r["group_id"] != rows[0]["group_id"])
    other["positives"].append({"memory_id": "zz-other-domain-dup", "text": shared})
    same_domain["positives"].append({"memory_id": "zz-other-episode-dup", "text": shared})
    protected = other["positives"][0]["text"]
    rows[0]["protected"] = [{"memory_id": "p-0", "text": protected}]
    pools = candidate_pools(rows)
    texts = {rel: [pools["turns"][i][1] for i in pools[rel][rows[0]["query_id"]]] for rel in RELATIONS}
    assert shared not in texts["other_domain"] and shared not in texts["other_episode"]
    assert protected not in texts["other_domain"]
    # the duplicates are still candidates of the rows that do not own the text
    third = next(r for r in rows if r["domain"] != other["domain"] and r["query_id"] != rows[0]["query_id"]
                 and shared not in {t["text"] for t in r["positives"]})
    assert "zz-other-domain-dup" in {pools["turns"][i][0] for i in pools["other_domain"][third["query_id"]]}
    reference = _pools_by_definition(rows)
    for rel in RELATIONS:
        assert pools[rel] == reference[rel]


def test_mine_real_rule_natural_similarity_and_balance():
    rows = _fake_rows()
    cos, matrix = _vector_matrix(rows)
    triples, stats = mine_real(rows, matrix, {"negatives_per_positive": 1})
    pools = candidate_pools(rows)
    turns = pools["turns"]
    n_pos = sum(len(r["positives"]) for r in rows)
    assert len(triples) <= n_pos * len(RELATIONS)
    by_q = {r["query_id"]: r for r in rows}
    for t in triples:
        row = by_q[t["query_id"]]
        assert t["source"] == "gatemem" and t["text_visible"] is True
        assert t["scenario"] == SCENARIO_OF[t["relation"]]
        assert t["pos_id"] in {p["memory_id"] for p in row["positives"]}
        cands = [turns[i] for i in pools[t["relation"]][t["query_id"]]]
        assert t["neg_id"] in {c[0] for c in cands}
        if t["relation"] == "other_episode":  # the query names its own project, the turn does not
            assert row["query_names"] and not set(row["query_names"]) <= words_of(t["neg_text"])
        cp = cos(row["query_text"], t["pos_text"])
        assert t["cos_pos"] == cp and t["cos_neg"] == cos(row["query_text"], t["neg_text"])
        assert (t["hardness"] == "hard_negative") == (t["cos_neg"] > t["cos_pos"])
    # the first triple of each (query, relation) takes the candidate closest in cosine to m+
    firsts: dict = {}
    for t in triples:
        firsts.setdefault((t["query_id"], t["relation"]), t)
    for (qid, rel), t in firsts.items():
        q = by_q[qid]["query_text"]
        gaps = [abs(cos(q, turns[i][1]) - t["cos_pos"]) for i in pools[rel][qid]
                if (t["hardness"] == "hard_negative" or cos(q, turns[i][1]) <= t["cos_pos"])
                and text_visible(rel, by_q[qid]["query_names"], turns[i][1])]
        assert abs(t["cos_neg"] - t["cos_pos"]) == pytest.approx(min(gaps), abs=1e-9)
    # balance: per scenario, every query with a hard negative also has a hard positive
    for scen in set(SCENARIO_OF.values()):
        hn = {t["query_id"] for t in triples if t["scenario"] == scen and t["hardness"] == "hard_negative"}
        hp = {t["query_id"] for t in triples if t["scenario"] == scen and t["hardness"] == "hard_positive"}
        assert hn <= hp
        if scen in stats:
            assert stats[scen]["hard_negative_queries"] <= stats[scen]["hard_positive_queries"]
    # symmetric controls: a triple is beneficial iff its m+ is an m- elsewhere
    negs = {t["neg_id"] for t in triples}
    assert all(t["beneficial"] == (t["pos_id"] in negs) for t in triples)
    again, _ = mine_real(rows, matrix, {"negatives_per_positive": 1})
    assert again == triples
    unnamed = {r["query_id"] for r in rows if not r["query_names"]}
    assert len(unnamed) == 4
    assert not [t for t in triples if t["query_id"] in unnamed and t["relation"] == "other_episode"]
    assert {t["query_id"] for t in triples if t["relation"] == "other_domain"} == set(by_q)


def test_real_text_absent_generates_without_it(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMGATE_DATA", raising=False)
    cfg = resolve(dict(SMALL, real_text={"enabled": True, "real_data_root": str(tmp_path / "nowhere")}))
    meta = run(cfg, tmp_path / "d")
    assert meta["real_text_triples"] == 0 and meta["real_splits"] is None
    assert meta["real_text"]["available"] is False and "not found" in meta["real_text"]["note"]
    assert (tmp_path / "d" / "train" / "real_candidates.jsonl").read_text() == ""
    assert "train/real_candidates.jsonl" in meta["data_files"]


def test_mine_counts_real_triples_and_leaves_split_files(tmp_path, monkeypatch):
    """With hand-built candidates and a hashing encoder: real_text_triples = the mined gatemem
    rows; split files and data_hash unchanged; only needed texts embedded."""
    import data_gen.mine as mine_mod

    out = tmp_path / "d"
    meta = run(resolve(SMALL), out)
    path = out / "train" / "real_candidates.jsonl"
    encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
    path.write_text("".join(encode(r) + "\n" for r in _fake_rows()), encoding="utf-8")
    digest = data_hash(out)
    assert digest != meta["data_hash"]  # the candidates are part of the hash
    m = json.loads((out / "meta.json").read_text())
    m["data_hash"] = digest
    (out / "meta.json").write_text(json.dumps(m))
    before = {p: (out / p).read_bytes() for p in m["data_files"]}
    fake = HashEncoder()
    monkeypatch.setattr(mine_mod, "load_encoder", lambda *a, **k: fake)
    result = mine(out)
    after = json.loads((out / "meta.json").read_text())
    assert {p: (out / p).read_bytes() for p in m["data_files"]} == before
    assert after["data_hash"] == digest == data_hash(out)
    mined = _rows(out / "mined" / fake.key / "triples.jsonl")
    real = [t for t in mined if t["source"] == "gatemem"]
    assert real and after["real_text_triples"] == len(real) == result["mined"]["real_text_triples"]
    assert set(result["mined"]["real_text"]) == {t["scenario"] for t in real}
    assert result["timing"]["texts_embedded"] == len(set(fake.seen))
    dev_texts = {r["text"] for r in _rows(out / "dev" / "queries.jsonl")}
    assert not dev_texts & set(fake.seen)  # dev is never embedded by mining


# --------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def real_root() -> Path:
    return require_real_data()


@pytest.fixture(scope="module")
def real_rows(real_root):
    from memgate.datasets.real.io_guard import forbid_report_parts

    cfg = resolve({"real_text": {"enabled": True, "real_data_root": str(real_root)}})
    with forbid_report_parts():  # any report read would raise PermissionError
        rows, info = build_real_candidates(cfg, real_root)
    return cfg, rows, info


def test_real_candidates_only_from_generator_episodes(real_root, real_rows):
    from memgate.datasets.real import raw
    from memgate.datasets.real.splits import make_real_splits

    _cfg, rows, info = real_rows
    splits = make_real_splits(real_root)
    generator = set(splits["gatemem"]["generator"])
    assert info["available"] is True and info["real_splits"] == splits and rows
    forbidden = set(splits["gatemem"]["select"]) | set(splits["gatemem"]["report"])
    assert any(row["query_names"] for row in rows) and not all(row["query_names"] for row in rows)
    for row in rows:
        assert row["group_id"] in generator and row["group_id"] not in forbidden
        for turn in row["positives"] + row["protected"]:
            assert turn["memory_id"].split(":")[0] == row["group_id"]
    # never LoCoMo: no candidate text is a LoCoMo turn or question
    locomo: set = set()
    for conv in raw.locomo_conversations(real_root):
        for _key, turns in conv["conversation"].items():
            if isinstance(turns, list):
                locomo.update(str(t.get("text", "")) for t in turns if isinstance(t, dict))
        locomo.update(str(qa.get("question", "")) for qa in conv.get("qa", []))
    texts = {r["query_text"] for r in rows} | {p["text"].split(": ", 1)[-1] for r in rows for p in r["positives"]}
    assert not texts & locomo
    # a report episode is refused by the reader the generator uses
    from memgate.datasets.real.gatemem import generator_turn_pairs

    with pytest.raises(PermissionError):
        generator_turn_pairs(real_root, splits["gatemem"]["report"][:1], splits=splits)


def test_benign_lists_hold_only_admissible_generator_turns(real_root, real_rows):
    """Provenance of the ranking-preservation lists: built under the report-part guard from the
    generator rows alone; every item is a turn of the list's own generator episode that is a
    positive of some checkpoint there, never one of the checkpoint's protected turns, never a
    select / report / LoCoMo turn."""
    from memgate.datasets.real import raw
    from memgate.datasets.real.splits import make_real_splits

    _cfg, rows, _info = real_rows
    splits = make_real_splits(real_root)
    generator = set(splits["gatemem"]["generator"])
    lists = benign_lists(rows)
    assert lists and len(lists) <= len(rows)
    positives_of = {}
    for row in rows:
        positives_of.setdefault(row["group_id"], set()).update(p["memory_id"] for p in row["positives"])
    by_query = {row["query_id"]: row for row in rows}
    locomo = {str(t.get("text", "")) for conv in raw.locomo_conversations(real_root)
              for turns in conv["conversation"].values() if isinstance(turns, list)
              for t in turns if isinstance(t, dict)}
    for lst in lists:
        row = by_query[lst["query_id"]]
        ids = [item["memory_id"] for item in lst["items"]]
        texts = [item["text"] for item in lst["items"]]
        assert len(ids) >= 2 and ids == sorted(ids) and len(set(texts)) == len(texts)
        assert lst["group_id"] == row["group_id"] in generator and lst["query_text"] == row["query_text"]
        assert set(ids) <= positives_of[row["group_id"]]
        assert not set(ids) & {t["memory_id"] for t in row["protected"]}
        assert not set(texts) & {t["text"] for t in row["protected"]}
        assert not {t.split(": ", 1)[-1] for t in texts} & locomo
    # a protected turn of one checkpoint that is another checkpoint's positive stays out of the first's list
    shared = [(row, t) for row in rows for t in row["protected"]
              if t["memory_id"] in positives_of[row["group_id"]]]
    for row, turn in shared[:20]:
        lst = next((x for x in lists if x["query_id"] == row["query_id"]), None)
        assert lst is None or turn["memory_id"] not in {i["memory_id"] for i in lst["items"]}


def test_benign_lists_enter_the_data_hash(tmp_path, real_root, monkeypatch):
    monkeypatch.delenv("MEMGATE_DATA", raising=False)
    cfg = resolve(dict(SMALL, real_text={"enabled": True, "real_data_root": str(real_root)}))
    meta = run(cfg, tmp_path / "d")
    path = tmp_path / "d" / "train" / "benign_lists.jsonl"
    assert "train/benign_lists.jsonl" in meta["data_files"] and _rows(path)
    path.write_text(path.read_text() + "\n", encoding="utf-8")
    assert data_hash(tmp_path / "d") != meta["data_hash"]


def test_real_candidates_deterministic(real_root, real_rows):
    cfg, rows, _info = real_rows
    again, _ = build_real_candidates(cfg, real_root)
    assert again == rows
    other, _ = build_real_candidates(resolve({"real_text": {"enabled": True}}, seed=1), real_root)
    assert [r["query_id"] for r in other] == [r["query_id"] for r in rows]  # same checkpoints


def test_generation_with_real_text_records_splits_and_hash(tmp_path, real_root, monkeypatch):
    from memgate.datasets.real.splits import make_real_splits

    monkeypatch.setenv("MEMGATE_DATA", str(real_root))
    cfg = resolve(dict(SMALL, real_text={"enabled": True}))
    a = run(cfg, tmp_path / "a")
    b = run(cfg, tmp_path / "b")
    assert a["data_hash"] == b["data_hash"]
    assert a["real_splits"] == make_real_splits(real_root)
    assert a["real_text"]["available"] is True and a["real_text"]["queries"] > 0
    rows = _rows(tmp_path / "a" / "train" / "real_candidates.jsonl")
    assert len(rows) == a["real_text"]["queries"]
    for split in SPLITS[1:]:
        assert not (tmp_path / "a" / split / "real_candidates.jsonl").exists()
    assert a["real_text_triples"] == 0  # counted after mining


def test_mined_real_triples_on_the_real_rows(real_rows):
    """The default spec on the real candidates (hashing encoder): volume and balance."""
    cfg, rows, _info = real_rows
    cos, matrix = _vector_matrix(rows)
    triples, stats = mine_real(rows, matrix, cfg["real_text"])
    assert len(triples) >= 7000
    for scen, s in stats.items():
        assert s["hard_negative_queries"] <= s["hard_positive_queries"], scen


def test_mine_real_refuses_candidates_written_before_the_other_episode_rule():
    """Rows without 'query_names' come from data generated before the rule: mining them would
    silently yield no other-episode negatives, so it raises and asks for regeneration."""
    rows = _fake_rows()
    cos, matrix = _vector_matrix(rows)
    stale = [{k: v for k, v in r.items() if k != "query_names"} for r in rows]
    with pytest.raises(ValueError, match="query_names"):
        mine_real(stale, matrix, {"negatives_per_positive": 1})


def test_query_names_skip_sentence_starts_the_pronoun_and_calendar_words():
    """Only capitalised words that name something: "Can you...? Please" starts sentences, "I" is
    the pronoun and "Sunday" / "March" are shared by every episode, so none of them counts even
    when a positive contains it; "Ember" and "Naomi's" (possessive dropped) do."""
    from data_gen.real_text import query_names

    positives = [{"memory_id": "t1", "text": "I told Naomi the Ember launch moves to Sunday in March; please confirm."}]
    query = "Can you check? Please tell me what I said to Naomi's team about Ember on Sunday in March."
    assert query_names(query, positives) == ["ember", "naomi"]
    assert query_names("Ember: when?", positives) == []  # the first word is never a name
    assert query_names("What did Dr. Naomi say? Ember is late.", positives) == ["naomi"]  # "Dr." ends no sentence
    assert query_names("When is Ember due?", []) == []  # nothing to share with


def test_wide_benign_lists_hold_own_history_up_to_as_of(real_root):
    """The wide definition (an ablation row): every item is a non-protected turn of the list's own
    generator episode up to the checkpoint's as_of; the lists are longer than the probe's; the
    candidates file never holds the history; a probe row cannot build a wide list."""
    from memgate.datasets.real.io_guard import forbid_report_parts

    cfg = resolve({"real_text": {"enabled": True, "real_data_root": str(real_root), "benign_lists": "wide"}})
    with forbid_report_parts():
        rows, _info = build_real_candidates(cfg, real_root)
    wide, probe = benign_lists(rows, "wide"), benign_lists(rows)
    by_query = {row["query_id"]: row for row in rows}
    for lst in wide:
        row = by_query[lst["query_id"]]
        history = {t["memory_id"]: t["text"] for t in row["history"]}
        assert {i["memory_id"] for i in lst["items"]} <= set(history)
        assert all(mid.startswith(row["group_id"] + ":") for mid in history)
        assert not {i["memory_id"] for i in lst["items"]} & {t["memory_id"] for t in row["protected"]}
        assert not {i["text"] for i in lst["items"]} & {t["text"] for t in row["protected"]}
    assert np.median([len(x["items"]) for x in wide]) > np.median([len(x["items"]) for x in probe])
    with pytest.raises(ValueError, match="history"):
        benign_lists([{k: v for k, v in row.items() if k != "history"} for row in rows], "wide")
    with pytest.raises(ValueError, match="real_text.benign_lists"):
        benign_lists(rows, "everything")
    with pytest.raises(ConfigError, match="real_text.benign_lists"):
        resolve({"real_text": {"benign_lists": "all"}})
