"""The gate's default-on rule reads only plausible figures (issue 34): a model card whose
``headline.json`` LoCoMo drop is -5 turned the gate on. Each row edits one figure of the released
card (config.json and headline.json copied) and the gate must stay off, naming the figure."""

from __future__ import annotations

import copy
import json
import math

import pytest

from memgate.integrations.card_figures import check_figure, implausible_figures
from memgate.integrations.gate_default import gate_default, released_gate_dir

RELEASED = released_gate_dir()
CONFIG = json.loads((RELEASED / "config.json").read_text())
HEADLINE = json.loads((RELEASED / "headline.json").read_text())


def card(tmp_path, edit) -> object:
    config, headline = copy.deepcopy(CONFIG), copy.deepcopy(HEADLINE)
    edit(config, headline)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "headline.json").write_text(json.dumps(headline))
    return gate_default(tmp_path)


def _set(path: str, value):
    """An edit setting ``file:dotted.path`` (``config`` or ``headline``) to ``value``."""
    where, _, dotted = path.partition(":")

    def edit(config, headline):
        node = config if where == "config" else headline
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return edit


GUARD = "export.selection.guard"
ROWS = [
    ("headline:locomo_report.drop", -5, "locomo_report.drop = -5"),
    ("headline:locomo_report.drop", math.nan, "locomo_report.drop = nan"),
    ("headline:locomo_report.drop", "-0.001", "locomo_report.drop = '-0.001'"),
    ("headline:locomo_report.ci", [0.01, -0.01], "locomo_report.ci"),
    ("headline:locomo_report.ci", [-3.0, 0.0], "locomo_report.ci"),
    (f"config:{GUARD}.locomo.drop", 3.0, "guard.locomo.drop = 3.0"),
    (f"config:{GUARD}.locomo.recall_required@20_namespace_dense", 1.5, "recall_required@20_namespace_dense = 1.5"),
    (f"config:{GUARD}.gatemem.suppression_auc", 1.7, "guard.gatemem.suppression_auc = 1.7"),
    (f"config:{GUARD}.gatemem.rows", -3, "guard.gatemem.rows = -3"),
    (f"config:{GUARD}.gatemem.passed", "yes", "guard.gatemem.passed = 'yes'"),
    (f"config:{GUARD}.locomo.drop_ci", [0.0], "guard.locomo.drop_ci"),
    # a guard the rule does not require is checked too ("whatever guards the card records")
    (f"config:{GUARD}.text_risk", {"source": "text_risk", "passed": True, "auc": -0.2}, "guard.text_risk.auc = -0.2"),
    ("config:export.selection.guards", [{"source": "extra", "passed": True, "drop": math.inf}], "guards[0].drop = inf"),
    ("config:export.locomo_report.drop", -5, "export.locomo_report.drop = -5"),
]


def test_the_released_card_is_plausible_and_switches_the_gate_on():
    assert implausible_figures(CONFIG, HEADLINE) == []
    decision = gate_default(RELEASED)  # the text-risk release records all four guards passed
    assert decision.use is True, decision.reason


@pytest.mark.parametrize("path, value, named", ROWS, ids=[f"{p.split('.')[-1]}={v!r}" for p, v, _ in ROWS])
def test_an_implausible_figure_keeps_the_gate_off_naming_it(tmp_path, path, value, named):
    decision = card(tmp_path, _set(path, value))
    assert decision.use is False, decision.reason
    assert "implausible figure" in decision.reason and named in decision.reason, decision.reason


@pytest.mark.parametrize("key, value", [("drop", -1.0), ("drop", 1), ("suppression_auc", 0.0), ("ci", [-1, 1]),
                                        ("recall_required@20_x", 1.0), ("rows", 0), ("note", "free text"),
                                        ("threshold", 12.5)])
def test_figures_at_the_edges_of_their_range_are_plausible(key, value):
    assert check_figure(key, value) is None
