"""One memory's trail through the audit log: its store events and the queries that retrieved,
dropped, exposed or disclosed it. ``trail`` is a principal's view (its own record and its own
queries only: what the agent surfaces show); ``operator_trail`` the store operator's (every
namespace and principal, narrowed on request); ``format_trail`` prints one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from memgate.retriever.audit.log import QUERY_EVENTS, STORE_EVENTS


@dataclass(frozen=True)
class TrailStep:
    """One stage of one memory's trail: stored / updated / ... / retrieved / not_retrieved /
    dropped / exposed / disclosed, with the event it came from."""

    stage: str
    ts: str
    detail: dict[str, Any]
    query_id: Optional[str] = None


_VERSION_KEYS = ("gate_version", "policy_version", "action_policy_version")
_RANK_KEYS = ("rank", "score", "cosine", "gate_score", "gate_risk", "lifecycle", "action", "unresolved")


def _compact(d: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {k: d[k] for k in keys if d.get(k) not in (None, [], (), {})}


def _item_namespace(item: Mapping[str, Any], query_namespaces: Any) -> Optional[str]:
    """The namespace of an id a query event names: the item's own (events since scoped ids),
    else the query's one readable namespace, else unknown (None)."""
    ns = item.get("namespace")
    if ns is not None:
        return str(ns)
    spaces = list(query_namespaces or ())
    return spaces[0] if len(spaces) == 1 else None


class _Scope:
    """Which events of the log a trail may show: ``namespace`` (the record's namespace, None =
    every namespace) and ``principal`` (whose queries, None = every principal's)."""

    def __init__(self, namespace: Optional[str], principal: Optional[str]):
        self.namespace, self.principal = namespace, principal

    def record(self, event: Mapping[str, Any]) -> bool:
        """A store event of the record: in the namespace (an event from before scoped ids, which
        names none, only when the scope's principal made it)."""
        if self.namespace is None:
            return True
        if "namespace" in event:
            return bool(event["namespace"] == self.namespace)
        return self.principal is None or event.get("principal") == self.principal

    def query(self, event: Mapping[str, Any]) -> bool:
        return self.principal is None or event.get("principal") == self.principal

    def item(self, namespace: Optional[str]) -> bool:
        """An id a query event names, whose namespace is ``namespace`` (None: unknown, which a
        namespace scope never shows)."""
        return self.namespace is None or namespace == self.namespace


def _trail(events: Iterable[Mapping[str, Any]], memory_id: str, scope: _Scope) -> list[TrailStep]:
    steps: list[TrailStep] = []
    retrieved_in: dict[Optional[str], Optional[str]] = {}  # query id -> the namespace its ranks give the id
    read_by: dict[Optional[str], Any] = {}  # query id -> the namespaces it read
    for e in events:
        kind = e.get("event")
        if kind in STORE_EVENTS:
            if not scope.record(e):
                continue
            if e.get("memory_id") == memory_id:
                detail = {k: v for k, v in e.items()
                          if k not in ("event", "event_id", "ts", "format", "memory_id", "slot")}
                encoder = detail.pop("encoder", None)
                if encoder:
                    detail["encoder"] = f"{encoder.get('id')}@{encoder.get('revision')}"
                steps.append(TrailStep(kind, e["ts"], _compact(detail, detail)))
            elif kind == "stored" and memory_id in (e.get("derived_from") or ()):
                steps.append(TrailStep("source_of", e["ts"], {"derived": e["memory_id"]}))
            continue
        if kind not in QUERY_EVENTS or not scope.query(e):
            continue
        qid: Optional[str] = e.get("query_id")
        who = _compact(e, ("principal", "intent", "purpose"))
        if kind == "retrieved":
            spaces = read_by[qid] = e.get("namespaces")
            for item in e.get("ranks", ()):
                if item["memory_id"] == memory_id:
                    retrieved_in[qid] = _item_namespace(item, spaces)
            versions = _compact(e, _VERSION_KEYS)
            for item in e.get("ranks", ()):
                if item["memory_id"] == memory_id and scope.item(_item_namespace(item, spaces)):
                    flags = {"needs_review": True} if item.get("needs_review") else {}
                    steps.append(TrailStep("retrieved", e["ts"], {
                        **who, **_compact(item, ("namespace",) + _RANK_KEYS), **flags, **versions}, qid))
            for item in e.get("excluded", ()):
                if item["memory_id"] == memory_id and scope.item(_item_namespace(item, spaces)):
                    steps.append(TrailStep("not_retrieved", e["ts"], {
                        **who, **_compact(item, ("namespace", "reasons", "unresolved", "lifecycle",
                                                 "cosine_rank")), **versions}, qid))
            for item in e.get("dropped", ()):
                if item["memory_id"] == memory_id and scope.item(_item_namespace(item, spaces)):
                    steps.append(TrailStep("dropped", e["ts"], {
                        **who, **_compact(item, ("namespace", "reason", "suppression", "threshold", "gate_risk")),
                        **versions}, qid))
        elif kind == "exposed" and memory_id in e.get("memory_ids", ()):
            # an exposure names ids of its query's retrieval: their namespaces are the ranks'
            if scope.item(retrieved_in.get(qid)):
                steps.append(TrailStep("exposed", e["ts"], who, qid))
        elif kind == "disclosed":
            for hit in e.get("hits", ()):
                if hit["memory_id"] != memory_id:
                    continue
                ns = retrieved_in.get(qid) or _item_namespace(hit, read_by.get(qid))
                if scope.item(ns):
                    steps.append(TrailStep("disclosed", e["ts"], {
                        **who, "was_exposed": hit.get("exposed"), "was_retrieved": hit.get("retrieved")}, qid))
    return steps


def trail(events: Iterable[Mapping[str, Any]], memory_id: str, *, namespace: str,
          principal: str) -> list[TrailStep]:
    """One tenant's view of ``memory_id``: the record ``(namespace, memory_id)`` (ids are scoped
    per namespace) through ``principal``'s own queries, in log order (ids and metadata only).

    Store events (stored, updated, forgotten, ...) of the record in ``namespace``; query events
    (retrieved, not_retrieved, dropped, exposed, disclosed) only of queries ``principal`` made
    and only where they name the record in ``namespace``. Another namespace's record with the
    same id, and another principal's queries, are never shown (every agent surface's history
    is this function). The store's operator reads the whole log with :func:`operator_trail`."""
    for name, value in (("namespace", namespace), ("principal", principal)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"trail: field {name!r} must be a non-empty string, got {value!r}")
    return _trail(events, memory_id, _Scope(namespace, principal))


def operator_trail(events: Iterable[Mapping[str, Any]], memory_id: str,
                   namespace: Optional[str] = None, principal: Optional[str] = None) -> list[TrailStep]:
    """The store operator's view (``memgate audit``): every namespace's record of
    ``memory_id`` and every principal's queries, unless ``namespace`` / ``principal`` narrow it.
    Not for tenants: an id used in several namespaces shows all of their events."""
    return _trail(events, memory_id, _Scope(namespace, principal))


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_fmt_value(v)}" for k, v in value.items() if v is not None) + "}"
    return str(value)


def format_trail(memory_id: str, steps: list[TrailStep]) -> str:
    """Human-readable trail, one line per stage."""
    if not steps:
        return f"memory {memory_id}: no audit events"
    counts = {s: sum(1 for x in steps if x.stage == s) for s in ("retrieved", "exposed", "disclosed")}
    lines = [
        f"memory {memory_id}: {len(steps)} event(s); retrieved in {counts['retrieved']} "
        f"quer{'y' if counts['retrieved'] == 1 else 'ies'}, exposed in {counts['exposed']}, "
        f"disclosed in {counts['disclosed']}"
    ]
    for step in steps:
        where = f" query={step.query_id}" if step.query_id else ""
        detail = " ".join(
            f"{k}={_fmt_value(v)}" for k, v in step.detail.items() if v not in (None, [], {}, ())
        )
        lines.append(f"  {step.ts}  {step.stage:<18}{where} {detail}".rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------- E <= R <= W


__all__ = ["TrailStep", "format_trail", "operator_trail", "trail"]
