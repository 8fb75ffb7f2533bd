"""Does the preservation penalty bound the drift of beneficial memories? An empirical check.

For each weight of a sweep — the ranking-preservation weight ``loss.list_preservation_weight``
(w_list, at the default lambda 0.1) and the mask penalty lambda = ``loss.preservation_weight``
alone (w_list = 0, so the lambda = 0.1 point is the w_list = 0 point) — one default training run
with the real-data guards off (so the trained gate is the best synthetic-dev step, whatever it
costs) and three figures on the gate it selects:

- ``cos_v_vg_pos``: mean cos(v, v * g+) over the admissible memories of the text-visible synthetic
  test triples (1 = the admissible direction is untouched; the gated cosine ignores a uniform
  scaling of g, so this is the drift that matters);
- ``rank_change_admissible``: mean |rank under the gated cosine - rank under the cosine| of the
  evidence turns of LoCoMo-select questions within their conversation (ranks capped at 100);
- ``locomo_select_drop``: recall_required@20 of ``namespace_dense`` minus ``learned_gate_namespace``
  on LoCoMo-select (the selection guard's figure, positive = recall lost).

Only synthetic data and LoCoMo ``select`` are read. Output: ``reports/preservation_bound/``
{bound.json, bound.md, bound.png}.

    python -m benchmarks.preservation_bound [--list-weights 0 1 5 20 50] [--lambdas 0.1 1 10]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from memgate.contract.config import REPO_ROOT, load_config, resolve_path
from memgate.contract.triples import read_triples
from memgate.datasets.real.locomo import build_locomo_source
from memgate.datasets.real.paths import real_data_root
from memgate.eval.engine import prepare
from memgate.model.gate import MemGate
from memgate.train.config import TrainConfig
from memgate.train.run import encoder_from, train
from memgate.train.selection import recall_guard

OUT = REPO_ROOT / "reports" / "preservation_bound"


@torch.no_grad()
def admissible_drift(gate: MemGate, data_dir: Path, encoder) -> float:
    rows = read_triples(data_dir / "test" / "triples.jsonl", text_visible_only=True)
    texts = sorted({r[k] for r in rows for k in ("query_text", "pos_text")})
    vec = dict(zip(texts, torch.from_numpy(encoder.encode(texts, progress=False))))
    q = torch.stack([vec[r["query_text"]] for r in rows])
    v = torch.stack([vec[r["pos_text"]] for r in rows])
    g = gate.mask(q, v.unsqueeze(1))[:, 0]
    vg = v * g
    return float(((v * vg).sum(-1) / (v.norm(dim=-1) * vg.norm(dim=-1))).mean())


@torch.no_grad()
def admissible_rank_change(gate: MemGate, prepared, cap: int = 100) -> float:
    source = prepared.source
    changes = []
    for i, query in enumerate(source.queries):
        pool = np.asarray(source.pools[query.query_id])
        anchors = set().union(*source.anchor_groups.get(query.query_id, [])) if source.anchor_groups.get(query.query_id) else set()
        if not anchors or not len(pool):
            continue
        q = torch.from_numpy(prepared.query_vectors[i])
        V = torch.from_numpy(prepared.memory_vectors[pool])
        cos, gated = V @ q / V.norm(dim=-1).clamp_min(1e-12), gate.score(q, V)
        rank_cos = torch.argsort(torch.argsort(-cos)).numpy()
        rank_gated = torch.argsort(torch.argsort(-gated)).numpy()
        for j, idx in enumerate(pool):
            if source.memories[idx].memory_id in anchors:
                changes.append(abs(min(int(rank_gated[j]), cap) - min(int(rank_cos[j]), cap)))
    return float(np.mean(changes)) if changes else float("nan")


SWEEP_OVERRIDES = {
    "w_list": lambda w: [f"loss.list_preservation_weight={w}"],
    "lambda": lambda w: [f"loss.preservation_weight={w}", "loss.list_preservation_weight=0"],
}


def run_point(kind: str, weight: float, guard, prepared, work: Path) -> dict:
    name = f"bound-{kind}-{weight:g}"
    config = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        *SWEEP_OVERRIDES[kind](weight), "selection.locomo_guard=false", "selection.gatemem_guard=false", "selection.gatemem_routes_guard=false",
            "selection.text_risk_guard=false", "selection.metric=dev_pref_acc_gated",
        "export.headline=false", "trainer.progress_bar=false", f"export.name={name}",
        f"export.runs_dir={work / 'runs'}"])
    t0 = time.perf_counter()
    summary = train(config, argv=["benchmarks.preservation_bound", kind, str(weight)], out_dir=work / name)
    gate = MemGate.from_pretrained(summary["export_dir"]).eval()
    encoder = encoder_from(config)
    drop = guard(gate)
    return {"kind": kind, "weight": weight, "selected_step": summary["selection"]["step"],
            "dev_pref_acc_gated": summary["selection"]["dev_pref_acc_gated"],
            "cos_v_vg_pos": admissible_drift(gate, resolve_path(config.data.data_dir), encoder),
            "rank_change_admissible": admissible_rank_change(gate, prepared),
            "locomo_select_drop": drop["drop"], "locomo_select_drop_ci": drop["drop_ci"],
            "seconds": time.perf_counter() - t0}


def plot(points: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = (("cos_v_vg_pos", "cos(v, v ⊙ g+)"), ("rank_change_admissible", "mean |Δ rank| of admissible"),
               ("locomo_select_drop", "LoCoMo-select recall@20 drop"))
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), constrained_layout=True)
    for row, (kind, label) in enumerate((("lambda", "λ (mask penalty)"), ("w_list", "w_list (list KL)"))):
        pts = sorted((p for p in points if p["kind"] == kind), key=lambda p: p["weight"])
        x = [max(p["weight"], 1e-2) for p in pts]
        for col, (key, title) in enumerate(figures):
            ax = axes[row, col]
            ax.plot(x, [p[key] for p in pts], marker="o")
            ax.set_xscale("log")
            ax.set_xlabel(label + " (0 drawn at 0.01)")
            ax.set_title(title)
            if key == "locomo_select_drop":
                ax.axhline(0.01, color="grey", linestyle="--", linewidth=1)
                ax.text(x[0], 0.0102, "guard 0.01", color="grey", fontsize=8, va="bottom")
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list-weights", type=float, nargs="*", default=[0, 1, 5, 20, 50])
    parser.add_argument("--lambdas", type=float, nargs="*", default=[0, 0.1, 1, 10])
    parser.add_argument("--work", default="runs/preservation_bound")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    default = load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [])
    prepared = prepare(build_locomo_source(real_data_root(default.real_data_root), part="select", purpose="selection"),
                       encoder_from(default))
    guard = recall_guard(prepared, default.selection.guard_k, default.selection.max_recall_drop,
                         default.selection.guard_rerank_depth)
    OUT.mkdir(parents=True, exist_ok=True)
    work = resolve_path(args.work)
    points = []
    done = json.loads((OUT / "bound.json").read_text())["points"] if (OUT / "bound.json").exists() else []
    for kind, weights in (("w_list", args.list_weights), ("lambda", args.lambdas)):
        for w in weights:
            old = next((p for p in done if p["kind"] == kind and p["weight"] == w), None)
            if kind == "lambda" and w == default.loss.preservation_weight and old is None:
                same = next((p for p in points if p["kind"] == "w_list" and p["weight"] == 0), None)
                old = dict(same, kind="lambda", weight=w) if same else None  # the same config
            point = old or run_point(kind, w, guard, prepared, work)
            points.append(point)
            print(json.dumps(point), flush=True)
            (OUT / "bound.json").write_text(json.dumps({"points": points}, indent=2) + "\n")
    lines = ["| sweep | weight | step | dev pref | cos(v, v⊙g+) | mean abs rank change (admissible, LoCoMo-select) | LoCoMo-select drop [95% CI] |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for p in points:
        lo, hi = p["locomo_select_drop_ci"]
        lines.append(f"| {p['kind']} | {p['weight']:g} | {p['selected_step']} | {p['dev_pref_acc_gated']:.3f} | "
                     f"{p['cos_v_vg_pos']:.4f} | {p['rank_change_admissible']:.2f} | {p['locomo_select_drop']:.4f} "
                     f"[{lo:.4f}, {hi:.4f}] |")
    (OUT / "bound.md").write_text("\n".join(lines) + "\n")
    plot(points, OUT / "bound.png")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
