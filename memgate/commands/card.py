"""``memgate card``: (re)write a release's model card (``README.md`` beside its weights) from the
committed files alone, without training: the checkpoint's ``config.json`` and ``headline.json``, and
what the release's evaluation recorded (``memgate targets``' ``targets.json``, the phrasing audit's
``released_gate.json``, ``examples/realistic_cases.txt``, the ``make demo-check`` record quoted in
``docs/reproducibility.md``). ``make release`` runs it after evaluating; the weights are not read.

    memgate card [--checkpoint checkpoints/memgate-minilm-l6] [--report reports/memgate-minilm-l6]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Optional

from memgate.commands.targets import issue44_rows, route_rows, text_risk_rows
from memgate.contract.config import REPO_ROOT
from memgate.model.card import card_lines

RELEASE_NAME = "memgate-minilm-l6"
AUDIT = "reports/phrasing_audit/released_gate.json"
REALISTIC = "examples/realistic_cases.txt"
REPRODUCIBILITY = "docs/reproducibility.md"


def _read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _rel(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def targets_of(targets: Optional[list], export: dict, headline: Optional[dict]) -> Optional[dict]:
    """The released seed's ``memgate targets`` record when it is this export's (same step and the same
    gate activity as headline.json), else None: a stale record never describes a new release."""
    if not targets:
        return None
    first = targets[0]
    if first.get("selected_step") != (export.get("selection") or {}).get("step"):
        return None
    if headline and first.get("gate_activity") != headline.get("gate_activity"):
        return None
    return first


def does_lines(result: dict) -> list[str]:
    """What the release measurably does on the report parts, per source (natural / matched)."""
    cells = result["text_risk_report"]["cells"]
    lines = []
    for source in sorted({c["source"] for c in cells.values()}):
        pair = [cells.get(f"{source}/{v}") for v in ("natural", "matched")]
        gains = " / ".join(f"{c['gated_minus_cos']['value']:+.3f}" for c in pair if c)
        aucs = " / ".join(f"{c['suppression_auc']['value']:.3f}" for c in pair if c)
        label = " (natural / matched)" if all(pair) else ""  # a natural source has one variant
        lines.append(f"`{source}`: AUC(1 - S) - AUC(1 - cos) {gains}, suppression AUC {aucs}{label}")
    lc = result["locomo"]["learned_gate_namespace_vs_namespace_dense"]
    lines.append(f"LoCoMo report recall_required@20, `learned_gate_namespace` - `namespace_dense`: "
                 f"{lc['value']:+.4f} [{lc['ci'][0]:+.4f}, {lc['ci'][1]:+.4f}]")
    routes = result["gatemem_routes"]
    lines.append("GateMem report `hybrid` - `kleene_gate`: " + ", ".join(
        f"{k} {(routes.get(k) or {}).get('value', float('nan')):+.4f}"
        for k in ("violation_any@20", "protected_exposure@20", "recall_required@20")))
    return lines


def gatemem_line(result: dict) -> Optional[str]:
    gm = result.get("gatemem") or {}
    auc, cos, diff = gm.get("suppression_auc"), gm.get("one_minus_cos_auc"), gm.get("vs_one_minus_cos")
    if not auc or not cos or auc["value"] >= 0.5:
        return None
    return (f"GateMem report: the gate's own suppression AUC is **{auc['value']:.3f}**, below chance (`1 - cos` "
            f"{cos['value']:.3f}; difference {diff['value']:+.3f} [{diff['ci'][0]:+.3f}, {diff['ci'][1]:+.3f}]): it ranks "
            "protected turns up, so on GateMem the protection is the metadata's alone")


def heldout_lines(audit: Optional[dict]) -> list[str]:
    """Each source's held-out topic family on its report part (no train or select pair has it)
    whose suppression AUC is below issue 44's 0.60."""
    lines = []
    for source, entry in sorted((audit or {}).items()):
        report = (entry.get("by_family") or {}).get("report") or {}
        total = sum(f.get("n", 0) for f in report.values())
        for family, f in sorted(report.items()):
            if f.get("heldout") and f.get("suppression_auc") is not None and f["suppression_auc"] < 0.6:
                what = ("inverted: the gate does not carry the risk to a topic it never saw" if f["suppression_auc"] < 0.5
                        else "below the 0.60 target for a held-out family")
                lines.append(f"`{source}` report, held-out topic family {family} ({f['n']:,} of {total:,} pairs): "
                             f"suppression AUC **{f['suppression_auc']:.3f}**, {what}")
    return lines


def realistic_lines(text: Optional[str]) -> list[str]:
    """The realistic cases' criteria the release missed (the committed output's last lines)."""
    out = []
    for line in (text or "").splitlines():
        if ("criterion" in line) and "missed" in line:
            out.append(f"realistic cases (`python {REALISTIC.replace('.txt', '.py')}`): {line.strip()}")
    return out


def reproduced(text: Optional[str], weights_sha256: Optional[str]) -> Optional[dict]:
    """The ``make demo-check`` record quoted in docs/reproducibility.md, when it is about these weights."""
    found = {key: re.search(rf"^{pattern}\s+(\S.*)$", text or "", re.M)
             for key, pattern in (("demo", "demo weights sha256"), ("release", "release weights sha256"),
                                  ("verdict", "verdict:"))}
    if not all(found.values()) or not weights_sha256:
        return None
    demo, release, verdict = (m.group(1).strip() for m in found.values() if m)
    if release != weights_sha256 or (verdict == "bit for bit" and demo != weights_sha256):
        return None
    return {"sha256": demo, "verdict": verdict, "source": REPRODUCIBILITY}


def release_facts(checkpoint: Path, report: Path, root: Path = REPO_ROOT) -> dict:
    """Everything the card says of the release beyond its own folder, read from committed files."""
    cfg = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    export = cfg.get("export") or {}
    headline = _read_json(checkpoint / "headline.json")
    targets_path = report / "targets" / "targets.json"
    result = targets_of(_read_json(targets_path), export, headline)
    audit_path, realistic_path, repro_path = root / AUDIT, root / REALISTIC, root / REPRODUCIBILITY
    facts: dict = {"reproduced": reproduced(repro_path.read_text(encoding="utf-8") if repro_path.is_file() else None,
                                            cfg.get("weights_sha256"))}
    if result is None:
        facts.update(source=f"no `memgate targets` record of this export in `{_rel(targets_path)}`", misses=[],
                     does=[], does_not=["its targets are not yet measured: run `memgate targets` (docs/results.md), "
                                        "then `memgate card`"])
        return facts
    misses = [(name, f"{value:.4f}" if value is not None else "—")
              for name, value, met in issue44_rows(result) + text_risk_rows(result) + route_rows(result) if not met]
    misses += [(f"exposure, {cat}: relative top-3 cut >= 30 %, CI above 0", f"{f['relative_cut']['value']:+.3f}")
               for cat, f in (result.get("exposure") or {}).items() if f.get("judged") and not f.get("met")]
    does_not = [line for line in (gatemem_line(result),) if line]
    audit = _read_json(audit_path)
    does_not += heldout_lines(audit)
    does_not += realistic_lines(realistic_path.read_text(encoding="utf-8") if realistic_path.is_file() else None)
    sources = [f"`{_rel(targets_path)}` (seed {result.get('seed')})"]
    sources += [f"`{p}`" for p, present in ((AUDIT, audit is not None), (REALISTIC, realistic_path.is_file())) if present]
    facts.update(source=", ".join(sources), does_source=sources[0], misses=misses, does=does_lines(result),
                 does_not=does_not)
    return facts


def card_text(checkpoint: Path, report: Path, root: Path = REPO_ROOT) -> str:
    """The card ``memgate card`` writes (the test compares it with the committed README.md)."""
    cfg = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    headline = _read_json(checkpoint / "headline.json")
    plots = {n for n in ("training_curve.png", "risk_reliability.png") if (checkpoint / n).exists()}
    shown = checkpoint.name if checkpoint.name == RELEASE_NAME else _rel(checkpoint)
    return "\n".join(card_lines(checkpoint.name, cfg, cfg.get("export"), headline, shown, plots,
                                release_facts(checkpoint, report, root)))


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=f"checkpoints/{RELEASE_NAME}")
    parser.add_argument("--report", default=f"reports/{RELEASE_NAME}")
    args = parser.parse_args(argv)
    checkpoint, report = Path(args.checkpoint), Path(args.report)
    if not (checkpoint / "config.json").is_file():
        parser.error(f"--checkpoint: no config.json in {checkpoint}")
    text = card_text(checkpoint, report)
    (checkpoint / "README.md").write_text(text, encoding="utf-8")
    print(f"wrote {checkpoint / 'README.md'} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
