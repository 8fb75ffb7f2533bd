"""What a retrieval returns: the items, the Kleene exclusions, the gate's drops, and the
disclosures an answer scan finds (plain frozen dataclasses, no behaviour beyond formatting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from memgate.retriever.records.memory import StoredMemory


@dataclass(frozen=True)
class RetrievedItem:
    """One returned memory: its ranking scores, resolved lifecycle, flags and allowed action."""

    memory_id: str
    rank: int
    text: str
    namespace: str
    score: float  # the ranking score: the gate's for re-scored items, else the cosine
    cosine: float
    gate_score: Optional[float]
    lifecycle: str  # the lifecycle state resolved for this query (scoped supersession, validity)
    admissible: Optional[bool]  # True, or None when kept unresolved (fail-open)
    unresolved: tuple[str, ...]
    needs_review: bool
    review_reasons: tuple[str, ...]
    action: Optional[str]
    action_binding: tuple[str, ...]
    memory: StoredMemory
    # the gate's calibrated risk sigmoid(r) of this memory for the query: None without a gate, for
    # an item the gate did not re-score, or for a score form without a risk head (mask)
    gate_risk: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id, "namespace": self.namespace, "rank": self.rank,
            "score": self.score,
            "cosine": self.cosine, "gate_score": self.gate_score, "gate_risk": self.gate_risk,
            "lifecycle": self.lifecycle,
            "admissible": self.admissible, "unresolved": list(self.unresolved),
            "needs_review": self.needs_review, "action": self.action,
            "action_binding": list(self.action_binding),
        }


@dataclass(frozen=True)
class Exclusion:
    """A Kleene-excluded candidate (not retrieved) and why; ``cosine_rank`` is its rank in the
    unfiltered cosine ranking of the support."""

    memory_id: str
    reasons: tuple[str, ...]
    unresolved: tuple[str, ...]
    lifecycle: str
    cosine_rank: int
    namespace: Optional[str] = None


@dataclass(frozen=True)
class GateDrop:
    """A re-scored candidate the gate dropped: by ``rule`` ``"suppression"`` (score form mask:
    ``suppression = cos - S >= threshold``) or ``"risk"`` (mask_risk: ``gate_risk >= threshold``,
    the checkpoint's ``risk_drop``; ``suppression`` is then ``cos - S'``, for the record)."""

    memory_id: str
    suppression: float
    threshold: float
    namespace: Optional[str] = None
    rule: str = "suppression"
    gate_risk: Optional[float] = None


@dataclass(frozen=True)
class RetrievalResult:
    query_id: str
    principal: Optional[str]
    namespaces: tuple[str, ...]
    route: str
    k: int
    items: tuple[RetrievedItem, ...]
    excluded: tuple[Exclusion, ...]
    dropped: tuple[GateDrop, ...]
    excluded_counts: dict[str, int]
    candidates: int
    unresolved_kept: int
    gate_version: Optional[str]
    policy_version: str
    action_policy_version: Optional[str]
    timings_ms: dict[str, float]
    set_apart: tuple[str, ...] = ()  # ids of set-apart candidates that ranked within the top k (not returned)

    @property
    def ids(self) -> list[str]:
        return [item.memory_id for item in self.items]

    def format(self, width: int = 64) -> str:
        """A plain-text table of items, exclusions and drops (for examples and debugging)."""
        lines = [
            f"query {self.query_id} principal={self.principal} namespaces={list(self.namespaces)} "
            f"route={self.route} candidates={self.candidates}"
        ]
        for it in self.items:
            text = it.text if len(it.text) <= width else it.text[: width - 3] + "..."
            flags = []
            if it.lifecycle != "current":
                flags.append(f"lifecycle={it.lifecycle}")
            if it.unresolved:
                flags.append(f"unresolved={','.join(it.unresolved)}")
            if it.needs_review:
                flags.append("needs_review")
            gate = "" if it.gate_score is None else f" gate={it.gate_score:.3f}"
            gate += "" if it.gate_risk is None else f" risk={it.gate_risk:.3f}"
            action = "" if it.action is None else f" action={it.action}"
            binding = f" ({','.join(it.action_binding)})" if it.action_binding else ""
            lines.append(
                f"  #{it.rank} {it.memory_id:<12} cos={it.cosine:.3f}{gate}{action}{binding}"
                + (f" [{'; '.join(flags)}]" if flags else "")
            )
            lines.append(f"      {text}")
        for ex in self.excluded:
            lines.append(
                f"  excluded {ex.memory_id:<12} reasons={','.join(ex.reasons)}"
                f" lifecycle={ex.lifecycle} (cosine rank {ex.cosine_rank})"
            )
        for d in self.dropped:
            lines.append(
                f"  dropped  {d.memory_id:<12} gate risk {d.gate_risk:.3f} >= {d.threshold:.3f}"
                if d.rule == "risk" and d.gate_risk is not None else
                f"  dropped  {d.memory_id:<12} gate suppression {d.suppression:.3f} >= {d.threshold:.3f}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Disclosure:
    """An answer repeated a protected marker of ``memory_id`` (``forgotten``: the text or a
    marker of a forgotten record, found through the suppression list's keyed hashes)."""

    memory_id: str
    exposed: bool
    retrieved: bool
    forgotten: bool = False


__all__ = ["Disclosure", "Exclusion", "GateDrop", "RetrievalResult", "RetrievedItem"]
