"""Measure, not filter: how many natural training texts lie within cosine ``NEAR_DUP_COS`` (0.95)
of a LoCoMo or GateMem string (issue 43 item 5). The build filters those evaluation sets by
normalised text only (``data_gen.natural_card``: embedding their 36k strings costs minutes a build);
this check embeds them once, through the encoder's cache, and counts what an embedding filter
would remove.

    python -m data_gen.guard_neardup [--data data/textrisk_natural]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from data_gen.natural_card import NEAR_DUP_COS
from memgate.contract.config import resolve_path


def check(data_dir: Path) -> dict:
    """{triples, texts, guard_strings, near_texts, near_triples (by source), max_cosine}."""
    from memgate.datasets.real import natural
    from memgate.model.encoder import Encoder, EncoderConfig

    triples = [json.loads(line) for path in sorted(data_dir.glob("mined/*/triples.jsonl"))
               for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not triples:
        raise SystemExit(f"--data: no mined triples under {data_dir}/mined (run python -m data_gen.mine --data {data_dir})")
    mine = [t for t in triples if t["source"].startswith("natural_")]
    texts = sorted({x for t in mine for x in (t["query_text"], t["pos_text"], t["neg_text"])})
    guard = sorted(set(natural.guard_raw_texts()) - set(natural.example_texts()))
    encoder = Encoder(EncoderConfig())
    g, v = encoder.encode(guard, progress=False), encoder.encode(texts, progress=False)
    best = np.concatenate([(v[i:i + 2048] @ g.T).max(axis=1) for i in range(0, len(v), 2048)])
    near = {t for t, m in zip(texts, best) if m >= NEAR_DUP_COS}
    by_source: dict = {}
    for t in mine:
        if {t["query_text"], t["pos_text"], t["neg_text"]} & near:
            by_source[t["source"]] = by_source.get(t["source"], 0) + 1
    return {"triples": len(mine), "texts": len(texts), "guard_strings": len(guard), "near_texts": len(near),
            "near_triples": by_source, "max_cosine": float(best.max()) if len(best) else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="data/textrisk_natural")
    args = parser.parse_args(argv)
    print(json.dumps(check(resolve_path(args.data)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
