"""Kleene exclusion over the whole candidate support, before any truncation: the lifecycle
resolved for a query (scoped supersession, validity windows), one verdict per distinct metadata
signature through :func:`memgate.contract.records.route_verdict`, the exclusions as a store
search filter, and the excluded ids logged with their reasons."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import numpy as np

from memgate.contract.admissibility import SupersessionScope, effective_state
from memgate.contract.records import MemoryRecord, QueryContext, route_verdict
from memgate.retriever.config import RetrieverConfig
from memgate.retriever.query.index import QueryIndex
from memgate.retriever.query.ranking import Ranking
from memgate.retriever.query.results import Exclusion
from memgate.retriever.query.verdicts import A_FALSE, A_NONE, A_TRUE, ExclusionSummary, SignatureVerdicts
from memgate.retriever.records.index import SupportIndex
from memgate.retriever.stores.base import MemoryStore

SearchFn = Callable[[np.ndarray, frozenset[str], int, None], np.ndarray]  # the ranking step's search


def resolve_lifecycle(
    state: str,
    superseded_scopes: tuple[Any, ...],
    window: Optional[SupersessionScope],
    subject: Optional[str],
    when: Optional[str],
) -> str:
    """The lifecycle state of a record for one query.

    Scoped supersession (docs/design.md section 3) goes through
    :func:`memgate.contract.admissibility.effective_state` for each scope the record was superseded in,
    joined by strong Kleene OR (superseded if inside any scope, unknown if undecidable, current
    if outside all). A current claim outside its validity window is ``stale``; with no query time
    the window cannot be checked and the state is ``unknown`` (never imputed).
    """
    if state == "superseded" and superseded_scopes:
        states = [effective_state("superseded", s, subject, when) for s in superseded_scopes]
        if "superseded" in states:
            state = "superseded"
        elif "unknown" in states:
            state = "unknown"
        else:
            state = "current"
    if window is not None and state == "current":
        inside = window.contains(None, when)
        if inside is None:
            state = "unknown"
        elif inside is False:
            state = "stale"
    return state


def _scopes_from_key(key: tuple[Any, ...]) -> tuple[Optional[SupersessionScope], ...]:
    return tuple(None if s is None else SupersessionScope(*s) for s in key)


class Verdicts(NamedTuple):
    """The Kleene step's answer for one query, per signature (never per record)."""

    info: dict[int, tuple[Any, ...]]  # signature code -> (resolved lifecycle, admissible, reasons, unresolved axes)
    a: np.ndarray  # admissibility code (A_FALSE / A_TRUE / A_NONE) per signature code
    keep_sig: np.ndarray  # bool per signature code: survives Kleene exclusion
    ns_mask: np.ndarray  # bool per namespace code: readable
    summary: ExclusionSummary

    def kept(self, index: SupportIndex, positions: np.ndarray) -> np.ndarray:
        """Which ``positions`` are live, readable and kept."""
        ok = index.alive[positions] & self.ns_mask[index.ns[positions]]
        sig = index.sig[positions]
        ok &= sig < len(self.keep_sig)
        kept: np.ndarray = ok & self.keep_sig[np.minimum(sig, len(self.keep_sig) - 1)]
        return kept

    def excluded(self, index: SupportIndex, positions: np.ndarray) -> np.ndarray:
        """Which ``positions`` are live, readable and excluded by the Kleene step."""
        ok = index.alive[positions] & self.ns_mask[index.ns[positions]]
        sig = index.sig[positions]
        ok &= sig < len(self.keep_sig)
        excluded: np.ndarray = ok & ~self.keep_sig[np.minimum(sig, len(self.keep_sig) - 1)]
        return excluded


class KleeneExclusion:
    """The exclusion step of the query path over the retriever's query index."""

    def __init__(self, index: QueryIndex, store: MemoryStore, config: RetrieverConfig) -> None:
        self.index, self.store, self.config = index, store, config

    def _decide(self, context: QueryContext, readable: frozenset[str]) -> Callable[[int], tuple[Any, ...]]:
        """The verdict of one signature code through :func:`memgate.contract.records.route_verdict`
        (the one implementation of the semantics)."""
        idx = self.index.support
        verdict_ctx = QueryContext(
            query_id=context.query_id, text="", principal=context.principal, namespaces=readable,
            purpose=context.purpose, intent=context.intent, time=context.time,
            subject=context.subject)

        def decide(s: int) -> tuple[Any, ...]:
            ns, tags, state, scopes, (vf, vt) = idx.sig_keys[s]
            window = None if vf is None and vt is None else SupersessionScope(None, vf, vt)
            resolved = resolve_lifecycle(state, _scopes_from_key(scopes), window,
                                         context.subject, context.time)
            record = MemoryRecord(memory_id="sig", text="", namespace=ns, policy_tags=tags,
                                  lifecycle_state=resolved)
            verdict = route_verdict(record, verdict_ctx, self.config.policy_rules)
            a = verdict.admissible
            reasons = verdict.exclusion_reasons
            if a is None and self.config.fail_mode == "closed":
                reasons = ("unresolved:" + ",".join(verdict.unresolved_axes),)
            return (resolved, a, tuple(reasons), tuple(verdict.unresolved_axes))
        return decide

    def verdicts(self, context: QueryContext, readable: frozenset[str]) -> Verdicts:
        """Kleene verdicts for the whole support, one per metadata signature, cached per
        ``(purpose, intent, subject, time bucket)``; the summary of the support (search filter,
        counts by reason) cached per readable namespaces too (:mod:`memgate.retriever.query.verdicts`)."""
        idx = self.index.support
        cache = self.index.verdicts
        vkey = (context.purpose, context.intent, context.subject, cache.time_bucket(context.time))
        sv = cache.verdicts(vkey)
        n_sigs = len(idx.sig_keys)
        ns_mask = np.zeros(max(len(idx.ns_code), 1), dtype=bool)
        codes = frozenset(idx.ns_code[n] for n in readable if n in idx.ns_code)
        ns_mask[list(codes)] = True
        skey = (readable, vkey)
        summary = cache.summary(skey)
        if summary is None or len(summary.keep_sig) < n_sigs:
            sig_ns = np.asarray(idx.sig_ns, dtype=np.int64)
            sig_codes = np.flatnonzero(ns_mask[sig_ns]) if n_sigs else np.zeros(0, dtype=np.int64)
            sv.ensure(sig_codes, n_sigs, self._decide(context, readable))
            summary = self._summarise(sig_codes, sv, readable, n_sigs)
            cache.put_summary(skey, summary, codes)
        return Verdicts(sv.info, sv.a, summary.keep_sig, ns_mask, summary)

    def _summarise(self, sig_codes: np.ndarray, sv: SignatureVerdicts, readable: frozenset[str],
                   n_sigs: int) -> ExclusionSummary:
        """What the support asks of the search, in O(signatures of the readable namespaces)."""
        idx = self.index.support
        a = sv.a[sig_codes]
        keep = a == A_TRUE if self.config.fail_mode == "closed" else a != A_FALSE
        keep_sig = np.zeros(n_sigs, dtype=bool)
        keep_sig[sig_codes[keep]] = True
        live = idx.sig_live_counts[sig_codes] if len(sig_codes) else np.zeros(0, dtype=np.int64)
        present = live > 0
        dropped = present & ~keep
        counts: dict[str, int] = {}
        for s, n in zip(sig_codes[dropped].tolist(), live[dropped].tolist()):
            for reason in sv.info[s][2]:
                counts[reason] = counts.get(reason, 0) + int(n)
        state_of = [idx.sig_keys[s][2] for s in sig_codes.tolist()]
        kept_states = {st for st, k, p in zip(state_of, keep.tolist(), present.tolist()) if k and p}
        dropped_states = {st for st, d in zip(state_of, dropped.tolist()) if d}
        whole = sorted(dropped_states - kept_states)
        by_sig = [s for s, st in zip(sig_codes[dropped].tolist(), np.asarray(state_of, dtype=object)[dropped].tolist())
                  if st not in whole] if dropped.any() else []
        digests, ids = [], []
        if by_sig and getattr(self.store, "filters_signatures", False):
            digests = sorted(idx.sig_digests[s] for s in by_sig)
        elif by_sig:  # a store without digests: the excluded records by id, O(support) once
            support = idx.live_positions(readable)
            out = np.zeros(n_sigs, dtype=bool)
            out[by_sig] = True
            ids = [(idx.namespaces[p], idx.ids[p]) for p in support[out[idx.sig[support]]].tolist()]
        return ExclusionSummary(
            sig_codes=sig_codes, keep_sig=keep_sig, states=whole, digests=digests, ids=ids,
            counts=counts, candidates=int(live.sum()), kept=int(live[keep].sum()),
            unresolved_kept=int(live[keep & (a == A_NONE)].sum()))

    def exclusion_filter(self, support: np.ndarray, keep: np.ndarray) -> tuple[list[str], list[tuple[str, str]], list[str]]:
        """The Kleene exclusions as a store-search filter: lifecycle states whose every readable
        record is excluded go as payload values (``exclude_states``); on a store that keeps each
        record's :func:`memgate.retriever.records.index.signature_digest` (``filters_signatures``),
        signatures whose every readable record is excluded go by digest
        (``exclude_signatures``: a verdict is one per signature, so these are few); the other
        excluded records by id (``exclude_ids``)."""
        idx = self.index.support
        dropped = ~keep
        if not dropped.any():
            return [], [], []
        state_names = {code: name for name, code in idx.state_code.items()}
        states = idx.state[support]
        whole = [code for code in np.unique(states[dropped]).tolist()
                 if not keep[states == code].any()]
        by_id = dropped & ~np.isin(states, np.array(whole, dtype=np.int32))
        digests: list[Any] = []
        if getattr(self.store, "filters_signatures", False) and by_id.any():
            sigs = idx.sig[support]
            n = len(idx.sig_keys)
            whole_sigs = np.flatnonzero((np.bincount(sigs[by_id], minlength=n) > 0)
                                        & (np.bincount(sigs[keep], minlength=n) == 0))
            digests = sorted(idx.sig_digests[s] for s in whole_sigs.tolist())
            by_id &= ~np.isin(sigs, whole_sigs)
        return (sorted(state_names[c] for c in whole),
                [(idx.namespaces[p], idx.ids[p]) for p in support[by_id].tolist()], digests)

    def exclusions(self, verdicts: Verdicts, ranking: Ranking, readable: frozenset[str],
                   search: SearchFn) -> tuple[list[Any], dict[str, Any]]:
        """Excluded ids the unfiltered cosine ranking would have considered (with reasons and
        their rank there), and counts by reason over the whole support (cached)."""
        idx = self.index.support
        log_depth = self.config.log_excluded_depth
        log_depth = ranking.depth if log_depth is None else log_depth
        excluded: list[Exclusion] = []
        if log_depth and verdicts.summary.dropped:
            # the unfiltered ranking of the support: the namespace filter only
            top_all = ranking.unfiltered  # (served by the filtered search's store call)
            if top_all is None:
                top_all = np.asarray(search(ranking.query, readable, log_depth, None), dtype=np.int64)
            out = verdicts.excluded(idx, top_all) if len(top_all) else np.zeros(0, dtype=bool)
            for rank, (p, is_out) in enumerate(zip(top_all.tolist(), out.tolist()), start=1):
                if is_out:
                    resolved, _, reasons, unresolved = verdicts.info[int(idx.sig[p])]
                    excluded.append(Exclusion(idx.ids[p], reasons, unresolved, resolved, rank,
                                              idx.namespaces[p]))
        return excluded, dict(verdicts.summary.counts)


__all__ = ["KleeneExclusion", "Verdicts", "resolve_lifecycle"]
