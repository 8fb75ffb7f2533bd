"""The embedded store's files and the forget list travel together (issue 46 item 4: R10, R11,
G3): a directory with one of its two files refuses to open, naming both and the fix; a
corrupted ``store.sqlite`` is a ``DamagedStoreError`` naming it; an export whose records hold
forget directives but which carries no forget list is refused unless accepted, with a warning."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memgate import Memory
from memgate.commands.store import main as store_main
from memgate.integrations.transfer import MANIFEST, SUPPRESSION, ImportRefused, export_store, import_store
from memgate.retriever import EmbeddedStore, StoredMemory
from memgate.retriever.errors import DamagedStoreError
from memgate.retriever.records.memory import FORGET_DIRECTIVE_KIND
from memgate.retriever.stores.embedded.layout import DB_FILE, VECTOR_FILE
from tests.retriever.store_helpers import IDENT, HashEncoder, vec


def _store_with_a_record(path):
    with EmbeddedStore(path, IDENT, fsync=False) as s:
        s.add(StoredMemory("m1", "alice", "the gym opens at six"), vec("gym"), encoder=IDENT)


@pytest.mark.parametrize("gone", [DB_FILE, VECTOR_FILE])
def test_a_store_missing_one_of_its_two_files_refuses_to_open(tmp_path, gone):
    path = tmp_path / "store"
    _store_with_a_record(path)
    (path / gone).unlink()
    kept = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    with pytest.raises(DamagedStoreError) as caught:
        EmbeddedStore(path, IDENT, fsync=False)
    message = str(caught.value)
    assert DB_FILE in message and VECTOR_FILE in message and "restore" in message and "\n" not in message
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == kept  # nothing created or changed


def test_a_new_or_vectorless_store_still_opens(tmp_path):
    with EmbeddedStore(tmp_path / "new", IDENT, fsync=False) as s:
        assert len(s) == 0
    (tmp_path / "new" / VECTOR_FILE).unlink()  # no record ever held a vector slot
    with EmbeddedStore(tmp_path / "new", IDENT, fsync=False) as s:
        assert len(s) == 0


@pytest.mark.parametrize("damage", ["garbage", "header"])
def test_a_corrupted_database_is_a_damaged_store_naming_the_file(tmp_path, damage):
    path = tmp_path / "store"
    _store_with_a_record(path)
    db = path / DB_FILE
    raw = db.read_bytes()
    db.write_bytes(b"this is not a database " * 200 if damage == "garbage" else b"\x00" * 100 + raw[100:])
    with pytest.raises(DamagedStoreError, match=DB_FILE):
        EmbeddedStore(path, IDENT, fsync=False)
    with pytest.raises(DamagedStoreError, match=DB_FILE):
        Memory(path=path, encoder=HashEncoder(), gate=None, fsync=False)


def _unit(seed: int, dim: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _export_without_forget_list(tmp_path, directives=True, identity=IDENT):
    """An export of alice's two memories (one forgotten), edited to claim format 1 without its
    suppression.json (G3)."""
    dim = int(identity["dim"])
    with EmbeddedStore(tmp_path / "src", identity, fsync=False) as s:
        s.add(StoredMemory("m1", "user:alice", "My locker code is 4417."), _unit(1, dim), encoder=identity)
        s.add(StoredMemory("m2", "user:alice", "The gym opens at six."), _unit(2, dim), encoder=identity)
        if directives:
            s.forget("m1", StoredMemory("d1", "user:alice", "The user asked me to forget a detail.",
                                        kind=FORGET_DIRECTIVE_KIND, forgets="m1"),
                     _unit(3, dim), encoder=identity)
        export_store(s, tmp_path / "export")
    out = tmp_path / "export"
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["format"] = "memgate-export/1"
    manifest["files"].pop(SUPPRESSION)
    manifest.pop("suppressed")
    (out / MANIFEST).write_text(json.dumps(manifest))
    (out / SUPPRESSION).unlink()
    return out


def test_an_export_with_directives_but_no_forget_list_is_refused_unless_accepted(tmp_path):
    out = _export_without_forget_list(tmp_path)
    with Memory(path=tmp_path / "dst", encoder=HashEncoder(), gate=None, fsync=False) as m:
        with pytest.raises(ImportRefused, match="accept-unprotected"):
            import_store(m.store, out)
        assert m.get_all(user_id="alice")["results"] == []  # nothing written
        with pytest.warns(UserWarning, match=r"without protection: 1 forget directive\(s\) in namespace\(s\) \['user:alice'\]"):
            assert import_store(m.store, out, accept_unprotected=True) == 3
        m.add("My locker code is 4417.", user_id="alice")  # the documented cost of accepting


def test_the_cli_refuses_it_without_the_flag(tmp_path, capsys):
    from memgate.integrations.opening import default_encoder
    out = _export_without_forget_list(tmp_path, identity=dict(default_encoder().identity))
    assert store_main(["import", "--from", str(out), "--store", str(tmp_path / "cli")]) == 2
    assert "--accept-unprotected" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="without protection"):
        assert store_main(["import", "--from", str(out), "--store", str(tmp_path / "cli2"),
                           "--accept-unprotected"]) == 0


def test_a_format_1_export_without_directives_imports_as_before(tmp_path):
    out = _export_without_forget_list(tmp_path, directives=False)
    with Memory(path=tmp_path / "dst", encoder=HashEncoder(), gate=None, fsync=False) as m:
        assert import_store(m.store, out) == 2
