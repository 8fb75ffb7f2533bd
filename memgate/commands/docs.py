"""``make docs``: the API reference, generated from the docstrings by pdoc (offline), into
``build/docs`` (open ``build/docs/index.html``).

The reference covers the modules behind ``memgate.__all__`` (``memgate.EXPORTS``) and the
configuration classes; every other module is reached by its path (docs/api.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import memgate
from memgate.contract.config import resolve_path

# the config classes a user sets from YAML files and key=value (docs/configuration.md)
CONFIG_MODULES = ("memgate.contract.config", "memgate.train.config", "memgate.eval.config")


def api_modules() -> list[str]:
    """``memgate`` itself, the modules that define its public names, and the config modules."""
    return ["memgate", *sorted(set(memgate.EXPORTS.values())), *CONFIG_MODULES]


def build(out_dir: Path, modules: Sequence[str]) -> Path:
    """Write the HTML reference of ``modules`` into ``out_dir``; returns ``out_dir/index.html``."""
    import pdoc  # the dev extra
    import pdoc.render

    pdoc.render.configure(docformat="restructuredtext", show_source=False,
                          footer_text=f"memgate {memgate.__version__}")
    for name in memgate.__all__:  # resolve the lazy re-exports so that memgate.html documents them
        value = getattr(memgate, name)
        setattr(memgate, name, value.resolve() if isinstance(value, memgate.LazyExport) else value)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pdoc.pdoc(*modules, output_directory=out_dir)
    return out_dir / "index.html"


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="build/docs", help="output folder (default build/docs)")
    args = parser.parse_args(argv)
    index = build(resolve_path(args.out), api_modules())
    print(f"wrote {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
