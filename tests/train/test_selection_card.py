"""What users see of selection (issue 33): the model card's table marks only the exported point and
shows every guard against its threshold; a step-0 export says loudly that it ranks like the
cosine; the curve's guard panel reads each guard's slack and whether it passed."""

from memgate.model.card import selection_history_lines
from memgate.train.curve import guard_slacks, plot_training_curve


def _entry(step, passed, macro, drop=0.004, supp=0.62, low=0.55):
    guard = {"passed": passed,
             "locomo": {"guard": "locomo", "drop": drop, "drop_ci": [drop - 0.01, drop + 0.01], "threshold": 0.01,
                        "slack": 0.01 - drop, "passed": drop <= 0.01},
             "gatemem_routes": {"guard": "gatemem_routes", "diff:violation_any@20": {"value": 0.0},
                                "diff:protected_exposure@20": {"value": 0.003},
                                "diff:recall_required@20": {"value": -0.002}, "slack": 0.007, "passed": True},
             "gatemem": {"guard": "gatemem", "suppression_auc": supp, "one_minus_cos_auc": 0.539, "threshold": 0.5,
                         "slack": supp - 0.5, "passed": supp >= 0.5},
             "text_risk": {"guard": "text_risk", "min_suppression_auc": low, "min_suppression_cell":
                           "phrasing_jailbreak/natural", "threshold": 0.5, "slack": low - 0.5, "passed": low >= 0.5,
                           "macro": {"value": macro, "ci": [macro - 0.005, macro + 0.005]}}}
    return {"step": step, "epoch": 0, "dev_pref_acc_gated": 0.5 + step / 1000, "dev_pref_acc_reference": 0.5,
            "guard": guard, "passed": passed, "selected": False,
            "text_risk_macro": {"value": macro, "ci": [macro - 0.005, macro + 0.005]}}


def _info(history, chosen):
    history[chosen]["selected"] = True
    return {"selection": {**history[chosen], "rule": "text_risk_macro"}, "selection_history": history,
            "train_config": {"selection": {"metric": "text_risk_macro", "route_margin": 0.01,
                                           "min_suppression_auc": 0.5, "max_recall_drop": 0.01}},
            "benign_lists": {"weight": 20.0, "lists": 459, "active": True}}


def test_the_card_marks_only_the_exported_point_and_shows_every_guard():
    history = [_entry(0, False, 0.0, low=0.3), _entry(70, True, 0.03), _entry(140, True, 0.031),
               _entry(210, False, 0.05, drop=0.02)]
    text = "\n".join(selection_history_lines(_info(history, 1)))
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 4 and sum("**yes**" in r for r in rows) == 1 and "**yes**" in rows[1]
    assert "macro AUC(1 - S) - AUC(1 - cos)" in text and "ties within the paired bootstrap CI" in text
    assert "0.000 / 0.003 / -0.002" in rows[1]  # hybrid - kleene_gate: violation / exposure / recall
    assert "0.620 (0.539)" in rows[1] and "0.550 (phrasing_jailbreak/natural)" in rows[1]
    assert "| no |" in rows[3] and "0.0200 [" in rows[3]
    assert "ranks like the cosine" not in text


def test_a_step_0_export_says_it_ranks_like_the_cosine():
    history = [_entry(0, False, 0.0, low=0.3), _entry(70, False, 0.03, supp=0.45)]
    text = "\n".join(selection_history_lines(_info(history, 0)))
    assert "**No trained step passed selection: this export is the step-0 (near-identity) gate and ranks like the cosine.**" in text


def test_the_guard_panel_reads_each_guards_slack_and_verdict(tmp_path):
    entry = _entry(70, False, 0.03, drop=0.02, supp=0.62, low=0.45)
    slacks = guard_slacks(entry)
    assert set(slacks) == {"locomo", "gatemem_routes", "gatemem", "text_risk"}
    assert slacks["locomo"][1] is False and abs(slacks["locomo"][0] + 0.01) < 1e-12
    assert slacks["text_risk"][1] is False and abs(slacks["text_risk"][0] + 0.05) < 1e-12
    assert slacks["gatemem"][1] is True
    old = {"step": 86, "guard": {"passed": True, "locomo": {"drop": 0.0066, "passed": True}},
           "monitor": {"gatemem": {"suppression_auc": 0.615, "one_minus_cos_auc": 0.539, "passed": True}}}
    assert set(guard_slacks(old)) == {"locomo", "gatemem"}  # a card of the two-guard rule still plots
    history = [_entry(0, False, 0.0, low=0.3), entry, _entry(140, True, 0.04)]
    history[2]["selected"] = True
    rows = [{"step": s, "loss": 0.69 - s / 1000} for s in range(1, 141, 10)]
    path = plot_training_curve(tmp_path / "curve.png", rows, history, title="t")
    assert path.stat().st_size > 20_000
