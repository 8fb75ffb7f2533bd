"""Kleene exclusion over the whole candidate support, before any truncation: the lifecycle
resolved for a query (scoped supersession, validity windows), one verdict per distinct metadata
signature through :func:`memgate.contract.records.route_verdict`, the exclusions as a store
search filter, and the excluded ids logged with their reasons (a mixin of
:class:`memgate.retriever.GatedRetriever`)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from memgate.contract.admissibility import SupersessionScope, effective_state
from memgate.contract.records import MemoryRecord, QueryContext, route_verdict
from memgate.retriever.ranking import _Ranking
from memgate.retriever.results import Exclusion

_A_FALSE, _A_TRUE, _A_NONE = 0, 1, 2


def resolve_lifecycle(
    state: str,
    superseded_scopes: tuple,
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


def _scopes_from_key(key: tuple) -> tuple:
    return tuple(None if s is None else SupersessionScope(*s) for s in key)


class _Verdicts(NamedTuple):
    sig: np.ndarray  # signature id per support position
    a: np.ndarray  # admissibility code per support position
    keep: np.ndarray  # survives Kleene exclusion
    info: dict  # signature id -> (resolved lifecycle, admissible, reasons, unresolved axes)



class KleeneExclusion:
    """The exclusion step of the query path (uses the retriever's index, config and search)."""

    def _verdicts(self, support: np.ndarray, context: QueryContext, readable: frozenset) -> "_Verdicts":
        """Kleene verdicts for the whole support, one per distinct metadata signature, through
        :func:`memgate.contract.records.route_verdict` (the one implementation of the semantics)."""
        idx = self._index
        verdict_ctx = QueryContext(
            query_id=context.query_id, text="", principal=context.principal, namespaces=readable,
            purpose=context.purpose, intent=context.intent, time=context.time,
            subject=context.subject)
        sig = idx.sig[support]
        a_code = np.zeros(len(idx.sig_keys), dtype=np.int8)
        info: dict[int, tuple] = {}
        for s in np.unique(sig).tolist():
            ns, tags, state, scopes, (vf, vt) = idx.sig_keys[s]
            window = None if vf is None and vt is None else SupersessionScope(None, vf, vt)
            resolved = resolve_lifecycle(state, _scopes_from_key(scopes), window,
                                         context.subject, context.time)
            record = MemoryRecord(memory_id="sig", text="", namespace=ns, policy_tags=tags,
                                  lifecycle_state=resolved)
            verdict = route_verdict(record, verdict_ctx, self.config.policy_rules)
            a = verdict.admissible
            a_code[s] = _A_TRUE if a is True else _A_FALSE if a is False else _A_NONE
            reasons = verdict.exclusion_reasons
            if a is None and self.config.fail_mode == "closed":
                reasons = ("unresolved:" + ",".join(verdict.unresolved_axes),)
            info[s] = (resolved, a, tuple(reasons), tuple(verdict.unresolved_axes))
        a = a_code[sig]
        keep = a == _A_TRUE if self.config.fail_mode == "closed" else a != _A_FALSE
        return _Verdicts(sig, a, keep, info)

    def _exclusion_filter(self, support: np.ndarray, keep: np.ndarray) -> tuple[list, list, list]:
        """The Kleene exclusions as a store-search filter: lifecycle states whose every readable
        record is excluded go as payload values (``exclude_states``); on a store that keeps each
        record's :func:`memgate.retriever.semantics.signature_digest` (``filters_signatures``),
        signatures whose every readable record is excluded go by digest
        (``exclude_signatures``: a verdict is one per signature, so these are few); the other
        excluded records by id (``exclude_ids``)."""
        idx = self._index
        dropped = ~keep
        if not dropped.any():
            return [], [], []
        state_names = {code: name for name, code in idx.state_code.items()}
        states = idx.state[support]
        whole = [code for code in np.unique(states[dropped]).tolist()
                 if not keep[states == code].any()]
        by_id = dropped & ~np.isin(states, np.array(whole, dtype=np.int32))
        digests: list = []
        if getattr(self.store, "filters_signatures", False) and by_id.any():
            sigs = idx.sig[support]
            n = len(idx.sig_keys)
            whole_sigs = np.flatnonzero((np.bincount(sigs[by_id], minlength=n) > 0)
                                        & (np.bincount(sigs[keep], minlength=n) == 0))
            digests = sorted(idx.sig_digests[s] for s in whole_sigs.tolist())
            by_id &= ~np.isin(sigs, whole_sigs)
        return (sorted(state_names[c] for c in whole),
                [(idx.namespaces[p], idx.ids[p]) for p in support[by_id].tolist()], digests)

    def _exclusions(self, support: np.ndarray, verdicts: "_Verdicts", ranking: "_Ranking",
                    readable: frozenset) -> tuple[list, dict]:
        """Excluded ids the unfiltered cosine ranking would have considered (with reasons and
        their rank there), and counts by reason over the whole support."""
        idx = self._index
        log_depth = self.config.log_excluded_depth
        log_depth = ranking.depth if log_depth is None else log_depth
        excluded: list[Exclusion] = []
        dropped = ~verdicts.keep
        if log_depth and dropped.any():
            # the unfiltered ranking of the support: the namespace filter only
            top_all = np.asarray(self._search(ranking.query, readable, log_depth, None), dtype=np.int64)
            out = set(support[dropped].tolist())
            for rank, p in enumerate(top_all.tolist(), start=1):
                if p in out:
                    resolved, _, reasons, unresolved = verdicts.info[int(idx.sig[p])]
                    excluded.append(Exclusion(idx.ids[p], reasons, unresolved, resolved, rank,
                                              idx.namespaces[p]))
        counts: dict[str, int] = {}
        if len(verdicts.sig):
            per_sig = np.bincount(verdicts.sig[dropped], minlength=len(idx.sig_keys))
            for s in np.flatnonzero(per_sig).tolist():
                for reason in verdicts.info[s][2]:
                    counts[reason] = counts.get(reason, 0) + int(per_sig[s])
        return excluded, counts


__all__ = ["KleeneExclusion", "resolve_lifecycle"]
