"""The 0.1 module paths of the flat retriever (``memgate.retriever.pg_store`` and the rest of
``memgate.retriever._moved.MOVED``) still import for one release, each with a DeprecationWarning
naming the new path and the same objects as the new modules; nothing in the library, the
benchmarks or the examples imports them any more."""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

from memgate.retriever._moved import MOVED

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_hands_on_the_new_objects(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to"):
        module = importlib.import_module(old)
    assert module.__all__
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, (type, types.FunctionType)):  # defined in its new home, handed on
            assert value.__module__ not in MOVED, (old, name)
            assert getattr(importlib.import_module(value.__module__), value.__name__) is value

def test_the_old_record_name_still_warns_through_the_old_schema_path():
    import memgate.retriever.schema as schema
    with pytest.warns(DeprecationWarning, match="StoredMemory"):
        assert schema.Memory is schema.StoredMemory


def test_no_code_of_the_project_imports_an_old_path():
    found = []
    for folder in ("memgate", "benchmarks", "examples", "data_gen"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            module = ".".join(rel.with_suffix("").parts)
            if module in MOVED:
                continue  # the old path's own module
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                         if isinstance(node, ast.ImportFrom) else [])
                found += [f"{rel}:{node.lineno}: {name}" for name in names if name in MOVED]
    assert not found, "\n".join(found)
