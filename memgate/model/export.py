"""Export directory of a trained gate: config.json, model.safetensors, headline.json, README.md."""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Optional

from memgate.contract import markdown as md
from memgate.contract.config import REPO_ROOT
from memgate.model.gate import MemGate
from memgate.model.pretrained import record_release, refuse_released_export


def git_state() -> dict:
    """The commit the code came from and whether the tree had uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=REPO_ROOT, capture_output=True, text=True,
                                    check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": None, "git_dirty": None}
    return {"git_sha": sha, "git_dirty": dirty}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for package in ("torch", "lightning", "sentence-transformers", "transformers", "numpy"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out


def write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def export_gate(gate: MemGate, out_dir: Path, export_info: dict) -> Path:
    """Save weights and config (with ``export_info`` primitives) into ``out_dir``. A released gate's
    name or directory is refused outside ``make release``, whose export rewrites the pin
    (``memgate.model.pretrained``)."""
    out_dir = Path(out_dir)
    refuse_released_export(out_dir)
    gate.save_pretrained(out_dir, extra_config=export_info)
    record_release(out_dir)
    return out_dir


def write_model_card(out_dir: Path, export_info: dict, headline: Optional[dict]) -> None:
    gate_cfg = json.loads((Path(out_dir) / "config.json").read_text())
    shown = Path(out_dir)
    try:  # a card never names the machine it was written on: relative to the working directory
        shown = shown.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    lines = [
        f"# {Path(out_dir).name}",
        "",
        "A MemGate admissibility gate for memgate: a small MLP over `[q ; v ; q*v]` of frozen",
        "sentence embeddings that outputs a mask over embedding dimensions; memories are ranked",
        "by the asymmetric gated cosine `S = q.(v*g) / (|q| |v*g|)`"
        + (" minus a risk term: `S' = S - a * sigmoid(r)`, `r` a scalar risk head on the first hidden "
           "layer and `a` one learned scale (`gate.score_with_risk` returns `sigmoid(r)` too)."
           if gate_cfg.get("score_form") == "mask_risk" else "."),
        "",
        "```python",
        "from memgate import MemGate",
        f"gate = MemGate.from_pretrained('{shown.as_posix()}')",
        "scores = gate.score(q, V)  # q: (d,), V: (N, d) unit-normalised embeddings",
        "```",
        "",
        "## Training",
        "",
        f"- encoder: `{export_info.get('encoder', {}).get('id')}` "
        f"(revision `{export_info.get('encoder', {}).get('revision')}`)",
        f"- data hash: `{export_info.get('data_hash')}`; seed {export_info.get('seed')}",
        f"- parameters: {export_info.get('parameters')}",
        f"- selected step: {export_info.get('selection', {}).get('step')} "
        f"(dev preference accuracy {export_info.get('selection', {}).get('dev_pref_acc_gated')}"
        + (f"; text-risk macro {_ci(export_info['selection'].get('text_risk_macro'))}"
           if (export_info.get('selection') or {}).get('text_risk_macro') else "") + ")"
        + (" — **no trained step passed: ranks like the cosine**"
           if (export_info.get('selection') or {}).get('step') == 0 and export_info.get('selection_history') else ""),
        f"- git: `{export_info.get('git_sha')}` (dirty: {export_info.get('git_dirty')})",
        *([f"- train triples: `{export_info['train_triples_file']}`; dev triples: "
           f"`{export_info['dev_triples_file']}`"] if export_info.get("dev_triples_file") else []),
        *([f"- real-data selection guards: {export_info['guards']}"] if export_info.get("guards") else []),
        *([f"- drop-threshold calibration: {export_info['calibration_note']}"]
          if export_info.get("calibration_note") else []),
        *drop_threshold_lines(export_info.get("calibration")),
        *risk_scale_lines(export_info.get("risk_scale")),
        *risk_threshold_lines(export_info.get("risk_thresholds")),
        "",
        *what_it_does_lines(),
    ]
    lines += risk_calibration_lines(export_info.get("risk_calibration"), (Path(out_dir) / "risk_reliability.png").exists())
    if (Path(out_dir) / "training_curve.png").exists():
        lines += ["## Training curve", "",
                  "Loss terms per step; per validation point the dev preference accuracy, the selection",
                  "figure (text-risk macro with its CI) and every guard's slack to its threshold (filled =",
                  "passed, hollow = failed); the dash-dotted line is the exported step.", "",
                  "![training curve](training_curve.png)", ""]
    if export_info.get("warnings"):
        lines += ["## Warnings", ""] + [f"- {w}" for w in export_info["warnings"]] + [""]
    lines += selection_history_lines(export_info)
    if headline:
        lines += ["## Headline (synthetic test, K = 20)", "", "```json",
                  json.dumps(headline, indent=2, sort_keys=True), "```", ""]
    lines += ["## Config", "", "```json", json.dumps(gate_cfg, indent=2, sort_keys=True), "```", ""]
    (Path(out_dir) / "README.md").write_text("\n".join(lines), encoding="utf-8")


def what_it_does_lines() -> list[str]:
    """What the gate does and does not do (the design split, docs/design.md section 4)."""
    return ["## What this gate does and does not do", "",
            "It re-ranks by **text-visible risk**: memories whose text, read against the query, signals",
            "cross-domain leakage, sycophancy, tool-call drift or a memory-induced jailbreak. It sees text",
            "embeddings only and never owners, namespaces, supersession, forget requests or policy tags:",
            "scope, principal, lifecycle and policy are decided from trusted metadata by namespace support",
            "and the Kleene gate, before it ranks (the `hybrid` route / `memgate.retriever`). Selection",
            "requires it not to undo what metadata protects (GateMem `hybrid` vs `kleene_gate`) and not to",
            "cost recall on benign real text (LoCoMo). It re-orders candidates; the retriever's default",
            "route (`hybrid_drop`) also drops those at or above the calibrated drop threshold, which is set",
            "so that at most 1 % of every real benign select set would be dropped (Training, above).", ""]


def drop_threshold_lines(calibration: Optional[dict]) -> list[str]:
    """The calibrated drop threshold the default retriever route (``hybrid_drop``) applies."""
    if not calibration:
        return []
    if calibration.get("threshold") is None:
        return [f"- drop threshold: none (every candidate is kept): {calibration.get('note')}"]
    floors = calibration.get("anchor_floors") or {}
    worst = max(floors.items(), key=lambda kv: kv[1].get("drop_rate") or 0.0, default=None)
    return [f"- drop threshold (suppression S_ref - S at or above it is dropped by `hybrid_drop`, the "
            f"retriever's default route): {calibration['threshold']:.4f}; {calibration.get('note')}"
            + (f"; at most {worst[1]['drop_rate']:.1%} of a real benign set dropped ({worst[0]})"
               if worst and worst[1].get("drop_rate") is not None else "")]


def risk_scale_lines(record: Optional[dict]) -> list[str]:
    """The risk scale a of a mask_risk gate: learned, and calibrated against the guards."""
    if not record:
        return []
    tried = "; ".join(f"x{t['multiplier']:g}: {'passed' if t['passed'] else 'failed ' + ', '.join(t['failed'])}"
                      for t in record.get("tried") or [])
    return [f"- risk scale a: learned {record['learned']:.4f}, exported {record['calibrated']:.4f} (multiplier "
            f"{record['multiplier']:g} of the grid {record.get('grid')}, the largest at which every guard passed on "
            f"select parts" + (f"; tried {tried}" if tried else "") + ")"
            + (f"; {record['note']}" if record.get("note") else "")]


def risk_threshold_lines(record: Optional[dict]) -> list[str]:
    """``risk_warn`` / ``risk_drop`` of a mask_risk gate (memgate.model.risk_thresholds)."""
    if not record:
        return []
    def fmt(t: Optional[float]) -> str:
        return "none" if t is None else f"{t:.6f}"
    return [f"- risk thresholds on sigmoid(r) (`gate_risk`): risk_warn {fmt(record.get('risk_warn'))} "
            f"(an agent surface's hit at or above it is at most `warn`, `verify_first` in `strict`; flags "
            f"{record.get('flagged', 0.0):.2%} of {record.get('n')} benign select pairs), risk_drop "
            f"{fmt(record.get('risk_drop'))} (the default route drops a hit at or above it; drops at most "
            f"{record.get('dropped', 0.0):.2%} of any benign set)" + (f"; {record['note']}" if record.get("note") else "")]


def risk_calibration_lines(calibration: Optional[dict], plot: bool) -> list[str]:
    """The card's risk-calibration section: ECE of sigmoid(r) per select set and pooled."""
    if not calibration or not calibration.get("sets"):
        return []
    lines = ["## Risk calibration (select parts)", "",
             "How well `sigmoid(r)` reads as a probability of risk: expected calibration error "
             f"({calibration.get('bins')} equal-width bins) per labelled select set (trap / protected = 1, "
             "control / anchor / LoCoMo evidence = 0) and pooled.", "",
             md.row("set", "rows", "risky", "mean sigmoid(r)", "ECE"), md.rule(["---", "---:", "---:", "---:", "---:"])]
    rows = [*sorted(calibration["sets"].items()), ("pooled", calibration.get("pooled"))]
    for name, entry in rows:
        if entry:
            lines.append(md.row(f"**{name}**" if name == "pooled" else name, entry["n"], entry["positives"],
                                _fmt(entry.get("mean_risk"), 3), _fmt(entry.get("ece"), 3)))
    if plot:
        lines += ["", "![risk reliability](risk_reliability.png)"]
    return lines + [""]


def _fmt(value, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(entry: Optional[dict], digits: int = 4) -> str:
    if not entry or entry.get("value") is None:
        return "—"
    lo, hi = (entry.get("ci") or [None, None])[:2]
    return f"{entry['value']:+.{digits}f}" + ("" if lo is None else f" [{lo:+.{digits}f}, {hi:+.{digits}f}]")


def _guards(entry: dict) -> dict:
    """name -> guard result of one history entry (the release format: a mapping with ``passed``;
    older cards: ``monitor`` beside it, or one LoCoMo guard dict)."""
    guard = dict(entry.get("guard") or {})
    for name, value in (entry.get("monitor") or {}).items():
        guard.setdefault(name, value)
    if "drop" in guard and "locomo" not in guard:
        guard = {"locomo": guard, "passed": guard.get("passed")}
    return guard


def _route_cell(gr: dict) -> str:
    keys = ("violation_any@20", "protected_exposure@20", "recall_required@20")
    if not gr:
        return "—"
    return " / ".join(_fmt((gr.get(f"diff:{k}") or {}).get("value"), 3) for k in keys)


def fallback_note(selection: dict) -> list[str]:
    """The card's loud paragraph when the export is the step-0 gate."""
    if not selection or selection.get("step") != 0:
        return []
    return ["**No trained step passed selection: this export is the step-0 (near-identity) gate and "
            "ranks like the cosine.** Its scores equal the plain cosine to within about 1e-3; the "
            "selection table below says which guard or tie sent every trained step out.", ""]


def selection_history_lines(export_info: dict) -> list[str]:
    """The model card's selection section: the rule, the benign-list term, and every validation
    point with every guard against its threshold; only the exported point is marked."""
    history = export_info.get("selection_history") or []
    lists = export_info.get("benign_lists") or {}
    selection = export_info.get("selection") or {}
    dev = f"dev-set (`{export_info['dev_set']}`)" if export_info.get("dev_set") else "synthetic-dev"
    sel_cfg = (export_info.get("train_config") or {}).get("selection") or {}
    if selection.get("rule", sel_cfg.get("metric")) == "text_risk_macro":
        rule = ["Rule: among validation points that pass every guard, the best macro AUC(1 - S) - AUC(1 - cos)",
                "over the natural-phrasing sources' select parts (mean over the four risk categories; a",
                "source = the mean of its natural and matched pairs); ties within the paired bootstrap CI go",
                "to the earlier step, so a trained step ships only when it beats step 0 beyond the CI.",
                f"{dev.capitalize()} preference accuracy is logged, not selected on."]
    else:
        rule = [f"Rule: the best {dev} preference accuracy among validation points that pass every guard;",
                "ties go to the earlier step."]
    margin = sel_cfg.get("route_margin", 0.01)
    lines = [
        "## Selection",
        "",
        *fallback_note(selection),
        *rule,
        "Step 0 (the near-identity gate) is a candidate, and the fallback when no point passes.",
        "Guards, all on `select` parts: LoCoMo `recall_required@20` drop of `learned_gate_namespace` vs",
        f"`namespace_dense` <= {sel_cfg.get('max_recall_drop', 0.01)}; GateMem `hybrid` - `kleene_gate` "
        f"violation_any@20 and protected_exposure@20 <= +{margin},",
        f"recall_required@20 >= -{margin}; GateMem suppression AUC >= {sel_cfg.get('min_suppression_auc', 0.5)}; "
        "every natural source's suppression AUC",
        f"(natural and matched) >= {sel_cfg.get('min_suppression_auc', 0.5)}. Only the dev set and `select` "
        "parts are read.",
        "",
        f"Ranking preservation on benign lists: weight {lists.get('weight')}, {lists.get('lists')} lists, "
        f"active: {lists.get('active')}.",
        "",
        md.row("step", "dev pref (gated / ref)", "text-risk macro [95% CI]", "LoCoMo drop [95% CI]",
               "GateMem hybrid - kleene: viol / exp / recall", "GateMem supp. AUC (1 - cos)",
               "natural min supp. AUC (cell)", "passed", "exported"),
        md.rule(["---:"] + ["---"] * 8),
    ]
    for e in history:
        g = _guards(e)
        lc, gm, gr, tr = (g.get(k) or {} for k in ("locomo", "gatemem", "gatemem_routes", "text_risk"))
        ci = lc.get("drop_ci") or [None, None]
        drop = "—" if not lc else f"{_fmt(lc.get('drop'))} [{_fmt(ci[0])}, {_fmt(ci[1])}]"
        auc = "—" if not gm else f"{_fmt(gm.get('suppression_auc'), 3)} ({_fmt(gm.get('one_minus_cos_auc'), 3)})"
        low = "—" if not tr else f"{_fmt(tr.get('min_suppression_auc'), 3)} ({tr.get('min_suppression_cell')})"
        macro = e.get("text_risk_macro") or tr.get("macro")
        passed = "—" if not e.get("guard") else ("yes" if e.get("passed", g.get("passed")) else "no")
        lines.append(md.row(e.get("step"), f"{_fmt(e.get('dev_pref_acc_gated'), 3)} / "
                            f"{_fmt(e.get('dev_pref_acc_reference'), 3)}", _ci(macro), drop, _route_cell(gr),
                            auc, low, passed, "**yes**" if e.get("step") == selection.get("step") else ""))
    tie = selection.get("tie_with_best")
    if tie and tie.get("best_step") != selection.get("step"):
        lines += ["", f"Step {tie['best_step']} had the best figure; step {selection.get('step')} is within its paired "
                  f"CI (difference {tie['difference']:+.4f} [{tie['ci'][0]:+.4f}, {tie['ci'][1]:+.4f}]), so the "
                  "earlier step ships."]
    return lines + [""]
