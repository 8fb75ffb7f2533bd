"""``make release``: regenerate the default data, train the default gate, export it to
``checkpoints/memgate-minilm-l6`` and evaluate it into ``reports/memgate-minilm-l6``."""

from __future__ import annotations

import sys

from memgate.config import resolve_path

RELEASE_NAME = "memgate-minilm-l6"


def main(argv=None) -> int:
    from memgate.pipeline import run_pipeline

    result = run_pipeline(resolve_path(f"checkpoints/{RELEASE_NAME}"),
                          resolve_path(f"reports/{RELEASE_NAME}"), fresh_data=True)
    for step, seconds in result["timings"].items():
        print(f"  {step:<45} {seconds:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
