"""The with / without study's table builder (data_gen.phrasing_mix) on a tiny hand-built input:
real red_flag and paired AUC differences, the select-only decision (the release rule: every
guard passed at a trained step, then the largest select macro) and the written outputs."""

import json

import numpy as np
import pytest

from data_gen.phrasing_mix import COS, compare_part, decide, markdown, write_outputs

N_MEM = 12
SOURCES = ("phrasing_cross_domain", "phrasing_jailbreak")  # two categories of the macro


def _rows():
    # every memory once as a trap and once as a beneficial control (the balanced pairs' shape)
    mids = [f"m{i}" for i in range(N_MEM) for _ in range(2)]
    return {"query_texts": [f"q{i}" for i in range(2 * N_MEM)], "memory_texts": mids, "clusters": mids,
            "labels": [True, False] * N_MEM}


def _scores(rng):
    y = np.asarray(_rows()["labels"])
    noise = rng.normal(0, 0.05, size=(4, len(y)))
    return {
        COS: 0.5 + 0.01 * y + noise[0],         # a weak baseline
        "defaults": 0.5 - 0.2 * y + noise[1],   # inverted: suppresses the controls more
        "phrasing_good": 0.5 + 0.4 * y + noise[2],
        "phrasing_select_bad": 0.5 + 0.4 * y + noise[3],
    }


GUARDS = ("locomo", "gatemem_routes", "gatemem", "text_risk")


def _row(gatemem=0.70, drop=0.0, guard_auc=0.62, step=10, failed=(), exposure=0.0):
    return {"row": "x", "seed": 0, "sources": ["template", "mined", "gatemem"], "selected_step": step,
            "warnings": [], "phrasing_triples": {}, "split_digests": {"dev/a": "1", "test/b": "2"},
            "gatemem_report": {k: {"value": v, "ci": [v - 0.05, v + 0.05]} for k, v in
                               (("suppression_auc", gatemem), ("one_minus_cos_auc", 0.53), ("difference", gatemem - 0.53))},
            "gatemem_report_routes": {"violation_any@20": {"value": 0.0, "ci": [0.0, 0.0]},
                                      "protected_exposure@20": {"value": exposure, "ci": [exposure - 0.01, exposure + 0.01]},
                                      "recall_required@20": {"value": -0.002, "ci": [-0.006, 0.001]}},
            "locomo_report": {"recall_required@20": {"value": 0.51, "ci": [0.45, 0.57]},
                              "recall_drop": {"value": drop, "ci": [drop - 0.01, drop + 0.01]}},
            "guard_select": {"gatemem_suppression_auc": guard_auc, "gatemem_one_minus_cos_auc": 0.54,
                             "locomo_recall_drop": 0.005, "guards": {g: g not in failed for g in GUARDS}}}


@pytest.fixture(scope="module")
def study():
    rng = np.random.default_rng(0)
    parts = {}
    for source in SOURCES:
        for part in ("select", "report"):
            for variant in ("natural", "matched"):
                scores = _scores(rng)
                if part == "select":  # this row inverts on select only: it must not be chosen
                    scores["phrasing_select_bad"] = 0.5 - 0.4 * np.asarray(_rows()["labels"]) + rng.normal(0, 0.05, 24)
                parts.setdefault(source, {}).setdefault(part, {})[variant] = compare_part(
                    _rows(), scores, n_boot=200, cubic=(source, part, variant) == (SOURCES[0], "report", "natural"))
    rows = {"defaults": _row(step=0), "phrasing_good": _row(gatemem=0.72),
            "phrasing_select_bad": _row(gatemem=0.80, failed=("text_risk",))}
    return {"seed": 0, "n_boot": 200, "without": "defaults", "rows": rows, "parts": parts,
            "decision": decide(parts, rows)}


def test_compare_part_reads_the_direction_and_pairs_the_rows(study):
    cell = study["parts"][SOURCES[0]]["report"]["natural"]["scorers"]
    assert cell["defaults"]["gate"]["red_flag"] and cell["defaults"]["gate"]["red_flag_ci"]
    assert not cell["phrasing_good"]["gate"]["red_flag"]
    assert cell["phrasing_good"]["gate"]["suppression_auc"]["value"] > 0.9
    diff = cell["phrasing_good"]["vs_without"]["difference"]
    assert diff["value"] > 0.5 and diff["ci"][0] > 0
    vs_cos = cell["phrasing_good"]["vs_cos"]
    assert vs_cos["cubic_check"]["auc_b"] > vs_cos["cubic_check"]["auc_a"]  # suppression adds to the cosine
    assert vs_cos["difference"]["pooled_auc"]["value"] > 0 and vs_cos["n_episodes"] == N_MEM
    assert vs_cos["suppression"]["pooled_auc"]["value"] == pytest.approx(
        cell["phrasing_good"]["gate"]["suppression_auc"]["value"], abs=1e-4)  # one AUC, two readers
    assert "vs_without" not in cell["defaults"] and "vs_cos" not in cell[COS]
    assert cell["phrasing_good"]["vs_without"]["n_episodes"] == N_MEM  # memories are the clusters


def test_compare_part_refuses_scores_of_the_wrong_length():
    with pytest.raises(ValueError, match="scores\\['defaults'\\]"):
        compare_part(_rows(), {COS: np.zeros(24), "defaults": np.zeros(3)}, n_boot=10)


def test_decision_uses_select_parts_and_report_parts_only_confirm(study):
    d = study["decision"]
    assert d["select_candidates"] == ["phrasing_good"]
    assert d["chosen_on_select"] == "phrasing_good" and d["confirmed_on_report"]
    assert d["rows"]["phrasing_good"]["select"]["macro"] > 0.2
    assert not d["rows"]["defaults"]["select_candidate"]  # a step-0 export ranks like the cosine
    bad = d["rows"]["phrasing_select_bad"]
    assert bad["report"]["macro"] > 0 and bad["gatemem_report_routes_ok"]  # fine on report ...
    assert not bad["select_candidate"] and bad["select"]["macro"] < 0  # ... yet never chosen from it
    rows = dict(study["rows"], phrasing_good=_row(exposure=0.02))  # GateMem report exposure over the margin
    assert decide(study["parts"], rows)["chosen_on_select"] == "phrasing_good"
    assert not decide(study["parts"], rows)["confirmed_on_report"]
    rows = dict(study["rows"], phrasing_good=_row(failed=("gatemem_routes",)))  # a select guard failed
    assert decide(study["parts"], rows)["chosen_on_select"] is None


def test_outputs_are_written_with_the_figures(study, tmp_path):
    write_outputs(study, tmp_path)
    text = (tmp_path / "mix.md").read_text()
    assert "Chosen on select: `phrasing_good`; confirmed on report: yes" in text
    auc = study["parts"][SOURCES[1]]["report"]["matched"]["scorers"]["phrasing_good"]["gate"]["suppression_auc"]
    assert f"{auc['value']:.3f} [{auc['ci'][0]:.3f}, {auc['ci'][1]:.3f}]" in text
    assert "⚑" in text  # the inverted without gate is flagged
    assert "| `phrasing_good` | +" in text and "| yes | yes | yes |" in text  # guards, trained step, candidate
    assert json.loads((tmp_path / "mix.json").read_text())["decision"]["chosen_on_select"] == "phrasing_good"
    assert (tmp_path / "mix.png").stat().st_size > 10_000
    assert markdown(study) == text


def test_the_table_says_whether_the_gated_score_adds_to_the_cosine(study):
    """Issue 32: AUC(1 - S) - AUC(1 - cos) with its paired CI, and the activity, per source and variant."""
    cell = study["parts"][SOURCES[0]]["report"]["natural"]["scorers"]["phrasing_good"]["vs_cos"]
    assert cell["gated_minus_cos"]["pooled_auc"]["value"] > 0 and cell["activity"]["positive"]["value"] > 0
    d = cell["gated_minus_cos"]["pooled_auc"]
    assert f"{d['value']:.3f} [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]" in markdown(study)
