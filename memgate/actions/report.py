"""Evaluate the allowed-action policy on the scenario suite and write a report.

    python -m memgate.commands.actions --out reports/actions

writes ``report.md``, ``results.json`` (byte-reproducible: no timestamps) and ``tradeoff.png``.
For every preset: correct / total, false-certainty errors (an action strictly more permissive
than expected), overblocks (strictly less permissive) and each disagreement with the suite's
rationale; plus a sweep over the thresholds (the low-risk settled threshold of
``balanced_risk_adjusted`` and a shift of every ``balanced`` answer threshold) that traces the
trade-off surface.

``--record`` also rewrites ``memgate/actions/action_suite/expected_results.json``, the per-preset figures
the tests assert; do that only on purpose, together with a policy version bump.

The suite's expected actions are never changed to match the policy: disagreements are reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Union

from memgate.actions import ACTION_ORDER, ActionPolicy, Preset, compare, decide_actions, load_policy
from memgate.actions.suite import EXPECTED_RESULTS_PATH, Suite, load_suite
from memgate.contract import markdown as md

SETTLED_SWEEP = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8)
SHIFT_SWEEP = (-0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1)


def evaluate_preset(suite: Suite, preset: Union[str, Preset], policy: ActionPolicy) -> dict:
    """Figures and per-memory decisions of one preset on the suite."""
    rows = []
    for scenario in suite.scenarios:
        decisions = decide_actions(scenario.memories, scenario.query, preset, policy)
        for memory, decision in zip(scenario.memories, decisions, strict=True):
            outcome = compare(decision.action, memory["expected_action"])
            rows.append(
                {
                    "scenario": scenario.id,
                    "memory_id": memory["id"],
                    "expected": memory["expected_action"],
                    "actual": decision.action,
                    "outcome": outcome,
                    "binding": list(decision.binding),
                    "rationale": memory["rationale"],
                    "policy_version": decision.policy_version,
                    "preset": decision.preset,
                }
            )
    return {
        "total": len(rows),
        "correct": sum(r["outcome"] == "correct" for r in rows),
        "false_certainty": sum(r["outcome"] == "false_certainty" for r in rows),
        "overblocks": sum(r["outcome"] == "overblock" for r in rows),
        "decisions": rows,
    }


def _figures(result: dict) -> dict:
    return {k: result[k] for k in ("correct", "total", "false_certainty", "overblocks")}


def _sweep_row(family: str, value: float, result: dict) -> dict:
    ids = {
        kind: [d["memory_id"] for d in result["decisions"] if d["outcome"] == kind]
        for kind in ("false_certainty", "overblock")
    }
    return {
        "family": family,
        "value": value,
        **_figures(result),
        "false_certainty_ids": ids["false_certainty"],
        "overblock_ids": ids["overblock"],
    }


def sweep(suite: Suite, policy: ActionPolicy) -> list[dict]:
    """The trade-off surface: two one-parameter families around the shipped presets."""
    rows = []
    base = policy.preset("balanced_risk_adjusted")
    for value in SETTLED_SWEEP:
        name = f"balanced_risk_adjusted@settled={value:g}"
        p = base.with_overrides(name=name, settled_low_risk_threshold=value)
        rows.append(
            _sweep_row("settled_low_risk_threshold", value, evaluate_preset(suite, p, policy))
        )
    balanced = policy.preset("balanced")
    for shift in SHIFT_SWEEP:
        thresholds = {
            k: min(1.0, max(0.0, round(v + shift, 4))) for k, v in balanced.answer_threshold.items()
        }
        p = balanced.with_overrides(name=f"balanced@shift={shift:+g}", answer_threshold=thresholds)
        family = "balanced_answer_threshold_shift"
        rows.append(_sweep_row(family, shift, evaluate_preset(suite, p, policy)))
    return rows


def build_results(suite: Suite, policy: ActionPolicy) -> dict:
    presets = {name: evaluate_preset(suite, name, policy) for name in policy.presets}
    return {
        "policy_version": policy.version,
        "suite": {
            "path": Path(suite.path).name,
            "suite_version": suite.version,
            "sha256": suite.sha256,
            "scenarios": len(suite.scenarios),
            "memories": len(suite.memories),
        },
        "action_order": list(ACTION_ORDER),
        "presets": presets,
        "sweep": sweep(suite, policy),
    }


def expected_record(results: dict) -> dict:
    """What the tests assert: per preset the figures and every memory's expected/actual action."""
    return {
        "policy_version": results["policy_version"],
        "suite_version": results["suite"]["suite_version"],
        "presets": {
            name: {
                **_figures(r),
                "actions": {
                    d["memory_id"]: {"expected": d["expected"], "actual": d["actual"]}
                    for d in r["decisions"]
                },
            }
            for name, r in results["presets"].items()
        },
    }


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_LIMITS = (
    (
        "Internal scenarios, deterministic logic, no retrieval noise, no language model in the "
        "loop: "
        "this shows the policy can be calibrated on these cases, not that it generalises."
    ),
    (
        "The suite and the policy were written by the same team (the suite first, in its own "
        "commit); "
        "the figures are in-sample."
    ),
    (
        "The suite has no low-risk settled item with weak evidence, so lowering the settled "
        "threshold "
        "cannot show false certainty here; the answer-threshold shift is where that side appears."
    ),
)


def render_markdown(results: dict) -> str:
    suite = results["suite"]
    lines = [
        "# Allowed-action policy: scenario-suite report",
        "",
        (
            f"Policy version `{results['policy_version']}`; suite `{suite['path']}` "
            f"(version {suite['suite_version']}, sha256 `{suite['sha256'][:12]}`): "
            f"{suite['scenarios']} scenarios, {suite['memories']} exposed memories."
        ),
        "",
        "Order of permissiveness: " + " > ".join(f"`{a}`" for a in ACTION_ORDER) + ". "
        "False certainty = an action strictly more permissive than expected; "
        "overblock = strictly less.",
        "",
        md.row("preset", "correct / total", "false certainty", "overblocks"),
        md.rule(4),
    ]
    for name, r in results["presets"].items():
        lines.append(
            md.row(
                f"`{name}`", f"{r['correct']} / {r['total']}", r["false_certainty"], r["overblocks"]
            )
        )
    lines += [
        "",
        "## Disagreements with the suite",
        "",
        (
            "The suite's expected actions were written before the policy and are not edited to "
            "match "
            "it; every disagreement is listed with the suite's rationale and the policy rules that "
            "bound the action."
        ),
    ]
    for name, r in results["presets"].items():
        bad = [d for d in r["decisions"] if d["outcome"] != "correct"]
        lines += ["", f"### `{name}` ({len(bad)})", ""]
        if not bad:
            lines.append("None.")
            continue
        lines.append(
            md.row("memory", "scenario", "expected", "policy", "kind", "binding rules", "rationale")
        )
        lines.append(md.rule(7))
        for d in bad:
            lines.append(
                md.row(
                    d["memory_id"],
                    d["scenario"],
                    f"`{d['expected']}`",
                    f"`{d['actual']}`",
                    d["outcome"].replace("_", " "),
                    ", ".join(d["binding"]),
                    d["rationale"],
                )
            )
    lines += [
        "",
        "## Trade-off surface",
        "",
        (
            "Two one-parameter families: the low-risk settled answer threshold of "
            "`balanced_risk_adjusted`, and a shift added to every `balanced` answer threshold "
            "(clipped to [0, 1]). See `tradeoff.png`."
        ),
        "",
        md.row(
            "family",
            "value",
            "correct / total",
            "false certainty",
            "overblocks",
            "false-certain ids",
        ),
        md.rule(6),
    ]
    for row in results["sweep"]:
        value = f"{row['value']:+g}" if row["family"].endswith("shift") else f"{row['value']:g}"
        lines.append(
            md.row(
                row["family"],
                value,
                f"{row['correct']} / {row['total']}",
                row["false_certainty"],
                row["overblocks"],
                ", ".join(row["false_certainty_ids"]) or "-",
            )
        )
    lines += ["", "## Limits", ""] + [f"- {text}" for text in _LIMITS]
    lines += ["", "Regenerate: `python -m memgate.commands.actions --out reports/actions`", ""]
    return "\n".join(lines)


def plot_tradeoff(results: dict, path: Path) -> None:
    """Three panels: presets and sweeps in the (overblocks, false certainty) plane, each sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    families = (
        (
            "balanced_answer_threshold_shift",
            "balanced: shift of every answer threshold",
            "tab:blue",
            "o",
        ),
        (
            "settled_low_risk_threshold",
            "balanced_risk_adjusted: low-risk settled threshold",
            "tab:green",
            "s",
        ),
    )
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    plane = axes[0]
    for family, label, color, marker in families:
        rows = [r for r in results["sweep"] if r["family"] == family]
        plane.plot(
            [r["overblocks"] for r in rows],
            [r["false_certainty"] for r in rows],
            color=color,
            marker=marker,
            alpha=0.5,
            label=label,
        )
    for i, (name, r) in enumerate(results["presets"].items()):
        plane.scatter([r["overblocks"]], [r["false_certainty"]], s=90, color="black", zorder=5)
        plane.annotate(
            name,
            (r["overblocks"], r["false_certainty"]),
            fontsize=8,
            xytext=(0, 10 + 12 * (i % 2)),
            textcoords="offset points",
            ha="center",
        )
    plane.set_xlabel("overblocks (strictly less permissive than expected)")
    plane.set_ylabel("false-certainty errors")
    plane.set_title(f"Presets (black) and sweeps, {results['policy_version']}")
    plane.legend(fontsize=7, loc="upper right")
    for (family, label, color, marker), ax in zip(families, axes[1:], strict=True):
        rows = [r for r in results["sweep"] if r["family"] == family]
        xs = [r["value"] for r in rows]
        ax.plot(
            xs,
            [r["false_certainty"] for r in rows],
            color="tab:red",
            marker=marker,
            label="false certainty",
        )
        ax.plot(
            xs,
            [r["overblocks"] for r in rows],
            color=color,
            marker=marker,
            linestyle="--",
            label="overblocks",
        )
        ax.set_xlabel(
            "shift added to answer thresholds"
            if family.endswith("shift")
            else "settled answer threshold"
        )
        ax.set_ylabel("errors on the suite")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(
    out: Union[str, Path],
    suite_path: Optional[Path] = None,
    policy_path: Optional[Path] = None,
    record: bool = False,
) -> dict:
    suite = load_suite(suite_path)
    policy = load_policy(policy_path)
    results = build_results(suite, policy)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(_dump(results), encoding="utf-8")
    (out / "report.md").write_text(render_markdown(results), encoding="utf-8")
    plot_tradeoff(results, out / "tradeoff.png")
    if record:
        EXPECTED_RESULTS_PATH.write_text(_dump(expected_record(results)), encoding="utf-8")
    return results


