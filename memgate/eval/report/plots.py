"""PNG plots from metrics.json (matplotlib, Agg backend), written beside report.md.

- ``exposure_by_scenario.png``: typed exposure ``exposure_<x>@20`` per scenario of synthetic test
  (one panel per axis / risk reason, grouped bars per route), from ``breakdowns``.
- ``gatemem_protected_vs_recall.png``: per route, ``protected_exposure@20`` (y) against utility
  ``recall_required@20`` (x) on GateMem, with the bootstrap CIs as error bars.
- ``corruption_<source>.png``: the metadata corruption sweep, mean L_RC@20 vs rate per route (band:
  min-max over seeds), one panel per channel, the clean baseline dashed.

The recall-vs-L_RC frontier is ``memgate.eval.report.markdown.plot_frontier``. A plot whose figures are absent
is skipped (returns None); plots never change metrics.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from memgate.eval.report.style import label_of, legend_outside, merge_identical, route_styles, sort_routes

EXPOSURE_TYPES = ("scope", "policy", "lifecycle", "cross_domain", "sycophancy", "tool_drift",
                  "jailbreak")
PLOT_ROUTES = ("global_dense", "namespace_dense", "kleene_gate", "learned_gate",
               "learned_gate_namespace", "hybrid", "oracle_required")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _value(metrics: dict, key: str) -> Optional[float]:
    cell = metrics.get(key)
    return cell.get("value") if isinstance(cell, dict) else None


def file_stem(name: str) -> str:
    """A source name as a file-name part (``cases:x/y`` -> ``cases_x_y``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "source"


def plot_exposure_by_scenario(out_dir: Path, metrics: dict, source: str = "synthetic_test",
                              routes: Sequence[str] = PLOT_ROUTES) -> Optional[Path]:
    slices = metrics.get("breakdowns", {}).get(source, {})
    scenarios = sorted(name for name in slices if name.startswith("scenario="))
    if not scenarios:
        return None
    present = sort_routes([r for r in routes if any(r in slices[s] for s in scenarios)])
    kinds = [x for x in EXPOSURE_TYPES
             if any(_value(slices[s].get(r, {}), f"exposure_{x}@20") is not None
                    for s in scenarios for r in present)]
    if not present or not kinds:
        return None
    plt = _plt()
    import numpy as np

    n_cols = 2
    n_rows = -(-len(kinds) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(max(8, 0.9 * len(scenarios) * n_cols), 3.2 * n_rows),
                             squeeze=False)
    x = np.arange(len(scenarios))
    width = 0.8 / len(present)
    styles = route_styles(present)
    for ax, kind in zip(axes.flat, kinds):
        for j, route in enumerate(present):
            ys = [_value(slices[s].get(route, {}), f"exposure_{kind}@20") for s in scenarios]
            ax.bar(x + (j - (len(present) - 1) / 2) * width,
                   [np.nan if y is None else y for y in ys], width, label=route,
                   color=styles[route].colour, hatch=styles[route].hatch, edgecolor="white", linewidth=0)
        ax.set_title(f"exposure_{kind}@20")
        ax.set_xticks(x)
        ax.set_xticklabels([s.split("=", 1)[1] for s in scenarios], rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("share of exposed prefix")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(kinds):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle(f"{source}: typed exposure per scenario (K = 20)")
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.845, 0.95), fontsize=8, frameon=False,
               title="colour = family, hatch = variant", title_fontsize=8)
    path = Path(out_dir) / "exposure_by_scenario.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_gatemem_tradeoff(out_dir: Path, metrics: dict, source: str = "gatemem") -> Optional[Path]:
    by_route = metrics.get(source)
    if not isinstance(by_route, dict):
        return None
    points = []
    for route, m in by_route.items():
        x, y = m.get("recall_required@20"), m.get("protected_exposure@20")
        if isinstance(x, dict) and isinstance(y, dict) and x.get("value") is not None \
                and y.get("value") is not None:
            points.append((route, x, y))
    if not points:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 5.5))
    by_route = {route: (x, y) for route, x, y in points}
    styles = route_styles(list(by_route))
    ordered = sort_routes(list(by_route))
    # Routes with the same figures (value and CI on both axes) are one point with one label.
    key = {r: (by_route[r][0]["value"], tuple(by_route[r][0].get("ci") or ()),
               by_route[r][1]["value"], tuple(by_route[r][1].get("ci") or ())) for r in ordered}
    for group in merge_identical(key):
        x, y = by_route[group[0]]
        xv, yv = x["value"], y["value"]
        xlo, xhi = x.get("ci") or [None, None]
        ylo, yhi = y.get("ci") or [None, None]
        xerr = [[xv - xlo], [xhi - xv]] if None not in (xlo, xhi) else None
        yerr = [[yv - ylo], [yhi - yv]] if None not in (ylo, yhi) else None
        style = styles[group[0]]
        ax.errorbar(xv, yv, xerr=xerr, yerr=yerr, fmt=style.marker, color=style.colour, capsize=2,
                    ms=6 if len(group) == 1 else 9, mfc="none" if len(group) > 1 else style.colour,
                    elinewidth=0.8, label=label_of(group))
    ax.set_xlabel("utility recall_required@20 (higher is better)")
    ax.set_ylabel("protected_exposure@20 (lower is better)")
    ax.set_title(f"{source}: protected exposure vs utility recall (95% group-bootstrap CIs)")
    ax.grid(alpha=0.3)
    legend_outside(ax, title="colour = family, marker = variant\nhollow = routes with identical figures")
    fig.subplots_adjust(left=0.08, right=0.58, top=0.92, bottom=0.1)
    path = Path(out_dir) / "gatemem_protected_vs_recall.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_sweep(out_dir: Path, sweep: dict) -> list[Path]:
    """One figure per source: L_RC@20 vs corruption rate per route, one panel per channel."""
    paths = []
    rates = sweep.get("rates") or []
    for source, result in (sweep.get("sources") or {}).items():
        channels = list(result.get("channels", {}))
        if not channels:
            continue
        plt = _plt()
        from matplotlib.lines import Line2D

        routes = sort_routes(sorted({r for c in channels for r in result["channels"][c]["routes"]}))
        styles = route_styles(routes)  # colour per family, marker per variant, the same in every panel
        n_cols = 4
        n_rows = -(-len(channels) // n_cols)
        fig, axes = plt.subplots(n_rows, n_cols, figsize=(4.2 * n_cols, 3.2 * n_rows), squeeze=False,
                                 sharex=True)
        for ax, channel in zip(axes.flat, channels):
            entry = result["channels"][channel]
            for route, curve in entry["routes"].items():
                pts = [(r, y) for r, y in zip(rates, curve["l_rc@20"]) if y is not None]
                if not pts:
                    continue
                ax.plot(*zip(*pts), ms=4, lw=1, **styles[route].line())
                lo, hi = curve.get("l_rc@20_min"), curve.get("l_rc@20_max")
                if lo and hi and None not in lo and None not in hi:
                    ax.fill_between(rates, lo, hi, color=styles[route].colour, alpha=0.12, lw=0)
            if entry.get("baseline_l_rc@20") is not None:
                ax.axhline(entry["baseline_l_rc@20"], color="black", ls="--", lw=1)
            ax.set_title(f"{channel} (vs clean {entry['baseline']})", fontsize=9)
            ax.set_xlabel("corruption rate", fontsize=8)
            ax.set_ylabel("L_RC@20", fontsize=8)
            ax.tick_params(labelbottom=True, labelsize=7)
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(channels):]:
            ax.axis("off")
        handles = [Line2D([], [], ms=4, label=r, **styles[r].line()) for r in routes]
        handles.append(Line2D([], [], color="black", ls="--", label="clean baseline (panel title)"))
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.985, 0.92), fontsize=8, frameon=False,
                   title="colour = family, marker = variant", title_fontsize=8)
        fig.suptitle(f"{source}: metadata corruption, mean over {sweep.get('seeds')} seeds "
                     "(band: min-max over seeds)")
        fig.subplots_adjust(left=0.05, right=0.98, bottom=0.06, top=0.92, hspace=0.5, wspace=0.25)
        path = Path(out_dir) / f"corruption_{file_stem(source)}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def write_plots(out_dir: Path, metrics: dict, sources: Sequence[str]) -> list[Path]:
    """Every plot whose figures metrics.json holds; returns the paths written."""
    out_dir = Path(out_dir)
    paths = [plot_exposure_by_scenario(out_dir, metrics)]
    if "gatemem" in sources:
        paths.append(plot_gatemem_tradeoff(out_dir, metrics))
    if "sweep" in metrics:
        paths += plot_sweep(out_dir, metrics["sweep"])
    return [p for p in paths if p is not None]
