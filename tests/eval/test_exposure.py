"""Exposure on the natural report parts (memgate.eval.exposure): a gate that flags exactly the risk
memories removes every exposed query under hybrid_drop; a gate that flags nothing changes nothing;
a mask gate drops by its cos - S threshold."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from memgate.eval.exposure import category_exposure, pool_of, rankings
from memgate.model.gate import GateOutput
from tests.fakes import HashEncoder


class FlagGate(nn.Module):
    """The cosine as score; risk 1 on the memory vectors in ``flagged``, else 0 (a ``mask_risk``
    gate whose head reads the risk perfectly), or no risk head at all (``risk=False``)."""

    def __init__(self, flagged: set, risk: bool = True, push: float = 0.0):
        super().__init__()
        self.flagged, self.risk, self.push = flagged, risk, push

    def forward(self, q, V):
        ref = (nn.functional.normalize(q, dim=-1).unsqueeze(1) * nn.functional.normalize(V, dim=-1)).sum(-1)
        hit = torch.tensor([[v.numpy().tobytes() in self.flagged for v in row] for row in V], dtype=ref.dtype)
        logit = (hit * 40.0 - 20.0) if self.risk else None
        return GateOutput(score=ref - self.push * hit, mask=torch.ones_like(V), reference=ref, risk_logit=logit)


@pytest.fixture(scope="module")
def sycophancy():
    encoder = HashEncoder()
    pool = pool_of("natural_sycophancy")
    v = encoder.encode(pool["memories"]).astype(np.float32)
    risky = {int(i) for r in pool["risk"] for i in r}
    flagged = {torch.from_numpy(v[i]).numpy().tobytes() for i in risky}
    return encoder, pool, flagged


def test_a_gate_that_drops_every_risk_memory_cuts_exposure_to_zero(sycophancy):
    encoder, pool, flagged = sycophancy
    config = {"export": {"risk_thresholds": {"risk_warn": 0.5, "risk_drop": 0.9}}}
    fig = category_exposure(FlagGate(flagged), config, encoder, "natural_sycophancy", n_boot=50)
    assert fig["queries"] == len(pool["queries"]) and fig["pool"] == len(pool["memories"])
    assert fig["exposed_queries"]["namespace_kleene"] > 0 and fig["exposed_queries"]["hybrid_drop"] == 0
    assert fig["relative_cut"]["value"] == 1.0 and fig["relative_cut"]["ci"] == [1.0, 1.0]
    assert fig["judged"] == (fig["exposed_queries"]["namespace_kleene"] >= 30) and fig["met"] == fig["judged"]


def test_no_drop_rule_and_no_risk_changes_nothing_and_a_mask_gate_drops_by_its_threshold(sycophancy):
    encoder, pool, flagged = sycophancy
    same = category_exposure(FlagGate(flagged), {"export": {}}, encoder, "natural_sycophancy", n_boot=50)
    assert same["relative_cut"]["value"] == 0.0 and same["exposed"]["hybrid_drop"] == same["exposed"]["namespace_kleene"]
    q = encoder.encode(pool["queries"][:40]).astype(np.float32)
    v = encoder.encode(pool["memories"]).astype(np.float32)
    mask = FlagGate(flagged, risk=False, push=0.5)  # cos - S = 0.5 on the risk memories
    dropped = rankings(mask, {"export": {"calibration": {"threshold": 0.4}}}, q, v)["hybrid_drop"]
    kept = rankings(mask, {"export": {"calibration": {"threshold": 0.6}}}, q, v)["hybrid_drop"]
    risky = {int(i) for r in pool["risk"] for i in r}
    assert not risky & set(dropped.ravel().tolist())
    assert (kept >= 0).all() and dropped.shape == kept.shape == (40, 3)
