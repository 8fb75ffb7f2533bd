"""The suppression list: keyed hashes of forgotten content, per namespace, never the content.

When a record is forgotten its text and each of its markers become :class:`Suppressed` entries
in its namespace: an HMAC-SHA256, under a random key of the store, of the content normalised by
:mod:`memgate.contract.text_normal` (the one normalisation every surface uses), with the
normalisation version it was made under, the key's id and its length.

A write is *checked* field by field (:func:`content_fields`: the text, every marker, every key
and scalar leaf of the metadata, and the other free-text fields). Under version 2 a field
matches an entry when

- the entry is **contained** (content of at least :data:`MIN_CONTAINED_CHARS` characters that
  is not a forgotten *text* of fewer than :data:`MIN_CONTAINED_WORDS` words, nor, in entries made
  before that rule, a forgotten text of one word without digits): the field's normalised tokens, with
  the separators removed, hold the entry's characters starting and ending on token boundaries
  (so ``X4417``, ``4 4 1 7`` and ``44-17`` all hold ``4417``, and ``sug-ars`` holds ``sugars``,
  but ``14417`` does not hold ``4417`` and ``concatenate`` does not hold ``cat``);
- the entry is **whole** (shorter content, e.g. the memories "yes" or "thank you"): the write's
  whole *text* normalises to exactly the entry (``Yes!`` matches, ``yes please`` and ``thank you
  for the help`` do not; labels and metadata are never compared with whole entries, so
  forgetting "general" does not refuse the policy tag ``general``). The secret inside a short
  text is still looked for everywhere through its *markers*: a forget derives them from the
  text (:mod:`memgate.retriever.records.markers`: identifiers, numbers, e-mail addresses,
  phone and card numbers), so forgetting "PIN 3390" refuses "my code is 33 90".

Every field is checked as written and in each other reading of it
(:func:`memgate.contract.text_views.matching_views`: HTML entities and percent-encoding
decoded, right-to-left overrides as displayed).

Version-1 entries (stores written before version 2: token runs of NFKC, case-folded ``\\w+``
tokens) match a field whose version-1 tokens, or those of its version-2 folding, hold the
entry's token run (:func:`memgate.contract.text_normal.v1_views`).

The stores refuse a write with a matching field (unless the caller re-consents,
``allow_relearn=True``), refuse a forget directive that repeats the detail, and let the
retriever's answer-disclosure scan still flag a forgotten detail after its markers are erased.

Limits: the keys live in the store, so whoever can read the store's files can test guesses
against the hashes (a dictionary attack); an entry reveals the token count (version 1) or the
character count (version 2) of its content; what :mod:`memgate.contract.text_normal` does not
catch (paraphrase, translation, spelled-out numbers, content split across fields or writes) is
not matched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from memgate.contract.text_normal import (
    CURRENT_NORMALISATION,
    NORMALISATION_VERSIONS,
    fold,
    tokens_v2,
    v1_views,
)
from memgate.contract.text_views import matching_views

KINDS = ("text", "marker")
MIN_CONTAINED_CHARS = 4  # forgotten content shorter than this matches whole texts only
MIN_CONTAINED_WORDS = 3  # a forgotten *text* of fewer words matches whole texts only (markers
# derived from it are contained)
# (and so does a forgotten *text* of one word without digits: "yes", "vegetarian"; a marker is a
# target the caller chose, looked for inside texts from this length on)


def new_key() -> str:
    return os.urandom(32).hex()


def key_id(key: bytes) -> str:
    """A key's public id (entries name the key they were made under)."""
    return hashlib.sha256(b"memgate suppression key\x00" + key).hexdigest()[:16]


def digest(key: bytes, toks: Iterable[str]) -> str:
    """Version 1's digest of a token run ("\\x1f" never occurs inside a ``\\w`` token)."""
    return hmac.new(key, "\x1f".join(toks).encode("utf-8"), hashlib.sha256).hexdigest()


def digest_v2(key: bytes, joined: str) -> str:
    """Version 2's digest of normalised characters (tokens joined without separators)."""
    return hmac.new(key, b"memgate-suppression/2\x1f" + joined.encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Suppressed:
    """One forgotten text or marker of ``memory_id`` (an id, never content). ``n``: the token
    count (version 1) or character count (version 2) of the normalised content; ``key_id``: the
    key it was made under ("" = the store's own key); ``whole``: matches whole fields only."""

    namespace: str
    digest: str
    n: int
    kind: str  # "text" | "marker"
    memory_id: str
    version: int = 1
    key_id: str = ""
    whole: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "digest": self.digest, "n": self.n, "kind": self.kind,
                "memory_id": self.memory_id, "version": self.version, "key_id": self.key_id,
                "whole": self.whole}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Suppressed:
        """An entry from its stored form (entries written before versions read as version 1)."""
        unknown = sorted(set(raw) - {"namespace", "digest", "n", "kind", "memory_id", "version", "key_id", "whole"})
        if unknown:
            raise ValueError(f"suppression entry: unknown field(s) {unknown}")
        entry = cls(str(raw["namespace"]), str(raw["digest"]), int(raw["n"]), str(raw["kind"]),
                    str(raw["memory_id"]), int(raw.get("version", 1)), str(raw.get("key_id") or ""),
                    bool(raw.get("whole", False)))
        if entry.version not in NORMALISATION_VERSIONS or entry.kind not in KINDS:
            raise ValueError(f"suppression entry of {entry.memory_id!r}: field 'version' or 'kind' "
                             f"is unknown ({entry.version!r}, {entry.kind!r})")
        return entry

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.namespace, self.digest, self.memory_id)


def word_count(text: str) -> int:
    """Words of ``text`` after the normalisation: its whitespace-separated parts that hold a
    token (``Alice's`` and ``X-4417`` are one word each)."""
    return sum(1 for part in fold(text).split() if tokens_v2(part))


def is_whole_only(toks: list[str], kind: str, words: Optional[int] = None) -> bool:
    """Whether version-2 content of these tokens matches whole texts only (too short, or too
    common a shape, to be looked for inside other text). ``words`` (a forgotten text's
    :func:`word_count`): under :data:`MIN_CONTAINED_WORDS`, a text is whole-only; without it,
    the rule before that one (a text of one word without digits)."""
    chars = sum(len(t) for t in toks)
    one_word = len(toks) == 1 and not toks[0].isdigit()
    if kind == "text" and words is not None and words < MIN_CONTAINED_WORDS:
        return True
    return chars < MIN_CONTAINED_CHARS or (kind == "text" and one_word)


def entries_for(key: bytes, namespace: str, memory_id: str, text: str | None,
                markers: Iterable[str] = (), *, key_ref: str = "") -> list[Suppressed]:
    """Version-2 entries for a record about to be forgotten: its text and every marker with a
    token (``key_ref``: the id recorded for ``key``, "" for the store's own). The text's
    markers (:func:`memgate.retriever.records.markers.derived_markers`) are the caller's to
    pass: this function derives nothing."""
    out = []
    for kind, content in [("text", text)] + [("marker", m) for m in markers]:
        toks = tokens_v2(content) if content else []
        if toks and content:
            joined = "".join(toks)
            whole = is_whole_only(toks, kind, word_count(content) if kind == "text" else None)
            out.append(Suppressed(namespace, digest_v2(key, joined), len(joined), kind, memory_id,
                                  CURRENT_NORMALISATION, key_ref, whole))
    return list({e.key: e for e in out}.values())


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    return None


def _attribute_fields(value: Any, path: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, Mapping):
        for k, sub in value.items():
            yield f"{path}.{k}", str(k)  # a key can hold the detail too
            yield from _attribute_fields(sub, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            yield from _attribute_fields(sub, f"{path}[{i}]")
    else:
        text = _scalar(value)
        if text is not None:
            yield path, text


def content_fields(memory: Any) -> list[tuple[str, str]]:
    """Every free-text field a record stores, as ``(field name, text)``: text, markers, the
    metadata's keys and scalar leaves (``attributes``), provenance, kind, domain, the
    applicability's subject and scope, policy tags, forbidden actions and supersession subjects
    (ids, times and enumerations are not content)."""
    out: list[tuple[str, str]] = []
    if memory.text is not None:
        out.append(("text", memory.text))
    out += [(f"markers[{i}]", m) for i, m in enumerate(memory.markers)]
    out += list(_attribute_fields(memory.attributes, "attributes"))
    for name in ("provenance", "kind", "domain"):
        if getattr(memory, name):
            out.append((name, getattr(memory, name)))
    for name in ("subject", "scope"):
        if getattr(memory.applicability, name):
            out.append((f"applicability.{name}", getattr(memory.applicability, name)))
    out += [(f"policy_tags[{i}]", t) for i, t in enumerate(memory.policy_tags or ())]
    out += [(f"forbids[{i}]", t) for i, t in enumerate(memory.forbids)]
    out += [(f"supersedes[{i}].scope.subject", s.scope.subject) for i, s in enumerate(memory.supersedes)
            if s.scope is not None and s.scope.subject]
    return out


def _match_v2(key: bytes, texts: list[str], entries: list[Suppressed]) -> dict[str, tuple[list[Suppressed], list[Suppressed]]]:
    """text -> (whole entries it equals, contained entries it holds)."""
    whole: dict[str, list[Suppressed]] = {}
    contained: dict[int, dict[str, list[Suppressed]]] = {}
    for e in entries:
        table = whole if e.whole else contained.setdefault(e.n, {})
        table.setdefault(e.digest, []).append(e)
    hits: dict[str, tuple[list[Suppressed], list[Suppressed]]] = {}
    for text in texts:
        toks = tokens_v2(text)
        if not toks:
            continue
        joined = "".join(toks)
        equal = list(whole.get(digest_v2(key, joined), ())) if whole else []
        inside: list[Suppressed] = []
        starts, ends = [], set()
        pos = 0
        for t in toks:
            starts.append(pos)
            pos += len(t)
            ends.add(pos)
        for n, table in contained.items():
            for start in starts:
                if start + n in ends:
                    inside += table.get(digest_v2(key, joined[start:start + n]), ())
        if equal or inside:
            hits[text] = (equal, inside)
    return hits


def _match_v1(key: bytes, texts: list[str], entries: list[Suppressed]) -> dict[str, tuple[list[Suppressed], list[Suppressed]]]:
    by_n: dict[int, dict[str, list[Suppressed]]] = {}
    for e in entries:
        by_n.setdefault(e.n, {}).setdefault(e.digest, []).append(e)
    hits: dict[str, tuple[list[Suppressed], list[Suppressed]]] = {}
    for text in texts:
        found: list[Suppressed] = []
        for toks in v1_views(text):
            for n, table in by_n.items():
                for i in range(len(toks) - n + 1):
                    found += table.get(digest(key, toks[i:i + n]), ())
        if found:
            hits[text] = ([], found)
    return hits


WHOLE_FIELDS = ("text",)  # the fields whole entries are compared with


def match_fields(keys: Mapping[str, bytes], fields: Iterable[tuple[str, str]],
                 entries: Iterable[Suppressed]) -> list[tuple[str, Suppressed]]:
    """``(field name, entry)`` for every entry a field matches (module doc; whole entries only
    against fields named in :data:`WHOLE_FIELDS`). ``keys``: key id -> key, "" for the store's
    own; an entry under a key not in ``keys`` is an error."""
    groups: dict[tuple[str, int], list[Suppressed]] = {}
    for e in entries:
        groups.setdefault((e.key_id, e.version), []).append(e)
    fields = [(name, view) for name, text in fields if isinstance(text, str) and text
              for view in matching_views(text)]
    if not groups or not fields:
        return []
    texts = list(dict.fromkeys(text for _, text in fields))
    by_text: dict[str, tuple[list[Suppressed], list[Suppressed]]] = {}
    for (kid, version), group in sorted(groups.items()):
        if kid not in keys:
            raise ValueError(f"suppression entries name key {kid!r}, which this store does not hold")
        match = _match_v2 if version == 2 else _match_v1
        for text, (equal, inside) in match(keys[kid], texts, group).items():
            seen = by_text.setdefault(text, ([], []))
            seen[0].extend(equal)
            seen[1].extend(inside)
    out: dict[tuple[Any, ...], tuple[str, Suppressed]] = {}
    for name, text in fields:
        equal, inside = by_text.get(text, ([], []))
        for e in [*(equal if name in WHOLE_FIELDS else ()), *inside]:
            out.setdefault((name, e.key), (name, e))
    return list(out.values())


def matching(keys: Mapping[str, bytes], text: str, entries: Iterable[Suppressed]) -> list[Suppressed]:
    """The entries ``text`` matches as one field (each entry at most once)."""
    hits = {e.key: e for _, e in match_fields(keys, [("text", text)], entries)}
    return sorted(hits.values(), key=lambda e: (e.namespace, e.memory_id, e.kind, e.digest))


__all__ = ["KINDS", "MIN_CONTAINED_CHARS", "MIN_CONTAINED_WORDS", "WHOLE_FIELDS", "Suppressed", "content_fields",
           "digest", "digest_v2", "entries_for", "is_whole_only", "key_id", "match_fields", "matching",
           "new_key", "word_count"]
