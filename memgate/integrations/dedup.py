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
from typing import Any, Optional


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


__all__ = ["check_cosine", "normal_text", "text_digest"]
