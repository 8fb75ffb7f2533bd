"""The ``memgate`` command line: ``memgate <verb> [options]``, also ``python -m memgate <verb>``.

Every verb is one row of ``VERBS``: its name, the module whose ``main(argv, prog)`` runs it, and one line
of help. ``memgate <verb> --help`` prints that module's own options. A verb's module is imported
only when the verb runs, so ``memgate --help`` starts without torch.

Errors print one line (``memgate <verb>: error: <what>``, naming the field and file:line where the
config loader knows them) and no traceback; ``--debug`` anywhere on the line shows the traceback.
Exit status: what the verb returns (0 success), 1 on an error, 2 on a usage error, 130 on Ctrl-C.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import memgate

# verb -> (module with main(argv), one line of help). Add a verb with one line here and a row in
# docs/design.md section 5. Modules outside ``memgate`` (data_gen, benchmarks) need a source checkout.
VERBS: dict[str, tuple[str, str]] = {
    "generate": ("data_gen.__main__", "generate the synthetic data set (configs/data/*.yaml)"),
    "mine": ("data_gen.mine", "mine hard training triples of a generated data set with an encoder"),
    "train": ("memgate.commands.train", "train a gate (configs/train/*.yaml, key=value overrides)"),
    "evaluate": ("memgate.commands.evaluate", "evaluate routes under the recall-constrained protocol"),
    "release": ("memgate.commands.release", "regenerate, train and evaluate the released gate"),
    "card": ("memgate.commands.card", "rewrite a release's model card from its committed files (no training)"),
    "demo": ("memgate.commands.demo", "generate -> mine -> train -> evaluate, print the headline"),
    "ablations": ("memgate.commands.ablations", "train and evaluate the ablation grid"),
    "bench": ("memgate.commands.bench", "run the benchmark suite (reports/bench.md)"),
    "actions": ("memgate.commands.actions", "evaluate the allowed-action policy on its suite"),
    "audit": ("memgate.commands.audit", "print one memory's audit trail, or verify a log"),
    "store": ("memgate.commands.store", "a store from the command line: add, search, list, forget, history, export, import, verify"),
    "serve": ("memgate.commands.serve", "serve a store over MCP (stdio or streamable HTTP) or an HTTP API"),
    "tables": ("memgate.commands.tables", "print a report's route tables as markdown"),
    "targets": ("memgate.commands.targets", "the learned-gate release targets of evaluated gates (3-seed mean and range)"),
    "verifiers": ("memgate.commands.verifier_study", "run the text-only verifier study alone"),
    "finetune-verifier": ("memgate.commands.verifier_finetune", "fine-tune the local verifier (TRL)"),
    "readers": ("memgate.commands.readers", "the exposure -> disclosure reader study"),
    "docs": ("memgate.commands.docs", "build the API reference from the docstrings (build/docs, offline)"),
    "encoder": ("memgate.commands.encoder", "export the encoder for ONNX Runtime / OpenVINO (make install), or show its backend"),
}

# a missing third-party module -> the extra that installs it
EXTRA_OF = {
    "lightning": "train", "sklearn": "eval", "matplotlib": "eval", "bm25s": "eval", "tqdm": "eval",
    "openai": "verifier", "trl": "verifier", "peft": "verifier", "gguf": "verifier",
    "qdrant_client": "qdrant", "uvicorn": "serve", "fastapi": "serve", "mcp": "serve",
    "langgraph": "langgraph", "hnswlib": "ann", "datasets": "workbench", "tensorboard": "workbench",
    "pdoc": "dev", "onnxruntime": "fast", "openvino": "fast",
}
CHECKOUT_ONLY = {"data_gen", "benchmarks"}  # top-level folders of the repository, not in the wheel


def checkout_root() -> Optional[Path]:
    """The source checkout memgate is installed from (``make install`` is editable), else None.

    Its ``data_gen/`` and ``benchmarks/`` are importable from there: ``python -m memgate`` run in
    the checkout finds them through the working directory, the ``memgate`` script through this."""
    root = Path(memgate.__file__).resolve().parents[1]
    return root if all((root / top).is_dir() for top in CHECKOUT_ONLY) else None

USAGE = "memgate [--version] [--debug] <verb> [options]   (memgate <verb> --help for a verb's options)"


def format_help() -> str:
    width = max(len(v) for v in VERBS)
    rows = "\n".join(f"  {verb:<{width}}  {text}" for verb, (_, text) in VERBS.items())
    return (f"usage: {USAGE}\n\nmemgate: admissible memory retrieval (a learned gate, a metadata gate "
            f"and a recall-constrained evaluation protocol)\n\nverbs:\n{rows}\n\noptions:\n"
            "  -h, --help  this message\n  --version   print the version\n"
            "  --debug     show the traceback of an error\n")


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message (the type name where the message alone is unclear)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if type(exc).__name__ in ("ConfigError", "ValueError", "FileNotFoundError", "RuntimeError"):
        return text
    return f"{type(exc).__name__}: {text}"


def _missing(exc: ModuleNotFoundError, verb: str) -> str:
    top = (exc.name or "").split(".")[0]
    if top in CHECKOUT_ONLY:
        return (f"needs a source checkout ({top}/ is not installed with the wheel): "
                f"git clone the repository and run `make install` there")
    if top in EXTRA_OF:
        return f"needs the [{EXTRA_OF[top]}] extra (missing module {top}): pip install 'memgate[{EXTRA_OF[top]}]'"
    return one_line(exc)


def run_verb(verb: str, argv: Sequence[str], debug: bool = False) -> int:
    module_name, _ = VERBS[verb]
    # sys.argv stays as it is: Lightning's DDP launcher re-runs it for every worker
    try:
        module = importlib.import_module(module_name)
        if "prog" in inspect.signature(module.main).parameters:  # the usage line reads `memgate <verb>`
            status = module.main(list(argv), prog=f"memgate {verb}")
        else:
            status = module.main(list(argv))
    except KeyboardInterrupt:
        print(f"memgate {verb}: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        if debug:
            raise
        print(f"memgate {verb}: error: {_missing(exc, verb)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 -- the one place errors become one line
        if debug:
            raise
        print(f"memgate {verb}: error: {one_line(exc)} (--debug shows the traceback)", file=sys.stderr)
        return 1
    if isinstance(status, dict):  # bench's main returns its figures
        return 0
    return int(status or 0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    root = checkout_root()
    if root is not None and str(root) not in sys.path:
        sys.path.append(str(root))  # after everything installed: the checkout's data_gen/, benchmarks/
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    if not args or args[0] in ("-h", "--help", "help"):
        if len(args) > 1 and args[0] == "help" and args[1] in VERBS:
            return run_verb(args[1], ["--help"], debug)
        print(format_help(), end="")
        return 0 if args else 2
    if args[0] == "--version":
        print(f"memgate {memgate.__version__}")
        return 0
    verb, rest = args[0], args[1:]
    if verb not in VERBS:
        close = difflib.get_close_matches(verb, list(VERBS), n=2)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        print(f"memgate: error: unknown verb {verb!r}{hint} (memgate --help lists {len(VERBS)} verbs)",
              file=sys.stderr)
        return 2
    try:
        return run_verb(verb, rest, debug)
    except SystemExit as exc:  # argparse's --help (0) and usage errors (2), sys.exit("message")
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(f"memgate {verb}: error: {exc.code}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
