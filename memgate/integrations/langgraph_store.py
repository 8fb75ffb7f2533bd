"""A LangGraph ``BaseStore`` over a memgate store: ``MemgateStore(path=DIR)``.

    from langgraph.graph import StateGraph
    from memgate.integrations.langgraph_store import MemgateStore

    store = MemgateStore(path="memstore")
    store.put(("users", "alice"), "diet", {"text": "Alice is vegetarian."})
    store.search(("users", "alice"), query="what does alice eat?")   # gated retrieval
    graph = builder.compile(store=store)    # nodes get it as ``store`` / ``runtime.store``

Mapping:

- a namespace tuple is one memgate namespace (``lg:`` + its JSON array), so a search inside
  ``("users", "alice")`` never reads ``("users", "bob")``; a prefix search reads every
  namespace under the prefix (the store is the trusted layer that decides that);
- an item is one memgate record: its key and value live in the record's metadata
  (``attributes = {"key", "value", "indexed"}``), its text is what the index fields select
  (``index_fields``, default ``["$"]``: every scalar leaf of the value, one per line;
  ``put(..., index=[...])`` per item; several texts are joined with newlines, one vector per
  item); ``index=False`` items are stored and listed but never ranked by a query;
- the value's *content* is what forget suppresses: each indexed scalar leaf (every leaf for
  ``"$"`` and ``index=False``) of at least four characters and three words (since issue 46;
  shorter leaves are covered by the markers a forget derives: numbers, identifiers, e-mails)
  is recorded as one of the record's markers, so forgetting the item suppresses each of them separately (a later
  value repeating one, in any field or under any key, with any other leaf changed, is refused);
  every key and scalar leaf of a new value is checked (``memgate.retriever.records.suppression``);
- ``search(query=...)`` is ``GatedRetriever.retrieve`` over the prefix's namespaces, with the
  filter as the candidates' restriction before truncation, ranking at most ``MAX_LIMIT``
  results (``offset + limit``, :mod:`memgate.contract.defaults`); without a query, the
  matching items oldest first. Each hit is a :class:`GatedSearchItem` (``gate_risk`` beside
  ``score``); what a list of ``SearchItem`` cannot carry, the per-search ``dropped`` count and
  ids, is not returned (the audit log records the drops). Filters follow LangGraph's semantics (exact match, nested subset,
  ``$eq $ne $gt $gte $lt $lte``);
- ``delete`` (and ``put(..., None)``) is memgate's forget: the item's text, value and vector
  are erased for good and a forget directive stays in the namespace (not listed as an item).
  **Deviation from key-value semantics:** the forgotten record is a tombstone; a later ``put``
  of the same key stores a new record under a new id, and a ``put`` whose value repeats
  forgotten content is refused (``SuppressedContentError``);
- ``batch`` runs the reads first, then the writes (the last write per key wins), as
  LangGraph's ``InMemoryStore`` does; ``abatch`` runs ``batch`` in a worker thread. Calls are
  serialised by a lock (the retriever is not thread-safe);
- TTLs (``MemgateStore(ttl={"default_ttl": minutes, "refresh_on_read": True})``, ``put(...,
  ttl=minutes)``): an item past its time is never returned by ``get``, ``search`` or
  ``list_namespaces`` (LangGraph's ``omit_expired``, always on) and is erased through the
  forget path's erasure without a directive (:mod:`memgate.integrations.expiry`: the next batch
  erases what has expired, as does ``memgate store sweep``; ``sweep_interval_minutes`` is
  accepted, no background thread runs). A read with ``refresh_ttl`` (default:
  ``refresh_on_read``, itself default True) restarts the item's time. The store never
  de-duplicates: items are addressed by key.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Optional

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from memgate.contract.defaults import MAX_LIMIT
from memgate.contract.ids import derived_id
from memgate.contract.records import QueryContext
from memgate.contract.text_normal import tokens_v2
from memgate.integrations.catalog import Catalog
from memgate.integrations.expiry import EXPIRES_KEY, check_ttl, expiry_after, is_expired, now_stamp
from memgate.integrations.memory import now_utc
from memgate.integrations.opening import DEFAULT_POLICY_TAG, open_retriever, open_store
from memgate.retriever.errors import RepeatedDetailError
from memgate.retriever.records.suppression import is_whole_only, word_count

PREFIX = "lg:"
KEY, VALUE, INDEXED = "key", "value", "indexed"
TTL = "ttl_minutes"  # the item's time to live (its expiry restarts from it on a refreshing read)
TTL_KEYS = ("refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes")


def check_ttl_config(config: Any) -> Optional[dict[str, Any]]:
    """LangGraph's ``TTLConfig`` (a mapping), checked: a one-line error naming the field."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise ValueError(f"field 'ttl' must be a TTLConfig mapping, got {config!r}")
    unknown = sorted(set(config) - set(TTL_KEYS))
    if unknown:
        raise ValueError(f"field 'ttl.{unknown[0]}' is not known (known: {', '.join(TTL_KEYS)})")
    check_ttl(config.get("default_ttl"), "ttl.default_ttl")
    for flag in ("refresh_on_read", "omit_expired"):
        if flag in config and type(config[flag]) is not bool:
            raise ValueError(f"field 'ttl.{flag}' must be True or False, got {config[flag]!r}")
    if config.get("omit_expired") is False:
        raise ValueError("field 'ttl.omit_expired': memgate never returns an expired item (False is not offered)")
    return dict(config)

try:  # the public validator (langgraph >= 1.x); older versions validate in the public methods
    from langgraph.store.base import validate_op_namespace as _validate_op
except ImportError:  # pragma: no cover
    def _validate_op(op: Op) -> None:
        return None


def to_namespace(namespace: tuple[str, ...]) -> str:
    return PREFIX + json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def from_namespace(ns: str) -> Optional[tuple[str, ...]]:
    if not ns.startswith(PREFIX):
        return None
    try:
        parts = json.loads(ns[len(PREFIX):])
    except ValueError:
        return None
    return tuple(parts) if isinstance(parts, list) and all(isinstance(p, str) for p in parts) else None


def _leaves(value: Any) -> list[str]:
    """Every scalar leaf of a JSON value as text (strings as they are, numbers in JSON; booleans
    and nulls carry no content), keys in sorted order."""
    if isinstance(value, Mapping):
        return [leaf for k in sorted(value, key=str) for leaf in _leaves(value[k])]
    if isinstance(value, (list, tuple)):
        return [leaf for sub in value for leaf in _leaves(sub)]
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [json.dumps(value)]
    return []


def _compare(item_value: Any, filter_value: Any) -> bool:
    """LangGraph's filter semantics (``InMemoryStore``): operators, nested subset, exact lists."""
    if isinstance(filter_value, dict):
        if any(str(k).startswith("$") for k in filter_value):
            return all(_operator(item_value, op, v) for op, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (isinstance(item_value, (list, tuple)) and len(item_value) == len(filter_value)
                and all(_compare(a, b) for a, b in zip(item_value, filter_value)))
    return bool(item_value == filter_value)


def _operator(value: Any, op: str, target: Any) -> bool:
    if op == "$eq":
        return bool(value == target)
    if op == "$ne":
        return bool(value != target)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(target)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"filter: unsupported operator {op!r}")


def _matches(match: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(match.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if match.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    if match.match_type not in ("prefix", "suffix"):
        raise ValueError(f"unsupported match type {match.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


class GatedSearchItem(SearchItem):
    """LangGraph's ``SearchItem`` plus ``gate_risk``: the learned gate's calibrated risk of the
    item for the query (:mod:`memgate.integrations.hits`; None without a gate, for a gate of
    score form ``mask`` and for an unranked item), also in :meth:`dict`. A search returns a plain
    list, so nothing per search (``dropped``, ``query_id``, ``route``) reaches the caller here."""

    __slots__ = ("gate_risk",)

    def __init__(self, *, gate_risk: Optional[float] = None, **fields: Any) -> None:
        super().__init__(**fields)
        self.gate_risk = gate_risk

    def dict(self) -> dict[str, Any]:
        result: dict[str, Any] = super().dict()
        result["gate_risk"] = self.gate_risk
        return result


class MemgateStore(BaseStore):
    """LangGraph's store interface over memgate (module docstring). ``path`` / ``store`` /
    ``url`` as in :class:`memgate.Memory`; ``principal`` is the identity recorded as the writer
    and reader in the audit log."""

    supports_ttl = True

    def __init__(self, path: Any = None, *, store: str = "embedded", url: Optional[str] = None,
                 collection: str = "memgate", gate: Any = "auto",
                 index_fields: Optional[list[str]] = None, principal: str = "langgraph",
                 action_preset: str = "agent_default", fsync: bool = True, encoder: Any = None,
                 ttl: Optional[Mapping[str, Any]] = None):
        self.ttl_config = check_ttl_config(ttl)  # type: ignore[assignment]
        self._lock = threading.RLock()
        self.principal = principal
        self.index_fields = list(index_fields or ["$"])
        for f in self.index_fields:
            tokenize_path(f)  # fail fast on a malformed path
        self.mstore = open_store(store, path=path, url=url, collection=collection, encoder=encoder,
                                 fsync=fsync)
        try:
            self.retriever, self.gate_decision = open_retriever(
                self.mstore, encoder=encoder, gate=gate, action_preset=action_preset)
        except BaseException:
            self.mstore.close()
            raise
        self.catalog = Catalog(self.mstore, key_field=KEY)

    def close(self) -> None:
        with self._lock:
            self.retriever.close()

    def __enter__(self) -> MemgateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the BaseStore interface --------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            _validate_op(op)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:  # (every TTL checked before anything is read or written)
            if isinstance(op, PutOp):
                check_ttl(op.ttl)
        with self._lock:
            expired = self.catalog.expired(now_stamp())
            if expired:  # (met by this batch: erased, audit "expired")
                self.retriever.erase(expired, event="expired", principal=self.principal)
            for i, op in enumerate(ops):
                if isinstance(op, GetOp):
                    results[i] = self._get(tuple(op.namespace), str(op.key), op.refresh_ttl)
                elif isinstance(op, SearchOp):
                    results[i] = self._search(op)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op)
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), str(op.key))] = op
                else:
                    raise ValueError(f"unknown operation type {type(op).__name__}")
            new: dict[str, list[tuple[str, dict[str, Any], list[str]]]] = {}  # namespace -> (text, attributes, markers) of new keys
            for (namespace, key), op in puts.items():
                if op.value is None:
                    self._delete(namespace, key)
                elif not self._put(namespace, key, op.value, op.index, op.ttl):
                    text, attrs, markers = self._prepare(namespace, key, op.value, op.index, op.ttl)
                    new.setdefault(to_namespace(namespace), []).append((text, attrs, markers))
            for ns, rows in new.items():  # new keys: embedded in one batch, one write per namespace
                self.retriever.add_many(
                    [t for t, _, _ in rows], namespace=ns, principal=self.principal,
                    fields=[{"memory_id": f"lg-{uuid.uuid4().hex[:16]}", "attributes": a, "markers": m,
                             "policy_tags": [DEFAULT_POLICY_TAG]} for _, a, m in rows])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- operations ---------------------------------------------------------------------------

    def _item(self, record: Any) -> Item:
        return Item(**self._item_fields(record))

    def _search_item(self, record: Any, score: Optional[float] = None,
                     gate_risk: Optional[float] = None) -> SearchItem:
        return GatedSearchItem(score=score, gate_risk=gate_risk, **self._item_fields(record))

    @staticmethod
    def _item_fields(record: Any) -> dict[str, Any]:
        attrs = record.attributes
        return dict(namespace=from_namespace(record.namespace), key=attrs[KEY], value=attrs[VALUE],
                    created_at=datetime.fromisoformat(record.created_at),
                    updated_at=datetime.fromisoformat(record.updated_at))

    def _get(self, namespace: tuple[str, ...], key: str, refresh: bool = False) -> Optional[Item]:
        memory_id = self.catalog.by_key(to_namespace(namespace), key)
        record = self.mstore.get(memory_id, namespace=to_namespace(namespace)) if memory_id else None
        if record is None or record.forgotten or is_expired(record.attributes, now_stamp()):
            return None
        return self._item(self._refreshed(record) if refresh else record)

    def _refreshed(self, record: Any) -> Any:
        """The record with its expiry restarted from its TTL (an item without one: as it is)."""
        minutes = record.attributes.get(TTL)
        if not isinstance(minutes, (int, float)):
            return record
        attrs = {**record.attributes, EXPIRES_KEY: expiry_after(float(minutes))}
        return self.retriever.update(record.memory_id, record.revision, principal=self.principal,
                                     namespace=record.namespace, attributes=attrs)

    def _text(self, value: Mapping[str, Any], index: Any) -> tuple[str, bool, list[str]]:
        """The record's text, whether it is ranked by queries, and the indexed content leaves."""
        leaves = _leaves(value)
        if index is False:
            return "\n".join(leaves) or "{}", False, leaves
        texts: list[str] = []
        for field in (self.index_fields if index is None else index):
            texts.extend(leaves if field == "$" else get_text_at_path(value, field))
        text = "\n".join(t for t in texts if t.strip())
        if not text:  # nothing to embed: stored and listed, never ranked by a query
            return "\n".join(leaves) or "{}", False, leaves
        return text, True, [t for t in texts if t.strip()]

    def _prepare(self, namespace: tuple[str, ...], key: str, value: Any,
                 index: Any, ttl: Optional[float] = None) -> tuple[str, dict[str, Any], list[str]]:
        """(text, attributes, markers) of the record that holds the item."""
        if not isinstance(value, Mapping):
            raise ValueError(f"put {namespace}/{key}: value must be a mapping, got {type(value).__name__}")
        text, indexed, content = self._text(value, index)
        markers = [c for c in dict.fromkeys(content) if not is_whole_only(tokens_v2(c), "text", word_count(c))]
        minutes = check_ttl(ttl)
        lifetime = {} if minutes is None else {TTL: minutes, EXPIRES_KEY: expiry_after(minutes)}
        return text, {KEY: key, VALUE: dict(value), INDEXED: indexed, **lifetime}, markers

    def _put(self, namespace: tuple[str, ...], key: str, value: Any, index: Any,
             ttl: Optional[float] = None) -> bool:
        """Update the key's live record; False when the key has none (the caller adds it)."""
        current = self.catalog.by_key(to_namespace(namespace), key)
        if current is None:
            return False
        text, attrs, markers = self._prepare(namespace, key, value, index, ttl)
        record = self.mstore.get(current, namespace=to_namespace(namespace))
        changes: dict[str, Any] = {"attributes": attrs, "markers": markers}
        if record.text != text:
            changes["text"] = text
        self.retriever.update(current, record.revision, principal=self.principal,
                              namespace=to_namespace(namespace), **changes)
        return True

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        memory_id = self.catalog.by_key(to_namespace(namespace), key)
        if memory_id is not None:
            keyed = (f"The item {key!r} was deleted at the user's request; do not recall, repeat "
                     "or re-store its content.")
            generic = "An item was deleted at the user's request; do not recall, repeat or re-store its content."
            for text in (keyed, generic):  # a directive may not repeat the forgotten content:
                try:  # when the key is part of it, the directive does not name the key
                    self.retriever.forget(memory_id, principal=self.principal,
                                          namespace=to_namespace(namespace), directive_text=text,
                                          directive_id=derived_id(memory_id, "-forget"))
                    break
                except RepeatedDetailError:  # (refused before anything is written)
                    if text is generic:
                        raise

    def _namespaces_under(self, prefix: tuple[str, ...]) -> list[str]:
        out = []
        for ns in self.catalog.namespaces():
            parsed = from_namespace(ns)
            if parsed is not None and parsed[: len(prefix)] == prefix:
                out.append(ns)
        return out

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 1 or op.offset < 0:
            raise ValueError(f"search: limit must be >= 1 and offset >= 0, got {op.limit}, {op.offset}")
        if op.query and op.offset + op.limit > MAX_LIMIT:  # a ranked search ranks at most MAX_LIMIT
            raise ValueError(f"search: field 'limit' with a query: offset + limit must be at most "
                             f"{MAX_LIMIT} (MAX_LIMIT), got {op.offset} + {op.limit}")
        namespaces = self._namespaces_under(tuple(op.namespace_prefix))
        flt = op.filter or {}
        at = now_stamp()
        keyed = self.catalog.ids(
            namespaces, where=lambda a: KEY in a and not is_expired(a, at)
            and all(_compare(a[VALUE].get(k), v) for k, v in flt.items()))
        if not keyed:
            return []
        if not op.query:
            records = sorted(self.mstore.get_many(keyed).values(), key=lambda r: (r.created_at, r.memory_id))
            page = records[op.offset: op.offset + op.limit]
            return [self._search_item(self._refreshed(r) if op.refresh_ttl else r) for r in page]
        records = self.mstore.get_many(keyed)
        indexed = [i for i in keyed if records[i].attributes.get(INDEXED)]
        hits: list[SearchItem] = []
        if indexed:
            ctx = QueryContext(query_id=f"lg-q-{uuid.uuid4().hex}", text="", principal=self.principal,
                               namespaces=frozenset(namespaces), time=now_utc())
            result = self.retriever.retrieve(op.query, ctx, k=op.offset + op.limit, only_ids=indexed)
            hits = [self._search_item(self._refreshed(it.memory) if op.refresh_ttl else it.memory, it.score,
                                      it.gate_risk)
                    for it in result.items][op.offset:]
        if len(hits) < op.limit:  # as InMemoryStore: unindexed matches fill the rest, unscored
            rest = sorted((records[i] for i in keyed if not records[i].attributes.get(INDEXED)),
                          key=lambda r: (r.created_at, r.memory_id))
            hits.extend(self._search_item(r) for r in rest[: op.limit - len(hits)])
        return hits

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [t for t in (from_namespace(ns) for ns in self.catalog.namespaces()) if t is not None]
        at = now_stamp()
        keyed = {t for t in found
                 if self.catalog.ids([to_namespace(t)], where=lambda a: KEY in a and not is_expired(a, at))}
        names = [t for t in keyed if all(_matches(m, t) for m in op.match_conditions or ())]
        if op.max_depth is not None:
            return sorted({t[: op.max_depth] for t in names})[op.offset: op.offset + op.limit]
        return sorted(names)[op.offset: op.offset + op.limit]


__all__ = ["GatedSearchItem", "MemgateStore", "from_namespace", "to_namespace"]
