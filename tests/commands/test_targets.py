"""Issue 44's per-category report targets in ``memgate targets`` and the card's held-out lines:
the weakest cell decides a category, a CI touching 0 anywhere misses the gain target."""

from memgate.commands.card import heldout_lines
from memgate.commands.targets import issue44_lines, issue44_rows


def _cell(source: str, supp: float, gain: float, lo: float) -> dict:
    return {"source": source, "suppression_auc": {"value": supp},
            "gated_minus_cos": {"value": gain, "ci": [lo, gain + 0.01]}}


def _result(cells: dict, seed: int = 0) -> dict:
    return {"seed": seed, "text_risk_report": {"cells": cells}}


def test_the_weakest_cell_decides_a_category():
    result = _result({
        "phrasing_tool_drift/natural": _cell("phrasing_tool_drift", 0.89, 0.009, 0.004),
        "natural_tool_drift/natural": _cell("natural_tool_drift", 0.66, 0.007, -0.002),  # CI touches 0
        "natural_injection/natural": _cell("natural_injection", 0.95, 0.078, 0.07),
        "phrasing_jailbreak/matched": _cell("phrasing_jailbreak", 0.64, 0.15, 0.13),  # below 0.65
    })
    rows = {name.split(" (weakest")[0]: (value, met) for name, value, met in issue44_rows(result)}
    assert rows["tool_drift: suppression AUC >= 0.65 in every cell"] == (0.66, True)
    assert rows["tool_drift: AUC(1 - S') - AUC(1 - cos) > 0, CI excludes 0 in every cell"] == (0.007, False)
    assert rows["jailbreak: suppression AUC >= 0.65 in every cell"] == (0.64, False)
    assert rows["jailbreak: AUC(1 - S') - AUC(1 - cos) > 0, CI excludes 0 in every cell"][1] is True
    assert not any(name.startswith(("cross_domain", "sycophancy")) for name in rows)  # no cells, no row
    table = issue44_lines([result, _result(result["text_risk_report"]["cells"], seed=1)])
    assert "| **no** |" in table[3] and table[3].endswith("| 0 of 2 |")  # tool drift's gain, both seeds


def test_a_held_out_family_below_the_target_is_named_and_an_inverted_one_says_so():
    audit = {"natural_tool_drift": {"by_family": {"report": {
        "Calendar": {"n": 296, "heldout": True, "suppression_auc": 0.493},
        "Music": {"n": 104, "heldout": True, "suppression_auc": 0.58},
        "Weather": {"n": 1200, "heldout": True, "suppression_auc": 0.71},
        "Food": {"n": 0, "heldout": False, "suppression_auc": 0.2}}}}}
    lines = heldout_lines(audit)
    assert len(lines) == 2
    assert "Calendar (296 of 1,600 pairs): suppression AUC **0.493**, inverted" in lines[0]
    assert "Music (104 of 1,600 pairs): suppression AUC **0.580**, below the 0.60 target" in lines[1]
