"""The forms of a text that suppression matching reads besides the text itself: HTML entities
and percent-encoding decoded, and right-to-left overrides shown as they display.

A forgotten detail written ``&#52;&#52;&#49;&#55;``, ``%34%34%31%37`` or
``code \\u202e7144\\u202c`` (a right-to-left override: it *displays* ``4417``) reads as ``4417``
to a person; :func:`matching_views` gives those readings, and the suppression list
(:mod:`memgate.retriever.records.suppression`) checks every view of a field, so any one of them
repeating forgotten content refuses the write. Bidi controls themselves are removed by the
normalisation (:mod:`memgate.contract.text_normal`, step 2), so the *logical* order (``7144``)
is matched too.

Not decoded (documented misses): base64, hex, rot13 and any other encoding a person does not
read at a glance. Decoding runs at most :data:`MAX_ROUNDS` times (``&amp;#52;`` is decoded
twice), so the cost stays linear.
"""

from __future__ import annotations

import html
import re
from urllib.parse import unquote

MAX_ROUNDS = 3
RLO, LRO, PDF = "\u202e", "\u202d", "\u202c"
_OVERRIDE = re.compile("\u202e([^\u202a-\u202e\u2066-\u2069\n]*)(?:\u202c|(?=[\u202a-\u202e\u2066-\u2069\n])|$)")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")


def decoded(text: str) -> str:
    """HTML character references and percent-escapes decoded (up to :data:`MAX_ROUNDS` rounds)."""
    for _ in range(MAX_ROUNDS):
        out = text
        if "&" in out:
            out = html.unescape(out)
        if _PERCENT.search(out):
            out = unquote(out, errors="strict") if _utf8(out) else out
        if out == text:
            break
        text = out
    return text


def _utf8(text: str) -> bool:
    try:
        unquote(text, errors="strict")
        return True
    except UnicodeDecodeError:
        return False


def displayed(text: str) -> str:
    """The text with every right-to-left override's span reversed (as it displays)."""
    if RLO not in text:
        return text
    return _OVERRIDE.sub(lambda m: m.group(1)[::-1], text)


def matching_views(text: str) -> list[str]:
    """``text`` first, then each different reading of it (decoded, displayed, both)."""
    views = [text]
    for view in (decoded(text), displayed(text), displayed(decoded(text))):
        if view not in views:
            views.append(view)
    return views


__all__ = ["MAX_ROUNDS", "decoded", "displayed", "matching_views"]
