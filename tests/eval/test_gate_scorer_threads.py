"""``GateScorer(threads=N)`` (make demo: 1) scores on N torch threads and gives back the caller's
thread count; the scores are the default's up to float rounding."""

from __future__ import annotations

import numpy as np
import torch

from memgate.contract.config import resolve_path
from memgate.eval.routes import GateScorer
from memgate.model.gate import MemGate


def test_one_thread_scores_match_the_default_and_the_count_is_restored():
    gate = MemGate.from_pretrained(resolve_path("checkpoints/memgate-minilm-l6"))
    gate.eval()
    rng = np.random.default_rng(0)
    M = rng.standard_normal((1500, gate.config.dim)).astype(np.float32)
    Q = rng.standard_normal((40, gate.config.dim)).astype(np.float32)
    wanted = {qi: rng.choice(len(M), int(rng.integers(5, 201)), replace=False) for qi in range(len(Q))}
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        one, default = GateScorer(gate, M, Q, threads=1), GateScorer(gate, M, Q)
        one.prefetch(wanted)
        assert torch.get_num_threads() == 2
        default.prefetch(wanted)
        for qi, candidates in wanted.items():
            a, b = one.scores(qi, candidates), default.scores(qi, candidates)
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
        assert one.gate_scorings == default.gate_scorings == sum(len(c) for c in wanted.values())
    finally:
        torch.set_num_threads(before)
