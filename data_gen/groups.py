"""One split's groups: ``SplitGenerator`` draws each group from its own seed (entities, a
timeline, scenario instances), assembles its memories, queries, labels and triples, and picks
the group negatives by word overlap."""

from __future__ import annotations

import datetime as dt
import heapq
import random
from collections.abc import Iterable

from data_gen import content as C
from data_gen.build import GroupContext, Instance, InstanceBuilder
from data_gen.config import INSTANCE_TYPES
from data_gen.entities import EntitySampler
from data_gen.forked import Forked
from data_gen.labelling import DataConflict, Labeller
from data_gen.split_files import GROUP_ROWS, SplitData
from memgate.contract.admissibility import PolicyRules
from memgate.contract.records import QueryContext
from memgate.contract.seeding import component_sequence


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


__all__ = ["SplitGenerator"]
