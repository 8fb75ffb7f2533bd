"""``PostgresStore``'s suppression list (a mixin of :class:`memgate.retriever.pg_store.PostgresStore`):
the ``suppressed`` table (namespace, digest, length, kind, memory id, normalisation version, key
id, whole-only flag) and ``suppression_keys`` (keys of imported entries); the store's own key is
the ``suppression_key`` row of ``meta``. Each primitive runs inside the caller's transaction
when there is one (:mod:`memgate.retriever.semantics`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional

from memgate.retriever.pg_schema import from_db, to_db
from memgate.retriever.suppression import Suppressed

_COLUMNS = "namespace, digest, n, kind, memory_id, version, key_id, whole"


class PostgresSuppression:
    """The suppression primitives over ``self._rows`` / ``self._run`` (one SQL statement in the
    write's transaction, or on its own) and ``self._key``."""

    def _suppression_key(self) -> bytes:
        return self._key

    def _foreign_keys(self) -> dict[str, bytes]:
        return {k: bytes.fromhex(v) for k, v in self._rows("SELECT key_id, key FROM {s}.suppression_keys")}

    def _put_foreign_keys(self, keys: Mapping[str, bytes]) -> None:
        self._run_many("INSERT INTO {s}.suppression_keys VALUES (%s, %s) ON CONFLICT DO NOTHING",
                       [(k, v.hex()) for k, v in keys.items()])

    def _suppressed(self, namespaces: Optional[Iterable[str]]) -> list[Suppressed]:
        if namespaces is None:
            rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.suppressed")
        else:
            rows = self._rows(f"SELECT {_COLUMNS} FROM {{s}}.suppressed WHERE namespace = ANY(%s)",
                              ([to_db(n) for n in sorted(set(namespaces))],))
        return [Suppressed(from_db(a), b, c, d, from_db(e), f, g, bool(h)) for a, b, c, d, e, f, g, h in rows]

    def _put_suppressed(self, entries: Iterable[Suppressed]) -> None:
        self._run_many(
            f"INSERT INTO {{s}}.suppressed ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [(to_db(e.namespace), e.digest, e.n, e.kind, to_db(e.memory_id), e.version, e.key_id,
              bool(e.whole)) for e in entries])

    def _lift_suppressed(self, entries: Iterable[Suppressed]) -> None:
        self._run_many("DELETE FROM {s}.suppressed WHERE namespace = %s AND digest = %s AND memory_id = %s",
                       [(to_db(e.namespace), e.digest, to_db(e.memory_id)) for e in entries])


__all__ = ["PostgresSuppression"]
