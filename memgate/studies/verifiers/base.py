"""The text-only verifier interface: what a verifier sees, what it returns, and the strict parser.

A verifier sees **only** the query text and the candidate memory texts (never metadata, ids,
labels, route or group names): ``Verifier.verify`` accepts plain strings and nothing else. Each
memory text is truncated to a byte budget (default 2,048 UTF-8 bytes) without splitting a
character. It returns, per candidate and in candidate order, a probability vector over
``(admissible, inadmissible, unknown)`` and optionally the same three-way vector for the
``policy`` and ``lifecycle`` axes.

Parsing is strict (``parse_verdicts``): exact candidate count and order, known keys only, every
value a real number in [0, 1], every vector summing to 1 within 1e-4. Anything else raises
``VerifierOutputError``; nothing is ever silently defaulted.
"""

from __future__ import annotations

import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

LABELS: tuple[str, str, str] = ("admissible", "inadmissible", "unknown")
AXES: tuple[str, str] = ("policy", "lifecycle")
DEFAULT_MAX_BYTES = 2048
SUM_TOL = 1e-4


class VerifierOutputError(ValueError):
    """A verifier answer that does not have exactly the promised shape and values."""


class VerifierInputError(TypeError):
    """A verifier was handed something other than a query string and candidate strings."""


def truncate_utf8(text: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes`` bytes.

    Never splits a code point: a multi-byte character that does not fit is left out whole.
    """
    if not isinstance(text, str):
        raise VerifierInputError(f"text must be a str, got {type(text).__name__}")
    if type(max_bytes) is not int or max_bytes < 0:
        raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    cut = max_bytes
    # Back off over continuation bytes (0b10xxxxxx) to the start of the character at ``cut``.
    while cut > 0 and (raw[cut] & 0xC0) == 0x80:
        cut -= 1
    return raw[:cut].decode("utf-8")


@dataclass(frozen=True)
class VerifierInput:
    """Everything a verifier may see: one query text and candidate texts (already truncated)."""

    query: str
    candidates: tuple[str, ...]
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def build(cls, query: str, candidates: Sequence[str], max_bytes: int = DEFAULT_MAX_BYTES) -> VerifierInput:
        if not isinstance(query, str):
            raise VerifierInputError(
                f"query must be the query text (str), got {type(query).__name__}: a verifier never "
                "sees query metadata")
        if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
            raise VerifierInputError("candidates must be a sequence of memory texts (str)")
        texts = []
        for i, c in enumerate(candidates):
            if not isinstance(c, str):
                raise VerifierInputError(
                    f"candidates[{i}] must be the memory text (str), got {type(c).__name__}: a "
                    "verifier never sees ids, metadata or labels")
            texts.append(truncate_utf8(c, max_bytes))
        return cls(query=query, candidates=tuple(texts), max_bytes=max_bytes)


def _check_vector(raw: Any, where: str) -> tuple[float, float, float]:
    if not isinstance(raw, dict):
        raise VerifierOutputError(f"{where}: expected an object with keys {list(LABELS)}, got {type(raw).__name__}")
    missing = [k for k in LABELS if k not in raw]
    extra = sorted(set(raw) - set(LABELS))
    if missing or extra:
        raise VerifierOutputError(f"{where}: missing keys {missing}, unknown keys {extra}")
    values = []
    for key in LABELS:
        x = raw[key]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise VerifierOutputError(f"{where}.{key}: must be a number, got {x!r}")
        try:
            x = float(x)
        except OverflowError:  # a huge JSON integer
            raise VerifierOutputError(f"{where}.{key}: must be in [0, 1], got an integer of "
                                      f"{len(str(x))} digits") from None
        if not math.isfinite(x) or x < 0.0 or x > 1.0:
            raise VerifierOutputError(f"{where}.{key}: must be in [0, 1], got {x!r}")
        values.append(x)
    total = sum(values)
    if abs(total - 1.0) > SUM_TOL:
        raise VerifierOutputError(f"{where}: probabilities sum to {total!r}, not 1 within {SUM_TOL}")
    return (values[0], values[1], values[2])


@dataclass(frozen=True)
class CandidateVerdict:
    """One candidate's probabilities over (admissible, inadmissible, unknown), plus optional
    per-axis vectors over the same three values (allowed by the axis / violated / unresolved)."""

    probs: tuple[float, float, float]
    policy: Optional[tuple[float, float, float]] = None
    lifecycle: Optional[tuple[float, float, float]] = None

    def __post_init__(self) -> None:
        _check_vector(dict(zip(LABELS, self.probs)), "probs")
        for axis in AXES:
            value = getattr(self, axis)
            if value is not None:
                _check_vector(dict(zip(LABELS, value)), axis)

    @property
    def p_admissible(self) -> float:
        return self.probs[0]

    @property
    def p_inadmissible(self) -> float:
        return self.probs[1]

    @property
    def p_unknown(self) -> float:
        return self.probs[2]

    def to_wire(self, index: int) -> dict:
        out: dict = {"index": index, **dict(zip(LABELS, self.probs))}
        for axis in AXES:
            value = getattr(self, axis)
            out[axis] = None if value is None else dict(zip(LABELS, value))
        return out


def _no_duplicate_keys(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise VerifierOutputError(f"duplicate key {key!r} in the verifier's JSON")
        out[key] = value
    return out


def parse_verdicts(payload: Any, n_candidates: int) -> list[CandidateVerdict]:
    """Parse a verifier answer strictly.

    ``payload``: a JSON string or the decoded object
    ``{"candidates": [{"index": i, "admissible": p, "inadmissible": p, "unknown": p,
    "policy": null | {...}, "lifecycle": null | {...}}, ...]}`` with exactly ``n_candidates``
    entries whose ``index`` is 0, 1, 2, ... in order (``policy`` and ``lifecycle`` may be
    omitted or null). Raises ``VerifierOutputError`` naming what is wrong.
    """
    if type(n_candidates) is not int or n_candidates < 0:
        raise ValueError(f"n_candidates must be a non-negative int, got {n_candidates!r}")
    if isinstance(payload, (bytes, bytearray)):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise VerifierOutputError(f"answer is not UTF-8: {exc}") from None
    if isinstance(payload, str):
        try:
            payload = json.loads(payload, object_pairs_hook=_no_duplicate_keys,
                                 parse_constant=lambda c: (_ for _ in ()).throw(
                                     VerifierOutputError(f"non-finite number {c} in the answer")))
        except json.JSONDecodeError as exc:
            raise VerifierOutputError(f"answer is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(payload, dict):
        raise VerifierOutputError(f"answer must be a JSON object, got {type(payload).__name__}")
    if set(payload) != {"candidates"}:
        raise VerifierOutputError(f"answer must have exactly the key 'candidates', got {sorted(payload)}")
    items = payload["candidates"]
    if not isinstance(items, list):
        raise VerifierOutputError(f"'candidates' must be a list, got {type(items).__name__}")
    if len(items) != n_candidates:
        raise VerifierOutputError(f"expected {n_candidates} candidates, got {len(items)}")
    out = []
    allowed = {"index", *LABELS, *AXES}
    for i, item in enumerate(items):
        where = f"candidates[{i}]"
        if not isinstance(item, dict):
            raise VerifierOutputError(f"{where}: must be an object, got {type(item).__name__}")
        extra = sorted(set(item) - allowed)
        if extra:
            raise VerifierOutputError(f"{where}: unknown keys {extra}")
        index = item.get("index")
        if type(index) is not int:
            raise VerifierOutputError(f"{where}: 'index' must be an integer, got {index!r}")
        if index != i:
            raise VerifierOutputError(f"{where}: index {index} out of order (expected {i})")
        probs = _check_vector({k: item[k] for k in LABELS if k in item}, where)
        axes = {}
        for axis in AXES:
            value = item.get(axis)
            axes[axis] = None if value is None else _check_vector(value, f"{where}.{axis}")
        out.append(CandidateVerdict(probs=probs, **axes))
    return out


@dataclass
class Ledger:
    """Calls, tokens, cost and latency of one verifier (cache hits cost nothing).

    ``seconds`` is the time of every ``verify`` call, cache hits included; ``answered_seconds``
    only that of the calls that ran the model, and ``scored_candidates`` the candidates it scored
    there, so ``answered_seconds / scored_candidates`` is the uncached cost per candidate whatever
    the cache held.

    Every disk-cache entry also records what answering it cost (``answer_record``: model seconds
    and tokens, the candidate's share where one forward pass scored several); a hit adds those to
    the ``cached_*`` fields, so a fully cached rerun still reports the cold cost and the tokens a
    query needs (``cold_seconds_per_candidate``). Entries written before this carry no record
    and are counted in ``cache_hits`` only."""

    calls: int = 0  # answered requests (network calls or local forward passes over a query)
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    answered_seconds: float = 0.0
    candidates: int = 0
    scored_candidates: int = 0
    cached_seconds: float = 0.0  # model seconds recorded by the cache entries that were hit
    cached_prompt_tokens: float = 0.0
    cached_completion_tokens: float = 0.0
    cached_cost_usd: float = 0.0  # what the hit entries cost when they were answered
    cached_candidates: int = 0  # candidates served by a hit that carried a record
    errors: dict = field(default_factory=dict)  # kind -> count

    def add(self, other: Ledger) -> None:
        for f in fields(self):
            if f.name != "errors":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for k, v in other.errors.items():
            self.errors[k] = self.errors.get(k, 0) + v

    def to_dict(self) -> dict:
        return asdict(self)

    def count_hit(self, entry: dict, candidates: int = 1) -> None:
        """Count one cache hit serving ``candidates`` candidates, with the cost its entry records."""
        self.cache_hits += 1
        record = entry.get("answered")
        if isinstance(record, dict):
            self.cached_seconds += float(record.get("seconds", 0.0))
            self.cached_prompt_tokens += float(record.get("prompt_tokens", 0.0))
            self.cached_completion_tokens += float(record.get("completion_tokens", 0.0))
            self.cached_cost_usd += float(record.get("cost_usd", 0.0))
            self.cached_candidates += candidates

    def cold_seconds_per_candidate(self) -> Optional[float]:
        """Model seconds per candidate with nothing cached: this run's model calls together with
        the cost recorded by the cache entries it hit (None when neither is known)."""
        n = self.scored_candidates + self.cached_candidates
        return (self.answered_seconds + self.cached_seconds) / n if n else None

    @contextmanager
    def timed(self):
        """Time one request into ``seconds`` and, when the backend counted a call during it (the
        model ran, even if its answer then failed to parse), into ``answered_seconds``. Backends
        add to ``calls`` exactly when they run the model; retries and their back-off sleeps are
        part of that call's time."""
        calls_before = self.calls
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds += elapsed
            if self.calls > calls_before:
                self.answered_seconds += elapsed


def answer_record(seconds: float, prompt_tokens: float, completion_tokens: float = 0.0,
                  cost_usd: float = 0.0) -> dict:
    """What answering one cache entry cost, stored inside the entry (see ``Ledger``)."""
    return {"seconds": round(float(seconds), 6), "prompt_tokens": round(float(prompt_tokens), 3),
            "completion_tokens": round(float(completion_tokens), 3), "cost_usd": round(float(cost_usd), 9)}


class Verifier(ABC):
    """Base class: subclasses implement ``_verify`` on an already-built ``VerifierInput``."""

    backend: str = "abstract"

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        if type(max_bytes) is not int or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.ledger = Ledger()

    @property
    def model_id(self) -> str:
        return self.backend

    def verify(self, query: str, candidates: Sequence[str]) -> list[CandidateVerdict]:
        """Probabilities per candidate, in candidate order (strings only; see module doc)."""
        request = VerifierInput.build(query, candidates, self.max_bytes)
        if not request.candidates:
            return []
        with self.ledger.timed():
            out = self._verify(request)
        if len(out) != len(request.candidates) or not all(isinstance(v, CandidateVerdict) for v in out):
            raise VerifierOutputError(
                f"{type(self).__name__} returned {len(out)} verdicts for {len(request.candidates)} candidates")
        self.ledger.candidates += len(out)
        return out

    @abstractmethod
    def _verify(self, request: VerifierInput) -> list[CandidateVerdict]:
        ...
