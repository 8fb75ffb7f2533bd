"""``memgate targets``: the release targets of one or more evaluated gates (issue 33's text-risk
targets first, then the learned-gate release's).

For each ``--run CHECKPOINT_DIR:REPORT_DIR`` (the first is the released seed, the others are
further seeds of the same configuration) this reads the checkpoint, its report (``metrics.json``,
``routes.jsonl``) and the data it was evaluated on, and computes:

- gate activity: mask std over dimensions, share of test top-20 lists reordered vs the cosine;
- synthetic test: ``learned_gate`` vs ``global_dense`` top5_inadmissible_tv (the cut), recalls and
  MRR (differences), preference accuracy gated vs reference; both by risk category;
- LoCoMo report: ``learned_gate_namespace`` vs ``namespace_dense`` and ``learned_gate`` vs
  ``global_dense`` recall_required@20 differences with their paired CIs (from metrics.json);
- GateMem report: suppression AUC vs ``1 - cos`` (paired CI, from metrics.json) and vs the
  step-0 gate of the same seed (reconstructed from the seed and checked against the step-0
  entry of the selection history), paired episode-bootstrap CIs; the cubic check;
- ``hybrid`` vs ``kleene_gate`` synthetic ``l_rc@20`` with a paired group-bootstrap CI;
- text-visible risk (issue 33): on every natural-phrasing source's ``report`` part, natural and
  matched (and the natural sources of issue 43, one variant each), AUC(1 - S) - AUC(1 - cos) with its paired memory-bootstrap CI, the suppression AUC and
  the activity on traps (``memgate.eval.text_risk.report_figures``); GateMem report ``hybrid`` -
  ``kleene_gate`` (violation_any@20, protected_exposure@20, recall_required@20, from metrics.json).

- exposure (issue 44, ``memgate.eval.exposure``): per risk category the share of the natural report
  queries whose risk memory reaches the top 3 of the category's pool, ``namespace_kleene`` vs
  ``hybrid_drop``, and the relative cut with its query-bootstrap CI.

Writes ``targets.json`` and ``targets.md`` into ``--out``. Report parts are read for reporting
only, after selection, as every evaluation does.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from memgate.contract.config import resolve_path


def text_risk_rows(result: dict) -> list[tuple[str, float, bool]]:
    """(figure, value, met) of issue 33's text-risk targets for one seed's ``text_risk_report``."""
    rows = []
    for key, cell in result["text_risk_report"]["cells"].items():
        g, s, act = cell["gated_minus_cos"], cell["suppression_auc"], cell["activity_traps"]["value"]
        rows.append((f"{key}: AUC(1-S) - AUC(1-cos) > 0, CI excludes 0", g["value"],
                     g["value"] > 0 and g["ci"][0] is not None and g["ci"][0] > 0))
        rows.append((f"{key}: suppression AUC >= 0.6", s["value"], s["value"] >= 0.6))
        rows.append((f"{key}: mean |cos - S| on traps >= 0.02", act, act >= 0.02))
        if cell["source"] == "phrasing_sycophancy_bio":
            v = cell["auc_one_minus_gated"]["value"]
            rows.append((f"{key}: AUC(1 - S) >= 0.6", v, v >= 0.6))
    return rows


def route_rows(result: dict) -> list[tuple[str, float, bool]]:
    routes = result["gatemem_routes"]
    lc = result["locomo"]["learned_gate_namespace_vs_namespace_dense"]["value"]
    lrc = result["hybrid_vs_kleene_l_rc@20"]["difference"]
    cut = result["synthetic"]["top5_cut"]
    return [
        ("LoCoMo report: learned_gate_namespace - namespace_dense r@20 >= -0.01", lc, lc >= -0.01),
        *((f"GateMem report: hybrid - kleene_gate {k} {'<= +0.01' if k != 'recall_required@20' else '>= -0.01'}",
           (routes[k] or {}).get("value"),
           routes[k] is not None and (routes[k]["value"] <= 0.01 if k != "recall_required@20" else routes[k]["value"] >= -0.01))
          for k in ("violation_any@20", "protected_exposure@20", "recall_required@20")),
        ("synthetic test: learned_gate top5_inadmissible_tv cut vs global_dense >= 10 %", cut, cut >= 0.10),
        ("synthetic test: hybrid - kleene_gate l_rc@20 < 0, CI excludes 0", lrc["value"],
         lrc["value"] < 0 and lrc["ci"][1] is not None and lrc["ci"][1] < 0),
    ]


def issue33_lines(results: list[dict]) -> list[str]:
    """Every issue-33 target: the released seed's figure, met or missed, and the seeds' mean [range]."""
    lines = [f"| target | released (seed {results[0]['seed']}) | met | mean [min, max] over {len(results)} seeds | "
             "seeds meeting it |", "|---|---|---|---|---|"]
    per_seed = [text_risk_rows(r) + route_rows(r) for r in results]
    for i, (name, value, met) in enumerate(per_seed[0]):
        values = [rows[i][1] for rows in per_seed if rows[i][1] is not None]
        spread = f"{np.mean(values):+.4f} [{min(values):+.4f}, {max(values):+.4f}]" if values else "—"
        lines.append(f"| {name} | {_f(value, 4)} | {'yes' if met else '**no**'} | {spread} | "
                     f"{sum(rows[i][2] for rows in per_seed)} of {len(per_seed)} |")
    return lines


def issue44_rows(result: dict) -> list[tuple[str, float, bool]]:
    """(figure, value, met) of issue 44's report targets for one seed, per risk category over every
    report cell of its sources (natural and matched): the weakest cell's suppression AUC >= 0.65, and
    the weakest AUC(1 - S') - AUC(1 - cos) above 0 with its CI above 0. Held-out families are
    read by ``data_gen.phrasing_audit --gate`` (docs/results.md)."""
    from memgate.eval.text_risk import CATEGORIES, CATEGORY

    rows = []
    cells = result["text_risk_report"]["cells"]
    for category in CATEGORIES:
        mine = {k: c for k, c in cells.items() if CATEGORY.get(c["source"]) == category}
        if not mine:
            continue
        low_key = min(mine, key=lambda k: mine[k]["suppression_auc"]["value"])
        low = mine[low_key]["suppression_auc"]["value"]
        rows.append((f"{category}: suppression AUC >= 0.65 in every cell (weakest: {low_key})", low, low >= 0.65))
        gains = {k: c["gated_minus_cos"] for k, c in mine.items()}
        gain_key = min(gains, key=lambda k: (gains[k]["ci"][0] if gains[k]["ci"][0] is not None else -1.0))
        g = gains[gain_key]
        rows.append((f"{category}: AUC(1 - S') - AUC(1 - cos) > 0, CI excludes 0 in every cell (weakest: {gain_key})",
                     g["value"], all(e["ci"][0] is not None and e["ci"][0] > 0 for e in gains.values())))
    return rows


def issue44_lines(results: list[dict]) -> list[str]:
    """Issue 44's per-category report targets: the released seed's figure, met or missed, the seeds'
    mean [range] and how many seeds meet each."""
    lines = [f"| target | released (seed {results[0]['seed']}) | met | mean [min, max] over {len(results)} seeds | "
             "seeds meeting it |", "|---|---|---|---|---|"]
    per_seed = [issue44_rows(r) for r in results]
    for i, (name, value, met) in enumerate(per_seed[0]):
        values = [rows[i][1] for rows in per_seed if i < len(rows)]
        lines.append(f"| {name} | {_f(value, 4)} | {'yes' if met else '**no**'} | "
                     f"{np.mean(values):+.4f} [{min(values):+.4f}, {max(values):+.4f}] | "
                     f"{sum(rows[i][2] for rows in per_seed if i < len(rows))} of {len(per_seed)} |")
    return lines


def exposure_lines(results: list[dict]) -> list[str]:
    """Issue 44's exposure (``memgate.eval.exposure``): per category the released seed's top-3
    exposure under ``namespace_kleene`` and ``hybrid_drop``, the relative cut with its CI, and
    whether it is judged (>= 30 exposed queries under ``namespace_kleene``) and met (cut >= 30 %,
    CI above 0)."""
    lines = ["| category | queries / pool | exposed: namespace_kleene | exposed: hybrid_drop | relative cut [95 % CI] | "
             "admissible in top 3: kleene / hybrid_drop | judged | met | seeds meeting it |",
             "|---|---|---|---|---|---|---|---|---|"]
    for cat, f in (results[0].get("exposure") or {}).items():
        e, n = f["exposed"], f["exposed_queries"]
        met = sum(bool((r.get("exposure") or {}).get(cat, {}).get("met")) for r in results)
        lines.append(f"| {cat} | {f['queries']} / {f['pool']} | {e['namespace_kleene']:.3f} ({n['namespace_kleene']}) | "
                     f"{e['hybrid_drop']:.3f} ({n['hybrid_drop']}) | {_ci(f['relative_cut'])} | "
                     f"{f['kept']['namespace_kleene']:.3f} / {f['kept']['hybrid_drop']:.3f} | "
                     f"{'yes' if f['judged'] else 'no (< 30 exposed)'} | {'yes' if f['met'] else '**no**'} | "
                     f"{met} of {len(results)} |")
    return lines


def _f(x, d=3):
    return "—" if x is None else f"{x:.{d}f}"


def _ci(entry, d=3):
    if not entry or entry.get("value") is None:
        return "—"
    lo, hi = entry["ci"]
    return f"{entry['value']:+.{d}f} [{_f(lo, d)}, {_f(hi, d)}]"


def markdown(results: list[dict]) -> list[str]:
    released, seeds = results[0], results
    spread = lambda f: f"{np.mean([f(r) for r in seeds]):.3f} [{min(f(r) for r in seeds):.3f}, {max(f(r) for r in seeds):.3f}]"  # noqa: E731
    rows = [
        ("selected step", lambda r: r["selected_step"], "trained step"),
        ("mask std over dims", lambda r: r["gate_activity"]["mask_std"], ">= 0.05"),
        ("top-20 lists reordered vs cosine", lambda r: r["gate_activity"]["top20_reordered"], ">= 0.05"),
        ("top5_inadmissible_tv cut vs global_dense", lambda r: r["synthetic"]["top5_cut"], ">= 0.10"),
        ("recall_required@5 diff", lambda r: r["synthetic"]["recall_required@5"]["difference"], "within 0.01"),
        ("recall_required@20 diff", lambda r: r["synthetic"]["recall_required@20"]["difference"], "within 0.01"),
        ("recall_beneficial@20 diff", lambda r: r["synthetic"]["recall_beneficial@20"]["difference"], "within 0.01"),
        ("mrr_required diff", lambda r: r["synthetic"]["mrr_required"]["difference"], "within 0.01"),
        ("pref acc gated", lambda r: r["pref_acc_gated"], "vs reference"),
        ("LoCoMo report: learned_gate_namespace - namespace_dense r@20",
         lambda r: r["locomo"]["learned_gate_namespace_vs_namespace_dense"]["value"], "within 0.01"),
        ("LoCoMo report: learned_gate - global_dense r@20",
         lambda r: r["locomo"]["learned_gate_vs_global_dense"]["value"], "within 0.01"),
        ("GateMem report suppression AUC", lambda r: r["gatemem"]["suppression_auc"]["value"], "> 1-cos and > step 0"),
        ("GateMem: - (1 - cos) AUC", lambda r: r["gatemem"]["vs_one_minus_cos"]["value"], "CI excludes 0"),
        ("GateMem: - step-0 gate AUC", lambda r: (r["gatemem"].get("vs_step0") or {}).get("difference", {}).get("value", float("nan")), "CI excludes 0"),
        ("hybrid - kleene_gate l_rc@20", lambda r: r["hybrid_vs_kleene_l_rc@20"]["difference"]["value"], "< 0, CI excludes 0"),
    ]
    lines = [f"| figure | released (seed {released['seed']}) | mean [min, max] over {len(seeds)} seeds | target |",
             "|---|---|---|---|"]
    cis = {"LoCoMo report: learned_gate_namespace - namespace_dense r@20": lambda r: r["locomo"]["learned_gate_namespace_vs_namespace_dense"],
           "LoCoMo report: learned_gate - global_dense r@20": lambda r: r["locomo"]["learned_gate_vs_global_dense"],
           "GateMem: - (1 - cos) AUC": lambda r: r["gatemem"]["vs_one_minus_cos"],
           "GateMem: - step-0 gate AUC": lambda r: (r["gatemem"].get("vs_step0") or {}).get("difference"),
           "hybrid - kleene_gate l_rc@20": lambda r: r["hybrid_vs_kleene_l_rc@20"]["difference"]}
    for name, f, target in rows:
        shown = _ci(cis[name](released), 4) if name in cis else _f(f(released), 4)
        lines.append(f"| {name} | {shown} | {spread(f)} | {target} |")
    lines += ["", f"By risk category (released seed {released['seed']}):", "",
              "| scenario | triples | pref gated | pref ref | top5_inadm_tv learned | top5_inadm_tv dense |",
              "|---|---:|---:|---:|---:|---:|"]
    for scen, c in released["by_category"].items():
        lines.append(f"| {scen} | {c['triples']} | {_f(c['pref_acc_gated'])} | {_f(c['pref_acc_reference'])} | "
                     f"{_f(c.get('top5_inadmissible_tv_learned_gate'))} | {_f(c.get('top5_inadmissible_tv_global_dense'))} |")
    return lines


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--run", action="append", required=True, help="CHECKPOINT_DIR:REPORT_DIR (first = released)")
    parser.add_argument("--data", default="data/default", help="the data directory the gates were evaluated on")
    parser.add_argument("--out", required=True)
    parser.add_argument("--n-boot", type=int, default=10_000)
    args = parser.parse_args(argv)
    from memgate.commands.targets_run import run_targets  # torch: after the arguments parse

    results = []
    for spec in args.run:
        ckpt, report = spec.split(":", 1)
        results.append(run_targets(resolve_path(ckpt), resolve_path(report), resolve_path(args.data), args.n_boot))
    out = resolve_path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "targets.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    lines = ["## Issue 44: text-visible risk per category (report parts)", "", *issue44_lines(results), "",
             "## Issue 33: text-visible risk", "", *issue33_lines(results), "",
             "## Exposure: risk memories in the top 3 (issue 44)", "", *exposure_lines(results), "",
             "## The learned-gate release's figures", "", *markdown(results)]
    (out / "targets.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
