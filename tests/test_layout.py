"""The layout shows the data flow (docs/design.md section 2): every module's imports, read with
``ast``, respect the layer order; no memgate import hides inside a function body unless an
optional extra needs it; only commands have a ``main()``; the public API table resolves."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import memgate

ROOT = Path(__file__).resolve().parents[1]

# Which layers each layer may import (its own always included). ``commands`` may import anything;
# no other layer may import ``commands``.
LIBRARY = ("contract", "datasets", "model", "eval", "train", "studies", "actions", "retriever",
           "integrations")
ALLOWED = {
    "contract": set(),
    "datasets": {"contract"},
    "model": {"contract"},
    "eval": {"contract", "datasets", "model"},
    "train": {"contract", "datasets", "model", "eval"},
    "studies": {"contract", "datasets", "model", "eval", "train"},
    "actions": {"contract"},
    "retriever": {"contract", "model", "actions"},
    "integrations": {"contract", "model", "retriever", "actions"},
    "commands": set(LIBRARY),
    "": set(LIBRARY),  # memgate/__init__.py: the public API's face (lazy re-exports only)
    "__main__": {"commands"},  # python -m memgate: runs memgate.commands.cli, nothing else
}

# ``python -m memgate``: the command line's second door (it runs memgate.commands.cli)
ENTRY_POINTS = {"memgate.__main__"}

# (module, imported module) -> why the import stays inside a function body.
LAZY = {
    ("memgate.studies.verifiers.factory", "memgate.studies.verifiers.openai_backend"):
        "verifier extra: the OpenAI backend needs httpx and openai",
    ("memgate.studies.verifiers.local", "memgate.studies.verifiers.openai_backend"):
        "verifier extra: the score cache lives in the OpenAI backend (httpx)",
    ("memgate.studies.disclosure", "memgate.studies.verifiers.openai_backend"):
        "verifier extra: the OpenAI reader needs httpx and openai",
    ("memgate.commands.serve", "memgate.integrations.http_server"):
        "serve extra: the HTTP API needs fastapi (memgate store works without it)",
    ("memgate.commands.serve", "memgate.integrations.mcp_server"):
        "serve extra: the MCP server needs the mcp SDK",
    ("memgate.integrations.opening", "memgate.retriever.pg_store"):
        "postgres extra: psycopg and pgvector load only when a PostgreSQL store is opened",
    ("memgate.retriever.retriever", "memgate.retriever.pg_store"):
        "postgres extra: GatedRetriever.open_postgres loads psycopg only when called",
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def memgate_imports(path: Path, module: str):
    """Yield (imported module, line, inside a function body) for every import of memgate."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                continue  # annotations only: never executed
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, True)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "memgate":
                        yield alias.name, child.lineno, in_function
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "memgate":
                    if target == "memgate":  # ``from memgate import actions``: a submodule or a name
                        for alias in child.names:
                            yield f"memgate.{alias.name}", child.lineno, in_function
                    else:
                        yield target, child.lineno, in_function
            yield from visit(child, in_function)

    yield from visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)


def violations(root: Path, lazy: dict = LAZY) -> list[str]:
    """Every broken rule under ``root/memgate``, one line each naming the module and the import."""
    out = []
    for path in sorted((root / "memgate").rglob("*.py")):
        module = module_name(path, root)
        layer = layer_of(module)
        rel = path.relative_to(root)
        if layer not in ALLOWED:
            out.append(f"{rel}: {module} is in no layer (add it to one of {sorted(ALLOWED)})")
            continue
        for target, line, in_function in memgate_imports(path, module):
            where = f"{rel}:{line}: {module} imports {target}"
            to = layer_of(target)
            if to == "commands" and layer != "commands" and module not in ENTRY_POINTS:
                out.append(f"{where}: nothing imports commands")
            elif to and to != layer and to not in ALLOWED[layer]:
                out.append(f"{where}: layer {layer!r} may import only {sorted(ALLOWED[layer])}")
            if in_function and (module, target) not in lazy:
                out.append(f"{where} inside a function body: move it to the top of the module "
                           f"(or list it in LAZY with the optional extra that needs it)")
        if layer != "commands" and module not in ENTRY_POINTS:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name == "main":
                    out.append(f"{rel}:{node.lineno}: {module} defines main(): programs live in "
                               "memgate/commands/")
                if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                    out.append(f"{rel}:{node.lineno}: {module} runs as a script: programs live in "
                               "memgate/commands/")
    return out


def test_every_module_respects_the_layer_order():
    found = violations(ROOT)
    assert not found, "layout violations:\n" + "\n".join(found)


def test_every_lazy_import_listed_is_still_there():
    seen = set()
    for path in (ROOT / "memgate").rglob("*.py"):
        module = module_name(path, ROOT)
        seen |= {(module, t) for t, _, inside in memgate_imports(path, module) if inside}
    assert set(LAZY) <= seen, f"stale LAZY entries: {sorted(set(LAZY) - seen)}"


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("rel, text, expected", [
    ("memgate/eval/x.py", "from memgate.train.run import train\n",
     "memgate/eval/x.py:1: memgate.eval.x imports memgate.train.run: layer 'eval' may import only"),
    ("memgate/contract/x.py", "import memgate.model.gate\n",
     "memgate/contract/x.py:1: memgate.contract.x imports memgate.model.gate: layer 'contract'"),
    ("memgate/retriever/x.py", "from memgate.eval import routes\n",
     "memgate.retriever.x imports memgate.eval: layer 'retriever' may import only"),
    ("memgate/studies/x.py", "from memgate.commands.evaluate import evaluate\n",
     "memgate.studies.x imports memgate.commands.evaluate: nothing imports commands"),
    ("memgate/eval/x.py", "def f():\n    from memgate.model.gate import MemGate\n",
     "memgate/eval/x.py:2: memgate.eval.x imports memgate.model.gate inside a function body"),
    ("memgate/eval/x.py", "def main():\n    return 0\n", "memgate.eval.x defines main()"),
    ("memgate/eval/x.py", "from ..train import run\n", "memgate.eval.x imports memgate.train"),
    ("memgate/actions/x.py", "from memgate import model\n", "layer 'actions' may import only"),
    ("memgate/stray.py", "x = 1\n", "memgate.stray is in no layer"),
])
def test_the_check_names_the_module_and_the_import(tmp_path, rel, text, expected):
    _write(tmp_path, "memgate/__init__.py", "")
    _write(tmp_path, rel, text)
    found = violations(tmp_path, lazy={})
    assert any(expected in line for line in found), found


def test_the_check_accepts_allowed_imports(tmp_path):
    _write(tmp_path, "memgate/__init__.py", "")
    _write(tmp_path, "memgate/commands/x.py", "from memgate.commands.y import z\n"
                                              "from memgate.studies import a\n"
                                              "def main():\n    return 0\n")
    _write(tmp_path, "memgate/retriever/x.py", "from memgate.actions import policy\n"
                                               "from memgate.model.gate import MemGate\n")
    _write(tmp_path, "memgate/eval/x.py", "from typing import TYPE_CHECKING\n"
                                          "if TYPE_CHECKING:\n    from memgate.train import run\n")
    assert violations(tmp_path, lazy={}) == []


def test_the_public_api_resolves_and_is_documented():
    for name, module in memgate.EXPORTS.items():
        assert getattr(memgate, name) is getattr(importlib.import_module(module), name), name
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", api, re.M))
    assert table == memgate.EXPORTS


MAX_LINES = 600  # docs/design.md: small readable modules, one concern per file


def long_files(root: Path, limit: int = MAX_LINES) -> list[str]:
    """Source files under ``root/memgate`` and ``root/data_gen`` longer than ``limit`` lines."""
    out = []
    for package in ("memgate", "data_gen"):
        for path in sorted((root / package).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > limit:
                out.append(f"{path.relative_to(root)}: {n} lines (split it by concern; the limit is {limit})")
    return out


def test_no_source_file_is_over_600_lines():
    found = long_files(ROOT)
    assert not found, "\n".join(found)


def test_the_length_check_names_the_file(tmp_path):
    _write(tmp_path, "memgate/ok.py", "x = 1\n" * MAX_LINES)
    _write(tmp_path, "data_gen/long.py", "x = 1\n" * (MAX_LINES + 1))
    assert long_files(tmp_path) == [
        f"data_gen/long.py: {MAX_LINES + 1} lines (split it by concern; the limit is {MAX_LINES})"]
