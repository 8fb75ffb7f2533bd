"""``make release``: regenerate the default data, train the default gate, export it to
``checkpoints/memgate-minilm-l6`` of this checkout, pin its weights' sha256 in
``memgate/model/release_pin.py`` (what a by-name load checks), evaluate it into
``reports/memgate-minilm-l6`` and write its model card (``memgate card``). The only way to export under the released name.

It embeds from an empty cache (the checkout's ``.cache/embeddings`` is removed first), as a fresh
clone's ``make demo`` does: the encoder's fast backend gives a text last-bit differences by the
batch it shares, so vectors cached by other runs would keep a fresh clone from reproducing the
release bit for bit (``make demo-check``, docs/reproducibility.md)."""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
from pathlib import Path

from memgate.commands.card import main as card_main
from memgate.commands.demo_check import clear_embedding_cache
from memgate.contract.config import REPO_ROOT, resolve_path
from memgate.model.pretrained import PIN_FILE, releasing
from memgate.model.release_pin import RELEASED_WEIGHTS_SHA256

RELEASE_NAME = "memgate-minilm-l6"


def compress_rows(path: Path) -> Path:
    """routes.jsonl.gz beside routes.jsonl (the committed copy; byte-stable: no name, mtime 0)."""
    out = path.with_name(path.name + ".gz")
    with path.open("rb") as src, out.open("wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return out


def main(argv=None, prog=None) -> int:
    argparse.ArgumentParser(prog=prog, description=__doc__).parse_args(argv)  # no options: --help, or refuse extras
    from memgate.commands.pipeline import run_pipeline  # torch, Lightning: after the arguments parse

    report_dir = resolve_path(f"reports/{RELEASE_NAME}")
    with releasing(RELEASE_NAME) as export_dir:  # the export rewrites the pin (memgate.model.pretrained)
        held = clear_embedding_cache(REPO_ROOT)
        print(f"make release: embedding from an empty cache (removed {held:,} cached vectors of earlier runs)")
        result = run_pipeline(export_dir, report_dir, fresh_data=True)
    print(f"pinned {RELEASE_NAME}: weights sha256 {RELEASED_WEIGHTS_SHA256[RELEASE_NAME]} in {PIN_FILE}")
    compress_rows(report_dir / "routes.jsonl")
    card_main(["--checkpoint", str(export_dir), "--report", str(report_dir)])  # the card with the report's facts
    for step, seconds in result["timings"].items():
        print(f"  {step:<45} {seconds:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
