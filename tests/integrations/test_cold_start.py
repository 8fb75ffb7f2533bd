"""Cold start of the library (docs/design.md section 2): what a fresh process imports and loads.

``from memgate import Memory, MemGate, QueryContext`` imports no torch; opening a store and the
calls that embed nothing (get, get_all, history) load no encoder model and no gate; a delete
embeds its forget directive (the encoder, no gate), the first add imports torch and loads the
encoder, the first search loads the gate. Nothing is printed on the way. (The times are in
``make bench``: benchmarks/bench_startup.py.)
"""

from __future__ import annotations

import pytest

import memgate
from memgate import Memory
from tests.fresh_process import run_fresh


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A store with two of alice's memories and one retrieval (made in this process)."""
    path = tmp_path_factory.mktemp("cold") / "store"
    with Memory(path=path, fsync=False) as m:
        a = m.add("I'm vegetarian.", user_id="alice", metadata={"topic": "food"})
        b = m.add("My phone number is 555-0199.", user_id="alice")
        m.search("what do I eat?", user_id="alice")
    return path, a["id"], b["id"]


def test_the_public_names_import_without_torch_and_reads_load_nothing(populated, tmp_path):
    path, a, _ = populated
    steps, out, err = run_fresh(f"""
from memgate import Memory, MemGate, QueryContext
steps["import"] = loaded()
m = Memory(path={str(path)!r})
steps["open"] = loaded()
steps["get"] = m.get({a!r}, user_id="alice")["memory"]
steps["get_all"] = len(m.get_all(user_id="alice")["results"])
steps["history"] = [e["event"] for e in m.history({a!r}, user_id="alice")]
steps["reads"] = loaded()
m.close()
steps["memgate"] = repr(MemGate)
""", tmp_path)
    assert steps["import"] == [] and steps["open"] == [] and steps["reads"] == []
    assert steps["get"] == "I'm vegetarian." and steps["get_all"] == 2
    assert steps["history"][:2] == ["stored", "retrieved"]
    assert "imported at its first use" in steps["memgate"]
    assert out == "" and err == ""


def test_the_encoder_loads_at_the_first_encode_the_gate_at_the_first_score(populated, tmp_path, capfd):
    from memgate.model.encoder import Encoder, EncoderConfig

    path, a, b = populated
    encoder = Encoder(EncoderConfig(cache_dir=None))  # a fresh one: its model not loaded yet
    capfd.readouterr()
    with Memory(path=path, encoder=encoder, fsync=False, gate="released") as m:  # (the default is off: docs/design.md section 4)
        assert m.get(a, user_id="alice") is not None and m.get_all(user_id="alice")["results"]
        assert encoder._model is None
        assert m.retriever._gate is None and m.retriever._pending_gate is not None
        assert m.retriever.route.startswith("hybrid")  # known from the checkpoint's config alone
        m.delete(b, user_id="alice")  # the forget directive is a memory: it is embedded
        assert encoder._model is not None and m.retriever._gate is None
        m.add("I cycle to work.", user_id="alice")
        assert m.retriever._gate is None
        hits = m.search("what do I eat?", user_id="alice")
        assert m.retriever._gate is not None and hits["route"].startswith("hybrid")
        assert hits["results"][0]["memory"] == "I'm vegetarian."
        assert hits["results"][0]["gate_score"] is not None
    out, err = capfd.readouterr()
    assert out == "" and "Loading weights" not in err and err == ""  # a library call prints nothing


def test_a_lazy_export_behaves_as_its_class():
    lazy = memgate.LazyExport("memgate.model.gate", "MemGate")
    real = lazy.resolve()
    gate = lazy(memgate.MemGateConfig())
    assert type(gate) is real and isinstance(gate, lazy) and not isinstance(object(), lazy)

    class Wider(lazy):  # a base class: the stand-in gives way to the class
        pass

    assert issubclass(Wider, real) and issubclass(Wider, lazy)
    assert lazy.from_pretrained == real.from_pretrained and (lazy | None) == (real | None)
    assert "memgate.model.gate.MemGate" in repr(lazy)
    with pytest.raises(AttributeError):
        lazy.no_such_attribute  # noqa: B018
