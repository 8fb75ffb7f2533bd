"""The one markdown-table helper."""

from __future__ import annotations

from memgate.contract.markdown import row, rule, table


def test_rows_rules_and_tables():
    assert row("a", 1, None) == "| a | 1 | None |"
    assert rule(3) == "|---|---|---|"
    assert rule(["---", "---:"]) == "|---|---:|"
    assert table(["route", "auc"], [["`x`", "0.500"], ["`y`", "—"]]) == [
        "| route | auc |", "|---|---|", "| `x` | 0.500 |", "| `y` | — |"]
    assert table(["n", "v"], [], align=["---:", "---"]) == ["| n | v |", "|---:|---|"]
