"""De-duplication on ``Memory.add``: an add whose normalised text equals a current memory of the
same scope (namespace, ``agent_id``, ``run_id``) returns that memory unchanged (audit event
``deduplicated``), whatever the metadata of either; an explicit ``memory_id`` always stores a
record of its own. Normalised: Unicode NFKC, case-folded, runs of whitespace as one space,
trailing ``.!?`` and spaces dropped. Near-duplicates (cosine at or above
``Memory(dedup_cosine=...)``) are folded the same way when that is set (off by default)."""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from memgate.integrations.expiry import is_expired, now_stamp
from memgate.integrations.scoping import SCOPE_KEYS


def normal_text(text: str) -> str:
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return folded.rstrip(".!? ")


def text_digest(text: Optional[str]) -> Optional[str]:
    if not isinstance(text, str):
        return None
    return hashlib.sha256(normal_text(text).encode("utf-8")).hexdigest()


def check_cosine(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= 1:
        raise ValueError(f"field 'dedup_cosine' must be a number in (0, 1] or None, got {value!r}")
    return float(value)



def duplicate_of(catalog: Any, retriever: Any, text: str, namespace: str, attributes: Mapping[str, Any],
                 cosine: Optional[float]) -> Optional[str]:
    """The id of a current memory of ``namespace`` with the same ``agent_id`` / ``run_id`` that
    ``text`` repeats: the oldest whose normalised text is equal, else (``cosine`` set) the
    nearest at or above that cosine; None when none does."""
    at = now_stamp()
    same_scope = {k: attributes.get(k) for k in SCOPE_KEYS}
    mine = catalog.ids([namespace], directives=False,
                       where=lambda a: {k: a.get(k) for k in SCOPE_KEYS} == same_scope and not is_expired(a, at))
    digest = text_digest(text)
    exact = set(catalog.same_text(namespace, digest)) if digest else set()
    found = [i for i in mine if i in exact]
    store = retriever.store
    if found:  # (the oldest, when explicit ids stored the text again)
        records = store.get_many(found, namespace=namespace).values()
        return str(min(records, key=lambda r: (r.created_at or "", r.memory_id)).memory_id)
    if cosine is None or not mine:
        return None
    q = retriever.embedder.embed(text)
    vectors = store.vectors_for(mine, namespace=namespace)
    best = max(((float(np.dot(q, v)), i) for i, v in vectors.items()), default=None)
    return best[1] if best is not None and best[0] >= cosine else None


__all__ = ["check_cosine", "duplicate_of", "normal_text", "text_digest"]
