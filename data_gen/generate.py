"""Deterministic synthetic preference data: groups -> instances -> records, labels and triples.

``generate_from_config(config_path, out_dir)`` writes::

    <out>/train|dev|test/{memories,queries,labels,triples,query_meta}.jsonl
    <out>/train/real_candidates.jsonl   (real phrasing candidates, data_gen.real_text; empty when off)
    <out>/train/benign_lists.jsonl      (benign real lists for ranking preservation; empty when off)
    <out>/meta.json  <out>/config.resolved.yaml

``data_hash`` (sha256 over the split files in sorted path order) covers exactly the split files.
Randomness: one seed; every group draws from its own ``random.Random`` seeded from
``memgate.contract.seeding.component_sequence(seed, "data_gen/<split>")`` children. No global state.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import heapq
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import yaml

from data_gen import content as C
from data_gen.build import SCENARIOS, GroupContext, Instance, InstanceBuilder
from data_gen.config import INSTANCE_TYPES, load_config, resolve
from data_gen.entities import HELDOUT_ENTITY_POOLS, EntitySampler
from data_gen.forked import Forked, worker_count
from data_gen.policy import default_policy_rules
from memgate.contract.admissibility import (
    INTENTS,
    LIFECYCLE_STATES,
    PolicyRules,
    effective_state,
    lifecycle_value,
)
from memgate.contract.records import QueryContext
from memgate.contract.seeding import component_sequence

SPLITS = ("train", "dev", "test")
SPLIT_FILES = ("memories.jsonl", "queries.jsonl", "labels.jsonl", "triples.jsonl", "query_meta.jsonl")
GROUP_ROWS = ("memories", "queries", "labels", "triples", "query_meta", "groups")  # SplitData row lists
REAL_CANDIDATES = "real_candidates.jsonl"  # train only (data_gen.real_text); always written
BENIGN_LISTS = "benign_lists.jsonl"  # train only (data_gen.real_text.benign_lists); always written
TRAIN_ONLY_FILES = (REAL_CANDIDATES, BENIGN_LISTS)
GENERATOR_VERSION = "2"  # 2: history-risky memories, "before" controls in superseded, scoped past phrasing on
# Memory kinds that are a scenario negative somewhere (inadmissible in some scenario).
NEGATIVE_KINDS = ("fact", "preference", "belief", "personality", "roleplay", "instruction", "correction",
                  "forget_directive", "state_value", "tool_config")


class DataConflict(ValueError):
    """A generated label contradicts the contract (e.g. a required memory with a = False)."""


@dataclass
class SplitData:
    name: str
    memories: list = field(default_factory=list)  # MemoryRecord.to_dict rows
    queries: list = field(default_factory=list)  # QueryContext.to_dict rows
    labels: list = field(default_factory=list)  # PairLabel.to_dict rows
    triples: list = field(default_factory=list)
    query_meta: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    real_candidates: list = field(default_factory=list)  # train only: data_gen.real_text rows
    benign_lists: list = field(default_factory=list)  # train only: data_gen.real_text.benign_lists
    real_info: Optional[dict] = None  # train only: what data_gen.real_text read (meta.json)

    def rows(self, filename: str) -> list:
        return getattr(self, filename.split(".")[0])

    def files(self) -> tuple:
        return split_file_names(self.name)


# --------------------------------------------------------------------------- labelling


class Labeller:
    """Three axes from the TRUE metadata (scorer) and the RELEASED metadata (what routes see).

    Every axis is computed with ``memgate.contract.admissibility`` (policy rules, effective state, the
    lifecycle table); results are memoised because a group asks the same few contexts many times.
    """

    def __init__(self, rules: PolicyRules):
        self.rules = rules
        self._policy: dict = {}
        self._life: dict = {}
        self._table = {(s, i): lifecycle_value(s, i) for s in LIFECYCLE_STATES for i in INTENTS}

    def policy(self, tags, purpose):
        key = (tags, purpose)
        hit = self._policy.get(key)
        if hit is None:
            hit = self._policy[key] = self.rules.evaluate(tags, purpose)
        return hit

    def lifecycle(self, state, scope, subject, time, intent):
        if scope is None:
            return self._table[(state, intent)]
        key = (state, scope, subject, time, intent)
        hit = self._life.get(key)
        if hit is None:
            hit = self._life[key] = lifecycle_value(effective_state(state, scope, subject, time), intent)
        return hit

    def axes(self, m, ctx: tuple) -> tuple:
        """(scope, policy, reasons, lifecycle, a, text_visible, metadata_visible) for a context
        ``ctx = (namespaces, purpose, subject, time, intent)``; memoised on the memory."""
        hit = m.cache.get(ctx)
        if hit is not None:
            return hit
        namespaces, purpose, subject, time, intent = ctx
        scope = m.namespace in namespaces
        policy, reasons = self.policy(m.true_tags, purpose)
        life = self.lifecycle(m.true_state, m.true_scope, subject, time, intent)
        if scope is False or policy is False or life is False:
            a = False
        elif scope is True and policy is True and life is True:
            a = True
        else:
            a = None
        tv = mv = False
        if a is False:
            r_policy, _ = self.policy(m.rel_tags, purpose)
            r_life = self.lifecycle(m.rel_state, m.rel_scope, subject, time, intent)
            # text: policy violations are written into the text by construction (domain, belief,
            # role-play, personality); lifecycle only when the value is phrased in the past tense;
            # scope never (first-person texts do not say whose they are).
            tv = (policy is False) or (life is False and m.past_phrased)
            mv = (scope is False) or (policy is False and r_policy is False) or (life is False and r_life is False)
        hit = m.cache[ctx] = (scope, policy, list(reasons) if policy is False else [], life, a, tv, mv)
        return hit

    def label(self, query_id: str, ctx: tuple, m, relevance: str, scenario: Optional[str]) -> tuple[dict, object]:
        scope, policy, reasons, life, a, tv, mv = self.axes(m, ctx)
        if relevance == "required" and a is False:
            raise DataConflict(
                f"required memory {m.memory_id!r} ({m.text!r}) is inadmissible for query {query_id!r}: "
                f"scope={scope}, policy={policy} {reasons}, lifecycle={life}"
            )
        row = {
            "query_id": query_id,
            "memory_id": m.memory_id,
            "relevance": relevance,
            "scope": scope,
            "policy": policy,
            "lifecycle": life,
            "policy_reasons": reasons,
            "text_visible": tv,
            "metadata_visible": mv,
            "scenario": scenario,
        }
        return row, a


# --------------------------------------------------------------------------- groups


def _rng_from(seq) -> random.Random:
    state = seq.generate_state(2)
    return random.Random(int(state[0]) << 32 | int(state[1]))


def _iso(day: dt.date) -> str:
    return day.isoformat()


class SplitGenerator:
    def __init__(self, cfg: dict, split: str, rules: PolicyRules, labeller: Labeller, forbidden: dict):
        self.cfg = cfg
        self.split = split
        self.rules = rules
        self.labeller = labeller
        self.forbidden = forbidden  # text -> split it already appears in (earlier splits)
        kinds = [k for k in INSTANCE_TYPES if cfg["scenario_weights"].get(k, 0) > 0]
        self.kinds = kinds
        self.weights = [float(cfg["scenario_weights"][k]) for k in kinds]
        self._word_cache: dict = {}

    def _words(self, text: str) -> frozenset:
        hit = self._word_cache.get(text)
        if hit is None:
            hit = self._word_cache[text] = _words(text)
        return hit

    def run(self, progress: bool = False, workers: int = 1) -> SplitData:
        """All groups of the split. Each group draws from its own seed, so with ``workers=2`` a
        forked child builds the second half while this process builds the first (same bytes)."""
        n = self.cfg["splits"][self.split]["groups"]
        children = component_sequence(self.cfg["seed"], f"data_gen/{self.split}").spawn(n)
        half = n // 2 if workers > 1 and n > 1 else n
        with Forked(self._group_rows, children, range(half, n), inline=half == n) as second:
            data = self._groups(children, range(half), progress, "" if half == n else f", 1st half of {n}")
            rest = second.result()
        for name, rows in zip(GROUP_ROWS, rest):
            getattr(data, name).extend(rows)
        return data

    def _group_rows(self, children: list, indices: range) -> tuple:
        """The rows of ``indices`` as plain lists (what the forked worker sends back)."""
        data = self._groups(children, indices)
        return tuple(getattr(data, name) for name in GROUP_ROWS)

    def _groups(self, children: list, indices: range, progress: bool = False, note: str = "") -> SplitData:
        data = SplitData(self.split)
        iterator: Iterable = indices
        if progress:  # this process's groups; the forked worker builds the other half silently
            from tqdm import tqdm

            iterator = tqdm(iterator, desc=f"generate {self.split}{note}", unit="group", leave=False)
        for g in iterator:
            self._group(g, _rng_from(children[g]), data)
        return data

    # ------------------------------------------------------------------
    def _group(self, index: int, rng: random.Random, data: SplitData) -> None:
        cfg = self.cfg
        group_id = f"{self.split}-g{index:05d}"
        test = self.split == "test"
        heldout_entities = test and rng.random() < cfg["heldout"]["entity_group_share"]
        ents = EntitySampler(rng, heldout_entities)
        lo, hi = cfg["group"]["principals"]
        principals = ents.sample("names", rng.randint(lo, hi))
        start = dt.date(2023, 3, 1)
        now = start + dt.timedelta(days=rng.randint(0, 960))
        ctx = GroupContext(group_id=group_id, group_type=rng.choice(cfg["group"]["types"]),
                           principals=principals, now=now, ents=ents, heldout_entities=heldout_entities)
        builder = InstanceBuilder(cfg, self.rules, rng, ctx)
        lo, hi = cfg["group"]["instances"]
        n_inst = rng.randint(lo, hi)
        used_topics: set = set()
        group_texts: set = set()
        instances: list[Instance] = []
        attempts = 0
        while len(instances) < n_inst and attempts < n_inst * 30:
            kind = rng.choices(self.kinds, self.weights)[0]
            for _ in range(10):  # redraw topic and values of the same kind on a text collision
                attempts += 1
                inst = self._try_instance(kind, builder, rng, test, heldout_entities, used_topics, group_texts)
                if inst is not None:
                    instances.append(inst)
                    break
        self._assemble(group_id, ctx, instances, rng, data)

    def _try_instance(self, kind, builder, rng, test, heldout_entities, used_topics, group_texts):
        cfg = self.cfg
        held_inst = test and not heldout_entities and rng.random() < cfg["heldout"]["instance_share"]
        held_topic = held_inst and rng.random() < cfg["heldout"]["topic_share"]
        topic = builder.choose_topic(kind, held_topic, used_topics)
        if topic is None and held_topic:
            held_topic = False
            topic = builder.choose_topic(kind, False, used_topics)
        if topic is None:
            return None
        inst = builder.build(kind, topic, heldout_frames=held_inst)
        texts = [m.text for m in inst.memories] + [q.text for q in inst.queries]
        if len(set(texts)) != len(texts) or any(t in self.forbidden or t in group_texts for t in texts):
            return None  # a text collision: draw again (deterministically)
        used_topics.add(topic["id"])
        group_texts.update(texts)
        items = []
        if heldout_entities:
            items.append("entity_pools")
        if held_inst:
            items.append("templates")
        if held_topic:
            items.append("topics")
            if inst.domain_pair and tuple(inst.domain_pair.split("->")) in C.HELDOUT_DOMAIN_PAIRS:
                items.append("domain_pairs")
        inst.heldout_items = items
        return inst

    def _assemble(self, group_id: str, ctx: GroupContext, instances: list, rng: random.Random,
                  data: SplitData) -> None:
        ns_of = {p: f"{group_id}/{p.lower()}" for p in ctx.principals}
        shared_ns = f"{group_id}/shared"
        mems = []
        for i, inst in enumerate(instances):
            for m in inst.memories:
                m.instance = i
                m.namespace = shared_ns if m.owner == "shared" else ns_of[m.owner]
                mems.append(m)
        rng.shuffle(mems)
        for j, m in enumerate(mems):
            m.memory_id = f"{group_id}-m{j:03d}"
        by_time = sorted(mems, key=lambda m: (-m.age_days, m.memory_id))
        order = {m.memory_id: k for k, m in enumerate(by_time)}
        for m in mems:
            created = ctx.now - dt.timedelta(days=m.age_days)
            # the exact shape of MemoryRecord.to_dict (checked by the tests)
            data.memories.append({
                "memory_id": m.memory_id, "text": m.text, "namespace": m.namespace, "kind": m.kind,
                "domain": m.domain, "policy_tags": None if m.rel_tags is None else list(m.rel_tags),
                "lifecycle_state": m.rel_state,
                "supersession_scope": None if m.rel_scope is None else {
                    "subject": m.rel_scope.subject, "valid_from": m.rel_scope.valid_from,
                    "valid_to": m.rel_scope.valid_to},
                "released_order": order[m.memory_id], "created_at": _iso(created),
                "observed_at": _iso(created), "provenance": m.provenance, "group_id": group_id,
            })
        key_of = {(m.instance, m.key): m for m in mems}
        self._group_mems = mems
        self._group_words = [(m, self._words(m.text)) for m in mems]
        readable_of = {p: [m for m in mems if m.namespace in (ns_of[p], shared_ns)] for p in ctx.principals}
        queries = []
        for i, inst in enumerate(instances):
            for q in inst.queries:
                q.instance = i
                queries.append(q)
        rng.shuffle(queries)
        now_iso = _iso(ctx.now)
        for j, q in enumerate(queries):
            q.query_id = f"{group_id}-q{j:03d}"
            inst = instances[q.instance]
            qctx = QueryContext(
                query_id=q.query_id, text=q.text, principal=q.principal.lower(),
                namespaces=frozenset({ns_of[q.principal], shared_ns}), purpose=q.purpose, intent=q.intent,
                time=q.time or now_iso, subject=q.subject or q.principal, group_id=group_id,
            )
            readable = readable_of[q.principal]
            data.queries.append({  # the exact shape of QueryContext.to_dict (checked by the tests)
                "query_id": qctx.query_id, "text": qctx.text, "principal": qctx.principal,
                "namespaces": sorted(qctx.namespaces), "purpose": qctx.purpose, "intent": qctx.intent,
                "time": qctx.time, "subject": qctx.subject, "group_id": group_id,
            })
            self._label_query(q, qctx, inst, readable, key_of, rng, data)
        data.groups.append(group_id)

    def _label_query(self, q, qctx, inst, readable, key_of, rng, data) -> None:
        labels: dict = {}
        adm: dict = {}
        label = self.labeller.label
        own_keys = q.rel
        qid = q.query_id
        ctx = (qctx.namespaces, qctx.purpose, qctx.subject, qctx.time, qctx.intent)
        seen = set()
        axes = self.labeller.axes
        append = data.labels.append
        inst_i, scen = q.instance, q.scenario
        for m in readable:
            if m.instance == inst_i:
                row, a = label(qid, ctx, m, own_keys.get(m.key, "not_useful"), scen)
            else:  # background memory of another instance: not_useful, never required (inlined)
                n, g, reasons, life, a, tv, mv = m.cache.get(ctx) or axes(m, ctx)
                row = {"query_id": qid, "memory_id": m.memory_id, "relevance": "not_useful", "scope": n,
                       "policy": g, "lifecycle": life, "policy_reasons": reasons, "text_visible": tv,
                       "metadata_visible": mv, "scenario": None}
            labels[m.memory_id] = row
            adm[m.memory_id] = a
            seen.add(m.memory_id)
            append(row)
        for k in own_keys:  # explicit labels for the instance's memories outside the readable set
            m = key_of[(q.instance, k)]
            if m.memory_id not in seen:
                row, a = label(qid, ctx, m, own_keys[k], q.scenario)
                labels[m.memory_id] = row
                adm[m.memory_id] = a
                data.labels.append(row)
        if not any(r == "required" for r in own_keys.values()):
            raise DataConflict(f"query {q.query_id!r} has no required memory")
        cell = inst.cell
        if inst.kind != "unknown_provenance":
            neg_flags = set()
            for k, r in own_keys.items():
                mid = key_of[(q.instance, k)].memory_id
                if r == "supportive" and adm.get(mid) is False:
                    neg_flags.add((labels[mid]["text_visible"], labels[mid]["metadata_visible"]))
            if len(neg_flags) == 1:
                cell = neg_flags.pop()
        meta = {
            "query_id": q.query_id, "group_id": qctx.group_id, "scenario": q.scenario,
            "beneficial": q.beneficial, "heldout": bool(inst.heldout_items),
            "heldout_items": list(inst.heldout_items), "template": q.template, "topic": inst.topic,
            "domain_pair": inst.domain_pair, "intent": q.intent, "purpose": q.purpose,
        }
        if cell is not None:
            tv, mv = cell
            meta.update(text_visible=tv, metadata_visible=mv,
                        visibility=f"{'tv' if tv else 'not_tv'}_{'mv' if mv else 'not_mv'}")
        data.query_meta.append(meta)
        if inst.kind == "unknown_provenance":
            return  # unresolved labels: no preferences are derived from them
        self._triples(q, qctx, inst, key_of, labels, adm, rng, data)

    def _triples(self, q, qctx, inst, key_of, labels, adm, rng, data) -> None:
        tcfg = self.cfg["triples"]
        pos = [key_of[(q.instance, k)] for k, r in sorted(q.rel.items()) if r == "required"]
        pos = [m for m in pos if adm.get(m.memory_id) is True]
        inst_negs = [m for m in self._group_mems if m.instance == q.instance and adm.get(m.memory_id) is False]
        extra = tcfg["extra_negatives_train"] if self.split == "train" else tcfg["extra_negatives"]
        n_group = extra if inst_negs else tcfg["fallback_negatives"]
        count = 0
        heldout = bool(inst.heldout_items)

        def emit(p, n, flags):
            nonlocal count
            data.triples.append({
                "triple_id": f"{q.query_id}-t{count:02d}", "group_id": qctx.group_id, "query_id": q.query_id,
                "scenario": q.scenario, "query_text": q.text, "pos_id": p.memory_id, "pos_text": p.text,
                "neg_id": n.memory_id, "neg_text": n.text, "pos_kind": p.kind, "neg_kind": n.kind,
                "text_visible": flags[0], "metadata_visible": flags[1], "heldout": heldout,
                "beneficial": q.beneficial, "source": "template",
            })
            count += 1

        group_negs = []
        if n_group and pos:
            # Other instances' inadmissible memories, the most word-overlapping with the query first
            # (a text-only hardness proxy; the encoder-based selection is data_gen.mine's job).
            q_words = self._words(q.text)
            cands = []
            for m, m_words in self._group_words:
                if m.instance == q.instance:
                    continue
                row = labels.get(m.memory_id)
                if row is None:  # outside the readable namespaces: default rule (scope False)
                    flags = (False, True)
                elif adm[m.memory_id] is False:
                    flags = (row["text_visible"], row["metadata_visible"])
                else:
                    continue
                cands.append((-len(q_words & m_words), m.memory_id, m, flags))
            # ties: memory ids (shuffled within the group); nsmallest = sorted(...)[:n_group]
            group_negs = [(c[2], c[3]) for c in heapq.nsmallest(n_group, cands, key=lambda c: (c[0], c[1]))]
        for p in pos:
            for n in inst_negs:
                row = labels[n.memory_id]
                emit(p, n, (row["text_visible"], row["metadata_visible"]))
            for n, flags in group_negs:
                emit(p, n, flags)


_STOP = frozenset("""a an and are at be but by can did do does for from has have how i i'd i'm in is it
it's me my of on or our so that the their them there these this to was we what when where which who
why will with you your please could would should""".split())


def _words(text: str) -> frozenset:
    words = {w.strip(".,;:!?'\"()") for w in text.lower().split()}
    words.discard("")
    return frozenset(words - _STOP)


# --------------------------------------------------------------------------- top level


def generate(cfg: dict, progress: bool = False) -> tuple[dict, dict]:
    """Build every split in memory; returns (splits, heldout description).

    With ``real_text.enabled`` the train split also carries the real-phrasing candidate rows
    (``splits["train"].real_candidates``) and what was read (``.real_info``)."""
    workers = worker_count()
    real = None
    if cfg["real_text"]["enabled"]:  # read the real data in a child while this process generates
        from data_gen.real_text import build_real_candidates

        real = Forked(build_real_candidates, cfg, inline=workers == 1)
    rules = PolicyRules.from_dict(default_policy_rules())
    labeller = Labeller(rules)
    forbidden: dict = {}
    splits = {}
    was_enabled = gc.isenabled()
    gc.disable()  # ~10^5 small dicts that all stay alive: collection passes only cost time
    try:
        for split in SPLITS:
            data = SplitGenerator(cfg, split, rules, labeller, forbidden).run(progress, workers)
            for row in data.memories:
                forbidden.setdefault(row["text"], split)
            for row in data.queries:
                forbidden.setdefault(row["text"], split)
            splits[split] = data
        real_rows: list = []
        real_info = {"enabled": False, "available": None, "queries": 0, "note": "real_text.enabled is false"}
        if real is not None:
            real_rows, real_info = real.result()
            if not real_info["available"]:
                import logging

                logging.getLogger(__name__).warning("%s", real_info["note"])
    finally:
        if real is not None:
            real.close()  # a no-op after result(); reaps the child when generation failed first
        if was_enabled:
            gc.enable()
    if real_rows:
        from data_gen.real_text import benign_lists

        splits["train"].benign_lists = benign_lists(real_rows, cfg["real_text"]["benign_lists"])
    # the wide definition's per-row history builds the lists only: the candidates file never holds it
    splits["train"].real_candidates = [{k: v for k, v in row.items() if k != "history"} for row in real_rows]
    splits["train"].real_info = real_info
    return splits, heldout_description()


def heldout_description() -> dict:
    return {
        "templates": list(C.HELDOUT_FRAMES),
        "topics": C.heldout_topics(),
        "entity_pools": HELDOUT_ENTITY_POOLS,
        "domain_pairs": [f"{a}->{b}" for a, b in C.HELDOUT_DOMAIN_PAIRS],
    }


def counts_of(splits: dict) -> dict:
    counts = {}
    for split, data in splits.items():
        c = {s: {"triples": 0, "queries": 0} for s in SCENARIOS}
        for row in data.query_meta:
            c[row["scenario"]]["queries"] += 1
        for row in data.triples:
            c[row["scenario"]]["triples"] += 1
        counts[split] = c
    return counts


def sizes_of(splits: dict) -> dict:
    out = {}
    all_texts: set = set()
    for split, data in splits.items():
        texts = {r["text"] for r in data.memories} | {r["text"] for r in data.queries}
        all_texts |= texts
        cells: dict = {}
        for row in data.query_meta:
            cells[row.get("visibility")] = cells.get(row.get("visibility"), 0) + 1
        out[split] = {
            "groups": len(data.groups), "queries": len(data.queries), "memories": len(data.memories),
            "labels": len(data.labels), "triples": len(data.triples),
            "triples_text_visible": sum(1 for t in data.triples if t["text_visible"]),
            "unique_texts": len(texts),
            "heldout_queries": sum(1 for r in data.query_meta if r["heldout"]),
            "beneficial_queries": sum(1 for r in data.query_meta if r["beneficial"]),
            "visibility_queries": {str(k): v for k, v in sorted(cells.items(), key=lambda kv: str(kv[0]))},
        }
    out["unique_texts_all_splits"] = len(all_texts)
    return out


_J = {True: "true", False: "false", None: "null"}


def _label_line(row: dict, encode, reasons_json: dict) -> str:
    """One labels.jsonl line, byte-identical to the sorted-key JSON encoder (checked by the tests).
    Ids, scenario names and reason codes are plain ASCII words, so they need no escaping; the few
    distinct reason lists are encoded once (``reasons_json``: tuple -> JSON)."""
    reasons = tuple(row["policy_reasons"])
    scen = row["scenario"]
    encoded = reasons_json.get(reasons)
    if encoded is None:
        encoded = reasons_json[reasons] = encode(list(reasons))
    return (
        f'{{"lifecycle": {_J[row["lifecycle"]]}, "memory_id": "{row["memory_id"]}", '
        f'"metadata_visible": {_J[row["metadata_visible"]]}, "policy": {_J[row["policy"]]}, '
        f'"policy_reasons": {encoded}, "query_id": "{row["query_id"]}", '
        f'"relevance": "{row["relevance"]}", "scenario": {"null" if scen is None else chr(34) + scen + chr(34)}, '
        f'"scope": {_J[row["scope"]]}, "text_visible": {_J[row["text_visible"]]}}}\n'
    )


def _write_jsonl(path: Path, rows: list) -> None:
    """Sorted-key JSON lines, byte-identical to ``memgate.contract.records.write_jsonl`` (one encoder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
    with path.open("w", encoding="utf-8") as handle:
        if path.name == "labels.jsonl":
            reasons_json: dict = {}
            handle.writelines(_label_line(row, encode, reasons_json) for row in rows)
        else:
            handle.writelines(encode(row) + "\n" for row in rows)


def write_splits(splits: dict, out_dir: Path) -> str:
    """Write the split files; return the data hash over exactly them (sorted path order).

    With two workers a forked child writes the largest file (train labels, about half the bytes)
    while this process writes the others."""
    out_dir = Path(out_dir)
    jobs = [(out_dir / split / filename, data.rows(filename))
            for split, data in splits.items() for filename in data.files()]
    largest = max(range(len(jobs)), key=lambda i: len(jobs[i][1])) if jobs else None
    if largest is not None and worker_count() > 1:
        jobs[largest][0].parent.mkdir(parents=True, exist_ok=True)  # before the fork: no race
        with Forked(_write_jsonl, *jobs.pop(largest)) as child:
            for path, rows in jobs:
                _write_jsonl(path, rows)
            child.result()
    else:
        for path, rows in jobs:
            _write_jsonl(path, rows)
    return data_hash(out_dir)


def split_file_names(split: str) -> tuple:
    return SPLIT_FILES + (TRAIN_ONLY_FILES if split == "train" else ())


def split_file_paths(out_dir: Path) -> list[Path]:
    from data_gen.real_phrasing import PHRASING_CANDIDATES

    paths = [Path(out_dir) / s / f for s in SPLITS for f in split_file_names(s)]
    phrasing = Path(out_dir) / "train" / PHRASING_CANDIDATES  # only when a source is enabled
    if phrasing.exists():
        paths.append(phrasing)
    return sorted(paths, key=lambda p: p.relative_to(out_dir).as_posix())


def data_hash(out_dir: Path) -> str:
    h = hashlib.sha256()
    for path in split_file_paths(out_dir):
        h.update(path.relative_to(out_dir).as_posix().encode("utf-8") + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def write_meta(out_dir: Path, meta: dict) -> None:
    path = Path(out_dir) / "meta.json"
    path.write_text(json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def read_meta(out_dir: Path) -> dict:
    return json.loads((Path(out_dir) / "meta.json").read_text(encoding="utf-8"))


def run(cfg: dict, out_dir: Path, progress: bool = False, audit: Optional[bool] = None) -> dict:
    """Generate, write and describe one data directory; returns meta."""
    out_dir = Path(out_dir)
    splits, heldout = generate(cfg, progress)
    for stale in [*(out_dir / s for s in SPLITS), out_dir / "mined"]:
        if stale.exists():
            shutil.rmtree(stale)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.resolved.yaml").write_text(yaml.safe_dump(cfg, sort_keys=True), encoding="utf-8")
    digest = write_splits(splits, out_dir)
    from data_gen.real_phrasing import write_candidates

    real_phrasing = write_candidates(cfg, out_dir)  # train/phrasing_candidates.jsonl (issue 15)
    if real_phrasing is not None:
        digest = data_hash(out_dir)
    do_audit = cfg["audit"]["enabled"] if audit is None else audit
    if do_audit:
        from data_gen.audit import run_audit

        audit_result = run_audit(splits, heldout, cfg)
    else:
        from data_gen.audit import find_leaks

        audit_result = {"memory_only_auc": None, "query_only_auc": None, "kind_only_auc": None,
                        "leaks": find_leaks(splits, heldout), "skipped": True}
    real_text = dict(splits["train"].real_info or {})
    real_splits = real_text.pop("real_splits", None)
    meta = {
        "generator_version": GENERATOR_VERSION,
        "seed": cfg["seed"],
        "config": cfg,
        "counts": counts_of(splits),
        "sizes": sizes_of(splits),
        "data_hash": digest,
        "data_files": [p.relative_to(out_dir).as_posix() for p in split_file_paths(out_dir)],
        "heldout": heldout,
        "audit": audit_result,
        "policy_rules": default_policy_rules(),
        "scenarios": list(SCENARIOS),
        "negative_kinds": list(NEGATIVE_KINDS),
        "real_splits": real_splits,
        "real_text": real_text,
        "real_text_triples": 0,  # training triples from real text: set by data_gen.mine
        "real_phrasing": real_phrasing,  # None unless a real_phrasing source is enabled
        "real_phrasing_triples": 0,  # set by data_gen.mine
        "hardness": {},
    }
    write_meta(out_dir, meta)
    return meta


def generate_from_config(config_path: Path, out_dir: Path, seed: Optional[int] = None,
                         progress: bool = False, audit: Optional[bool] = None) -> dict:
    """The entry point other tools call: load ``config_path`` and write ``out_dir``."""
    return run(load_config(Path(config_path), seed), Path(out_dir), progress=progress, audit=audit)


def generate_from_dict(raw: Optional[dict], out_dir: Path, seed: Optional[int] = None, **kwargs) -> dict:
    return run(resolve(raw, seed), Path(out_dir), **kwargs)
