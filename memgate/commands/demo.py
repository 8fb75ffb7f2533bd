"""``make demo``: generate -> mine -> guarded train -> export -> evaluate, then print the headline.

The demo runs the main job end to end on the default config, but evaluates only the headline
routes (global_dense, namespace_dense, kleene_gate, learned_gate, learned_gate_namespace, hybrid)
on synthetic test and the LoCoMo / GateMem report parts, with 1,000 bootstrap replicates;
``make release`` evaluates every core route (the baselines the headline does not print: BM25,
recency, RRF, post-filters, random partition, the embedding classifier, the drop routes) with
10,000. ``--all-routes`` gives the demo the release's route set. The gated routes score on one
torch thread (``--gate-threads``): the same scores up to float rounding, much faster when another
process holds the second core.

The demo gate goes to ``runs/demo/checkpoint`` and its report to ``reports/demo`` so that the
released gate under ``checkpoints/`` is never overwritten by a demo run.

``--check-release`` (``make demo-check``) runs the demo in a fresh clone of this checkout's HEAD and
compares its gate with the released one: bit for bit, within 2e-5, or not reproduced (exit 1)
(``memgate.commands.demo_check``).
"""

from __future__ import annotations

import argparse
import sys

from memgate.commands.demo_check import check_release, warm_cache_note
from memgate.commands.release import RELEASE_NAME
from memgate.contract.config import REPO_ROOT, resolve_path
from memgate.model.pretrained import released_dir


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install-seconds", type=float, default=None)
    parser.add_argument("--n-boot", type=int, default=1_000,
                        help="bootstrap replicates (make release uses 10,000; 1,000 keeps the demo "
                             "inside its time budget)")
    parser.add_argument("--all-routes", action="store_true",
                        help="evaluate every core route, as make release does (slower)")
    parser.add_argument("--gate-threads", type=int, default=1,
                        help="torch threads of the gated routes' scoring in the evaluation (default 1: "
                             "their products are small, and a busy second core made two threads ~10x "
                             "slower; 0 = the evaluation's threads, as make release)")
    parser.add_argument("--check-release", action="store_true",
                        help="run the demo in a fresh clone of this checkout's HEAD (empty caches) and compare "
                             "its gate with the released one (make demo-check; exit 1 when not reproduced)")
    parser.add_argument("--keep-clone", action="store_true", help="with --check-release: keep the clone")
    parser.add_argument("overrides", nargs="*", help="training key=value overrides")
    args = parser.parse_args(argv)
    if args.check_release:
        passed = [f"--n-boot={args.n_boot}", f"--gate-threads={args.gate_threads}",
                  *(["--all-routes"] if args.all_routes else []), *args.overrides]
        return check_release(REPO_ROOT, released_dir(RELEASE_NAME), passed, args.keep_clone)
    note = warm_cache_note(REPO_ROOT)
    if note:
        print(note, file=sys.stderr)
    from memgate.commands.pipeline import run_pipeline  # torch, Lightning: after the arguments parse
    from memgate.eval.headline import HEADLINE_ROUTES
    from memgate.eval.report.markdown import headline_table

    export_dir = resolve_path("runs/demo/checkpoint")
    report_dir = resolve_path("reports/demo")
    result = run_pipeline(export_dir, report_dir, ["export.name=memgate-demo", *args.overrides],
                          install_seconds=args.install_seconds, n_boot=args.n_boot,
                          routes=None if args.all_routes else HEADLINE_ROUTES,
                          gate_threads=args.gate_threads or None)
    headline = result["summary"]["headline"]
    print("\n== memgate demo: synthetic test headline ==\n")
    print("\n".join(headline_table(headline)))
    print("\n== time breakdown (s) ==")
    for step, seconds in result["timings"].items():
        print(f"  {step:<45} {seconds:8.1f}")
    scope = "every core route" if args.all_routes else "the headline routes (make release: every core route)"
    print(f"\nfull report ({scope}): {report_dir / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
