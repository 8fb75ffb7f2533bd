"""Fixtures shared by the test folders (which mirror the memgate/ layers), and the one Hypothesis
profile every property test runs under: derandomised (the same examples on every run and
machine), a fixed number of examples, no deadline (the shared 2-core machine's timing varies)
and no example database (nothing written into the checkout)."""

import pytest
from hypothesis import HealthCheck, settings

from memgate.model.encoder import Encoder, EncoderConfig

PROPERTY_EXAMPLES = 10  # per property test (and per surface and store kind where parametrised)

settings.register_profile(
    "memgate", derandomize=True, max_examples=PROPERTY_EXAMPLES, deadline=None, database=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile("memgate")


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """The bundled encoder with an embedding cache of its own per test module."""
    return Encoder(EncoderConfig(cache_dir=str(tmp_path_factory.mktemp("cache"))))


@pytest.fixture(autouse=True, scope="session")
def _gate_graph_cache(tmp_path_factory):
    """Built gate graphs (memgate.model.scoring.cached_gate_graph) go to a folder of this test
    session, not the user's cache (subprocesses inherit it)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("MEMGATE_GATE_CACHE", str(tmp_path_factory.mktemp("gate-graphs")))
    yield
    patch.undo()


@pytest.fixture(autouse=True, scope="session")
def _postgres_server():
    """One real PostgreSQL server (pgserver) for the whole session: started by the first test
    that opens a postgres store (``tests.pg_test_server.url``), stopped here at the end; each
    store gets a schema of its own."""
    from tests import pg_test_server

    yield
    pg_test_server.stop()


@pytest.fixture(scope="session")
def mask_risk_checkpoint(tmp_path_factory):
    """A tiny gate of score form ``mask_risk`` (issue 44 item 7), trained for real: 40 Adam steps
    of the project's preference loss with the risk head's calibration term
    (``LossConfig(risk_weight=1.0)``: m- = 1, m+ = 0) on 64 example triples embedded by the
    bundled encoder (the process-wide ``default_encoder()``, which the surfaces under test load
    too), exported with ``save_pretrained`` and no risk thresholds. Tests copy it before writing
    thresholds into its ``config.json``."""
    import json
    from itertools import islice

    import torch

    from memgate.contract.config import REPO_ROOT
    from memgate.integrations.opening import default_encoder
    from memgate.model.gate import MemGate, MemGateConfig
    from memgate.train.objective import LossConfig, preference_loss

    with open(REPO_ROOT / "examples/triples/train.jsonl") as handle:
        rows = [json.loads(line) for line in islice(handle, 64)]
    encoder = default_encoder()
    texts = sorted({r[k] for r in rows for k in ("query_text", "pos_text", "neg_text")})
    vectors = torch.from_numpy(encoder.encode(texts, progress=False))
    at = {t: i for i, t in enumerate(texts)}
    q, pos, neg = (vectors[[at[r[k]] for r in rows]] for k in ("query_text", "pos_text", "neg_text"))
    identity = encoder.identity
    torch.manual_seed(0)
    gate = MemGate(MemGateConfig(dim=identity["dim"], encoder_id=identity["id"],
                                 encoder_revision=identity["revision"], encoder_normalize=identity["normalize"],
                                 hidden=32, score_form="mask_risk"))
    optimiser = torch.optim.Adam(gate.parameters(), lr=0.01)
    for _ in range(40):
        losses, _ = preference_loss(LossConfig(risk_weight=1.0), gate, q, pos, neg.unsqueeze(1))
        optimiser.zero_grad()
        losses.mean().backward()
        optimiser.step()
    out = tmp_path_factory.mktemp("mask-risk") / "gate"
    gate.eval().save_pretrained(out, extra_config={"note": "tests/conftest.py: a tiny mask_risk gate"})
    return out
