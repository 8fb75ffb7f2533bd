"""With and without each real-phrasing source (issue 15): ``python -m data_gen.phrasing_mix``.

Reads the exported gates of finished ablation rows (``reports/ablations/<row>/seed<s>/``): the
``without`` row (``defaults``, the release config) and the ``with`` rows (``phrasing_<source>``,
``phrasing_all``; configs/ablations/phrasing_*.yaml). On every source's ``select`` and ``report``
part (``memgate.datasets.real.phrasing.eval_rows``; natural and similarity-matched pairs) it scores
each gate's suppression ``S_ref - S`` and the baseline ``1 - cos`` (``data_gen.phrasing_audit``) and
reports, with percentile bootstrap intervals resampling memories (the pairs' clusters):

- ``gate``: the gate's suppression AUC for "trap" and the red flag (mean suppression on the
  beneficial controls >= on the traps; ``red_flag_ci`` when the whole interval of trap minus
  control is <= 0): ``data_gen.phrasing_audit.red_flag``;
- ``vs_cos``: ``memgate.eval.transfer.transfer_analysis`` with the memory (the biography source:
  the user) as query and episode: pooled and within-memory AUC of the suppression against
  ``1 - cos``, AUC(1 - S) against AUC(1 - cos) (``gated_minus_cos``, issue 32: the figure the
  next issue selects on), the activity (mean ``|cos - S|`` on traps and on controls), their
  paired differences and the cubic check (does suppression add to any smooth function of the
  cosine?);
- ``vs_without``: AUC(gate with) - AUC(gate without) on the same rows, paired likewise
  (``memgate.eval.transfer.paired_auc_difference``).

Per row also: the GateMem report transfer AUC vs
``1 - cos`` and the LoCoMo report recall drop (namespace_dense - learned_gate_namespace, from the
row's report/metrics.json), the selection guard's figures on the GateMem and LoCoMo ``select``
parts (the export's config.json), the training triples per phrasing source (the data dir's
meta.json) and whether the row's synthetic dev and test files are byte-identical to the without
row's (the comparison needs the same test split).

Selection honesty: ``decide`` picks a mix from ``select`` figures only (the guards each row's
selection recorded on select parts, and every source's select part, natural and matched: the macro
AUC(1 - S) - AUC(1 - cos)); the ``report`` figures confirm or refute it and never choose. The rule
is the release rule of docs/design.md section 4. Writes ``mix.json``, ``mix.md`` and ``mix.png``
under ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract.config import REPO_ROOT
from memgate.datasets.real.phrasing import SOURCES

WITHOUT = "defaults"
ROWS = (WITHOUT, "phrasing_cross_domain", "phrasing_sycophancy", "phrasing_sycophancy_bio", "phrasing_tool_drift",
        "phrasing_jailbreak",
        "phrasing_all")
PARTS = ("select", "report")
VARIANTS = ("natural", "matched")
COS = "one_minus_cos"
RELEASE_GATEMEM_AUC = 0.690  # issue 14's release: GateMem report suppression AUC (docs/results.md)
MAX_RECALL_DROP = 0.01
DEFAULT_N_BOOT = 2000


# --------------------------------------------------------------------------- per part


def compare_part(rows: dict, scores: dict, without: str = WITHOUT, n_boot: int = DEFAULT_N_BOOT,
                 seed: int = 0, cubic: bool = True) -> dict:
    """Every scorer of ``scores`` ({label: suppression per row}, ``one_minus_cos`` among them) on
    one part's ``rows`` (``eval_rows``): ``gate`` (red_flag), ``vs_cos`` and, for the gates other
    than ``without``, ``vs_without`` (paired AUC differences, memories resampled)."""
    from data_gen.phrasing_audit import red_flag
    from memgate.eval.transfer import paired_auc_difference, transfer_analysis

    labels, clusters = np.asarray(rows["labels"], dtype=bool), np.asarray(rows["clusters"], dtype=object)
    for label, s in scores.items():
        if len(s) != len(labels):
            raise ValueError(f"compare_part: scores[{label!r}] has {len(s)} values for {len(labels)} rows")
    out: dict = {"n_rows": int(len(labels)), "n_memories": int(len(set(clusters.tolist()))), "scorers": {}}
    for label, s in scores.items():
        entry = {"gate": red_flag(rows, lambda _q, _m, s=s: s, n_boot=n_boot, seed=seed)}
        if label != COS:
            # S_ref = cos = 1 - (1 - cos); S = S_ref - suppression. The memory is both the "query"
            # (within-memory AUC: its traps against its own controls) and the episode (bootstrap).
            cos = 1.0 - scores[COS]
            entry["vs_cos"] = transfer_analysis(cos, cos - s, labels, clusters, clusters, n_boot=n_boot,
                                              seed=seed, cubic=cubic)
            if label != without and without in scores:
                entry["vs_without"] = paired_auc_difference(s, scores[without], labels, clusters,
                                                            n_boot=n_boot, seed=seed)
        out["scorers"][label] = entry
    return out


def score_parts(gates: dict, cos_fn, embed, sources=SOURCES, parts=PARTS, n_boot: int = DEFAULT_N_BOOT,
                seed: int = 0, root: Optional[Path] = None) -> dict:
    """{source: {part: {variant: compare_part(...)}}} for every gate in ``gates`` ({label: fn})."""
    from memgate.datasets.real.phrasing import eval_rows

    out: dict = {}
    for name in sources:
        for part in parts:
            for variant in VARIANTS:
                rows = eval_rows(name, part, purpose="evaluation", root=root, seed=0,
                                 embed=embed if variant == "matched" else None)
                scores = {COS: np.asarray(cos_fn(rows["query_texts"], rows["memory_texts"]), dtype=float)}
                for label, fn in gates.items():
                    scores[label] = np.asarray(fn(rows["query_texts"], rows["memory_texts"]), dtype=float)
                out.setdefault(name, {}).setdefault(part, {})[variant] = compare_part(
                    rows, scores, n_boot=n_boot, seed=seed)
    return out


# --------------------------------------------------------------------------- per row


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def split_digests(data_dir: Path) -> dict:
    """sha256 of every file of the synthetic dev and test splits (relative path -> digest)."""
    return {p.relative_to(data_dir).as_posix(): _sha256(p)
            for split in ("dev", "test") for p in sorted((data_dir / split).glob("*")) if p.is_file()}


def phrasing_triples(meta: dict) -> dict:
    """Training triples per phrasing source of a mined data dir (meta.json), {} when none."""
    out: dict = {}
    for entry in (meta.get("hardness") or {}).values():
        for src, stats in ((entry.get("mined") or {}).get("real_phrasing") or {}).items():
            out[src] = {"triples": stats["triples"], "queries": stats["queries"],
                        "beneficial_controls": stats["beneficial_controls"],
                        "hard_negative_triples": stats["hard_negative_triples"],
                        "hard_positive_triples": stats["hard_positive_triples"]}
    return out


def row_figures(row_dir: Path) -> dict:
    """A finished row's real-data figures: GateMem report transfer, LoCoMo report recall drop,
    the guards' select figures at the selected step, and what it trained on."""
    results = json.loads((row_dir / "results.json").read_text())
    metrics = json.loads((row_dir / "report" / "metrics.json").read_text())
    name, seed = results["row"], results["seed"]
    export = json.loads((row_dir / f"{name}-seed{seed}" / "config.json").read_text())["export"]
    transfer = (metrics.get("transfer") or {}).get("gatemem") or {}
    locomo = (metrics.get("locomo") or {}).get("learned_gate_namespace") or {}
    diff = locomo.get("diff_vs_namespace_dense:recall_required@20") or {}
    selection = export.get("selection") or {}
    guard = selection.get("guard") or {}
    hybrid = (metrics.get("gatemem") or {}).get("hybrid") or {}
    data_dir = REPO_ROOT / export["data_dir"]
    meta = json.loads((data_dir / "meta.json").read_text())
    return {
        "row": name, "seed": seed, "data_dir": export["data_dir"], "data_hash": results.get("data_hash"),
        "sources": export["train_config"]["data"]["sources"], "selected_step": results["figures"]["selected_step"],
        "warnings": export.get("warnings", []),
        "phrasing_triples": phrasing_triples(meta),
        "gatemem_report": {"suppression_auc": transfer["suppression"]["pooled_auc"],
                           "one_minus_cos_auc": transfer["one_minus_cos"]["pooled_auc"],
                           "difference": transfer["difference"]["pooled_auc"]},
        # drop = ungated (namespace_dense) minus gated recall: the negated paired difference
        "locomo_report": {"recall_required@20": locomo["recall_required@20"],
                          "recall_drop": {"value": -diff["value"], "ci": [-diff["ci"][1], -diff["ci"][0]]}},
        "guard_select": {"gatemem_suppression_auc": (guard.get("gatemem") or {}).get("suppression_auc"),
                         "gatemem_one_minus_cos_auc": (guard.get("gatemem") or {}).get("one_minus_cos_auc"),
                         "locomo_recall_drop": (guard.get("locomo") or {}).get("drop"),
                         "guards": {n: bool(g.get("passed")) for n, g in guard.items() if isinstance(g, dict)},
                         "text_risk_macro": selection.get("text_risk_macro"),
                         "fallback": selection.get("fallback")},
        "gatemem_report_routes": {k: hybrid.get(f"diff_vs_kleene_gate:{k}")
                                  for k in ("violation_any@20", "protected_exposure@20", "recall_required@20")},
        "pref_acc_gated": results["figures"].get("pref_acc_gated"),
        "top5_inadmissible_tv": results["figures"].get("top5_inadmissible_tv"),
        "split_digests": split_digests(data_dir),
        "selection_path": selection_path(export),
    }


def _failed(entry: dict) -> list:
    guard = entry.get("guard") or {}
    return [name for name, g in guard.items() if isinstance(g, dict) and not g.get("passed")]


def selection_path(export: dict) -> dict:
    """What selection saw (select parts only): the data, the share and lists trained with, how many
    trained points passed every guard, and the trained point with the best text-risk macro, with
    the guards it failed."""
    cfg = export["train_config"]["data"]
    shares = cfg.get("source_shares") or {}
    history = [e for e in export.get("selection_history", []) if e.get("step", 0) > 0]
    macro = lambda e: (e.get("text_risk_macro") or {}).get("value")  # noqa: E731
    scored = [e for e in history if macro(e) is not None]
    best = max(scored, key=macro) if scored else None
    return {
        "natural_share": sum(v for k, v in shares.items() if k.startswith("phrasing_")) if shares else None,
        "list_sources": cfg.get("list_sources"),
        "trained_points": len(history),
        "trained_points_passing": sum(1 for e in history if e.get("passed")),
        "best_trained": None if best is None else {"step": best["step"], "macro": best["text_risk_macro"],
                                                   "failed": _failed(best),
                                                   "categories": {c: v["value"] for c, v in
                                                                  best["guard"]["text_risk"]["categories"].items()}},
        "exported_macro": (export.get("selection") or {}).get("text_risk_macro"),
    }


# --------------------------------------------------------------------------- decision


def _cells(parts: dict, row: str, part: str):
    for name, by_part in parts.items():
        for variant, cmp in by_part[part].items():
            yield name, variant, cmp["scorers"][row]


def part_macro(parts: dict, row: str, part: str) -> Optional[float]:
    """The selection figure of ``row`` on ``part``: AUC(1 - S) - AUC(1 - cos) per source and
    variant, the mean over variants, then over each category's sources, then over the categories
    (``memgate.eval.text_risk.macro_of``)."""
    from memgate.datasets.real.phrasing import CATEGORY

    by_source: dict = {}
    for name, _variant, cell in _cells(parts, row, part):
        by_source.setdefault(name, []).append(cell["vs_cos"]["gated_minus_cos"]["pooled_auc"]["value"])
    if not by_source:
        return None
    by_category: dict = {}
    for name, values in by_source.items():
        by_category.setdefault(CATEGORY[name], []).append(float(np.mean(values)))
    return float(np.mean([np.mean(v) for v in by_category.values()]))


REQUIRED_GUARDS = ("locomo", "gatemem_routes", "gatemem", "text_risk")  # memgate.integrations.gate_default


def decide(parts: dict, rows: dict, without: str = WITHOUT) -> dict:
    """The mix to release, chosen on ``select`` figures only, then checked on ``report``.

    A row is a select candidate when its exported gate passed every selection guard (locomo,
    gatemem_routes, gatemem, text_risk: all on select parts, recorded at the exported step) and the
    exported step is a trained one (step 0 ranks like the cosine): the release rule of
    docs/design.md section 4, the one ``memgate.integrations.gate_default`` applies. The candidate
    with the largest select macro AUC(1 - S) - AUC(1 - cos) is chosen. On report it is confirmed
    when every source's report part (natural and matched) has AUC(1 - S) - AUC(1 - cos) > 0 with a
    CI excluding 0 and suppression AUC >= 0.6, GateMem report hybrid - kleene_gate is within the
    route margins (violation_any@20 and protected_exposure@20 <= +0.01, recall_required@20 >= -0.01)
    and the LoCoMo report recall drop is <= 0.01. The without row is judged by the same rule."""
    verdicts: dict = {}
    for row in rows:
        out: dict = {}
        for part in PARTS:
            cells = list(_cells(parts, row, part))
            gm = [c["vs_cos"]["gated_minus_cos"]["pooled_auc"] for _, _, c in cells]
            out[part] = {
                "macro": part_macro(parts, row, part),
                "min_gated_minus_cos": min(g["value"] for g in gm),
                "gated_minus_cos_ci_above_0": [f"{n}/{v}" for (n, v, _), g in zip(cells, gm) if g["ci"][0] > 0],
                "gated_minus_cos_ci_below_0": [f"{n}/{v}" for (n, v, _), g in zip(cells, gm) if g["ci"][1] < 0],
                "suppression_below_0.5": [f"{n}/{v}" for n, v, c in cells
                                          if c["vs_cos"]["suppression"]["pooled_auc"]["value"] < 0.5],
                "suppression_below_0.6": [f"{n}/{v}" for n, v, c in cells
                                          if c["vs_cos"]["suppression"]["pooled_auc"]["value"] < 0.6],
            }
            if row != without and all("vs_without" in c for _, _, c in cells):
                out[part]["mean_vs_without"] = float(np.mean([c["vs_without"]["difference"]["value"] for _, _, c in cells]))
        g = rows[row]["guard_select"]
        passed = g.get("guards") or {}
        out["guards_select_pass"] = bool(all(passed.get(name) for name in REQUIRED_GUARDS))
        out["trained_step"] = bool((rows[row]["selected_step"] or 0) > 0)
        out["select_candidate"] = bool(out["guards_select_pass"] and out["trained_step"])
        routes = rows[row].get("gatemem_report_routes") or {}
        values = {k: (v or {}).get("value") for k, v in routes.items()}
        out["gatemem_report_routes_ok"] = bool(
            values and None not in values.values() and values["violation_any@20"] <= MAX_RECALL_DROP
            and values["protected_exposure@20"] <= MAX_RECALL_DROP and values["recall_required@20"] >= -MAX_RECALL_DROP)
        drop = rows[row]["locomo_report"]["recall_drop"]["value"]
        out["locomo_report_ok"] = bool(drop <= MAX_RECALL_DROP)
        rep = out["report"]
        out["report_confirms"] = bool(len(rep["gated_minus_cos_ci_above_0"]) == len(list(_cells(parts, row, "report")))
                                      and not rep["suppression_below_0.6"] and out["gatemem_report_routes_ok"]
                                      and out["locomo_report_ok"])
        verdicts[row] = out
    candidates = [r for r, v in verdicts.items() if v["select_candidate"]]
    chosen = max(candidates, key=lambda r: verdicts[r]["select"]["macro"]) if candidates else None
    return {"rows": verdicts, "select_candidates": candidates, "chosen_on_select": chosen,
            "confirmed_on_report": bool(chosen and verdicts[chosen]["report_confirms"]),
            "rule": decide.__doc__.split("\n\n", 1)[1].strip()}


# --------------------------------------------------------------------------- outputs


def _ci(entry: dict, digits: int = 3) -> str:
    lo, hi = entry["ci"]
    if entry["value"] is None:
        return "—"
    ci = "" if lo is None else f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"{entry['value']:.{digits}f}{ci}"


def markdown(study: dict) -> str:
    parts, rows, decision = study["parts"], study["rows"], study["decision"]
    names = list(rows)
    lines = ["# Real phrasing: the gate with and without each source", "",
             f"Seed {study['seed']}; {study['n_boot']:,} bootstrap replicates resampling memories (phrasing "
             "parts) or episodes / conversations (GateMem, LoCoMo). AUC of suppression `S_ref - S` for "
             "\"trap\" against `1 - cos`; `with - without` is paired on the same rows. Generated by "
             "`python -m data_gen.phrasing_mix`.", "", "## Rows", "",
             "| row | trained on | natural share | lists | phrasing triples | trained points passing every guard | "
             "best trained select macro (step; guards it failed) | exported step | exported select macro | "
             "same dev/test as `defaults` | warnings |", "| --- " * 11 + "|"]
    base = rows.get(WITHOUT, {}).get("split_digests")
    for name in names:
        r = rows[name]
        triples = ", ".join(f"{s.removeprefix('phrasing_')} {v['triples']:,}" for s, v in r["phrasing_triples"].items()
                            if s in r["sources"]) or "—"
        same = "—" if name == WITHOUT or base is None else ("yes" if r["split_digests"] == base else "**no**")
        extra = ", ".join(s for s in r["sources"] if s.startswith("phrasing_"))
        path = r.get("selection_path") or {}
        best = path.get("best_trained")
        best_cell = "—" if not best else (f"{_ci(best['macro'], 4)} ({best['step']}; "
                                          f"{', '.join(best['failed']) or 'none'})")
        share = path.get("natural_share")
        lines.append(f"| `{name}` | {'+'.join(s for s in r['sources'] if not s.startswith('phrasing_'))}"
                     f"{' + ' + str(len(extra.split(', '))) + ' natural' if extra else ''} | "
                     f"{'—' if share is None else f'{share:.0%}'} | {','.join(path.get('list_sources') or [])} | "
                     f"{triples} | {path.get('trained_points_passing', '—')} of {path.get('trained_points', '—')} | "
                     f"{best_cell} | {r['selected_step']} | {_ci(path['exported_macro'], 4) if path.get('exported_macro') else '—'} | "
                     f"{same} | {len(r['warnings'])} |")
    lines += ["", "## GateMem and LoCoMo", "",
              "| row | GateMem report AUC | 1 - cos | difference | LoCoMo report recall@20 | recall drop | "
              "GateMem select AUC (guard) | LoCoMo select drop (guard) |", "|---" * 8 + "|"]
    for name in names:
        r = rows[name]
        g = r["guard_select"]
        lines.append(f"| `{name}` | {_ci(r['gatemem_report']['suppression_auc'])} | "
                     f"{_ci(r['gatemem_report']['one_minus_cos_auc'])} | {_ci(r['gatemem_report']['difference'])} | "
                     f"{_ci(r['locomo_report']['recall_required@20'])} | {_ci(r['locomo_report']['recall_drop'])} | "
                     f"{g['gatemem_suppression_auc']:.3f} (1 - cos {g['gatemem_one_minus_cos_auc']:.3f}) | "
                     f"{g['locomo_recall_drop']:.4f} |")
    for part in PARTS:
        lines += ["", f"## Phrasing sources, `{part}` parts", "",
                  "| source | variant | 1 - cos AUC | " + " | ".join(f"`{n}` AUC" for n in names)
                  + " | " + " | ".join(f"`{n}` - without" for n in names if n != WITHOUT) + " |",
                  "|---" * (3 + 2 * len(names) - 1) + "|"]
        for source, by_part in parts.items():
            for variant, cmp in by_part[part].items():
                sc = cmp["scorers"]
                cells = [_ci(sc[COS]["gate"]["suppression_auc"])]
                for n in names:
                    flag = " ⚑" if sc[n]["gate"]["red_flag"] else ""
                    cells.append(_ci(sc[n]["gate"]["suppression_auc"]) + flag)
                cells += [_ci(sc[n]["vs_without"]["difference"]) for n in names if n != WITHOUT]
                lines.append(f"| {source.removeprefix('phrasing_')} | {variant} | " + " | ".join(cells) + " |")
        lines += ["", "Gate minus `1 - cos` (pooled AUC, paired; * = the cubic check credits the gate: "
                  "suppression adds to a cubic in the cosine, out of fold):", "",
                  "| source | variant | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (2 + len(names)) + "|"]
        for source, by_part in parts.items():
            for variant, cmp in by_part[part].items():
                sc = cmp["scorers"]
                cells = [_ci(sc[n]["vs_cos"]["difference"]["pooled_auc"])
                         + ("*" if (sc[n]["vs_cos"].get("cubic_check") or {}).get("credit") else "") for n in names]
                lines.append(f"| {source.removeprefix('phrasing_')} | {variant} | " + " | ".join(cells) + " |")
        lines += ["", "Does the gated score separate traps from controls better than the cosine? "
                  "AUC(1 - S) - AUC(1 - cos), paired [95 % CI]; activity = mean |cos - S| on traps / controls "
                  "(issue 32):", "",
                  "| source | variant | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (2 + len(names)) + "|"]
        for source, by_part in parts.items():
            for variant, cmp in by_part[part].items():
                sc = cmp["scorers"]
                cells = []
                for n in names:
                    v = sc[n]["vs_cos"]
                    act = v["activity"]
                    cells.append(f"{_ci(v['gated_minus_cos']['pooled_auc'])} "
                                 f"({act['positive']['value']:.4f} / {act['negative']['value']:.4f})")
                lines.append(f"| {source.removeprefix('phrasing_')} | {variant} | " + " | ".join(cells) + " |")
        lines += ["", "⚑ = red flag (mean suppression on controls >= on traps). Trap minus control "
                  "mean suppression [95 % CI]:", "",
                  "| source | variant | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (2 + len(names)) + "|"]
        for source, by_part in parts.items():
            for variant, cmp in by_part[part].items():
                sc = cmp["scorers"]
                lines.append(f"| {source.removeprefix('phrasing_')} | {variant} | "
                             + " | ".join(_ci(sc[n]["gate"]["difference"], 4) for n in names) + " |")
    lines += ["", "## Decision (select parts choose, report parts confirm)", "", " ".join(decision["rule"].split()), "",
              "| row | select macro | guards (select) pass | trained step | select candidate | report macro | "
              "report CI > 0 | report CI < 0 | report suppression < 0.6 | GateMem report routes ok | "
              "LoCoMo drop <= 0.01 | report confirms |", "|---" * 12 + "|"]
    for name, v in decision["rows"].items():
        s, r = v["select"], v["report"]
        lines.append(f"| `{name}` | {s['macro']:+.4f} | {'yes' if v['guards_select_pass'] else 'no'} | "
                     f"{'yes' if v['trained_step'] else 'no'} | {'yes' if v['select_candidate'] else 'no'} | "
                     f"{r['macro']:+.4f} | {len(r['gated_minus_cos_ci_above_0'])} | "
                     f"{', '.join(r['gated_minus_cos_ci_below_0']) or '—'} | {', '.join(r['suppression_below_0.6']) or '—'} | "
                     f"{'yes' if v['gatemem_report_routes_ok'] else 'no'} | {'yes' if v['locomo_report_ok'] else 'no'} | "
                     f"{'yes' if v['report_confirms'] else 'no'} |")
    chosen = decision["chosen_on_select"]
    lines += ["", f"Select candidates: {', '.join(f'`{c}`' for c in decision['select_candidates']) or 'none'}. "
              f"Chosen on select: {f'`{chosen}`' if chosen else 'none'}; confirmed on report: "
              f"{'yes' if decision['confirmed_on_report'] else 'no'}."]
    return "\n".join(lines) + "\n"


def plot(study: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in study["rows"] if n != WITHOUT]
    cells = [(s, v) for s, by_part in study["parts"].items() for v in by_part["report"]]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 1.2]})
    ax = axes[0]
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        vals, los, his = [], [], []
        for s, v in cells:
            d = study["parts"][s]["report"][v]["scorers"][name]["vs_without"]["difference"]
            vals.append(d["value"]), los.append(d["value"] - d["ci"][0]), his.append(d["ci"][1] - d["value"])
        x = np.arange(len(cells)) + (i - (len(names) - 1) / 2) * width
        ax.bar(x, vals, width, yerr=[los, his], capsize=2, color=f"C{i}", label=name)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(cells)))
    ax.set_xticklabels([f"{s.removeprefix('phrasing_')}\n{v}" for s, v in cells], fontsize=8)
    ax.set_ylabel("suppression AUC: with - without (report, 95 % CI)")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, axis="y")
    ax = axes[1]
    rows = list(study["rows"])
    for _i, name in enumerate(rows):
        r = study["rows"][name]
        ax.errorbar(r["gatemem_report"]["suppression_auc"]["value"], r["locomo_report"]["recall_drop"]["value"],
                    fmt="o", color="k" if name == WITHOUT else f"C{names.index(name)}", label=name)
    ax.axvline(RELEASE_GATEMEM_AUC, color="grey", ls="--", lw=0.8)
    ax.axhline(MAX_RECALL_DROP, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("GateMem report suppression AUC")
    ax.set_ylabel("LoCoMo report recall@20 drop")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(study: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "mix.json").write_text(json.dumps(study, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out_dir / "mix.md").write_text(markdown(study), encoding="utf-8")
    plot(study, out_dir / "mix.png")


def run_study(ablations_dir: Path, rows=ROWS, seed: int = 0, n_boot: int = DEFAULT_N_BOOT) -> dict:
    from data_gen.mine import load_encoder
    from data_gen.phrasing_audit import cosine_suppression, encoder_embed, gate_suppression
    from memgate.model.gate import MemGate

    encoder = load_encoder(None)
    missing = [r for r in rows if not (ablations_dir / r / f"seed{seed}" / "results.json").exists()]
    if missing:
        raise FileNotFoundError(f"{ablations_dir}: no finished seed {seed} for rows {missing} "
                                "(run python -m memgate ablations --grid full --only <row> --seeds <seed>)")
    figures = {r: row_figures(ablations_dir / r / f"seed{seed}") for r in rows}
    gates = {}
    for r in rows:
        gate = MemGate.from_pretrained(ablations_dir / r / f"seed{seed}" / f"{r}-seed{seed}",
                                       expected_encoder=encoder.identity["id"])
        gate.eval()
        gates[r] = gate_suppression(gate, encoder)
    parts = score_parts(gates, cosine_suppression(encoder), encoder_embed(encoder), n_boot=n_boot, seed=seed)
    return {"seed": seed, "n_boot": n_boot, "without": WITHOUT, "rows": figures, "parts": parts,
            "decision": decide(parts, figures)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_gen.phrasing_mix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated; the first is the without row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT)
    parser.add_argument("--ablations", type=Path, default=REPO_ROOT / "reports" / "ablations")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "phrasing_mix")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    rows = args.rows.split(",")
    if rows[0] != WITHOUT:
        raise SystemExit(f"--rows: the first row must be the without row {WITHOUT!r}, got {rows[0]!r}")
    study = run_study(args.ablations, rows, args.seed, args.n_boot)
    write_outputs(study, args.out)
    print(markdown(study))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
