"""``make ablations``: one overlay per study in ``configs/ablations/``, 3 training seeds per row,
resumable (one directory per row and seed, skipped when its results exist and both its config hash
and the training data's ``data_hash`` match), and a comparison table (markdown + JSON + plot),
all in a run directory (``--out``, default ``runs/ablations/``). The committed table under
``reports/ablations/`` is written only with ``--update-reports`` (it is rebuilt from the rows
finished in the run directory, so a one-row run would otherwise replace the committed grid).

    python -m memgate.commands.ablations [--grid small|full] [--only name[,name]] [--seeds 0,1,2]
                                [--no-real] [--table-only] [--out DIR] [--update-reports]

Each (row, seed) trains with the overlay's overrides and ``seed=<s>``, then evaluates the export
on synthetic test (and, unless --no-real, LoCoMo and GateMem report parts, with the transfer
AUC). Rows of the ``full`` grid are added to the ``small`` ones.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from memgate.contract import markdown as md
from memgate.contract.config import REPO_ROOT, config_hash, load_config, resolve_path
from memgate.eval.report.style import MARKERS, label_of, legend_outside, merge_identical
from memgate.train.config import TrainConfig

ABLATIONS_DIR = REPO_ROOT / "configs" / "ablations"
OUT_DIR = REPO_ROOT / "runs" / "ablations"  # the default run directory (--out): rows and the table
REPORTS_DIR = REPO_ROOT / "reports" / "ablations"  # the committed table: only with --update-reports
TABLE_FILES = ("ablations.md", "ablations.json", "ablations.png")
SUMMARY_KEYS = ("selected_step", "selected_text_risk_macro", "best_passing_text_risk_macro",
                "best_trained_text_risk_macro", "selected_dev_acc", "best_trained_dev_acc", "trained_points_passing_guard",
                "pref_acc_gated", "pref_acc_gated_hard", "pref_acc_gated_heldout", "top5_inadmissible_tv",
                "recall_required@20", "mrr_required", "l_rc@20", "locomo_recall_required@20",
                "gatemem_transfer_auc", "gatemem_baseline_auc", "parameters", "train_seconds")
log = logging.getLogger(__name__)


def load_rows(grid: str, only: list[str] | None) -> dict[str, dict]:
    rows = {}
    for path in sorted(ABLATIONS_DIR.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text()) or {}
        unknown = set(spec) - {"grid", "overrides"}
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        if spec.get("grid") not in ("small", "full"):
            raise ValueError(f"{path}: grid must be small or full")
        if grid == "small" and spec["grid"] == "full":
            continue
        rows[path.stem] = {"overrides": list(spec.get("overrides") or []), "path": str(path)}
    if only:
        missing = set(only) - set(rows)
        if missing:
            raise ValueError(f"unknown ablation rows {sorted(missing)} for grid {grid!r}")
        rows = {k: v for k, v in rows.items() if k in only}
    return rows


def row_config(name: str, overrides: list[str], seed: int, row_dir: Path) -> TrainConfig:
    """The training config of one (row, seed). Output paths inside the repository are written
    relative to it (``resolve_path`` reads them so), so the config hash survives moving the
    checkout."""
    try:
        row_dir = row_dir.relative_to(REPO_ROOT)
    except ValueError:
        pass
    return load_config(TrainConfig, resolve_path("configs/train/default.yaml"), [
        *overrides, f"seed={seed}", f"export.name={name}-seed{seed}",
        f"export.checkpoints_dir={row_dir.as_posix()}", f"export.runs_dir={(row_dir / 'runs').as_posix()}",
        "trainer.progress_bar=false",
    ])


def data_hash_of(config: TrainConfig) -> str | None:
    """The ``data_hash`` of the data directory a row trains and evaluates on (None without meta.json)."""
    meta = resolve_path(config.data.data_dir) / "meta.json"
    return json.loads(meta.read_text()).get("data_hash") if meta.exists() else None


def _recorded_data_hash(done: dict, row_dir: Path, name: str, seed: int) -> str | None:
    """The data hash a finished row ran on: results.json, else the exported gate's config.json
    (``export.data_hash``, written by the training run itself)."""
    if done.get("data_hash"):
        return done["data_hash"]
    exported = row_dir / f"{name}-seed{seed}" / "config.json"
    if exported.exists():
        return json.loads(exported.read_text()).get("export", {}).get("data_hash")
    return None


def finished_row(name: str, overrides: list[str], seed: int, need_real: bool = False,
                 out_dir: Path | None = None) -> dict | None:
    """The stored results of a (row, seed) whose config hash and data hash still match, else None
    (a regenerated data directory makes every row stale, as a changed overlay does; with
    ``need_real``, so does a row run with ``--no-real``); a stale row is logged with the reason.
    ``out_dir``: the run directory (default ``OUT_DIR``)."""
    row_dir = (out_dir or OUT_DIR) / name / f"seed{seed}"
    path = row_dir / "results.json"
    if not path.exists():
        return None
    done = json.loads(path.read_text())
    if need_real and "locomo_recall_required@20" not in done.get("figures", {}):
        log.info("%s seed %d is stale: it ran without the real data (--no-real)", name, seed)
        return None
    config = row_config(name, overrides, seed, row_dir)
    if done.get("config_hash") != config_hash(config):
        log.info("%s seed %d is stale: its config changed since it ran", name, seed)
        return None
    ran_on, now = _recorded_data_hash(done, row_dir, name, seed), data_hash_of(config)
    if ran_on != now:
        log.info("%s seed %d is stale: it ran on data %s, the data dir is now %s",
                 name, seed, str(ran_on)[:8], str(now)[:8])
        return None
    trained_on = done.get("train_triples_hash")
    if trained_on is not None and trained_on != current_triples_hash(config):
        log.info("%s seed %d is stale: its training triples changed (re-mined?) since it ran", name, seed)
        return None
    exported = row_dir / f"{name}-seed{seed}" / "config.json"
    if "selected_dev_acc" not in done["figures"] and exported.exists():  # rows run before the key
        done["figures"] = {**selection_figures(json.loads(exported.read_text())["export"]), **done["figures"]}
    return dict(done, data_hash=ran_on)


_TRIPLES_HASHES: dict = {}


def current_triples_hash(config: TrainConfig) -> str | None:
    """``train_triples_hash`` of what this config would train on now (memoised per input)."""
    data_dir = resolve_path(config.data.data_dir)
    if not (data_dir / "meta.json").exists():
        return None
    # what training_triples reads (config.data itself holds a dict, data.source_shares: unhashable)
    key = (str(data_dir), config.encoder, tuple(config.data.sources), config.data.use_mined,
           config.data.text_visible_only)
    if key not in _TRIPLES_HASHES:
        from memgate.train.run import encoder_from, training_triples, triples_hash  # torch

        try:
            _TRIPLES_HASHES[key] = triples_hash(training_triples(config, data_dir, encoder_from(config))[1])
        except (OSError, ValueError):
            _TRIPLES_HASHES[key] = None
    return _TRIPLES_HASHES[key]


def finished_rows(grid: str = "full", out_dir: Path | None = None) -> dict[str, list[dict]]:
    """Every finished (row, seed) of ``grid`` in the run directory, whatever this invocation ran:
    the table. The table is always built over the full grid (a superset of the small one), so a
    ``make ablations`` run never drops full-grid rows finished in another sitting."""
    out: dict[str, list[dict]] = {}
    for name, spec in load_rows(grid, None).items():
        seeds = sorted(int(d.name[4:]) for d in ((out_dir or OUT_DIR) / name).glob("seed*")
                       if d.name[4:].isdigit())
        for seed in seeds:
            done = finished_row(name, spec["overrides"], seed, out_dir=out_dir)
            if done is not None:
                out.setdefault(name, []).append(done)
    return out


def _macro(entry: dict):
    macro = entry.get("text_risk_macro") or ((entry.get("guard") or {}).get("text_risk") or {}).get("macro")
    return None if not macro else macro.get("value")


def selection_figures(export: dict) -> dict:
    """What model selection saw, from the exported gate's ``selection_history``: the selected
    step, the selection figure there (the text-risk macro on the natural sources' select parts, and
    the dev accuracy), the best of each over trained (step > 0) points, how many trained points
    passed every guard, and whether the export passed them all (the release rule's first part)."""
    history = export.get("selection_history", [])
    trained = [h for h in history if h.get("step", 0) > 0]
    selected = export.get("selection") or {}
    passed = lambda h: h.get("passed", (h.get("guard") or {}).get("passed"))  # noqa: E731
    text_risk = (selected.get("guard") or {}).get("text_risk") or {}
    out = {
        "selected_step": selected.get("step"),
        # what the selection rule maximised (under the guards): the figures to compare
        # configurations by without reading a test or report figure
        "selected_dev_acc": selected.get("dev_pref_acc_gated"),
        "best_trained_dev_acc": max((h["dev_pref_acc_gated"] for h in trained), default=None),
        "trained_points_passing_guard": sum(1 for h in trained if passed(h)),
        "selected_text_risk_macro": _macro(selected),
        "best_trained_text_risk_macro": max((m for m in map(_macro, trained) if m is not None), default=None),
        "best_passing_text_risk_macro": max((m for m in (_macro(h) for h in trained if passed(h)) if m is not None),
                                            default=None),
        "exported_passes_guards": bool(selected.get("guard") and passed(selected) and selected.get("step", 0) > 0),
    }
    for category, entry in (text_risk.get("categories") or {}).items():
        out[f"selected_text_risk_{category}"] = entry.get("value")
    return out


CI_KEYS = ("l_rc@20", "locomo_recall_required@20", "gatemem_transfer_auc", "gatemem_baseline_auc")


def group_cis(metrics: dict) -> dict:
    """The 95 % group-bootstrap CIs the evaluation computed for a row's figures (per seed)."""
    transfer = metrics.get("transfer", {}).get("gatemem") or {}
    cells = {
        "l_rc@20": metrics.get("synthetic_test", {}).get("learned_gate", {}).get("l_rc@20"),
        "locomo_recall_required@20": metrics.get("locomo", {}).get("learned_gate_namespace", {})
        .get("recall_required@20"),
        "gatemem_transfer_auc": (transfer.get("suppression") or {}).get("pooled_auc"),
        "gatemem_baseline_auc": (transfer.get("one_minus_cos") or {}).get("pooled_auc"),
    }
    return {k: list(v["ci"]) for k, v in cells.items() if isinstance(v, dict) and v.get("ci") is not None}


def run_row(name: str, overrides: list[str], seed: int, real: bool, out_dir: Path | None = None) -> dict:
    row_dir = (out_dir or OUT_DIR) / name / f"seed{seed}"
    config = row_config(name, overrides, seed, row_dir)
    digest = config_hash(config)
    result_path = row_dir / "results.json"
    done = finished_row(name, overrides, seed, need_real=real, out_dir=out_dir)
    if done is not None:
        log.info("skip %s seed %d (results exist, config and data hashes match)", name, seed)
        return done
    from memgate.commands.evaluate_run import evaluate  # torch, Lightning: when a row runs
    from memgate.eval.headline import HEADLINE_ROUTES
    from memgate.train.run import train
    from memgate.train.selection import selection_guards_for

    started = time.perf_counter()
    summary = train(config, argv=["memgate.commands.ablations", name, str(seed)], guard=selection_guards_for(config))
    # The headline routes only: the rows compare gates, and the other routes do not read the gate.
    metrics = evaluate(Path(summary["export_dir"]), resolve_path(config.data.data_dir), row_dir / "report",
                       routes=HEADLINE_ROUTES, real_sources=("locomo", "gatemem") if real else (),
                       n_boot=1000, seed=seed)
    headline = metrics["headline"]
    gated = headline["routes"].get("learned_gate", {})
    export = json.loads((Path(summary["export_dir"]) / "config.json").read_text())["export"]
    figures = {
        **selection_figures(export),
        "pref_acc_gated": headline["pref_acc_gated"],
        "pref_acc_reference": headline["pref_acc_reference"],
        "pref_acc_gated_hard": headline.get("strata", {}).get("pref_acc_gated_hard"),
        "pref_acc_gated_heldout": headline.get("strata", {}).get("pref_acc_gated_heldout"),
        "top5_inadmissible_tv": gated.get("top5_inadmissible_tv"),
        "recall_required@20": gated.get("recall_required@20"),
        "mrr_required": gated.get("mrr_required"),
        "l_rc@20": metrics["synthetic_test"].get("learned_gate", {}).get("l_rc@20", {}).get("value"),
        "parameters": export["parameters"],
        "train_seconds": summary["seconds"]["train"],
    }
    if "locomo" in metrics:
        figures["locomo_recall_required@20"] = (
            metrics["locomo"].get("learned_gate_namespace", {}).get("recall_required@20", {}).get("value"))
    transfer = metrics.get("transfer", {}).get("gatemem")
    if transfer:
        figures["gatemem_transfer_auc"] = transfer["suppression"]["pooled_auc"]["value"]
        figures["gatemem_baseline_auc"] = transfer["one_minus_cos"]["pooled_auc"]["value"]
    result = {"row": name, "seed": seed, "config_hash": digest, "data_hash": data_hash_of(config),
              "train_triples_hash": export.get("train_triples_hash"),
              "overrides": overrides, "figures": figures, "ci": group_cis(metrics),
              "seconds": time.perf_counter() - started}
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result


def summarize(results: dict[str, list[dict]]) -> dict:
    table = {}
    for name, runs in results.items():
        table[name] = {"data_hash": sorted({str(r.get("data_hash"))[:8] for r in runs}),
                       "seeds": sorted(r["seed"] for r in runs),
                       "group_ci": {str(r["seed"]): r["ci"] for r in sorted(runs, key=lambda r: r["seed"])
                                    if r.get("ci")}}
        for key in SUMMARY_KEYS:
            values = [r["figures"].get(key) for r in runs if r["figures"].get(key) is not None]
            if values:
                table[name][key] = {"mean": float(np.mean(values)), "min": float(np.min(values)),
                                    "max": float(np.max(values)), "n_seeds": len(values)}
    return table


def write_outputs(table: dict, out_dir: Path | None = None) -> None:
    """ablations.md, .json and .png into ``out_dir`` (default ``OUT_DIR``)."""
    out_dir = out_dir or OUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ablations.json").write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
    keys = [k for k in SUMMARY_KEYS if any(k in row for row in table.values())]
    hashes = sorted({h for row in table.values() for h in row.get("data_hash", [])})
    lines = ["# Ablations", "", "Mean over training seeds [min, max]. Training and synthetic test data: "
             f"data_hash {', '.join(hashes) or 'unknown'}.", "",
             md.row("row", "seeds", *keys), md.rule(len(keys) + 2)]
    for name, row in table.items():
        cells = [",".join(str(seed) for seed in row["seeds"])]
        for key in keys:
            cell = row.get(key)
            cells.append("—" if cell is None else f"{cell['mean']:.3f} [{cell['min']:.3f}, {cell['max']:.3f}]")
        lines.append(md.row(f"`{name}`", *cells))
    lines += ["", "95 % group-bootstrap CIs per training seed (test groups, LoCoMo conversations, GateMem "
              "episodes; 1,000 replicates):", "",
              md.row("row", "seed", *CI_KEYS), md.rule(len(CI_KEYS) + 2)]
    for name, row in table.items():
        for seed, cis in row.get("group_ci", {}).items():
            cells = ["—" if key not in cis else f"[{cis[key][0]:.3f}, {cis[key][1]:.3f}]" for key in CI_KEYS]
            lines.append(md.row(f"`{name}`", seed, *cells))
    (out_dir / "ablations.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    points = {name: (round(row["top5_inadmissible_tv"]["mean"], 6), round(row["pref_acc_gated"]["mean"], 6))
              for name, row in table.items() if "pref_acc_gated" in row and "top5_inadmissible_tv" in row}
    # Rows that are the same gate (same figures) are one point; labels go in the legend, never on
    # the points, so they cannot overprint.
    for i, group in enumerate(merge_identical(points)):
        ax.scatter(*points[group[0]], color=f"C{i % 10}", marker=MARKERS[(i // 10) % len(MARKERS)],
                   s=45 if len(group) == 1 else 80, label=label_of(group, width=40))
    ax.set_xlabel("top5_inadmissible_tv (learned_gate, lower is better)")
    ax.set_ylabel("pref_acc_gated (synthetic test)")
    ax.grid(alpha=0.3)
    legend_outside(ax, title="ablation row (mean over seeds)")
    fig.subplots_adjust(left=0.08, right=0.6, top=0.95, bottom=0.1)
    fig.savefig(out_dir / "ablations.png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def committed_rows(reports_dir: Path | None = None) -> list[str]:
    """The rows of the committed table (``reports/ablations/ablations.json``)."""
    committed = (reports_dir or REPORTS_DIR) / "ablations.json"
    return sorted(json.loads(committed.read_text())) if committed.exists() else []


def publish(table: dict, out_dir: Path, before: list[str], reports_dir: Path | None = None) -> list[str]:
    """``--update-reports``: copy the run directory's table over the committed one. Returns the rows
    the committed table had (``before``) that this one lacks (said on stderr: they leave it)."""
    reports_dir = reports_dir or REPORTS_DIR
    dropped = sorted(set(before) - set(table))
    if out_dir.resolve() != reports_dir.resolve():
        reports_dir.mkdir(parents=True, exist_ok=True)
        for name in TABLE_FILES:
            (reports_dir / name).write_bytes((out_dir / name).read_bytes())
    if dropped:
        print(f"memgate ablations: {len(dropped)} row(s) of the committed table are not finished in {out_dir} "
              f"and left it: {', '.join(dropped)}", file=sys.stderr)
    return dropped


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", choices=("small", "full"), default="small")
    parser.add_argument("--only", default=None, help="comma-separated row names")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--no-real", action="store_true")
    parser.add_argument("--table-only", action="store_true",
                        help="train nothing: rebuild the table from every finished row and seed on disk")
    parser.add_argument("--out", type=Path, default=None,
                        help="run directory: one folder per row and seed, and the table (default runs/ablations)")
    parser.add_argument("--update-reports", action="store_true",
                        help="also write the table over the committed reports/ablations/ (built from the rows "
                             "finished in --out: rows it lacks leave the committed table, named on stderr)")
    args = parser.parse_args(argv)
    out_dir = args.out.resolve() if args.out is not None else OUT_DIR
    if out_dir.resolve() == REPORTS_DIR.resolve() and not args.update_reports:
        parser.error(f"--out {args.out} is the committed reports/ablations/: pass --update-reports to rewrite it")
    before = committed_rows()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    rows = load_rows(args.grid, args.only.split(",") if args.only else None)
    seeds = [int(s) for s in args.seeds.split(",")]
    if not args.table_only:
        for name, spec in rows.items():
            for seed in seeds:
                run_row(name, spec["overrides"], seed, not args.no_real, out_dir)
                # the table grows as rows finish, from every finished row on disk: nothing lost
                write_outputs(summarize(finished_rows(out_dir=out_dir)), out_dir)
    results = finished_rows(out_dir=out_dir)
    if not results:
        raise SystemExit(f"no finished ablation rows in {out_dir}")
    table = summarize(results)
    write_outputs(table, out_dir)
    print((out_dir / "ablations.md").read_text())
    if args.update_reports:
        publish(table, out_dir, before)
        print(f"updated the committed table in {REPORTS_DIR}")
    else:
        print(f"table and rows in {out_dir} (the committed reports/ablations/ are untouched; --update-reports "
              "writes them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
