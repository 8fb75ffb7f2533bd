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
