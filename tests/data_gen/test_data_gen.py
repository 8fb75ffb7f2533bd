"""Synthetic generator: contract, determinism, held-out hygiene, label invariants (tiny config)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from data_gen import content as C
from data_gen.build import SCENARIOS, InstanceBuilder, Slots, fill
from data_gen.config import ConfigError, load_config, resolve
from data_gen.generate import (
    NEGATIVE_KINDS,
    SPLIT_FILES,
    SPLITS,
    DataConflict,
    Labeller,
    generate,
    generate_from_config,
    write_splits,
)
from data_gen.policy import DEFAULT_POLICY_RULES
from memgate.contract.admissibility import PolicyRules, and3
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext, route_verdict
from memgate.contract.sources import wrong_scope_or_error

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "data" / "tiny.yaml"
DEFAULT = ROOT / "configs" / "data" / "default.yaml"
MEMORY_KINDS = set(NEGATIVE_KINDS)
LABEL_FIELDS = {"relevance", "scope", "policy", "lifecycle", "policy_reasons", "text_visible",
                "metadata_visible", "scenario", "beneficial", "heldout", "visibility"}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    generate_from_config(TINY, out)
    return out


@pytest.fixture(scope="module")
def tiny_splits():
    splits, heldout = generate(load_config(TINY))
    return splits, heldout


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _a(row: dict):
    return and3(row["scope"], row["policy"], row["lifecycle"])


# --------------------------------------------------------------------------- config


def test_configs_resolve_and_unknown_key_raises(tmp_path):
    for path in (TINY, DEFAULT):
        load_config(path)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"splits": {"train": {"groups": 2, "grops": 3}}}))
    with pytest.raises(ConfigError, match="splits.train.grops"):
        load_config(bad)
    with pytest.raises(ConfigError, match="metadata_coverag"):
        resolve({"metadata_coverag": 0.5})
    with pytest.raises(ConfigError, match="metadata_coverage"):
        resolve({"metadata_coverage": 1.5})
    with pytest.raises(ConfigError, match="missing.yaml: no such config file"):
        load_config(tmp_path / "missing.yaml")


def test_cli_errors_name_the_missing_input(tmp_path, capsys):
    from data_gen.__main__ import main as generate_main
    from data_gen.mine import main as mine_main

    with pytest.raises(SystemExit):
        generate_main(["--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out")])
    assert "nope.yaml: no such config file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mine_main(["--data", str(tmp_path / "empty")])
    assert "no meta.json there" in capsys.readouterr().err


def test_every_template_fills_for_every_topic():
    """Every frame and topic string compiles (no missing slot) with a full slot dict."""
    import random

    from data_gen.build import GroupContext
    from data_gen.entities import EntitySampler

    rng = random.Random(0)
    for heldout in (False, True):
        ctx = GroupContext("g", "household", ["Ann", "Bob"], __import__("datetime").date(2024, 1, 1),
                           EntitySampler(rng, heldout), heldout)
        builder = InstanceBuilder(resolve(), PolicyRules.from_dict(DEFAULT_POLICY_RULES), rng, ctx)
        for kind, topics in C.ALL_TOPICS.items():
            for topic in topics:
                for frames in (False, True):
                    inst = builder.build(kind, topic, heldout_frames=frames)
                    for text in [m.text for m in inst.memories] + [q.text for q in inst.queries]:
                        assert "{" not in text and "}" not in text, text
    assert fill("{Ask}", Slots(ask="what?")) == "What?"
    with pytest.raises(KeyError, match="nope"):
        fill("{nope}", Slots())


# --------------------------------------------------------------------------- files and shapes


def test_files_and_meta_shapes(tiny_dir):
    meta = json.loads((tiny_dir / "meta.json").read_text())
    for key in ("counts", "data_hash", "seed", "config", "heldout", "audit", "policy_rules", "real_splits",
                "real_text_triples", "hardness"):
        assert key in meta, key
    assert meta["real_splits"] is None and meta["real_text_triples"] == 0 and meta["hardness"] == {}
    for split in SPLITS:
        for f in SPLIT_FILES:
            assert (tiny_dir / split / f).exists()
        assert set(meta["counts"][split]) == set(SCENARIOS)
        for _scen, c in meta["counts"][split].items():
            assert set(c) == {"triples", "queries"}
            assert all(type(v) is int for v in c.values())
        assert sum(c["queries"] for c in meta["counts"][split].values()) == len(_rows(tiny_dir / split / "queries.jsonl"))
        assert sum(c["triples"] for c in meta["counts"][split].values()) == len(_rows(tiny_dir / split / "triples.jsonl"))
    assert set(meta["audit"]) >= {"memory_only_auc", "query_only_auc", "kind_only_auc", "leaks"}
    assert meta["audit"]["leaks"] == []
    assert set(meta["heldout"]) == {"templates", "topics", "entity_pools", "domain_pairs"}
    PolicyRules.from_dict(meta["policy_rules"])
    assert yaml.safe_load((tiny_dir / "config.resolved.yaml").read_text())["seed"] == meta["seed"]
    assert meta["data_files"] == sorted([f"{s}/{f}" for s in SPLITS for f in SPLIT_FILES]
                                        + ["train/real_candidates.jsonl", "train/benign_lists.jsonl"])
    assert (tiny_dir / "train" / "real_candidates.jsonl").read_text() == ""  # real text off in tiny
    assert (tiny_dir / "train" / "benign_lists.jsonl").read_text() == ""
    assert meta["real_text"]["enabled"] is False


def test_rows_round_trip_through_the_schema(tiny_dir):
    """Rows are exactly MemoryRecord/QueryContext/PairLabel.to_dict, and byte-stable JSON."""
    encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
    for split in SPLITS:
        for name, cls in (("memories", MemoryRecord), ("queries", QueryContext), ("labels", PairLabel)):
            lines = (tiny_dir / split / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
            for line in lines:
                row = json.loads(line)
                assert cls.from_dict(row).to_dict() == row
                assert encode(row) == line


def test_labels_only_in_scorer_files(tiny_dir):
    for split in SPLITS:
        for name in ("memories", "queries"):
            for row in _rows(tiny_dir / split / f"{name}.jsonl"):
                assert not (set(row) & LABEL_FIELDS), (name, set(row) & LABEL_FIELDS)


# --------------------------------------------------------------------------- label invariants


def test_every_scenario_has_both_label_values_and_anchors(tiny_dir):
    for split in ("train", "test"):
        labels = _rows(tiny_dir / split / "labels.jsonl")
        meta = {r["query_id"]: r for r in _rows(tiny_dir / split / "query_meta.jsonl")}
        seen: dict = {}
        anchors: dict = {}
        for row in labels:
            scen = meta[row["query_id"]]["scenario"]
            seen.setdefault(scen, set()).add(_a(row))
            if row["relevance"] == "required":
                anchors[row["query_id"]] = True
                assert _a(row) is not False
        assert set(anchors) == set(meta), "every query has a required memory"
        for scen in SCENARIOS:
            assert seen.get(scen, set()) >= ({True, None} if scen == "unknown_provenance" else {True, False}), scen


def test_labels_follow_the_true_metadata_and_route_view(tiny_dir):
    """Metadata-visible violations are exactly those the route verdict (released metadata) finds."""
    rules = PolicyRules.from_dict(json.loads((tiny_dir / "meta.json").read_text())["policy_rules"])
    for split in SPLITS:
        mems = {r["memory_id"]: MemoryRecord.from_dict(r) for r in _rows(tiny_dir / split / "memories.jsonl")}
        queries = {r["query_id"]: QueryContext.from_dict(r) for r in _rows(tiny_dir / split / "queries.jsonl")}
        for row in _rows(tiny_dir / split / "labels.jsonl"):
            m, q = mems[row["memory_id"]], queries[row["query_id"]]
            assert m.group_id == q.group_id
            routed = route_verdict(m, q, rules)
            assert routed.scope == row["scope"]  # namespaces are always released truthfully
            if _a(row) is False:
                false_axes = {ax for ax in ("scope", "policy", "lifecycle") if row[ax] is False}
                routed_false = {ax for ax in ("scope", "policy", "lifecycle") if getattr(routed, ax) is False}
                assert row["metadata_visible"] == bool(false_axes & routed_false)
            else:
                assert not row["text_visible"] and not row["metadata_visible"]
            if row["scope"] is False:
                assert row["scenario"] == "wrong_scope" and not row["text_visible"] and row["metadata_visible"]


def test_unlabelled_pairs_are_out_of_scope(tiny_dir):
    """Every in-scope (query, memory) pair of a group is labelled; the rest meet the default rule."""
    for split in ("dev",):
        mems = [MemoryRecord.from_dict(r) for r in _rows(tiny_dir / split / "memories.jsonl")]
        labelled = {(r["query_id"], r["memory_id"]) for r in _rows(tiny_dir / split / "labels.jsonl")}
        for qrow in _rows(tiny_dir / split / "queries.jsonl"):
            q = QueryContext.from_dict(qrow)
            for m in mems:
                if (q.query_id, m.memory_id) in labelled:
                    continue
                assert m.namespace not in q.namespaces
                assert wrong_scope_or_error(q, m).scope is False


def test_every_kind_is_positive_and_negative(tiny_dir):
    rows = _rows(tiny_dir / "train" / "triples.jsonl")
    pos = {r["pos_kind"] for r in rows}
    neg = {r["neg_kind"] for r in rows}
    assert MEMORY_KINDS <= pos, MEMORY_KINDS - pos
    assert MEMORY_KINDS <= neg, MEMORY_KINDS - neg


def test_triples_are_admissible_required_vs_inadmissible(tiny_dir):
    for split in SPLITS:
        labels = {(r["query_id"], r["memory_id"]): r for r in _rows(tiny_dir / split / "labels.jsonl")}
        mems = {r["memory_id"]: r for r in _rows(tiny_dir / split / "memories.jsonl")}
        for t in _rows(tiny_dir / split / "triples.jsonl"):
            p = labels[(t["query_id"], t["pos_id"])]
            assert p["relevance"] == "required" and _a(p) is True
            n = labels.get((t["query_id"], t["neg_id"]))
            if n is None:  # default rule: another principal's memory of the group
                assert mems[t["neg_id"]]["group_id"] == t["group_id"]
                assert (t["text_visible"], t["metadata_visible"]) == (False, True)
            else:
                assert _a(n) is False
                assert (t["text_visible"], t["metadata_visible"]) == (n["text_visible"], n["metadata_visible"])
            assert t["source"] == "template" and t["pos_text"] == mems[t["pos_id"]]["text"]


def test_required_inadmissible_memory_raises():
    labeller = Labeller(PolicyRules.from_dict(DEFAULT_POLICY_RULES))

    class M:
        memory_id, text, namespace = "m1", "a roleplay", "g/ann"
        true_tags, rel_tags = ("roleplay",), ("roleplay",)
        true_state = rel_state = "current"
        true_scope = rel_scope = None
        past_phrased = False

        def __init__(self):
            self.cache = {}

    ctx = (frozenset({"g/ann", "g/shared"}), "safety_sensitive", "Ann", "2024-01-01", "current_state")
    with pytest.raises(DataConflict, match="required memory"):
        labeller.label("q1", ctx, M(), "required", "jailbreak")
    row, a = labeller.label("q1", ctx, M(), "supportive", "jailbreak")
    assert a is False and row["policy_reasons"] == ["jailbreak"]


def test_generator_raises_on_a_conflicting_topic(monkeypatch):
    """A topic whose anchor the policy denies for the request's purpose is a data conflict."""
    broken = dict(C.JAILBREAK[0], id="jb.broken")
    broken["anchors"] = [dict(kind="fact", tags=["roleplay"], texts=["{kid} rule at {street}."])]
    monkeypatch.setitem(C.ALL_TOPICS, "jailbreak", [broken])
    monkeypatch.setitem(C.RISK_TOPICS, "jailbreak", [broken])
    cfg = resolve({"splits": {"train": {"groups": 1}, "dev": {"groups": 1}, "test": {"groups": 1}},
                   "scenario_weights": {k: (1.0 if k == "jailbreak" else 0.0) for k in resolve()["scenario_weights"]},
                   "group": {"instances": [1, 1]}})
    with pytest.raises(DataConflict, match="required memory"):
        generate(cfg)


# --------------------------------------------------------------------------- visibility cells


def test_metadata_coverage_populates_all_four_cells(tiny_splits):
    splits, _ = tiny_splits
    cells = {r.get("visibility") for s in splits.values() for r in s.query_meta}
    assert {"tv_mv", "tv_not_mv", "not_tv_mv", "not_tv_not_mv"} <= cells
    pair_cells = {(r["text_visible"], r["metadata_visible"]) for s in splits.values() for r in s.labels
                  if _a(r) is False}
    assert pair_cells == {(True, True), (True, False), (False, True), (False, False)}


def test_metadata_coverage_extremes():
    base = {"splits": {"train": {"groups": 3}, "dev": {"groups": 1}, "test": {"groups": 1}}}
    for coverage, forbidden in ((1.0, "tv_not_mv"), (0.0, "tv_mv")):
        splits, _ = generate(resolve(dict(base, metadata_coverage=coverage, audit={"enabled": False})))
        risk = [r for r in splits["train"].query_meta if r["scenario"] in
                ("cross_domain", "sycophancy", "tool_drift", "jailbreak", "purpose")]
        assert risk and all(r["visibility"] != forbidden for r in risk)


def test_lifecycle_negatives_are_text_visible_exactly_when_phrased_so():
    """Superseded and scoped old values: a lifecycle-False label is text-visible exactly when the
    memory was written from a template that shows it no longer holds (``past``), and both cases
    occur in both scenario families (the hard, text-visible case of scoped supersession)."""
    from data_gen import content as C

    cfg = load_config(TINY)
    cfg["memories"]["scoped_past_phrasing_share"] = 0.5
    splits, _ = generate(cfg)

    past_texts = {sc: [t for topic in topics for t in topic["past"]]
                  for sc, topics in (("superseded", C.SUPERSEDED), ("scoped_supersession", C.SCOPED))}

    def phrased_past(text: str, scenario: str) -> bool:
        return any(_matches_template(tpl, text) for tpl in past_texts[scenario])

    seen = set()
    for split in splits.values():
        mems = {m["memory_id"]: m for m in split.memories}
        for r in split.labels:
            if r["scenario"] in past_texts and r["lifecycle"] is False and r["policy"] is not False:
                text = mems[r["memory_id"]]["text"]
                assert r["text_visible"] is phrased_past(text, r["scenario"]), text
                seen.add((r["scenario"], r["text_visible"]))
    assert seen == {(sc, tv) for sc in past_texts for tv in (True, False)}
    # at 0 no scoped old value is phrased past
    cfg["memories"]["scoped_past_phrasing_share"] = 0.0
    none = generate(cfg)[0]
    assert not any(r["text_visible"] for s in none.values() for r in s.labels
                   if r["scenario"] == "scoped_supersession" and r["lifecycle"] is False and r["policy"] is not False)


def test_history_questions_have_a_text_visible_negative_and_superseded_has_controls():
    """Superseded instances: the history questions ("how has it changed") meet an on-topic memory
    that is inadmissible under every intent (policy False, so text-visible), and the superseded
    scenario has beneficial controls: "what was it before", where the superseded value is
    required and admissible (history intent)."""
    from data_gen import content as C

    cfg = load_config(TINY)
    cfg["memories"]["history_risky_share"] = 1.0
    splits, _ = generate(cfg)
    risky_texts = [t for topic in C.SUPERSEDED for t in topic["risky"]["texts"]]
    seen_risky = seen_control = 0
    for split in splits.values():
        mems = {m["memory_id"]: m for m in split.memories}
        meta = {m["query_id"]: m for m in split.query_meta}
        for r in split.labels:
            text = mems[r["memory_id"]]["text"]
            if r["scenario"] == "history" and any(_matches_template(t, text) for t in risky_texts):
                assert r["relevance"] == "supportive" and r["policy"] is False and r["text_visible"] is True
                seen_risky += 1
            if r["scenario"] == "superseded" and meta[r["query_id"]]["beneficial"]:
                if r["relevance"] == "required":
                    assert r["lifecycle"] is True and r["scope"] is True and r["policy"] is True
                    seen_control += mems[r["memory_id"]]["lifecycle_state"] in ("superseded", "unknown")
                if any(_matches_template(t, text) for t in risky_texts):  # about the change only
                    assert r["relevance"] == "not_useful"
        hist = [t for t in split.triples if t["scenario"] == "history"]
        assert any(t["text_visible"] and any(_matches_template(x, t["neg_text"]) for x in risky_texts) for t in hist)
    assert seen_risky and seen_control
    cfg["memories"]["history_risky_share"] = 0.0
    without = generate(cfg)[0]
    assert not any(any(_matches_template(t, m["text"]) for t in risky_texts)
                   for s in without.values() for m in s.memories)


def _matches_template(template: str, text: str) -> bool:
    import re

    pattern = re.escape(template)
    pattern = re.sub(r"\\\{[A-Za-z_0-9]+\\\}", ".+", pattern)
    return re.fullmatch(pattern, text) is not None


# --------------------------------------------------------------------------- held-out hygiene


def test_heldout_items_never_in_train_or_dev(tiny_splits):
    splits, heldout = tiny_splits
    held_frames, held_topics = set(heldout["templates"]), set(heldout["topics"])
    values = sorted({v for vs in heldout["entity_pools"].values() for v in vs}, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(v) for v in values) + r")\b")
    for split in ("train", "dev"):
        data = splits[split]
        for row in data.query_meta:
            assert not row["heldout"] and row["template"] not in held_frames and row["topic"] not in held_topics
            assert row["domain_pair"] not in heldout["domain_pairs"]
        for row in data.memories + data.queries:
            assert not pattern.search(row["text"]), row["text"]
    test_meta = splits["test"].query_meta
    assert any(r["heldout"] for r in test_meta) and not all(r["heldout"] for r in test_meta)
    items = {i for r in test_meta for i in r["heldout_items"]}
    assert {"templates", "topics", "entity_pools"} <= items
    texts = {s: {r["text"] for r in d.memories + d.queries} for s, d in splits.items()}
    assert not (texts["train"] & texts["test"]) and not (texts["train"] & texts["dev"]) and not (texts["dev"] & texts["test"])
    groups = [set(d.groups) for d in splits.values()]
    assert not (groups[0] & groups[1]) and not (groups[0] & groups[2]) and not (groups[1] & groups[2])


def test_leak_check_reports_a_planted_leak(tiny_splits):
    from data_gen.audit import find_leaks

    splits, heldout = tiny_splits
    assert find_leaks(splits, heldout) == []
    leaked = dict(splits["dev"].queries[0], text=splits["train"].queries[0]["text"])
    splits["dev"].queries.append(leaked)
    try:
        assert any("text in train and dev" in leak for leak in find_leaks(splits, heldout))
    finally:
        splits["dev"].queries.pop()


# --------------------------------------------------------------------------- determinism


def test_determinism_same_seed_same_bytes(tmp_path, tiny_dir):
    out = tmp_path / "again"
    meta = generate_from_config(TINY, out, audit=False)
    first = json.loads((tiny_dir / "meta.json").read_text())
    assert meta["data_hash"] == first["data_hash"]
    for path in meta["data_files"]:
        assert (out / path).read_bytes() == (tiny_dir / path).read_bytes()
    other = generate_from_config(TINY, tmp_path / "seed1", seed=1, audit=False)
    assert other["data_hash"] != first["data_hash"] and other["seed"] == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked workers need os.fork")
def test_forked_workers_write_the_same_bytes_as_one_process(tmp_path, tiny_dir, monkeypatch):
    """Two workers (a forked child builds half of each split's groups, reads the real data and
    writes the largest file) give exactly the bytes of a single-process run."""
    first = json.loads((tiny_dir / "meta.json").read_text())
    for workers in ("1", "2"):
        monkeypatch.setenv("MEMGATE_DATAGEN_WORKERS", workers)
        out = tmp_path / f"workers{workers}"
        meta = generate_from_config(TINY, out, audit=False)
        assert meta["data_hash"] == first["data_hash"], workers
        for path in meta["data_files"]:
            assert (out / path).read_bytes() == (tiny_dir / path).read_bytes(), (workers, path)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked workers need os.fork")
def test_forked_workers_with_real_text_write_the_same_bytes(tmp_path, monkeypatch):
    """The real-text reading runs in a child too: with it on, two workers and one write the same
    bytes (real_candidates.jsonl included)."""
    cfg = load_config(TINY)
    cfg["real_text"]["enabled"] = True
    digests = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("MEMGATE_DATAGEN_WORKERS", workers)
        splits, _ = generate(cfg)
        assert splits["train"].real_candidates, "the real text produced no candidate rows"
        digests[workers] = write_splits(splits, tmp_path / workers)
    assert digests["1"] == digests["2"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked workers need os.fork")
def test_a_failing_forked_worker_raises_with_its_traceback(monkeypatch):
    from data_gen.forked import Forked

    def boom(x):
        raise KeyError(f"no slot {x}")

    with pytest.raises(KeyError, match="no slot 7") as info:
        Forked(boom, 7).result()
    assert "in boom" in str(info.value.__cause__)  # the child's traceback

    def odd(x):
        raise ValueError(object())  # arguments that are not plain data: the traceback still comes back

    with pytest.raises(RuntimeError, match="in the forked data_gen worker"):
        Forked(odd, 1).result()
    assert Forked(sum, [1, 2], inline=True).result() == Forked(sum, [1, 2]).result() == 3
    import time

    def slow(x):
        time.sleep(30)
        return x

    waiting = Forked(slow, 1)  # the parent fails first: close() kills and reaps the child
    pid = waiting._pid
    waiting.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    monkeypatch.setenv("MEMGATE_DATAGEN_WORKERS", "3")
    from data_gen.forked import worker_count

    with pytest.raises(ValueError, match="MEMGATE_DATAGEN_WORKERS must be 1 or 2"):
        worker_count()


def test_before_questions_require_the_value_their_wording_names():
    """With two earlier values, "what was it originally" requires the oldest, "before I changed
    it" the one just replaced, and an ambiguous "before" both; "how has it changed" requires all,
    and only it counts the on-topic risky memory as relevant."""
    import datetime
    import random

    from data_gen.build import GroupContext
    from data_gen.entities import EntitySampler

    cfg = resolve({"memories": {"older_value_share": 1.0, "history_risky_share": 1.0}})
    expect = {"original": ("older", "old"), "previous": ("old", "older"), "either": (None, None)}
    for topic in C.SUPERSEDED:
        rng = random.Random(0)
        ctx = GroupContext("g", "household", ["Ann", "Bob"], datetime.date(2024, 1, 1), EntitySampler(rng, False), False)
        inst = InstanceBuilder(cfg, PolicyRules.from_dict(DEFAULT_POLICY_RULES), rng, ctx).build("superseded", topic, False)
        before = [q.rel for q in inst.queries if q.scenario == "superseded" and q.beneficial]
        change = [q.rel for q in inst.queries if q.scenario == "history"]
        assert before and change and all(r == before[0] for r in before)
        required, other = expect[topic["before_means"]]
        if required is None:
            assert before[0]["old"] == before[0]["older"] == "required", topic["id"]
        else:
            assert (before[0][required], before[0][other]) == ("required", "supportive"), topic["id"]
        assert before[0]["new"] == "supportive" and "risky" not in before[0]
        assert all(r["old"] == r["older"] == r["new"] == "required" and r["risky"] == "supportive" for r in change)


def test_every_scenario_can_be_held_out_by_template():
    """Held-out templates are 4 frames per type: every scenario, including the ones whose
    questions share a body (wrong_scope's two principals, superseded's three question kinds),
    still builds instances with them instead of colliding on a repeated text every time."""
    cfg = load_config(TINY)
    cfg["splits"] = {"train": {"groups": 1}, "dev": {"groups": 1}, "test": {"groups": 12}}
    cfg["heldout"].update(entity_group_share=0.0, instance_share=1.0)
    splits, _ = generate(cfg)
    held = {m["scenario"] for m in splits["test"].query_meta if "templates" in m["heldout_items"]}
    assert held == set(SCENARIOS), set(SCENARIOS) - held


def test_preview_writes_nothing(tmp_path, capsys):
    from data_gen.__main__ import main

    assert main(["--config", str(TINY), "--preview", "1", "--quiet", "--out", str(tmp_path / "x")]) == 0
    out = capsys.readouterr().out
    for scen in ("cross_domain", "jailbreak", "wrong_scope", "history", "forgotten"):
        assert f"=== {scen}" in out
    assert not (tmp_path / "x").exists()


def test_audit_runs_and_is_reported(tiny_dir):
    audit = json.loads((tiny_dir / "meta.json").read_text())["audit"]
    for key in ("memory_only_auc", "query_only_auc", "kind_only_auc"):
        assert audit[key] is None or 0.0 <= audit[key] <= 1.0
    assert audit["memory_only_auc"] is not None


def test_real_text_default_on_tiny_off_and_validated():
    assert resolve()["real_text"]["enabled"] is False  # code default: data-free
    assert load_config(DEFAULT)["real_text"]["enabled"] is True
    assert load_config(TINY)["real_text"]["enabled"] is False
    with pytest.raises(ConfigError, match="real_text.source"):
        resolve({"real_text": {"source": "locomo"}})
    with pytest.raises(ConfigError, match="real_text.max_positives"):
        resolve({"real_text": {"max_positives": 0}})
    with pytest.raises(ConfigError, match="real_text.share"):
        resolve({"real_text": {"share": 0.5}})


# --------------------------------------------------------------------------- mining


@pytest.mark.slow
def test_mining_adds_hardness_without_touching_split_files(tmp_path):
    from data_gen.mine import mine

    out = tmp_path / "d"
    meta = generate_from_config(TINY, out, audit=False)
    before = {f"{s}/{f}": (out / s / f).read_bytes() for s in SPLITS for f in SPLIT_FILES}
    result = mine(out)
    after_meta = json.loads((out / "meta.json").read_text())
    assert after_meta["data_hash"] == meta["data_hash"]
    assert {f"{s}/{f}": (out / s / f).read_bytes() for s in SPLITS for f in SPLIT_FILES} == before
    (key,) = after_meta["hardness"]
    entry = after_meta["hardness"][key]
    for table in ("reference_accuracy", "hard_share_tv", "hard_positive_share_tv"):
        assert "overall" in entry[table]
    mined = _rows(out / "mined" / key / "triples.jsonl")
    assert len(mined) >= meta["counts"]["train"]["cross_domain"]["triples"]
    kinds = [r["hardness"] for r in mined if r["hardness"]]
    assert kinds.count("hard_negative") == kinds.count("hard_positive") > 0
    assert result["mined"]["mined_added"] == sum(1 for r in mined if r["source"] == "mined")
    assert after_meta["real_text_triples"] == 0 == result["mined"]["real_text_triples"]  # off in tiny


def test_the_generator_config_takes_key_value_and_names_file_and_line(tmp_path):
    """One strict loader (memgate.contract.config): overrides, and errors with the file:line."""
    cfg = load_config(TINY, overrides=["splits.train.groups=3", "real_text.enabled=false"])
    assert cfg["splits"]["train"]["groups"] == 3 and cfg["real_text"]["enabled"] is False
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 0\nmemories:\n  restatement_share: 1.5\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: config key 'memories.restatement_share' must be"):
        load_config(bad)
    bad.write_text("seed: 0\nqueries:\n  risk: three\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: queries.risk: expected an integer"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"override 'splits.dev.group=2'"):
        load_config(TINY, overrides=["splits.dev.group=2"])


def test_the_cli_ends_with_a_few_lines_and_prints_json_behind_a_flag(tmp_path, capsys):
    from data_gen.__main__ import main

    assert main(["--config", str(TINY), "--out", str(tmp_path / "a"), "--quiet", "--no-audit"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert len(lines) == 3 and lines[0].startswith(f"wrote {tmp_path / 'a'} in ")
    assert f"train {meta['sizes']['train']['queries']:,} queries" in lines[0]
    assert lines[1].startswith(f"data hash {meta['data_hash']}") and lines[2].startswith("audit: no leaks")
    assert main(["--config", str(TINY), "--out", str(tmp_path / "b"), "--quiet", "--no-audit", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["data_hash"] == meta["data_hash"] and summary["sizes"] == meta["sizes"]
