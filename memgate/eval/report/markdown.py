"""report.md and PNG plots from metrics.json: headline first, then sources, slices, timings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from memgate.contract import markdown as md
from memgate.eval.report.style import label_of, legend_outside, merge_identical, route_styles, sort_routes
from memgate.eval.sweep import sweep_report_lines

MAIN_KEYS = ("recall_required@20", "feasible_rate@20", "l_rc@20", "risk_upper@20",
             "violation_any@20", "mrr_required")


def _fmt(cell) -> str:
    if not isinstance(cell, dict) or cell.get("value") is None:
        return "—"
    value = cell["value"]
    lo, hi = (cell.get("ci") or [None, None])[:2]
    if lo is None or hi is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def _table(rows: dict, keys: Sequence[str]) -> list[str]:
    return md.table(["route", *keys], ([f"`{route}`", *(_fmt(metrics.get(k)) for k in keys)]
                                       for route, metrics in rows.items()))


def headline_table(headline: dict) -> list[str]:
    keys = ("top5_inadmissible_tv", "recall_required@5", "recall_required@20",
            "recall_beneficial@20", "mrr_required")
    lines = [
        f"Preference accuracy on {headline.get('n_test_triples_tv')} text-visible test triples: "
        f"gated **{headline['pref_acc_gated']:.3f}**, reference (plain cosine) "
        f"{headline['pref_acc_reference']:.3f}.",
        "",
    ]
    activity = headline.get("gate_activity") or {}
    if activity.get("mask_std") is not None:
        reordered = activity.get("top20_reordered")
        lines += [f"Gate activity: mask std over dimensions {activity['mask_std']:.4f} (0 for any uniform "
                  f"mask); `learned_gate` top 20 differs from `global_dense`'s on "
                  f"{'—' if reordered is None else f'{reordered:.1%}'} of test queries.", ""]
    strata = headline.get("strata") or {}
    names = [n for n in ("hard", "easy", "in_dist", "heldout") if f"n_triples_{n}" in strata]
    if names:
        lines += [md.row("stratum", "triples", "gated", "reference"), md.rule(4)]
        for n in names:
            gated, ref = strata.get(f"pref_acc_gated_{n}"), strata.get(f"pref_acc_reference_{n}")
            lines.append(f"| {n} | {strata[f'n_triples_{n}']} | {'—' if gated is None else f'{gated:.3f}'} "
                         f"| {'—' if ref is None else f'{ref:.3f}'} |")
        lines += ["", "(hard: the plain cosine ranks m- at or above m+, so its accuracy there is 0 by "
                  "construction.)", ""]
    lines += [md.row("route", *keys), md.rule(len(keys) + 1)]
    for route, figures in headline["routes"].items():
        cells = ["—" if figures.get(k) is None else f"{figures[k]:.3f}" for k in keys]
        lines.append(md.row(f"`{route}`", *cells))
    return lines


def write_report(out_dir: Path, metrics: dict, timings: dict, sources: Sequence[str],
                 routes: Sequence[str], checkpoint: Optional[str], data_dir: Optional[str]) -> None:
    lines = ["# memgate evaluation report", "",
             f"Checkpoint: `{checkpoint}`; data: `{data_dir}`. K = 20, τ = 0.8, clean metadata. "
             "Cells are value [95% group-bootstrap CI]; risks and rates are fractions.", ""]
    if "headline" in metrics:
        lines += ["## Headline (synthetic test)", ""] + headline_table(metrics["headline"]) + [""]
    for source in sources:
        lines += [f"## {source}", ""] + _table(metrics[source], MAIN_KEYS) + [""]
        paired = {r: m for r, m in metrics[source].items()
                  if any(k.startswith("diff_vs_") for k in m)}
        diff_keys = ("diff_vs_global_dense:l_rc@20", "diff_vs_namespace_dense:l_rc@20",
                     "diff_vs_global_dense:recall_required@20",
                     "diff_vs_namespace_dense:recall_required@20")
        lines += ["Paired differences (route − baseline):", ""] + _table(paired, diff_keys) + [""]
        contrast = {r: m for r, m in metrics[source].items() if any(k.startswith("diff_vs_kleene_gate:") for k in m)}
        if contrast:
            keys = [k for k in ("diff_vs_kleene_gate:recall_required@20", "diff_vs_kleene_gate:l_rc@20",
                                "diff_vs_kleene_gate:violation_any@20", "diff_vs_kleene_gate:protected_exposure@20")
                    if any(k in m for m in contrast.values())]
            lines += ["Text gate on top of the metadata gate (route − `kleene_gate`, paired):", ""]
            lines += _table(contrast, keys) + [""]
        exposure_keys = [k for k in ("exposure_scope@20", "exposure_policy@20",
                                     "exposure_lifecycle@20", "protected_exposure@20")
                         if any(k in m for m in metrics[source].values())]
        lines += ["Typed exposure:", ""] + _table(metrics[source], exposure_keys) + [""]
        skipped = metrics.get("skipped", {}).get(source) or {}
        for route, reason in skipped.items():
            lines.append(f"- `{route}` skipped: {reason}")
        lines.append("")
    lines += ["## Macro (equal weight over sources)", ""]
    macro_rows = {r: m for r, m in metrics["macro"].items() if "reason" not in m}
    lines += _table(macro_rows, ("recall_required@20", "l_rc@20")) + [""]
    for route, m in metrics["macro"].items():
        if "reason" in m:
            lines.append(f"- `{route}`: null ({m['reason']})")
    lines += ["", "## Breakdowns", ""]
    for source, slices in metrics.get("breakdowns", {}).items():
        for name, by_route in slices.items():
            lines += [f"### {source} / {name}", ""]
            lines += _table(by_route, ("recall_required@20", "l_rc@20", "violation_any@20")) + [""]
    if "sweep" in metrics:
        lines += sweep_report_lines(metrics["sweep"])
    lines += ["## Timings (seconds, wall clock)", "", "```", _timings(timings), "```", ""]
    Path(out_dir, "report.md").write_text("\n".join(lines), encoding="utf-8")
    plot_frontier(Path(out_dir), metrics, sources)


def _timings(timings: dict) -> str:
    import json

    return json.dumps(timings, indent=1, sort_keys=True)


def plot_frontier(out_dir: Path, metrics: dict, sources: Sequence[str]) -> None:
    """Recall vs L_RC across K per route, one panel per source (stacked), each with its legend
    outside the axes: colour = route family, marker = variant; routes with identical curves on a
    panel are drawn once and labelled together (``memgate.eval.report.style``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    routes = sorted({r for source in sources for r in metrics[source]})
    styles = route_styles(routes)
    fig, axes = plt.subplots(len(sources), 1, figsize=(12, 4.4 * len(sources)), squeeze=False)
    for ax, source in zip(axes[:, 0], sources):
        curves = {}
        for route in sort_routes(list(metrics[source])):
            m = metrics[source][route]
            points = [(m.get(f"recall_required@{k}", {}).get("value"),
                       m.get(f"l_rc@{k}", {}).get("value")) for k in (10, 20, 50, 100)]
            points = tuple((x, y) for x, y in points if x is not None and y is not None)
            if points:
                curves[route] = points
        for group in merge_identical(curves):
            xs, ys = zip(*curves[group[0]])
            ax.plot(xs, ys, ms=6 if len(group) == 1 else 9, lw=1.2, label=label_of(group),
                    markerfacecolor="none" if len(group) > 1 else None, **styles[group[0]].line())
        ax.set_title(source)
        ax.set_xlabel("recall_required@K (K = 10, 20, 50, 100)")
        ax.set_ylabel("L_RC@K (lower is better)")
        ax.grid(alpha=0.3)
        legend_outside(ax, title="colour = family, marker = variant\nhollow = routes with identical curves")
    fig.subplots_adjust(left=0.07, right=0.6, top=0.97, bottom=0.04, hspace=0.3)
    fig.savefig(out_dir / "frontier.png", dpi=100, bbox_inches="tight")
    plt.close(fig)
