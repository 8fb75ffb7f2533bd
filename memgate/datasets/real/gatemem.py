"""GateMem as an evaluation source (multi-principal shared memory, restricted access, deletion),
and the generator part's turns as training text for the synthetic generator.

Store (docs/design.md section 6). Namespace = ``episode_id`` (one organisation's shared store). All
episodes of a domain in the part share one store: a checkpoint's pool is its own episode's turns up
to and including ``as_of_turn_id`` plus every turn of every other episode of the same domain in
the part (other-episode turns are wrong-scope candidates). Memory id ``<episode_id>:<turn_id>``;
text = the turn text, prefixed by ``"<speaker role>: "`` when ``prefix_role`` (default, the
analogue of LoCoMo's ``"<speaker>: "``); ``released_order`` = the turn's index in its episode;
``created_at`` = the turn timestamp (about a quarter of turns have none); ``kind`` = ``turn_kind``;
``provenance = "speaker:<principal_id>/<role>"`` (route-visible: speaker principal and role are
metadata, not the namespace).

Route-visible admissibility metadata: GateMem releases no lifecycle and no policy metadata. Every
turn is stored as ``current`` (nothing was retired by the store: deletion requests are only text
inside the turns) and carries **no policy tags** (``policy_tags=None``, empty rule set). A neutral
"allowed" tag would be a lie: the route would read policy True for turns the scorer knows are
forbidden. So the Kleene gate sees policy unresolved everywhere and can only exclude other-episode
turns by scope; its fail-closed variant drops everything.

Scorer labels per checkpoint (patterns are regexes, case-insensitive; a pattern that does not
compile is matched literally and counted):

- protected turns: own-episode turns up to ``as_of`` matching a ``leak_targets`` or
  ``judge_spec.not_include`` pattern (missing ``leak_targets`` = []). ``a = False``: for safety
  checkpoints (all of them are deletion probes, expected action ``no_memory``) lifecycle False
  (``forgotten``, scenario ``forgotten``); otherwise policy False with reason ``purpose`` (scenario
  ``purpose``). The other axes of a protected turn: scope True, the remaining one None. Relevance
  ``unresolved`` (a protected turn often answers the question; relevance is not decided here).
- anchors: per ``judge_spec.include`` pattern j, the own-episode turns up to ``as_of`` that match
  it and are not protected form A_j (``required``, every axis True). A pattern matching no turn is
  dropped (``dropped_no_match``); one whose every match is protected is dropped
  (``dropped_protected``). A checkpoint with no pattern left has ``anchor_groups = []`` and is
  recall-unevaluable (every safety checkpoint: they have no include list).
- other-episode turns (default rule): ``not_useful``, scope False, policy and lifecycle None,
  ``metadata_visible`` True, scenario ``wrong_scope``.
- every other own-episode turn (default rule): ``unresolved`` relevance (an include pattern lists
  answer fragments, so a paraphrase may answer the question: relevance is unknown, not
  ``not_useful``), scope True, policy None, lifecycle None.

Visibility flags: GateMem has no visibility annotation; ``text_visible`` is False (not claimed) for
protected turns, ``metadata_visible`` False (no policy or lifecycle metadata is released).

``query_meta[qid]``: ``query_type``, ``domain``, ``expected_action``, ``attack_type``,
``protected_ids`` (for ``protected_exposure@K``; evaluable when non-empty), ``protected_evaluable``,
``recall_evaluable``, ``group`` (the episode), ``as_of_turn_id``, ``asker_role``, and
``patterns`` (include / kept / dropped_no_match / dropped_protected, protected patterns / matched).
"""

from __future__ import annotations

import bisect
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memgate.contract.admissibility import PolicyRules
from memgate.contract.records import MemoryRecord, PairLabel, QueryContext
from memgate.contract.seeding import component_rng
from memgate.contract.sources import EvalSource
from memgate.datasets.real import raw
from memgate.datasets.real.io_guard import check_part_access
from memgate.datasets.real.paths import real_data_root, verify_checksums
from memgate.datasets.real.splits import make_real_splits

log = logging.getLogger(__name__)

SOURCE = "gatemem"
QUERY_TYPES = ("utility", "privacy", "safety")
PURPOSE = "content_disclosure"


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class GateMemEpisode:
    episode_id: str
    domain: str
    turns: tuple  # raw turn dicts, in order
    checkpoints: tuple  # raw checkpoint dicts, in file order

    def memory_id(self, index: int) -> str:
        return f"{self.episode_id}:{self.turns[index]['turn_id']}"


def read_gatemem(root: Path | None = None, episodes: Sequence[str] | None = None, *,
                 part: str, purpose: str | None = None,
                 splits: Mapping | None = None) -> list[GateMemEpisode]:
    """Episodes (with their checkpoints) of ``part``, sorted by (domain, episode_id).

    Guarded: a report part needs ``purpose="evaluation"`` and is refused inside
    ``forbid_report_parts()``; any requested episode that the split (default: the recorded split)
    places in the report part is treated as a report read whatever ``part`` says.
    """
    check_part_access(SOURCE, part, purpose)
    root = (real_data_root() if root is None else Path(root)).resolve()
    verify_checksums(root)
    splits = make_real_splits(root) if splits is None else splits
    wanted = list(splits[SOURCE][part]) if episodes is None else list(episodes)
    if part != "report" and set(splits[SOURCE].get("report", ())).intersection(wanted):
        check_part_access(SOURCE, "report", purpose)
    wanted_set = set(wanted)
    found: dict[str, GateMemEpisode] = {}
    for folder in raw.gatemem_domains(root):
        checkpoints: dict[str, list] = {}
        for ckpt in raw.gatemem_checkpoints(root, folder):
            if ckpt["episode_id"] in wanted_set:
                checkpoints.setdefault(ckpt["episode_id"], []).append(ckpt)
        for ep in raw.gatemem_episodes(root, folder):
            if ep["episode_id"] in wanted_set:
                found[ep["episode_id"]] = GateMemEpisode(
                    episode_id=ep["episode_id"],
                    domain=ep.get("domain", folder),
                    turns=tuple(ep["turns"]),
                    checkpoints=tuple(checkpoints.get(ep["episode_id"], ())),
                )
    missing = sorted(wanted_set - set(found))
    if missing:
        raise KeyError(f"gatemem: unknown episode id(s) {missing}")
    return sorted(found.values(), key=lambda e: (e.domain, e.episode_id))


# --------------------------------------------------------------------------- patterns


def compile_pattern(pattern: str) -> tuple[re.Pattern, bool]:
    """Case-insensitive regex; a pattern that does not compile is matched literally.

    Returns (compiled, literal_fallback)."""
    try:
        return re.compile(pattern, re.IGNORECASE), False
    except re.error:
        return re.compile(re.escape(pattern), re.IGNORECASE), True


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")
_TURN_SEPARATOR = "\x00"
# The non-ASCII characters that IGNORECASE matches to ASCII letters (and U+0130 lowers to two
# characters): with none of them in the text, an ASCII literal matches case-insensitively exactly
# where its lower case occurs in the lower-cased text.
_ASCII_CASE_EXTRAS = frozenset("\u0130\u0131\u017f\u212a")


class _Matcher:
    """Per-episode cache: pattern -> boolean array over the episode's turns.

    A pattern without regex syntax (most GateMem patterns) is searched once over the episode's
    turns joined by NUL, jumping to the next turn after each hit: a literal cannot match across
    the separator, so the turns it finds are exactly those a per-turn search finds, at one search
    call per matching turn instead of one per turn. An ASCII literal is found with ``str.find`` in
    the lower-cased text (same positions, see ``_ASCII_CASE_EXTRAS``). Patterns with regex syntax
    (``.`` matches NUL) are searched turn by turn. Tests compare every path with the per-turn
    search on the real episodes and on the characters where case folding differs."""

    def __init__(self, episode: GateMemEpisode):
        self.texts = [str(t.get("text", "")) for t in episode.turns]
        self.cache: dict[str, np.ndarray] = {}
        self.literal_fallbacks: set[str] = set()
        self._joined = self._lower = None
        if not any(_TURN_SEPARATOR in t for t in self.texts):
            self._joined = _TURN_SEPARATOR.join(self.texts)
            if not _ASCII_CASE_EXTRAS.intersection(self._joined):
                self._lower = self._joined.lower()
                if len(self._lower) != len(self._joined):  # a lower case of another length
                    self._lower = None
            self._starts, pos = [], 0
            for t in self.texts:
                self._starts.append(pos)
                pos += len(t) + 1

    def matches(self, pattern: str) -> np.ndarray:
        hit = self.cache.get(pattern)
        if hit is None:
            plain = not _REGEX_SYNTAX.intersection(pattern) and _TURN_SEPARATOR not in pattern
            if plain and self._lower is not None and pattern.isascii():  # compiles; no regex needed
                needle = pattern.lower()
                self.cache[pattern] = hit = self._joined_search(lambda pos: self._find(needle, pos))
                return hit
            regex, literal = compile_pattern(pattern)
            if literal:
                self.literal_fallbacks.add(pattern)
                plain = _TURN_SEPARATOR not in pattern
            if plain and self._joined is not None:
                hit = self._joined_search(lambda pos: _start(regex.search(self._joined, pos)))
            else:
                hit = np.fromiter((regex.search(t) is not None for t in self.texts), dtype=bool,
                                  count=len(self.texts))
            self.cache[pattern] = hit
        return hit

    def _find(self, needle: str, pos: int) -> int | None:
        at = self._lower.find(needle, pos)
        return None if at < 0 else at

    def _joined_search(self, search_from) -> np.ndarray:
        """Turns holding a match; ``search_from(pos)`` = start of the first match at or after pos."""
        hit = np.zeros(len(self.texts), dtype=bool)
        starts, pos = self._starts, 0
        while True:
            at = search_from(pos)
            if at is None:
                return hit
            turn = bisect.bisect_right(starts, at) - 1
            hit[turn] = True
            if turn + 1 == len(starts):
                return hit
            pos = starts[turn + 1]


def _start(found: re.Match | None) -> int | None:
    return None if found is None else found.start()


@dataclass(frozen=True)
class CheckpointLabels:
    """Turn indices (into the episode) that a checkpoint's scorer labels name."""

    checkpoint_id: str
    as_of_index: int  # inclusive
    anchor_groups: tuple[tuple[int, ...], ...]  # one per kept include pattern
    kept_patterns: tuple[str, ...]
    protected: tuple[int, ...]
    n_include: int
    dropped_no_match: int
    dropped_protected: int
    n_protected_patterns: int
    protected_patterns_matched: int


def protected_patterns(checkpoint: Mapping) -> list[str]:
    """``leak_targets`` (missing = []) and ``judge_spec.not_include``, deduplicated in order."""
    spec = checkpoint.get("judge_spec") or {}
    out: list[str] = []
    for p in list(checkpoint.get("leak_targets") or []) + list(spec.get("not_include") or []):
        if isinstance(p, str) and p and p not in out:
            out.append(p)
    return out


def include_patterns(checkpoint: Mapping) -> list[str]:
    spec = checkpoint.get("judge_spec") or {}
    return [p for p in (spec.get("include") or []) if isinstance(p, str) and p]


def checkpoint_labels(episode: GateMemEpisode, checkpoint: Mapping,
                      matcher: _Matcher | None = None) -> CheckpointLabels:
    """Anchors per include pattern and protected turns of one checkpoint (turns up to as_of)."""
    matcher = matcher or _Matcher(episode)
    turn_ids = [t["turn_id"] for t in episode.turns]
    try:
        as_of = turn_ids.index(checkpoint["as_of_turn_id"])
    except ValueError:
        raise KeyError(
            f"gatemem {checkpoint.get('checkpoint_id')}: as_of_turn_id "
            f"{checkpoint.get('as_of_turn_id')!r} is not a turn of {episode.episode_id}") from None
    visible = slice(0, as_of + 1)
    prot_pats = protected_patterns(checkpoint)
    protected_mask = np.zeros(as_of + 1, dtype=bool)
    matched_prot = 0
    for p in prot_pats:
        hit = matcher.matches(p)[visible]
        matched_prot += bool(hit.any())
        protected_mask |= hit
    groups: list[tuple[int, ...]] = []
    kept: list[str] = []
    no_match = emptied = 0
    incl = include_patterns(checkpoint)
    for p in incl:
        hit = matcher.matches(p)[visible]
        if not hit.any():
            no_match += 1
            continue
        hit = hit & ~protected_mask
        if not hit.any():
            emptied += 1
            continue
        groups.append(tuple(int(i) for i in np.flatnonzero(hit)))
        kept.append(p)
    return CheckpointLabels(
        checkpoint_id=checkpoint["checkpoint_id"],
        as_of_index=as_of,
        anchor_groups=tuple(groups),
        kept_patterns=tuple(kept),
        protected=tuple(int(i) for i in np.flatnonzero(protected_mask)),
        n_include=len(incl),
        dropped_no_match=no_match,
        dropped_protected=emptied,
        n_protected_patterns=len(prot_pats),
        protected_patterns_matched=matched_prot,
    )


# --------------------------------------------------------------------------- source


def gatemem_memory_text(turn: Mapping, prefix_role: bool = True) -> str:
    text = str(turn.get("text", ""))
    role = (turn.get("speaker") or {}).get("role")
    return f"{role}: {text}" if prefix_role and role else text


def _memory(episode: GateMemEpisode, index: int, prefix_role: bool) -> MemoryRecord:
    turn = episode.turns[index]
    speaker = turn.get("speaker") or {}
    return MemoryRecord(
        memory_id=episode.memory_id(index),
        text=gatemem_memory_text(turn, prefix_role),
        namespace=episode.episode_id,
        kind=turn.get("turn_kind"),
        domain=episode.domain,
        policy_tags=None,
        lifecycle_state="current",
        released_order=index,
        created_at=turn.get("timestamp"),
        provenance=f"speaker:{speaker.get('principal_id')}/{speaker.get('role')}",
        group_id=episode.episode_id,
    )


def _default_label(query: QueryContext, memory: MemoryRecord) -> PairLabel:
    in_scope = query.namespaces is not None and memory.namespace in query.namespaces
    if not in_scope:
        return PairLabel(query_id=query.query_id, memory_id=memory.memory_id,
                         relevance="not_useful", scope=False, policy=None, lifecycle=None,
                         text_visible=False, metadata_visible=True, scenario="wrong_scope")
    return PairLabel(query_id=query.query_id, memory_id=memory.memory_id,
                     relevance="unresolved", scope=True, policy=None, lifecycle=None)


def _protected_label(query_id: str, memory_id: str, query_type: str) -> PairLabel:
    if query_type == "safety":
        return PairLabel(query_id=query_id, memory_id=memory_id, relevance="unresolved",
                         scope=True, policy=None, lifecycle=False, scenario="forgotten")
    return PairLabel(query_id=query_id, memory_id=memory_id, relevance="unresolved",
                     scope=True, policy=False, lifecycle=None, policy_reasons=("purpose",),
                     scenario="purpose")


def gatemem_stats(source: EvalSource) -> dict:
    """Counts per query type: checkpoints, recall-evaluable / unevaluable, protected-evaluable,
    include patterns (total, dropped for no match, dropped because every match is protected)."""
    out: dict = {}
    for qt in QUERY_TYPES + ("all",):
        metas = [m for m in source.query_meta.values() if qt == "all" or m["query_type"] == qt]
        out[qt] = {
            "checkpoints": len(metas),
            "recall_evaluable": sum(m["recall_evaluable"] for m in metas),
            "recall_unevaluable": sum(not m["recall_evaluable"] for m in metas),
            "protected_evaluable": sum(m["protected_evaluable"] for m in metas),
            "include_patterns": sum(m["patterns"]["include"] for m in metas),
            "patterns_kept": sum(m["patterns"]["kept"] for m in metas),
            "patterns_dropped_no_match": sum(m["patterns"]["dropped_no_match"] for m in metas),
            "patterns_dropped_protected": sum(m["patterns"]["dropped_protected"] for m in metas),
            "protected_patterns": sum(m["patterns"]["protected"] for m in metas),
            "protected_patterns_matched": sum(m["patterns"]["protected_matched"] for m in metas),
            "protected_turns": sum(len(m["protected_ids"]) for m in metas),
        }
    return out


def build_gatemem_source(root: Path | None = None, episodes: Sequence[str] | None = None,
                         part: str = "select", *, purpose: str | None = None,
                         splits: Mapping | None = None, prefix_role: bool = True,
                         name: str = SOURCE) -> EvalSource:
    """The GateMem ``EvalSource`` of ``episodes`` (default: every episode of ``part`` in the
    split). See the module docstring for every rule."""
    eps = read_gatemem(root, episodes, part=part, purpose=purpose, splits=splits)
    memories: list[MemoryRecord] = []
    offsets: dict[str, int] = {}
    for ep in eps:
        offsets[ep.episode_id] = len(memories)
        memories.extend(_memory(ep, i, prefix_role) for i in range(len(ep.turns)))
    by_domain: dict[str, list[GateMemEpisode]] = {}
    for ep in eps:
        by_domain.setdefault(ep.domain, []).append(ep)

    queries: list[QueryContext] = []
    pools: dict[str, np.ndarray] = {}
    labels: dict[str, dict[str, PairLabel]] = {}
    anchors: dict[str, list[frozenset]] = {}
    meta: dict[str, dict] = {}
    literal: set[str] = set()
    for ep in eps:
        matcher = _Matcher(ep)
        others = [np.arange(offsets[o.episode_id], offsets[o.episode_id] + len(o.turns))
                  for o in by_domain[ep.domain] if o.episode_id != ep.episode_id]
        for ckpt in ep.checkpoints:
            qid = ckpt["checkpoint_id"]
            if qid in meta:
                raise ValueError(f"gatemem: duplicate checkpoint id {qid!r}")
            cl = checkpoint_labels(ep, ckpt, matcher)
            qtype = ckpt.get("query_type")
            if qtype not in QUERY_TYPES:
                raise ValueError(f"gatemem {qid}: unknown query_type {qtype!r}")
            asker = ckpt.get("asker") or {}
            own = np.arange(offsets[ep.episode_id], offsets[ep.episode_id] + cl.as_of_index + 1)
            pool = np.concatenate([own] + others).astype(np.int64)
            pool.sort()
            pools[qid] = pool
            queries.append(QueryContext(
                query_id=qid,
                text=ckpt["query_text"],
                principal=asker.get("principal_id"),
                namespaces=frozenset({ep.episode_id}),
                purpose=PURPOSE,
                intent="unknown",
                time=ep.turns[cl.as_of_index].get("timestamp"),
                group_id=ep.episode_id,
            ))
            qlabels: dict[str, PairLabel] = {}
            protected_ids = [ep.memory_id(i) for i in cl.protected]
            for mid in protected_ids:
                qlabels[mid] = _protected_label(qid, mid, qtype)
            groups = []
            for group in cl.anchor_groups:
                ids = frozenset(ep.memory_id(i) for i in group)
                groups.append(ids)
                for mid in ids:
                    qlabels[mid] = PairLabel(query_id=qid, memory_id=mid, relevance="required",
                                             scope=True, policy=True, lifecycle=True)
            labels[qid] = qlabels
            anchors[qid] = groups
            meta[qid] = {
                "query_type": qtype,
                "domain": ep.domain,
                "expected_action": ckpt.get("expected_action"),
                "attack_type": ckpt.get("attack_type"),
                "protected_ids": protected_ids,
                "protected_evaluable": bool(protected_ids),
                "recall_evaluable": bool(groups),
                "group": ep.episode_id,
                "as_of_turn_id": ckpt["as_of_turn_id"],
                "asker_role": asker.get("role"),
                "patterns": {
                    "include": cl.n_include,
                    "kept": len(cl.kept_patterns),
                    "dropped_no_match": cl.dropped_no_match,
                    "dropped_protected": cl.dropped_protected,
                    "protected": cl.n_protected_patterns,
                    "protected_matched": cl.protected_patterns_matched,
                },
            }
        literal |= matcher.literal_fallbacks
    source = EvalSource(
        name=name,
        memories=memories,
        queries=queries,
        pools=pools,
        labels=labels,
        anchor_groups=anchors,
        policy_rules=PolicyRules({}),
        default_label=_default_label,
        query_meta=meta,
    )
    stats = gatemem_stats(source)
    source.notes.append(
        f"gatemem part={part}: episodes={len(eps)}, turns={len(memories)}, "
        + "; ".join(f"{qt}: " + ", ".join(f"{k}={v}" for k, v in s.items())
                    for qt, s in stats.items()))
    if literal:
        source.notes.append(f"gatemem: {len(literal)} pattern(s) did not compile and were matched "
                            f"literally: {sorted(literal)}")
    for note in source.notes:
        log.info(note)
    return source


# --------------------------------------------------------------------------- generator text


def generator_turn_pairs(root: Path | None = None, episodes: Sequence[str] | None = None, *,
                         splits: Mapping | None = None, n_other_domain: int = 8,
                         seed: int = 0, prefix_role: bool = True) -> list[dict]:
    """Real phrasing for the synthetic generator, from ``generator`` episodes only.

    ``episodes`` defaults to the split's generator part; an episode of the select part raises
    ``ValueError`` and one of the report part ``PermissionError`` (it would leak evaluation data
    into training). One dict per checkpoint, in (domain, episode, file) order::

        {"checkpoint_id", "episode_id", "domain", "query_type", "expected_action",
         "attack_type", "asker_role", "query_text",
         "positives":    [{"memory_id", "text"}],  # include-matched turns up to as_of, not protected
         "protected":    [{"memory_id", "text"}],  # leak_targets / not_include matches up to as_of
         "history":      [{"memory_id", "text"}],  # every own-episode turn up to as_of, not protected
         "other_domain": [{"memory_id", "text", "domain"}]}  # n_other_domain turns sampled from
                                                             # generator episodes of other domains

    Texts are formatted as in the evaluation source (``prefix_role``). Sampling is seeded
    (component ``gatemem/generator_other_domain``) and deterministic.
    """
    root = (real_data_root() if root is None else Path(root)).resolve()
    check_part_access(SOURCE, "generator")
    splits = make_real_splits(root) if splits is None else splits
    wanted = list(splits[SOURCE]["generator"]) if episodes is None else list(episodes)
    report = sorted(set(wanted) & set(splits[SOURCE]["report"]))
    if report:
        raise PermissionError(f"gatemem: generator text must not come from report episodes {report}")
    select = sorted(set(wanted) & set(splits[SOURCE]["select"]))
    if select:
        raise ValueError(f"gatemem: generator text must not come from select episodes {select}")
    eps = read_gatemem(root, wanted, part="generator", splits=splits)
    pool_by_domain: dict[str, list[tuple[str, str]]] = {}  # stays empty when nothing is sampled
    for ep in eps if n_other_domain > 0 else ():
        pool_by_domain.setdefault(ep.domain, []).extend(
            (ep.memory_id(i), gatemem_memory_text(t, prefix_role)) for i, t in enumerate(ep.turns))
    rng = component_rng(seed, "gatemem/generator_other_domain")
    out: list[dict] = []
    others: dict[str, list] = {}  # per domain: the other domains' turns (the same for its episodes)
    for ep in eps:
        matcher = _Matcher(ep)
        other = others.get(ep.domain)
        if other is None:
            other = others[ep.domain] = [(mid, text, dom) for dom, rows in sorted(pool_by_domain.items())
                                         if dom != ep.domain for mid, text in rows]
        turns = [(ep.memory_id(i), gatemem_memory_text(t, prefix_role)) for i, t in enumerate(ep.turns)]
        for ckpt in ep.checkpoints:
            cl = checkpoint_labels(ep, ckpt, matcher)
            positives = sorted({i for g in cl.anchor_groups for i in g})
            protected = set(cl.protected)
            picks = (rng.choice(len(other), size=min(n_other_domain, len(other)), replace=False)
                     if other and n_other_domain > 0 else [])
            out.append({
                "checkpoint_id": ckpt["checkpoint_id"],
                "episode_id": ep.episode_id,
                "domain": ep.domain,
                "query_type": ckpt.get("query_type"),
                "expected_action": ckpt.get("expected_action"),
                "attack_type": ckpt.get("attack_type"),
                "asker_role": (ckpt.get("asker") or {}).get("role"),
                "query_text": ckpt["query_text"],
                "positives": [{"memory_id": turns[i][0], "text": turns[i][1]} for i in positives],
                "protected": [{"memory_id": turns[i][0], "text": turns[i][1]} for i in cl.protected],
                "history": [{"memory_id": turns[i][0], "text": turns[i][1]}
                            for i in range(cl.as_of_index + 1) if i not in protected],
                "other_domain": [{"memory_id": other[j][0], "text": other[j][1],
                                  "domain": other[j][2]} for j in sorted(int(x) for x in picks)],
            })
    counts = Counter(row["query_type"] for row in out)
    log.info("gatemem generator text: %d checkpoints from %d episodes %s", len(out), len(eps),
             dict(counts))
    return out
