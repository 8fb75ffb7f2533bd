"""Ids are scoped per namespace (issue 18) through memgate.Memory and store export / import: two
users may use one id (it used to answer "already exists" to the second, an existence oracle),
each sees and changes only their own record, and an export keeps both."""

from __future__ import annotations

from memgate import Memory
from memgate.integrations.memory import user_namespace
from memgate.integrations.transfer import export_store, import_store
from memgate.retriever import EmbeddedStore
from tests.retriever.store_helpers import IDENT, HashEncoder


def test_two_users_may_use_one_id_and_neither_sees_the_other(tmp_path):
    with Memory(path=tmp_path / "store", fsync=False, encoder=HashEncoder(), gate=None) as mem:
        mem.add("Alice's note about the dentist.", user_id="alice", memory_id="note-1")
        mem.add("Bob's note about the train.", user_id="bob", memory_id="note-1")
        assert mem.get("note-1", user_id="alice")["memory"] == "Alice's note about the dentist."
        assert mem.get("note-1", user_id="bob")["memory"] == "Bob's note about the train."
        assert [m["id"] for m in mem.get_all(user_id="alice")["results"]] == ["note-1"]
        mem.update("note-1", user_id="bob", text="Bob's note about the late train.")
        assert mem.get("note-1", user_id="alice")["memory"] == "Alice's note about the dentist."
        mem.delete("note-1", user_id="alice")
        assert mem.get("note-1", user_id="alice") is None
        assert mem.get("note-1", user_id="bob")["memory"] == "Bob's note about the late train."
        hits = mem.search("train", user_id="bob", limit=5)["results"]
        assert [h["id"] for h in hits] == ["note-1"]
        export_store(mem.store, tmp_path / "export")
    target = EmbeddedStore(tmp_path / "target", IDENT, audit=None, fsync=False)
    assert import_store(target, tmp_path / "export") == 3  # two records and alice's directive
    assert target.get("note-1", namespace=user_namespace("bob")).text == "Bob's note about the late train."
    assert target.get("note-1", namespace=user_namespace("alice")).forgotten
    assert target.verify() == []
    target.close()
