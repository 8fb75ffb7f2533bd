"""The retrieval audit: the "retrieved" event, what the caller exposed (E within R) and what
its answer disclosed (protected markers, forgotten content through the suppression list's keyed
hashes): the audit part of :class:`memgate.retriever.GatedRetriever`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Optional

from memgate.contract.records import QueryContext
from memgate.retriever.access import Access
from memgate.retriever.audit.log import AuditError, AuditLog, make_event
from memgate.retriever.audit.trails import TrailStep, trail
from memgate.retriever.config import RetrieverConfig
from memgate.retriever.query.gate import RetrieverGate
from memgate.retriever.query.results import Disclosure, RetrievalResult
from memgate.retriever.stores.base import MemoryStore

MAX_REMEMBERED = 10_000  # retrievals kept in memory for report_exposed / report_answer


class ExposureAudit:
    """Audit events of the query path into ``audit`` (None: no log), and the retrievals of this
    process (``retrieved``: query id -> ids, namespaces, principal, exposed ids)."""

    def __init__(self, *, store: MemoryStore, audit: Optional[AuditLog], clock: Callable[[], str],
                 config: RetrieverConfig, encoder_identity: dict[str, Any], access: Access,
                 gate: RetrieverGate) -> None:
        self.store, self.audit, self.clock, self.config = store, audit, clock, config
        self.encoder_identity, self.access, self.gate = encoder_identity, access, gate
        self.retrieved: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def seen(self, query_id: str) -> bool:
        """Whether this process already logged a retrieval under ``query_id``."""
        return query_id in self.retrieved

    def log_retrieval(self, result: RetrievalResult, context: QueryContext) -> None:
        self.retrieved[result.query_id] = {
            "ids": set(result.ids), "namespaces": result.namespaces, "principal": result.principal,
            "exposed": set(),
        }
        while len(self.retrieved) > MAX_REMEMBERED:
            self.retrieved.popitem(last=False)
        if self.audit is None:
            return
        self.store.flush_outbox()  # every stored event precedes the query that returns it
        event = make_event(
            "retrieved", clock=self.clock,
            query_id=result.query_id, principal=result.principal, namespaces=list(result.namespaces),
            purpose=context.purpose, intent=context.intent, time=context.time,
            subject=context.subject, route=result.route, fail_mode=self.config.fail_mode, k=result.k,
            rerank_depth=self.config.rerank_depth if result.gate_version else None,
            candidates=result.candidates, unresolved_kept=result.unresolved_kept,
            ranks=[it.to_dict() for it in result.items],
            excluded=[{"memory_id": e.memory_id, "namespace": e.namespace, "reasons": list(e.reasons),
                       "unresolved": list(e.unresolved), "lifecycle": e.lifecycle,
                       "cosine_rank": e.cosine_rank} for e in result.excluded],
            excluded_counts=result.excluded_counts,
            dropped=[{"memory_id": d.memory_id, "namespace": d.namespace,
                      "reason": "gate_risk" if d.rule == "risk" else "gate_suppression",
                      "suppression": d.suppression, "threshold": d.threshold,
                      **({} if d.gate_risk is None else {"gate_risk": d.gate_risk})} for d in result.dropped],
            gate_version=result.gate_version, drop_threshold=self.gate.drop_threshold if result.gate_version else None,
            policy_version=result.policy_version, action_policy_version=result.action_policy_version,
            encoder=self.encoder_identity,
        )
        if result.set_apart:  # forget directives that ranked within k, kept out of the slots
            event["set_apart"] = list(result.set_apart)
        self.audit.append(event)

    def _retrieval_record(self, query_id: str) -> dict[str, Any]:
        found = self.retrieved.get(query_id)
        if found is not None:
            return found
        event = self.audit.find_retrieval(query_id) if self.audit is not None else None
        if event is None:
            raise AuditError(f"no retrieval logged for query {query_id!r}")
        found = {"ids": {r["memory_id"] for r in event["ranks"]}, "namespaces": tuple(event["namespaces"]),
                 "principal": event["principal"], "exposed": set()}
        return found

    def report_exposed(self, query_id: str, memory_ids: Iterable[str]) -> None:
        """Record which retrieved memories the caller put in the prompt (E); E must be within R."""
        ids = list(dict.fromkeys(memory_ids))
        record = self._retrieval_record(query_id)
        extra = sorted(set(ids) - record["ids"])
        if extra:
            raise AuditError(
                f"query {query_id!r}: exposed ids {extra} were not retrieved for it (E <= R); "
                "nothing was logged")
        record["exposed"].update(ids)
        if self.audit is not None:
            self.audit.append(make_event("exposed", clock=self.clock, query_id=query_id, memory_ids=ids,
                                         principal=record["principal"]))

    def history(self, memory_id: str, *, principal: str, namespace: Optional[str] = None) -> list[TrailStep]:
        """``principal``'s audit trail of the record ``memory_id`` names for it (in ``namespace``,
        or the one namespace of its ACL that holds the id: the same lookup, and the same refusal
        for another tenant's id, as every by-id call): the record's store events and
        ``principal``'s own queries only (:func:`memgate.retriever.audit.trail`). Forgotten
        records keep their trail."""
        if not isinstance(principal, str) or not principal:
            raise ValueError(f"history: field 'principal' must be a non-empty string, got {principal!r}")
        record = self.access.record_for(principal, memory_id, namespace)
        if self.audit is None:
            raise RuntimeError("this store keeps no audit log (pass audit_log= for a Qdrant server)")
        self.store.flush_outbox()  # every committed store event is in the log
        return trail(self.audit.events(), memory_id, namespace=record.namespace, principal=principal)

    def report_answer(self, query_id: str, answer: str) -> list[Disclosure]:
        """Scan the answer the caller produced for the protected markers of the memories in the
        query's readable namespaces, and (through the suppression list's keyed hashes) for the
        text and markers of records forgotten there; log and return the hits (a literal match,
        not proof of use)."""
        if not isinstance(answer, str):
            raise TypeError("answer must be a string")
        record = self._retrieval_record(query_id)
        folded = answer.casefold()
        hits = []
        scanned = self.store.scan_markers(record["namespaces"])
        for memory_id, markers in scanned:
            if any(m.casefold() in folded for m in markers):
                hits.append(Disclosure(memory_id, memory_id in record["exposed"], memory_id in record["ids"]))
        scan_suppressed = getattr(self.store, "scan_suppressed", None)
        if scan_suppressed is not None:
            for _, memory_id in scan_suppressed(record["namespaces"], answer):
                hits.append(Disclosure(memory_id, False, False, forgotten=True))
        if self.audit is not None:
            self.audit.append(make_event(
                "disclosed", clock=self.clock, query_id=query_id, principal=record["principal"],
                hits=[h.__dict__ for h in hits], scanned=len(scanned)))
        return hits


__all__ = ["ExposureAudit"]
