"""The training curve, ``training_curve.png``: loss terms per step, dev preference accuracy, the
selection figure (the text-risk macro with its CI) and every selection guard against its threshold
per validation point (filled = passed, hollow = failed), the exported step marked on every panel.
A panel with nothing to show (no text-risk figure, no guard: ``--guards none``) is left out and
the title says why; loss terms that coincide (``loss`` is ``loss_dpo`` when DPO is the only term)
stay apart by line style, width and marker. A last panel shows the dev mask diagnostics per
validation point (the uniform share of ||1 - g||^2, the alignment of 1 - g with q_i v_i - cos v_i^2,
the activity |cos - S|, and the risk scale a of a mask_risk gate) when the run recorded them.

Inputs are the ``TrainingMonitor`` rows and ``BestGateSelection.history`` (what the model card's
selection table shows), so the plot never reads anything the run did not record.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

LOSS_TERMS = ("loss", "loss_dpo", "loss_listwise", "loss_margin", "loss_preservation", "loss_list_kl",
              "loss_risk_bce", "loss_list_risk_bce")
# term -> line style, marker, width: the total is a wide pale band under the terms, so a term equal
# to it shows as a marked line inside the band
LOSS_STYLES = {"loss": ("-", "", 4.0), "loss_dpo": ("--", "o", 1.2), "loss_listwise": (":", "s", 1.2),
               "loss_margin": ("-.", "^", 1.2), "loss_preservation": ((0, (5, 1, 1, 1)), "v", 1.2),
               "loss_list_kl": ((0, (1, 1)), "D", 1.2), "loss_risk_bce": ((0, (3, 1)), "P", 1.2),
               "loss_list_risk_bce": ((0, (2, 2)), "X", 1.2)}
MASK_SERIES = (("dev_mask_uniform_share", "uniform share of ||1 - g||^2", "-"),
               ("dev_mask_alignment_neg", "alignment of 1 - g with q v - cos v^2 (m-)", "-"),
               ("dev_mask_alignment_pos", "alignment (m+)", ":"),
               ("dev_activity", "mean |cos - S| (dev)", "--"),
               ("risk_scale", "risk scale a (exported per point)", "-."))


GUARD_LABELS = {"locomo": "LoCoMo recall: max drop - drop",
                "gatemem_routes": "GateMem hybrid vs kleene: tightest margin",
                "gatemem": "GateMem suppression AUC - 0.5",
                "text_risk": "natural sources: min suppression AUC - 0.5"}


def guard_slacks(entry: dict) -> dict:
    """name -> (slack, passed) of one history entry: slack = how far the guard's figure is on the
    passing side of its threshold (>= 0 passes). Older cards' entries (a ``monitor`` beside the
    guard, GateMem against 1 - cos) are read too."""
    guard = dict(entry.get("guard") or {})
    for name, value in (entry.get("monitor") or {}).items():
        guard.setdefault(name, value)
    out = {}
    for name, result in guard.items():
        if not isinstance(result, dict) or "passed" not in result:
            continue
        slack = result.get("slack")
        if slack is None and name == "gatemem" and result.get("suppression_auc") is not None:
            slack = result["suppression_auc"] - result.get("one_minus_cos_auc", 0.5)
        if slack is None and name == "locomo" and result.get("drop") is not None:
            slack = result.get("threshold", 0.01) - result["drop"]
        if slack is not None:
            out[name] = (float(slack), bool(result["passed"]))
    return out


def mask_series(history: list[dict]) -> dict:
    """name -> [(step, value)] of the dev mask diagnostics per validation point (the risk scale:
    the exported one, calibrated against the guards)."""
    out: dict = {}
    for key, _, _ in MASK_SERIES:
        if key == "risk_scale":
            pts = [(e["step"], e["risk_scale"]["calibrated"]) for e in history if isinstance(e.get("risk_scale"), dict)]
        else:
            pts = [(e["step"], e[key]) for e in history if e.get(key) is not None]
        if pts:
            out[key] = pts
    return out


def mask_panel(ax, history: list[dict]) -> None:
    series = mask_series(history)
    for i, (key, label, style) in enumerate(MASK_SERIES):
        if key in series:
            ax.plot(*zip(*series[key]), marker="o", ms=3, ls=style, color=f"C{i + 4}", label=label)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_title("mask diagnostics (dev, per validation)")
    ax.set_xlabel("optimiser step")


def plot_training_curve(path: Path, rows: list[dict], history: list[dict], title: str = "",
                        max_recall_drop: Optional[float] = None, guards: str = "",
                        warnings: Sequence[str] = ()) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    selected = [e["step"] for e in history if e.get("selected")]
    best = selected[-1] if selected else None
    macro = [(e["step"], e["text_risk_macro"]) for e in history if e.get("text_risk_macro")]
    slacks = [(e["step"], guard_slacks(e)) for e in history]
    names = [n for n in GUARD_LABELS if any(n in g for _, g in slacks)]
    names += sorted({n for _, g in slacks for n in g} - set(names))
    mask = mask_series(history)
    left_out = ([] if macro else ["selection on dev accuracy (no text-risk figure)"]) + \
        ([] if names else [f"no real-data guards: {guards or 'none'}"])
    n_panels = 2 + bool(macro) + bool(names) + bool(mask)
    fig, axes = plt.subplots(1, n_panels, figsize=(5.25 * n_panels, 4.6), squeeze=False)
    axes = list(axes[0])
    ax = axes[0]
    terms = [t for t in LOSS_TERMS if any(t in r for r in rows)]
    for i, term in enumerate(terms):
        pts = [(r["step"], r[term]) for r in rows if term in r]
        ls, marker, lw = LOSS_STYLES.get(term, ("--", "x", 1.2))
        ax.plot(*zip(*pts), ls=ls, marker=marker or None, lw=lw, ms=4, label=term, color=f"C{i}",
                alpha=0.35 if term == "loss" else 1.0, markevery=max(1, len(pts) // 12),
                zorder=1 if term == "loss" else 2)
    if not terms:
        ax.text(0.5, 0.5, "no training steps recorded", ha="center", transform=ax.transAxes)
    ax.set_title("training loss terms (per step)")
    ax.set_xlabel("optimiser step")
    sizes = [abs(r[t]) for r in rows for t in terms if t in r and r[t]]
    if sizes and max(sizes) > 10 * max(min(sizes), 1e-3):  # terms a decade apart: a log axis shows both
        ax.set_yscale("symlog", linthresh=1e-3)

    ax = axes[1]
    steps = [e["step"] for e in history]
    ax.plot(steps, [e["dev_pref_acc_gated"] for e in history], marker="o", ms=4, label="dev gated")
    ax.plot(steps, [e["dev_pref_acc_reference"] for e in history], marker="s", ms=3, ls=":",
            color="grey", label="dev reference (plain cosine)")
    ax.set_title("dev preference accuracy (per validation)")
    ax.set_xlabel("optimiser step")

    panel = 2
    if macro:
        ax = axes[panel]
        panel += 1
        xs = [s for s, _ in macro]
        ys = [m["value"] for _, m in macro]
        lo = [m["value"] - (m["ci"][0] if m["ci"][0] is not None else m["value"]) for _, m in macro]
        hi = [(m["ci"][1] if m["ci"][1] is not None else m["value"]) - m["value"] for _, m in macro]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=3, color="C2",
                    label="text-risk macro AUC(1-S) - AUC(1-cos) [95% CI]")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title("selection figure (natural sources, select)")
        ax.set_xlabel("optimiser step")

    if names:
        ax = axes[panel]
    for i, name in enumerate(names):
        pts = [(s, *g[name]) for s, g in slacks if name in g]
        color = ("tab:red", "tab:blue", "tab:purple", "tab:green", "tab:orange", "tab:brown")[i % 6]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=1, alpha=0.6,
                label=GUARD_LABELS.get(name, name))
        ok = [(p[0], p[1]) for p in pts if p[2]]
        bad = [(p[0], p[1]) for p in pts if not p[2]]
        if ok:
            ax.plot(*zip(*ok), marker="o", ls="none", color=color)
        if bad:
            ax.plot(*zip(*bad), marker="o", ls="none", mfc="none", color=color)
    if names:
        from matplotlib.lines import Line2D

        ax.axhline(0, color="black", lw=1, ls="--", label="threshold (>= 0 passes)")
        ax.plot([], [], marker="o", ls="none", color="grey", label="point passed the guard")
        ax.add_line(Line2D([], [], marker="o", ls="none", mfc="none", color="grey", label="point failed it"))
        ax.set_ylabel("slack to threshold")
        ax.set_yscale("symlog", linthresh=1e-2)
        ax.set_title("selection guards against their thresholds")
        ax.set_xlabel("optimiser step")
        panel += 1

    if mask:
        mask_panel(axes[panel], history)

    for a in axes[2:]:  # the same steps as the dev panel, guards or not
        a.set_xlim(axes[1].get_xlim())
    for a in axes:
        if best is not None:
            a.axvline(best, color="black", lw=1, ls="-.", alpha=0.7)
        a.grid(alpha=0.3)
    handles, labels = [], []
    for a in (*axes, *[a for a in fig.axes if a not in axes]):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    if best is not None:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="black", lw=1, ls="-.", alpha=0.7))
        labels.append(f"exported step {best}")
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize=8,
               frameon=False)
    fig.suptitle(title or "training curve")
    top = 0.95
    lines = []
    if left_out:  # why a panel is missing, in grey under the title
        lines.append(("not drawn: " + "; ".join(left_out), "grey"))
    if warnings:  # the run's warnings, first words each, in red under the title
        lines.append(("; ".join("WARNING: " + w.split(":")[0] for w in warnings), "C3"))
    for text, color in lines:
        top -= 0.055
        fig.text(0.5, top + 0.01, text, ha="center", color=color, fontsize=9)
    fig.tight_layout(rect=(0, 0.16, 1, top), w_pad=3.0)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
