"""Calibrate drop thresholds of text-only scorers on a dev / select split (never test, never a
report part), with the one rule of ``memgate.eval.calibration``.

A scorer maps (query vectors, memory vectors) of labelled pairs to a score where higher means
"more likely inadmissible": the learned gate's suppression ``S_ref - S`` or the embedding
classifier's P(inadmissible).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from memgate.contract.sources import EvalSource
from memgate.eval.calibration import Calibration, calibrate_threshold, with_anchor_floors

PairScorer = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (n, d), (n, d) -> (n,)


def labelled_pairs(source: EvalSource) -> tuple[np.ndarray, np.ndarray, list, list]:
    """Indices of (query, memory) for every explicit label, with a and is-required per pair."""
    query_index = {q.query_id: i for i, q in enumerate(source.queries)}
    qi, mi, admissible, required = [], [], [], []
    for qid, labels in sorted(source.labels.items()):
        for mid, label in sorted(labels.items()):
            qi.append(query_index[qid])
            mi.append(source.index_of[mid])
            admissible.append(label.admissible)
            required.append(label.relevance == "required")
    return np.array(qi, dtype=np.int64), np.array(mi, dtype=np.int64), admissible, required


def gate_suppression(gate) -> PairScorer:
    @torch.no_grad()
    def score(q: np.ndarray, v: np.ndarray) -> np.ndarray:
        qt = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32))
        vt = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)).unsqueeze(1)
        out = gate(qt, vt)
        return (out.reference[:, 0] - out.score[:, 0]).double().numpy()

    return score


def calibrate_scorer(
    scorer: PairScorer,
    source: EvalSource,
    memory_vectors: np.ndarray,
    query_vectors: np.ndarray,
    data_hash: str | None,
    max_anchor_drop: float = 0.01,
    anchor_sets: dict | None = None,
) -> Calibration:
    """The one rule on ``source``'s labelled pairs; with ``anchor_sets`` (name -> (query vectors,
    memory vectors) of benign real pairs, select parts only) the threshold is raised until at
    most ``max_anchor_drop`` of each set is dropped too (``calibration.with_anchor_floors``)."""
    qi, mi, admissible, required = labelled_pairs(source)
    scores = _scores(scorer, query_vectors[qi], memory_vectors[mi])
    calibration = calibrate_threshold(scores.tolist(), admissible, required,
                                      max_anchor_drop=max_anchor_drop, data_hash=data_hash)
    if not anchor_sets:
        return calibration
    sets = {name: _scores(scorer, q, v) for name, (q, v) in anchor_sets.items()}
    return with_anchor_floors(calibration, sets, scores, admissible, required)


def _scores(scorer: PairScorer, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.concatenate([scorer(q[s:s + 8192], v[s:s + 8192])
                           for s in range(0, len(q), 8192)]) if len(q) else np.zeros(0)
