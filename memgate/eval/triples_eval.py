"""Evaluate a gate on your own triples: gated vs reference (plain cosine) preference accuracy
with group-bootstrap CIs, overall and per category, the paired difference, and the suppression
AUC (does ``S_ref - S`` rank the dispreferred memories above the preferred ones?) beside the
``1 - cos`` AUC on the same pairs.

Writes ``metrics.json``, ``report.md`` and ``accuracy_by_category.png`` into the report folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from memgate.contract import markdown as md
from memgate.contract.progress import progress
from memgate.datasets.user_triples import TripleSet, load_triples
from memgate.eval.bootstrap import group_bootstrap_many, paired_bootstrap_ci
from memgate.eval.engine import encoder_for_gate
from memgate.eval.metrics import rank_auc
from memgate.model.gate import MemGate


def _vectors(gate: MemGate, triples: TripleSet) -> dict[str, np.ndarray]:
    keys = sorted({row[f"{r}_text"] for row in triples.rows for r in ("query", "pos", "neg")})
    if triples.kind == "vector":
        if triples.dim != gate.config.dim:
            raise ValueError(f"{triples.name}: vectors have {triples.dim} dimensions, the gate expects "
                             f"{gate.config.dim}")
        return {k: triples.vectors[k] for k in keys}
    encoder = encoder_for_gate(gate)
    return dict(zip(keys, encoder.encode(keys, desc="embed triples")))


@torch.no_grad()
def triple_scores(gate: MemGate, triples: TripleSet) -> dict[str, np.ndarray]:
    """Per triple: gated and reference scores of pos and neg."""
    vec = _vectors(gate, triples)
    q = torch.from_numpy(np.stack([vec[r["query_text"]] for r in triples.rows]))
    v = torch.from_numpy(np.stack([[vec[r["pos_text"]], vec[r["neg_text"]]] for r in triples.rows]))
    out = gate(q, v)
    return {"s_pos": out.score[:, 0].double().numpy(), "s_neg": out.score[:, 1].double().numpy(),
            "r_pos": out.reference[:, 0].double().numpy(), "r_neg": out.reference[:, 1].double().numpy()}


def _cell(point, lo, hi) -> dict:
    return {"value": point, "ci": [lo, hi]}


def accuracy_block(gated: np.ndarray, ref: np.ndarray, groups: list, n_boot: int, seed: int) -> dict:
    cis = group_bootstrap_many({"gated": gated, "reference": ref}, groups, seed=seed, n_boot=n_boot)
    diff = paired_bootstrap_ci(list(gated), list(ref), groups, seed=seed, n_boot=n_boot)
    return {"n": int(len(gated)), "groups": len(set(groups)),
            "pref_acc_gated": _cell(*cis["gated"]), "pref_acc_reference": _cell(*cis["reference"]),
            "diff_gated_minus_reference": _cell(*diff)}


def evaluate_triples(checkpoint: Path, triples_path: Path, out_dir: Path, n_boot: int = 10_000,
                     seed: int = 0) -> dict:
    gate = MemGate.from_pretrained(checkpoint)
    gate.eval()
    triples = load_triples(triples_path)
    s = triple_scores(gate, triples)
    gated = (s["s_pos"] > s["s_neg"]).astype(float)
    ref = (s["r_pos"] > s["r_neg"]).astype(float)
    groups = [r["group"] for r in triples.rows]
    categories = sorted({r["category"] for r in triples.rows})
    metrics: dict = {"checkpoint": str(checkpoint), "triples": str(triples_path), "n_boot": n_boot,
                     "seed": seed, "skipped_text_visible_false": triples.skipped}
    bar = progress(f"bootstrap {Path(triples_path).name}", total=1 + len(categories), unit="slice")
    metrics["overall"] = accuracy_block(gated, ref, groups, n_boot, seed)
    bar.update()
    metrics["by_category"] = {}
    for cat in categories:
        idx = [i for i, r in enumerate(triples.rows) if r["category"] == cat]
        metrics["by_category"][cat] = accuracy_block(gated[idx], ref[idx], [groups[i] for i in idx],
                                                     n_boot, seed)
        bar.update()
    bar.close()
    # Suppression AUC over (query, memory) pairs: neg = 1 (should be suppressed), pos = 0.
    suppression = np.concatenate([s["r_neg"] - s["s_neg"], s["r_pos"] - s["s_pos"]])
    one_minus_cos = np.concatenate([1 - s["r_neg"], 1 - s["r_pos"]])
    labels = np.concatenate([np.ones(len(gated)), np.zeros(len(gated))])
    metrics["suppression_auc"] = {"gate": rank_auc(suppression, labels),
                                  "one_minus_cos": rank_auc(one_minus_cos, labels),
                                  "pairs": int(len(labels))}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
    plot = plot_accuracy_by_category(out_dir / "accuracy_by_category.png", metrics)
    write_triples_report(out_dir / "report.md", metrics, plot)
    return metrics


def _fmt(cell: dict) -> str:
    v, (lo, hi) = cell["value"], cell["ci"]
    if v is None:
        return "—"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{v:.3f}"


def write_triples_report(path: Path, metrics: dict, plot: Optional[Path]) -> None:
    auc = metrics["suppression_auc"]
    lines = [f"# Preference triples: {metrics['triples']}", "",
             f"Gate `{metrics['checkpoint']}`; 95% group-bootstrap CIs ({metrics['n_boot']} replicates, "
             f"seed {metrics['seed']}; the unit is the triple's `group`). Reference = plain cosine.", "",
             md.row("slice", "triples", "groups", "pref acc (gated)", "pref acc (reference)",
                    "gated - reference"),
             md.rule(["---", "---:", "---:", "---", "---", "---"])]
    rows = [("**all**", metrics["overall"])] + list(metrics["by_category"].items())
    for name, m in rows:
        lines.append(md.row(name, m["n"], m["groups"], _fmt(m["pref_acc_gated"]),
                            _fmt(m["pref_acc_reference"]), _fmt(m["diff_gated_minus_reference"])))
    lines += ["", f"Suppression AUC (`S_ref - S` ranks neg above pos, {auc['pairs']} pairs): "
              f"gate {auc['gate']:.3f} vs `1 - cos` {auc['one_minus_cos']:.3f}.", ""]
    if metrics.get("skipped_text_visible_false"):
        lines += [f"{metrics['skipped_text_visible_false']} triples with text_visible=false left out.", ""]
    if plot is not None:
        lines += [f"![accuracy by category]({plot.name})", ""]
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def plot_accuracy_by_category(path: Path, metrics: dict) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["all"] + list(metrics["by_category"])
    blocks = [metrics["overall"]] + list(metrics["by_category"].values())
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(names) + 3), 4.2))
    x = np.arange(len(names))
    for offset, key, label, colour in ((-0.18, "pref_acc_reference", "reference (plain cosine)", "grey"),
                                       (0.18, "pref_acc_gated", "gated", "C0")):
        vals = [b[key]["value"] for b in blocks]
        lo = [v - b[key]["ci"][0] for v, b in zip(vals, blocks)]
        hi = [b[key]["ci"][1] - v for v, b in zip(vals, blocks)]
        ax.bar(x + offset, vals, 0.36, yerr=[lo, hi], capsize=3, color=colour, label=label)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{n}\n(n={b['n']})" for n, b in zip(names, blocks)], rotation=30, ha="right",
                       fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("preference accuracy (95% group-bootstrap CI)")
    ax.set_title(f"{Path(metrics['triples']).name}: gated vs reference by category")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
