"""The figures of ``memgate targets`` for one evaluated gate (``run_targets``; the command,
its arguments and the markdown live in ``memgate.commands.targets``, which imports this module
only to run)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import torch

from memgate.contract.jsonl import parse_jsonl
from memgate.contract.seeding import seed_everything
from memgate.contract.triples import read_triples
from memgate.datasets.real.gatemem import build_gatemem_source
from memgate.datasets.real.paths import real_data_root
from memgate.datasets.synthetic import load_split
from memgate.eval.bootstrap import paired_bootstrap_ci
from memgate.eval.engine import encoder_for_gate, prepare
from memgate.eval.exposure import exposure
from memgate.eval.headline import inadmissible_tv_targets
from memgate.eval.metrics import rank_auc
from memgate.eval.text_risk import ALL_SOURCES, report_figures
from memgate.eval.transfer import paired_auc_difference, transfer_pairs
from memgate.model.gate import MemGate, MemGateConfig

SYNTHETIC_KEYS = ("top5_inadmissible_tv", "recall_required@5", "recall_required@20",
                  "recall_beneficial@20", "mrr_required")


def _rows(report_dir: Path) -> list[dict]:
    plain, packed = report_dir / "routes.jsonl", report_dir / "routes.jsonl.gz"
    text = plain.read_text() if plain.exists() else gzip.decompress(packed.read_bytes()).decode()
    return parse_jsonl(text, str(plain if plain.exists() else packed))


def _value(metrics: dict, source: str, route: str, key: str):
    entry = metrics.get(source, {}).get(route, {}).get(key)
    return None if entry is None else {"value": entry["value"], "ci": entry["ci"]}


def step0_gate(config: dict) -> MemGate:
    """The initial gate of a training run, rebuilt as ``memgate.train.run.train`` builds it."""
    export = config["export"]
    seed_everything(export["seed"], "train")
    gate_cfg = {k: v for k, v in config.items() if k in MemGateConfig.__dataclass_fields__}
    return MemGate(MemGateConfig(**gate_cfg)).eval()


@torch.no_grad()
def suppression_scores(gate: MemGate, prepared, rows: dict) -> np.ndarray:
    q_index = {q.query_id: i for i, q in enumerate(prepared.source.queries)}
    q = torch.from_numpy(prepared.query_vectors[[q_index[x] for x in rows["query_ids"]]])
    v = torch.from_numpy(prepared.memory_vectors[np.asarray(rows["memory_index"], dtype=np.int64)]).unsqueeze(1)
    out = gate(q, v)
    return (out.reference[:, 0] - out.score[:, 0]).double().numpy()


@torch.no_grad()
def by_category(gate: MemGate, data_dir: Path, encoder, routes_rows: list[dict]) -> dict:
    """Per risk category (scenario): preference accuracy gated / reference on text-visible test
    triples, and top5_inadmissible_tv of learned_gate vs global_dense."""
    triples = read_triples(data_dir / "test" / "triples.jsonl", text_visible_only=True)
    texts = sorted({t[k] for t in triples for k in ("query_text", "pos_text", "neg_text")})
    vec = dict(zip(texts, torch.from_numpy(encoder.encode(texts, progress=False))))
    out: dict = {}
    for scenario in sorted({t.get("scenario", "unknown") for t in triples}):
        rows = [t for t in triples if t.get("scenario", "unknown") == scenario]
        q = torch.stack([vec[t["query_text"]] for t in rows])
        V = torch.stack([torch.stack([vec[t["pos_text"]], vec[t["neg_text"]]]) for t in rows])
        gated, ref = gate.score(q, V), torch.nn.functional.cosine_similarity(q.unsqueeze(1), V, dim=-1)
        out[scenario] = {"triples": len(rows), "pref_acc_gated": float((gated[:, 0] > gated[:, 1]).float().mean()),
                         "pref_acc_reference": float((ref[:, 0] > ref[:, 1]).float().mean())}
    source = load_split(data_dir, "test")
    targets = inadmissible_tv_targets(source)
    ranked = {(r["route"], r["query_id"]): r["ranked_ids"] for r in routes_rows
              if r["source"] == "synthetic_test" and r["route"] in ("learned_gate", "global_dense")}
    for scenario in list(out):
        qids = [q for q in targets if source.query_meta.get(q, {}).get("scenario") == scenario]
        if not qids:
            continue
        for route in ("learned_gate", "global_dense"):
            hits = [bool(set(ranked[(route, q)][:5]) & targets[q]) for q in qids if (route, q) in ranked]
            out[scenario][f"top5_inadmissible_tv_{route}"] = float(np.mean(hits)) if hits else None
        out[scenario]["top5_queries"] = len(qids)
    return out


def run_targets(checkpoint: Path, report: Path, data_dir: Path, n_boot: int) -> dict:
    metrics = json.loads((report / "metrics.json").read_text())
    config = json.loads((checkpoint / "config.json").read_text())
    gate = MemGate.from_pretrained(checkpoint).eval()
    encoder = encoder_for_gate(gate)
    headline = metrics["headline"]
    routes = headline["routes"]
    out: dict = {"checkpoint": str(checkpoint), "seed": config["export"]["seed"],
                 "selected_step": config["export"]["selection"]["step"],
                 "gate_activity": headline.get("gate_activity"),
                 "pref_acc_gated": headline["pref_acc_gated"], "pref_acc_reference": headline["pref_acc_reference"]}
    syn = {k: {"learned_gate": routes["learned_gate"][k], "global_dense": routes["global_dense"][k],
               "difference": routes["learned_gate"][k] - routes["global_dense"][k]} for k in SYNTHETIC_KEYS}
    syn["top5_cut"] = 1 - routes["learned_gate"]["top5_inadmissible_tv"] / routes["global_dense"]["top5_inadmissible_tv"]
    out["synthetic"] = syn
    rows = _rows(report)
    out["by_category"] = by_category(gate, data_dir, encoder, rows)
    out["locomo"] = {"learned_gate_namespace_vs_namespace_dense": _value(
        metrics, "locomo", "learned_gate_namespace", "diff_vs_namespace_dense:recall_required@20"),
        "learned_gate_vs_global_dense": _value(metrics, "locomo", "learned_gate", "diff_vs_global_dense:recall_required@20")}
    transfer = metrics["transfer"]["gatemem"]
    out["gatemem"] = {"suppression_auc": transfer["suppression"]["pooled_auc"],
                      "one_minus_cos_auc": transfer["one_minus_cos"]["pooled_auc"],
                      "vs_one_minus_cos": transfer["difference"]["pooled_auc"],
                      "cubic_check": {k: transfer["cubic_check"][k] for k in ("delta_auc", "credit")}}
    # the step-0 gate of this seed, checked against the selection history's step-0 entry
    step0 = step0_gate(config)
    history0 = (config["export"]["selection_history"] or [{}])[0]
    logged = ((history0.get("guard") or {}).get("gatemem") or {}).get("suppression_auc")
    root = real_data_root(config["export"]["train_config"].get("real_data_root"))
    select = prepare(build_gatemem_source(root, part="select", purpose="selection"), encoder)
    sel_rows = transfer_pairs(select.source)
    rebuilt = rank_auc(suppression_scores(step0, select, sel_rows), np.asarray(sel_rows["labels"]))
    out["gatemem"]["step0_check"] = {"select_auc_logged": logged, "select_auc_rebuilt": rebuilt,
                                     "same_gate": logged is not None and abs(rebuilt - logged) < 1e-9}
    if out["gatemem"]["step0_check"]["same_gate"]:
        rep = prepare(build_gatemem_source(root, part="report", purpose="evaluation"), encoder)
        rep_rows = transfer_pairs(rep.source)
        out["gatemem"]["vs_step0"] = paired_auc_difference(
            suppression_scores(gate, rep, rep_rows), suppression_scores(step0, rep, rep_rows),
            rep_rows["labels"], rep_rows["episode_ids"], n_boot=n_boot)
    # hybrid vs kleene_gate on synthetic l_rc@20, paired over test groups
    lrc = {route: {r["query_id"]: (r["group_id"], r["l_rc"]) for r in rows
                   if r["source"] == "synthetic_test" and r["route"] == route and r["l_rc"] is not None}
           for route in ("hybrid", "kleene_gate")}
    common = sorted(set(lrc["hybrid"]) & set(lrc["kleene_gate"]))
    point, lo, hi = paired_bootstrap_ci([lrc["hybrid"][q][1] for q in common], [lrc["kleene_gate"][q][1] for q in common],
                                        [lrc["hybrid"][q][0] for q in common], seed=0, n_boot=n_boot)
    out["hybrid_vs_kleene_l_rc@20"] = {"hybrid": _value(metrics, "synthetic_test", "hybrid", "l_rc@20"),
                                       "kleene_gate": _value(metrics, "synthetic_test", "kleene_gate", "l_rc@20"),
                                       "difference": {"value": point, "ci": [lo, hi]}}
    out["gatemem_routes"] = {k: _value(metrics, "gatemem", "hybrid", f"diff_vs_kleene_gate:{k}")
                             for k in ("violation_any@20", "protected_exposure@20", "recall_required@20")}
    # every source's report part: issue 15's phrasing sources and issue 43's natural ones
    out["text_risk_report"] = report_figures(gate, encoder, n_boot=min(n_boot, 2000), root=root, sources=ALL_SOURCES)
    out["exposure"] = exposure(gate, config, encoder, root=root, n_boot=min(n_boot, 2000))
    return out
