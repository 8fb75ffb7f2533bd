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
    """A tiny gate of score form ``mask_risk`` (issue 44 item 7), trained for real: four steps on
    the head of the example triples (hidden 32, the risk head's calibration loss on), exported
    as a checkpoint directory with no risk thresholds. Tests copy it before writing thresholds."""
    from dataclasses import replace
    from itertools import islice

    from memgate.contract.config import REPO_ROOT, load_config, resolve_path
    from memgate.datasets.user_triples import load_triples
    from memgate.train.config import TrainConfig
    from memgate.train.workbench import train_on_triples

    root = tmp_path_factory.mktemp("mask-risk")

    def head(name: str, n: int):
        dst = root / name
        with open(REPO_ROOT / "examples/triples" / name) as handle:
            dst.write_text("".join(islice(handle, n)))
        return load_triples(dst)

    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        f"export.runs_dir={root / 'runs'}", f"encoder.cache_dir={root / 'cache'}", "trainer.progress_bar=false",
        "trainer.logger=none", "gate.score_form=mask_risk", "loss.risk_weight=0.5", "gate.hidden=32",
        "optim.batch_size=8", "optim.max_steps=4", "optim.warmup_steps=1", "optim.lr=0.01",
        "trainer.val_check_interval=1.0"])
    config = replace(config, optim=replace(config.optim, max_epochs=3))
    train_on_triples(head("train.jsonl", 24), head("dev.jsonl", 12), root / "gate", config, guards="none")
    return root / "gate"
