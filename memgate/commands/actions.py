"""Evaluate the allowed-action policy on its scenario suite (the suite and the report are
documented in :mod:`memgate.actions.report`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from memgate.actions.report import write_report
from memgate.actions.suite import EXPECTED_RESULTS_PATH


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="reports/actions", help="output directory")
    parser.add_argument(
        "--suite", type=Path, default=None, help="scenario suite (default: bundled)"
    )
    parser.add_argument("--policy", type=Path, default=None, help="policy file (default: bundled)")
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"also rewrite {EXPECTED_RESULTS_PATH.name}, the figures the tests assert",
    )
    args = parser.parse_args(argv)
    results = write_report(args.out, args.suite, args.policy, args.record)
    for name, r in results["presets"].items():
        print(
            f"{name:24s} {r['correct']}/{r['total']} correct, "
            f"{r['false_certainty']} false certainty, "
            f"{r['overblocks']} overblocks"
        )
    print(
        f"wrote {Path(args.out) / 'report.md'}, results.json, tradeoff.png "
        f"(policy {results['policy_version']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
