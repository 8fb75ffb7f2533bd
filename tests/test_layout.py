"""The layout shows the data flow (docs/design.md section 2): every module's imports, read with
``ast``, respect the layer order; a memgate import inside a function body is a deferred import of
a torch-heavy module (one whose imports reach torch, Lightning or sentence-transformers) or of an
optional extra listed in ``LAZY``, nothing else; the torch-free layers reach no torch-heavy module
through their module-level imports; only commands have a ``main()``; the public API table
resolves."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import memgate
from memgate.commands import cli

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

# Inside a layer, the same rule one level down (docs/design.md section 2): a sub-layer (the folder
# or module right under the layer) may import only the sub-layers listed (its own always
# included). Modules of the layer that are in no sub-layer (``memgate/retriever/retriever.py``,
# its parts ``access``, ``writes``, ``exposure``, the deprecated paths) may import every sub-layer;
# no sub-layer imports them. Inside ``stores`` each back-end's package imports no other's.
SUBLAYERS = {
    "retriever": {
        "errors": set(),
        "vectors": set(),
        "config": set(),
        "audit": {"errors"},
        "records": {"errors", "audit"},
        "stores": {"errors", "audit", "records", "vectors"},  # never query: a back-end ranks nothing
        "query": {"errors", "audit", "records", "vectors", "config", "stores"},
    },
}
BACKEND_PACKAGES = {"memgate.retriever.stores": {"embedded", "qdrant", "postgres"}}

# Third-party packages that make a module torch-heavy: importing torch alone takes 2-5 s, and
# these bring it (or are it). A module is torch-heavy when its module-level imports reach one.
HEAVY_ROOTS = frozenset({"torch", "lightning", "sentence_transformers", "transformers"})

# Layers whose every module imports without torch (checked through module-level imports): the
# public API's face, the store and its retriever (the gate and the encoder's model load at the
# first score or encode) and the agent surfaces; and the command line with every verb's module
# (``--help`` and usage errors come before any heavy import; a verb's work may live in a heavy
# module of its own, e.g. ``evaluate_run``). A memgate import of a torch-heavy module inside a
# function body is the one deferred import allowed beyond LAZY.
TORCH_FREE_LAYERS = ("", "__main__", "contract", "actions", "retriever", "integrations")
TORCH_FREE_MODULES = frozenset({"memgate.commands.cli", *(
    module for module, _ in cli.VERBS.values() if module.startswith("memgate."))})

# (module, imported module) -> the optional extra that keeps the import inside a function body
# (a torch-heavy import needs no entry: it is always deferred where a torch-free layer needs it).
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
    ("memgate.retriever.retriever", "memgate.retriever.stores.postgres.store"):
        "postgres extra: GatedRetriever.open_postgres loads psycopg only when called",
    ("memgate.commands.audit", "memgate.retriever.stores.postgres.store"):
        "postgres extra: memgate audit --url loads psycopg only when called",
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


def module_level_imports(path: Path, module: str) -> tuple[set[str], set[str]]:
    """(memgate modules or names, third-party top-level packages) imported when ``module`` is
    imported: the imports outside function bodies and TYPE_CHECKING blocks (``from a import b``
    yields ``a`` and ``a.b``: b may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    ours: set[str] = set()
    third: set[str] = set()

    def visit(node: ast.AST):
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child) or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    (ours.add(alias.name) if alias.name.split(".")[0] == "memgate"
                     else third.add(alias.name.split(".")[0]))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "memgate":
                    ours.add(target)
                    ours.update(f"{target}.{alias.name}" for alias in child.names)
                elif target:
                    third.add(target.split(".")[0])
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return ours, third


def module_path(root: Path, module: str) -> Path | None:
    """The file that defines ``module`` (a package's __init__.py), or None (a name, not a module)."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def heavy_chains(root: Path) -> dict[str, list[str]]:
    """Torch-heavy module -> the import chain that makes it so (``[module, ..., "torch"]``), for
    every module under ``root/memgate`` whose module-level imports reach one of HEAVY_ROOTS
    (importing ``a.b.c`` imports ``a`` and ``a.b`` first, so parents count)."""
    graph: dict[str, tuple[set[str], set[str]]] = {}
    for path in sorted((root / "memgate").rglob("*.py")):
        module = module_name(path, root)
        targets, third = module_level_imports(path, module)
        resolved = set()
        for target in targets:
            while target and module_path(root, target) is None:  # ``from memgate import Memory``
                target = target.rpartition(".")[0]
            parts = target.split(".")
            resolved |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} - {module}
        graph[module] = (resolved, third)
    chains: dict[str, list[str] | None] = {}

    def chain(module: str, seen: frozenset) -> list[str] | None:
        if module in chains:
            return chains[module]
        targets, third = graph.get(module, (set(), set()))
        found = next(([module, t] for t in sorted(third & HEAVY_ROOTS)), None)
        for target in sorted(targets):
            if found is None and target not in seen:
                below = chain(target, seen | {module})
                found = [module, *below] if below else None
        if found is not None or not seen:  # a cycle's partial answer is not memoised
            chains[module] = found
        return found

    for module in graph:
        chain(module, frozenset())
    return {m: c for m, c in chains.items() if c}


def sublayer_of(module: str) -> tuple[str, str] | None:
    """``(layer, sub-layer)`` of a module in a layer with sub-layers (sub-layer "" for the
    layer's own modules), or None."""
    parts = module.split(".")
    layer = layer_of(module)
    if layer not in SUBLAYERS or len(parts) < 3:
        return None
    return layer, (parts[2] if parts[2] in SUBLAYERS[layer] else "")


def sublayer_violation(module: str, target: str) -> str | None:
    """Why ``module`` may not import ``target`` under ``SUBLAYERS`` / ``BACKEND_PACKAGES``, or None."""
    mine, theirs = sublayer_of(module), sublayer_of(target)
    if mine is not None and target == f"memgate.{mine[0]}":
        theirs = (mine[0], "")  # the layer's package itself: its face
    if (mine is not None and theirs is not None and mine[0] == theirs[0] and mine[1]
            and theirs[1] != mine[1] and theirs[1] not in SUBLAYERS[mine[0]][mine[1]]):
        return (f"sub-layer '{mine[0]}.{mine[1]}' may import only {sorted(SUBLAYERS[mine[0]][mine[1]])} "
                f"(not {theirs[1] or 'its modules in no sub-layer'})")
    for package, kinds in BACKEND_PACKAGES.items():
        depth = len(package.split("."))
        a, b = module.split("."), target.split(".")
        if (module.startswith(package + ".") and target.startswith(package + ".") and len(a) > depth
                and len(b) > depth and {a[depth], b[depth]} <= kinds and a[depth] != b[depth]):
            return f"back-end '{a[depth]}' may not import back-end '{b[depth]}' ({package})"
    return None


def violations(root: Path, lazy: dict = LAZY, torch_free: frozenset = TORCH_FREE_MODULES) -> list[str]:
    """Every broken rule under ``root/memgate``, one line each naming the module and the import."""
    out = []
    heavy = heavy_chains(root)
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
            why = sublayer_violation(module, target)
            if why:
                out.append(f"{where}: {why}")
            if in_function and (module, target) not in lazy and target not in heavy:
                out.append(f"{where} inside a function body: move it to the top of the module "
                           f"(only a torch-heavy module or an optional extra listed in LAZY is "
                           f"imported there)")
        if (layer in TORCH_FREE_LAYERS or module in torch_free) and module in heavy:
            what = f"layer {layer!r}" if layer in TORCH_FREE_LAYERS else "a verb's module"
            out.append(f"{rel}: {module} imports torch at import time ({' -> '.join(heavy[module])}): "
                       f"{what} is torch-free; import the torch-heavy module inside the "
                       f"function that needs it")
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
    ("memgate/eval/x.py", "def f():\n    from memgate.model.architecture import FEATURE_SETS\n",
     "memgate/eval/x.py:2: memgate.eval.x imports memgate.model.architecture inside a function body"),
    ("memgate/retriever/x.py", "import numpy\nimport torch\n",
     "memgate.retriever.x imports torch at import time (memgate.retriever.x -> torch)"),
    ("memgate/integrations/x.py", "from memgate.retriever import y\n",
     "memgate.integrations.x imports torch at import time (memgate.integrations.x -> "
     "memgate.retriever.y -> lightning)"),
    ("memgate/commands/train.py", "from memgate.retriever.y import fit\ndef main():\n    fit()\n",
     "memgate.commands.train imports torch at import time (memgate.commands.train -> "
     "memgate.retriever.y -> lightning): a verb's module is torch-free"),
    ("memgate/eval/x.py", "def main():\n    return 0\n", "memgate.eval.x defines main()"),
    ("memgate/eval/x.py", "from ..train import run\n", "memgate.eval.x imports memgate.train"),
    ("memgate/actions/x.py", "from memgate import model\n", "layer 'actions' may import only"),
    ("memgate/stray.py", "x = 1\n", "memgate.stray is in no layer"),
    ("memgate/retriever/stores/x.py", "from memgate.retriever.query.ranking import top\n",
     "memgate.retriever.stores.x imports memgate.retriever.query.ranking: sub-layer 'retriever.stores' "
     "may import only ['audit', 'errors', 'records', 'vectors'] (not query)"),
    ("memgate/retriever/stores/embedded/x.py", "from memgate.retriever import GatedRetriever\n",
     "sub-layer 'retriever.stores' may import only ['audit', 'errors', 'records', 'vectors'] (not its "
     "modules in no sub-layer)"),
    ("memgate/retriever/records/x.py", "from memgate.retriever.stores.base import MemoryStore\n",
     "sub-layer 'retriever.records' may import only ['audit', 'errors']"),
    ("memgate/retriever/query/x.py", "from memgate.retriever.writes import WritePath\n",
     "sub-layer 'retriever.query' may import only"),
    ("memgate/retriever/stores/qdrant/x.py", "from memgate.retriever.stores.embedded.ann import M\n",
     "back-end 'qdrant' may not import back-end 'embedded' (memgate.retriever.stores)"),
])
def test_the_check_names_the_module_and_the_import(tmp_path, rel, text, expected):
    _write(tmp_path, "memgate/__init__.py", "")
    _write(tmp_path, "memgate/model/architecture.py", "FEATURE_SETS = ()\n")
    _write(tmp_path, "memgate/retriever/__init__.py", "")
    _write(tmp_path, "memgate/retriever/y.py", "import lightning.pytorch\n")
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
    _write(tmp_path, "memgate/model/heavy.py", "import torch\n")  # torch-heavy: deferred below
    _write(tmp_path, "memgate/retriever/y.py", "import numpy\ndef load():\n    import torch\n"
                                               "    from memgate.model.heavy import MemGate\n")
    _write(tmp_path, "memgate/retriever/query/x.py", "from memgate.retriever.stores.base import MemoryStore\n"
                                                     "from memgate.retriever.records.index import SupportIndex\n")
    _write(tmp_path, "memgate/retriever/stores/embedded/x.py", "from memgate.retriever.vectors import matvec\n"
                                                               "from memgate.retriever.stores.base import f\n"
                                                               "from memgate.retriever.stores.embedded import y\n")
    _write(tmp_path, "memgate/retriever/z.py", "from memgate.retriever.query.x import MemoryStore\n")
    assert violations(tmp_path, lazy={}) == []


def test_the_public_api_resolves_and_is_documented():
    for name, module in memgate.EXPORTS.items():
        value = getattr(memgate, name)
        if isinstance(value, memgate.LazyExport):  # a torch-backed class not imported yet
            assert name in memgate.TORCH_BACKED
            value = value.resolve()
        assert value is getattr(importlib.import_module(module), name), name
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


# ------------------------------------------------------------------------- no import cycles

CYCLE_ROOTS = ("memgate", "benchmarks", "data_gen")  # the packages whose import graph has no cycle


def import_graph(root: Path, packages: tuple[str, ...] = CYCLE_ROOTS) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports: every import statement, a deferred one
    (inside a function) included, TYPE_CHECKING blocks left out; ``from a import b`` names the
    module ``a.b`` when there is one, else ``a``."""
    paths = {module_name(path, root): path
             for package in packages if (root / package).is_dir()
             for path in sorted((root / package).rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        todo: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), str(path))]
        while todo:
            node = todo.pop()
            todo.extend(child for child in ast.iter_child_nodes(node)
                        if not _type_checking_block(child))  # (annotations only: never executed)
            if isinstance(node, ast.Import):
                targets.update(t for t in (resolve(a.name) for a in node.names) if t)
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                 + ([node.module] if node.module else [])) if node.level else node.module or "")
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else resolve(base)
                    if target:
                        targets.add(target)
        graph[module] = targets - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_import_graph_has_no_cycles():
    found = cycles(import_graph(ROOT))
    assert not found, "import cycles (modules that import each other, directly or around a loop):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_check_finds_a_loop_through_a_deferred_import(tmp_path):
    _write(tmp_path, "memgate/__init__.py", "")
    _write(tmp_path, "memgate/commands/a.py", "from memgate.commands.b import run\n")
    _write(tmp_path, "memgate/commands/b.py", "def run():\n    from memgate.commands import a\n")
    _write(tmp_path, "memgate/commands/c.py", "from typing import TYPE_CHECKING\n"
                                              "if TYPE_CHECKING:\n    from memgate.commands.a import x\n")
    assert cycles(import_graph(tmp_path)) == [["memgate.commands.a", "memgate.commands.b"]]
