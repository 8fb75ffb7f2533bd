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
    """Save weights and config (with ``export_info`` primitives) into ``out_dir``."""
    out_dir = Path(out_dir)
    gate.save_pretrained(out_dir, extra_config=export_info)
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
        "by the asymmetric gated cosine `q.(v*g) / (|q| |v*g|)`.",
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
        f"(dev preference accuracy {export_info.get('selection', {}).get('dev_pref_acc_gated')})",
        f"- git: `{export_info.get('git_sha')}` (dirty: {export_info.get('git_dirty')})",
        *([f"- train triples: `{export_info['train_triples_file']}`; dev triples: "
           f"`{export_info['dev_triples_file']}`"] if export_info.get("dev_triples_file") else []),
        *([f"- real-data selection guards: {export_info['guards']}"] if export_info.get("guards") else []),
        *([f"- drop-threshold calibration: {export_info['calibration_note']}"]
          if export_info.get("calibration_note") else []),
        "",
        "The gate sees text embeddings only: it can learn violations the text reveals, never",
        "owners, supersession or forget requests. Use it behind namespace support and Kleene",
        "exclusion on trusted metadata (the `hybrid` route / `memgate.retriever`).",
        "",
    ]
    if (Path(out_dir) / "training_curve.png").exists():
        lines += ["## Training curve", "",
                  "Loss terms per step, dev preference accuracy and the real-data guards per validation",
                  "point; the dash-dotted line is the selected step.", "",
                  "![training curve](training_curve.png)", ""]
    if export_info.get("warnings"):
        lines += ["## Warnings", ""] + [f"- {w}" for w in export_info["warnings"]] + [""]
    lines += selection_history_lines(export_info)
    if headline:
        lines += ["## Headline (synthetic test, K = 20)", "", "```json",
                  json.dumps(headline, indent=2, sort_keys=True), "```", ""]
    lines += ["## Config", "", "```json", json.dumps(gate_cfg, indent=2, sort_keys=True), "```", ""]
    (Path(out_dir) / "README.md").write_text("\n".join(lines), encoding="utf-8")


def _fmt(value, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def selection_history_lines(export_info: dict) -> list[str]:
    """The model card's selection section: the rule, the benign-list term, and every validation
    point with both guards (``—`` where a guard did not run: only a candidate that would improve
    on the best dev accuracy so far is LoCoMo-guarded; the GateMem guard runs at every point)."""
    history = export_info.get("selection_history") or []
    lists = export_info.get("benign_lists") or {}
    dev = f"dev-set (`{export_info['dev_set']}`)" if export_info.get("dev_set") else "synthetic-dev"
    lines = [
        "## Selection",
        "",
        f"Rule: the best {dev} preference accuracy among validation points that pass every",
        "guard (LoCoMo-select `recall_required@20` drop <= max drop vs `namespace_dense`; GateMem-select",
        "suppression AUC >= the `1 - cos` AUC on the same rows); ties go to the earlier step, and",
        "step 0 (the near-identity gate) is a candidate. Only the dev set and `select` parts are read.",
        "",
        f"Ranking preservation on benign lists: weight {lists.get('weight')}, {lists.get('lists')} lists, "
        f"active: {lists.get('active')}.",
        "",
        md.row("step", "epoch", "dev pref (gated)", "dev pref (ref)", "LoCoMo drop [95% CI]",
               "GateMem AUC / 1-cos", "passed", "selected"),
        md.rule(["---:"] * 4 + ["---"] * 4),
    ]
    for e in history:
        guard = e.get("guard") or {}
        gm = guard.get("gatemem") or (e.get("monitor") or {}).get("gatemem") or {}
        lc = guard.get("locomo") or ({} if "gatemem" in guard or "locomo" in guard else
                                     (guard if "drop" in guard else {}))
        ci = lc.get("drop_ci") or [None, None]
        drop = "—" if not lc else f"{_fmt(lc.get('drop'))} [{_fmt(ci[0])}, {_fmt(ci[1])}]"
        auc = "—" if not gm else f"{_fmt(gm.get('suppression_auc'), 3)} / {_fmt(gm.get('one_minus_cos_auc'), 3)}"
        passed = "—" if not guard else ("yes" if guard.get("passed") else "no")
        lines.append(md.row(e.get("step"), e.get("epoch"), _fmt(e.get("dev_pref_acc_gated")),
                            _fmt(e.get("dev_pref_acc_reference")), drop, auc, passed,
                            "**yes**" if e.get("selected") else ""))
    return lines + [""]
