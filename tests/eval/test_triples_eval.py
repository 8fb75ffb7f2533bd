"""The triples report's table (memgate.eval.triples_eval.write_triples_report)."""

from __future__ import annotations

from memgate.eval.triples_eval import write_triples_report


def test_the_triples_report_table_has_one_row_per_slice(tmp_path):
    def ci(v):
        return {"value": v, "ci": [None, None] if v is None else [v - 0.1, v + 0.1]}

    m = {"n": 12, "groups": 4, "pref_acc_gated": ci(0.75), "pref_acc_reference": ci(0.5),
         "diff_gated_minus_reference": ci(0.25)}
    metrics = {"triples": "t.jsonl", "checkpoint": "c", "n_boot": 100, "seed": 0, "overall": m,
               "by_category": {"b": {**m, "pref_acc_gated": ci(None)}},
               "suppression_auc": {"pairs": 12, "gate": 0.7, "one_minus_cos": 0.6}}
    write_triples_report(tmp_path / "report.md", metrics, None)
    lines = (tmp_path / "report.md").read_text(encoding="utf-8").splitlines()
    i = lines.index("| slice | triples | groups | pref acc (gated) | pref acc (reference) | gated - reference |")
    assert lines[i + 1:i + 4] == [
        "|---|---:|---:|---|---|---|",
        "| **all** | 12 | 4 | 0.750 [0.650, 0.850] | 0.500 [0.400, 0.600] | 0.250 [0.150, 0.350] |",
        "| b | 12 | 4 | — | 0.500 [0.400, 0.600] | 0.250 [0.150, 0.350] |"]
