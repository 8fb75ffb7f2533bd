"""The model card (``README.md`` of an export directory), a function of the committed files only:
``config.json`` (the export record under ``"export"``), ``headline.json``, the plots beside them and,
for a release, the facts ``memgate card`` reads from its report (``memgate.commands.card``). The
full config stays in ``config.json``; the card says what the gate does and does not do, its guards
and thresholds, how to reproduce it and the hashes that identify it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from memgate.contract import markdown as md


def write_model_card(out_dir: Path, export_info: Optional[dict] = None, headline: Optional[dict] = None,
                     release: Optional[dict] = None, shown: Optional[str] = None) -> Path:
    """Write ``README.md`` into ``out_dir``: ``card_lines`` of its ``config.json`` (``export_info``
    defaults to its ``"export"`` record) and ``headline``; ``release`` adds the release's report
    facts (``memgate.commands.card.release_facts``)."""
    out_dir = Path(out_dir)
    gate_cfg = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    if shown is None:
        shown = out_dir.as_posix()
        try:  # a card never names the machine it was written on: relative to the working directory
            shown = out_dir.resolve().relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            pass
    plots = {name for name in ("training_curve.png", "risk_reliability.png") if (out_dir / name).exists()}
    lines = card_lines(out_dir.name, gate_cfg, gate_cfg.get("export") if export_info is None else export_info,
                       headline, shown, plots, release)
    path = out_dir / "README.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def card_lines(name: str, gate_cfg: dict, export_info: Optional[dict], headline: Optional[dict], shown: str,
               plots: set[str], release: Optional[dict] = None) -> list[str]:
    """The card's lines (a pure function: the same files give the same card)."""
    info = export_info or {}
    risk = gate_cfg.get("score_form") == "mask_risk"
    lines = [
        f"# {name}",
        "",
        "A MemGate admissibility gate for memgate: a small MLP over `[q ; v ; q*v]` of frozen",
        "sentence embeddings that outputs a mask over embedding dimensions; memories are ranked",
        "by the asymmetric gated cosine `S = q.(v*g) / (|q| |v*g|)`"
        + (" minus a risk term: `S' = S - a * sigmoid(r)`, `r` a scalar risk head on the first hidden "
           "layer and `a` one learned scale (`gate.score_with_risk` returns `sigmoid(r)` too)." if risk else "."),
        "The full configuration and training record are in `config.json`; the synthetic headline in",
        "`headline.json`.",
        "",
        "```python",
        "from memgate import MemGate",
        f"gate = MemGate.from_pretrained('{shown}')",
        "scores = gate.score(q, V)  # q: (d,), V: (N, d) unit-normalised embeddings",
        "```",
        "",
        *what_it_does_lines(),
        *release_does_lines(release),
        *does_not_lines(release),
        *guard_lines(info),
        *identity_lines(gate_cfg, info),
        *reproduce_lines(info, release),
    ]
    if info.get("warnings"):
        lines += ["## Warnings", ""] + [f"- {w}" for w in info["warnings"]] + [""]
    lines += selection_history_lines(info)
    lines += headline_lines(headline)
    lines += risk_calibration_lines(info.get("risk_calibration"), "risk_reliability.png" in plots)
    if "training_curve.png" in plots:
        lines += ["## Training curve", "",
                  "Loss terms per step; per validation point the dev preference accuracy, the selection",
                  "figure (text-risk macro with its CI) and every guard's slack to its threshold (filled =",
                  "passed, hollow = failed); the dash-dotted line is the exported step.", "",
                  "![training curve](training_curve.png)", ""]
    return lines


def release_does_lines(release: Optional[dict]) -> list[str]:
    """What the release measurably does on the report parts (``memgate targets``' record)."""
    if not release or not release.get("does"):
        return []
    return [f"On the report parts ({release.get('does_source', release['source'])}):", "",
            *(f"- {line}" for line in release["does"]), ""]


def does_not_lines(release: Optional[dict]) -> list[str]:
    """What the gate does not do: its scope, then every missed target of the release with its figure."""
    lines = ["## What it does not do", "",
             "- It never sees owners, namespaces, supersession, forget requests or policy tags: those are",
             "  decided from metadata before it ranks, and a text-only score cannot replace them."]
    if not release:
        return lines + ["- The missed targets of a release are listed by `memgate card` from its report",
                        "  (`memgate targets`); this export has none recorded.", ""]
    lines += [f"- Missed target: {name}: **{value}**" for name, value in release.get("misses", [])]
    lines += [f"- {line}" for line in release.get("does_not", [])]
    return lines + ["", f"Sources: {release['source']}.", ""]


def guard_lines(info: dict) -> list[str]:
    """The selection guards with their thresholds, the drop threshold, the risk scale."""
    sel = (info.get("train_config") or {}).get("selection") or {}
    if not any((sel, info.get("calibration"), info.get("guards"), info.get("calibration_note"), info.get("risk_scale"))):
        return []
    margin = sel.get("route_margin", 0.01)
    auc = sel.get("min_suppression_auc", 0.5)
    lines = ["## Guards and thresholds", "",
             "A trained step ships only when every guard passes on `select` parts (report parts are read only",
             "after selection):", ""]
    if sel:
        lines += [f"- LoCoMo: `learned_gate_namespace` - `namespace_dense` recall_required@20 drop <= "
                  f"{sel.get('max_recall_drop', 0.01)}" + ("" if sel.get("locomo_guard", True) else " (off)"),
                  f"- GateMem routes: `hybrid` - `kleene_gate` violation_any@20 and protected_exposure@20 <= +{margin}, "
                  f"recall_required@20 >= -{margin}" + ("" if sel.get("gatemem_routes_guard", True) else " (off)"),
                  f"- GateMem: the gate's suppression AUC >= {auc}" + ("" if sel.get("gatemem_guard", True) else " (off)"),
                  f"- text risk: every natural-phrasing source's suppression AUC (natural and matched) >= {auc}"
                  + ("" if sel.get("text_risk_guard", True) else " (off)")]
    if info.get("guards"):
        lines.append(f"- real-data selection guards: {info['guards']}")
    if info.get("calibration_note"):
        lines.append(f"- drop-threshold calibration: {info['calibration_note']}")
    drop = drop_threshold_lines(info.get("calibration"))
    if info.get("risk_thresholds") and (info["risk_thresholds"].get("risk_drop") is not None):
        drop = [line + " — recorded only: this gate's default route drops by `risk_drop` (below) instead" for line in drop]
    return (lines + drop + risk_scale_lines(info.get("risk_scale"))
            + risk_threshold_lines(info.get("risk_thresholds")) + [""])


def identity_lines(gate_cfg: dict, info: dict) -> list[str]:
    """What identifies the export: encoder, data, triples, config and weights hashes, versions, git."""
    encoder = info.get("encoder") or {}
    selection = info.get("selection") or {}
    vers = ", ".join(f"{k} {v}" for k, v in sorted((info.get("versions") or {}).items()))
    lines = ["## Data, config and weights", "",
             f"- encoder: `{encoder.get('id', gate_cfg.get('encoder_id'))}` (revision "
             f"`{encoder.get('revision', gate_cfg.get('encoder_revision'))}`)",
             f"- data: `{info.get('data_dir')}`, data hash `{info.get('data_hash')}`; seed {info.get('seed')}",
             *([f"- train triples: `{info['train_triples_file']}` (sha256 `{info.get('train_triples_hash')}`)"]
               if info.get("train_triples_file") else []),
             *([f"- dev triples: `{info['dev_triples_file']}`"] if info.get("dev_triples_file") else []),
             f"- config hash: `{info.get('config_hash')}` (the training config in `config.json` under `export.train_config`)",
             f"- weights: `model.safetensors`, sha256 `{gate_cfg.get('weights_sha256')}`; parameters {info.get('parameters')}",
             f"- selected step: {selection.get('step')} (dev preference accuracy "
             f"{_fmt(selection.get('dev_pref_acc_gated'))}"
             + (f"; text-risk macro {_ci(selection.get('text_risk_macro'))}" if selection.get("text_risk_macro") else "")
             + ")" + (" — **no trained step passed: ranks like the cosine**"
                      if selection.get("step") == 0 and info.get("selection_history") else ""),
             *([f"- versions: {vers}"] if vers else []),
             f"- git: `{info.get('git_sha')}` (git_dirty: {str(info.get('git_dirty')).lower()})",
             ""]
    return lines


def reproduce_lines(info: dict, release: Optional[dict]) -> list[str]:
    """The commands that reproduce a release, and why a dirty tree is or is not a concern."""
    lines = ["## Reproduce", "", "```sh",
             "make release     # regenerate the data, train, export, pin the weights' sha256, evaluate",
             "make demo-check  # a fresh clone of HEAD trains the demo and compares its weights with these",
             "```", ""]
    if info.get("git_dirty"):
        lines += [f"The export recorded `git_dirty: true`: it was trained from a working tree at "
                  f"`{str(info.get('git_sha'))[:12]}` with uncommitted changes."]
        repro = (release or {}).get("reproduced")
        if repro:
            lines += [f"A clean clone reproduces it: `make demo-check` (a clone of the committed HEAD, no "
                      f"uncommitted changes, an empty embedding cache) trained weights with sha256 "
                      f"`{repro['sha256'][:12]}…`, verdict **{repro['verdict']}** ({repro['source']}), so no "
                      "uncommitted change reached the weights."]
        else:
            lines += ["No clean-clone reproduction is recorded for it; `make demo-check` measures one."]
        lines.append("")
    return lines


def headline_lines(headline: Optional[dict]) -> list[str]:
    """The synthetic headline (``headline.json``) as one table per route; the JSON stays beside it."""
    if not headline:
        return []
    routes = headline.get("routes") or {}
    keys = ("recall_required@5", "recall_required@20", "recall_beneficial@20", "mrr_required", "top5_inadmissible_tv")
    lines = ["## Headline (synthetic test, K = 20; `headline.json`)", "",
             md.row("route", *keys), md.rule(["---"] + ["---:"] * len(keys))]
    lines += [md.row(f"`{r}`", *(_fmt(v.get(k), 3) for k in keys)) for r, v in sorted(routes.items())]
    extra = [f"preference accuracy gated {_fmt(headline.get('pref_acc_gated'))} vs reference "
             f"{_fmt(headline.get('pref_acc_reference'))} ({headline.get('n_test_triples_tv')} test triples)"]
    activity = headline.get("gate_activity") or {}
    if activity:
        extra.append(f"mask std {_fmt(activity.get('mask_std'), 3)}, top-20 lists reordered "
                     f"{_fmt(activity.get('top20_reordered'), 3)}")
    lc = headline.get("locomo_report") or {}
    if lc:
        extra.append(f"LoCoMo report `{lc.get('route')}` vs `{lc.get('baseline')}` {lc.get('metric')} drop "
                     f"{_fmt(lc.get('drop'))}")
    return lines + ["", "; ".join(extra) + ".", ""]


def what_it_does_lines() -> list[str]:
    """What the gate does and does not do (the design split, docs/design.md section 4)."""
    return ["## What it does", "",
            "It re-ranks by **text-visible risk**: memories whose text, read against the query, signals",
            "cross-domain leakage, sycophancy, tool-call drift or a memory-induced jailbreak. It sees text",
            "embeddings only; scope, principal, lifecycle and policy are decided from trusted metadata by",
            "namespace support and the Kleene gate before it ranks (the `hybrid` route / `memgate.retriever`).",
            "Selection requires it not to undo what metadata protects (GateMem `hybrid` vs `kleene_gate`) and",
            "not to cost recall on benign real text (LoCoMo). It re-orders candidates; the retriever's default",
            "route (`hybrid_drop`) also drops those at or above the calibrated drop threshold (Guards, below).",
            ""]


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
