"""The training curve, ``training_curve.png``: loss terms per step, dev preference accuracy, the
selection figure (the text-risk macro with its CI) and every selection guard against its threshold
per validation point (filled = passed, hollow = failed), the exported step marked on every panel.

Inputs are the ``TrainingMonitor`` rows and ``BestGateSelection.history`` (what the model card's
selection table shows), so the plot never reads anything the run did not record.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

LOSS_TERMS = ("loss", "loss_dpo", "loss_listwise", "loss_margin", "loss_preservation", "loss_list_kl")


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


def plot_training_curve(path: Path, rows: list[dict], history: list[dict], title: str = "",
                        max_recall_drop: Optional[float] = None, guards: str = "",
                        warnings: Sequence[str] = ()) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    selected = [e["step"] for e in history if e.get("selected")]
    best = selected[-1] if selected else None
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.6))
    ax = axes[0]
    terms = [t for t in LOSS_TERMS if any(t in r for r in rows)]
    for term in terms:
        pts = [(r["step"], r[term]) for r in rows if term in r]
        ax.plot(*zip(*pts), lw=1.2, label=term, ls="-" if term == "loss" else "--")
    if not terms:
        ax.text(0.5, 0.5, "no training steps recorded", ha="center", transform=ax.transAxes)
    ax.set_title("training loss terms (per step)")
    ax.set_xlabel("optimiser step")
    ax.set_yscale("symlog", linthresh=1e-3)

    ax = axes[1]
    steps = [e["step"] for e in history]
    ax.plot(steps, [e["dev_pref_acc_gated"] for e in history], marker="o", ms=4, label="dev gated")
    ax.plot(steps, [e["dev_pref_acc_reference"] for e in history], marker="s", ms=3, ls=":",
            color="grey", label="dev reference (plain cosine)")
    ax.set_title("dev preference accuracy (per validation)")
    ax.set_xlabel("optimiser step")

    ax = axes[2]
    macro = [(e["step"], e["text_risk_macro"]) for e in history if e.get("text_risk_macro")]
    if macro:
        xs = [s for s, _ in macro]
        ys = [m["value"] for _, m in macro]
        lo = [m["value"] - (m["ci"][0] if m["ci"][0] is not None else m["value"]) for _, m in macro]
        hi = [(m["ci"][1] if m["ci"][1] is not None else m["value"]) - m["value"] for _, m in macro]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=3, color="C2",
                    label="text-risk macro AUC(1-S) - AUC(1-cos) [95% CI]")
        ax.axhline(0, color="grey", lw=0.8)
    else:
        ax.text(0.5, 0.5, "selection on dev accuracy\n(no text-risk panel)", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title("selection figure (natural sources, select)")
    ax.set_xlabel("optimiser step")

    ax = axes[3]
    slacks = [(e["step"], guard_slacks(e)) for e in history]
    names = [n for n in GUARD_LABELS if any(n in g for _, g in slacks)]
    names += sorted({n for _, g in slacks for n in g} - set(names))
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
    else:
        ax.text(0.5, 0.5, f"no real-data guards\n({guards or 'none'})", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_title("selection guards against their thresholds")
    ax.set_xlabel("optimiser step")

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
    if warnings:  # the run's warnings, first words each, in red under the title
        text = "; ".join("WARNING: " + w.split(":")[0] for w in warnings)
        fig.text(0.5, 0.905, text, ha="center", color="C3", fontsize=9)
        top = 0.89
    fig.tight_layout(rect=(0, 0.16, 1, top), w_pad=3.0)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
