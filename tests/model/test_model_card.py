"""The released model card is short, generated and cannot drift (issue 48 item 3): it is exactly what
``memgate card`` writes from the committed files, at most 200 lines, with every missed target of the
release and its figure, the guards and thresholds, the reproduce commands and the hashes; the full
config stays in config.json."""

from __future__ import annotations

import json

import pytest

from memgate.commands.card import card_text, realistic_lines, reproduced, targets_of
from memgate.contract.config import REPO_ROOT

RELEASE = REPO_ROOT / "checkpoints" / "memgate-minilm-l6"
REPORT = REPO_ROOT / "reports" / "memgate-minilm-l6"
MAX_CARD_LINES = 200


def test_the_released_card_is_what_the_generator_writes():
    committed = (RELEASE / "README.md").read_text(encoding="utf-8")
    assert committed == card_text(RELEASE, REPORT), (
        "checkpoints/memgate-minilm-l6/README.md differs from its generator: run `memgate card`")


def test_the_released_card_is_short_and_says_what_a_newcomer_needs():
    card = (RELEASE / "README.md").read_text(encoding="utf-8")
    export = json.loads((RELEASE / "config.json").read_text(encoding="utf-8"))["export"]
    assert len(card.splitlines()) <= MAX_CARD_LINES
    assert "```json" not in card  # the config stays in config.json
    for needed in ("## What it does", "## What it does not do", "## Guards and thresholds", "## Reproduce",
                   "make release", "make demo-check", export["data_hash"], export["config_hash"],
                   export["train_triples_hash"], f"git_dirty: {str(export['git_dirty']).lower()}"):
        assert needed in card, needed
    targets = json.loads((REPORT / "targets" / "targets.json").read_text(encoding="utf-8"))[0]
    assert targets_of([targets], export, json.loads((RELEASE / "headline.json").read_text())) is targets
    # every missed target of the release with its figure (memgate targets' rows), and the misses beside them
    for missed in ("natural_tool_drift/natural: AUC(1-S) - AUC(1-cos) > 0, CI excludes 0: **0.0071**",
                   "phrasing_cross_domain/matched: suppression AUC >= 0.6: **0.5631**",
                   "top5_inadmissible_tv cut vs global_dense >= 10 %: **0.0038**",
                   "exposure, sycophancy: relative top-3 cut >= 30 %, CI above 0: **+0.017**",
                   "Calendar (296 of 1,600 pairs): suppression AUC **0.493**",
                   "margin grows by >= 0.02 in 2 of 6", "the risky memory flagged in 0 of 6"):
        assert missed in card, missed
    # a release from a clean tree, or the card says why a dirty one does not matter (a clean clone's
    # verdict, from docs/reproducibility.md)
    assert export["git_dirty"] is False or "verdict **bit for bit**" in card


def test_a_stale_targets_record_never_describes_a_release():
    export = {"selection": {"step": 560}}
    headline = {"gate_activity": {"mask_std": 0.08}}
    same = {"selected_step": 560, "gate_activity": {"mask_std": 0.08}}
    assert targets_of([same], export, headline) is same
    assert targets_of([{**same, "selected_step": 490}], export, headline) is None
    assert targets_of([{**same, "gate_activity": {"mask_std": 0.05}}], export, headline) is None
    assert targets_of(None, export, headline) is None


def test_the_reproduction_record_must_be_about_these_weights():
    text = ("demo weights sha256    aaa\nrelease weights sha256 aaa\nverdict: bit for bit\n")
    assert reproduced(text, "aaa") == {"sha256": "aaa", "verdict": "bit for bit", "source": "docs/reproducibility.md"}
    assert reproduced(text, "bbb") is None  # a record of other weights
    assert reproduced(text.replace("demo weights sha256    aaa", "demo weights sha256    ccc"), "aaa") is None
    assert reproduced("nothing measured", "aaa") is None
    assert realistic_lines("x (criterion: all but one, 5): missed; gains +0.1\nother (criterion: 2): met\n") == [
        "realistic cases (`python examples/realistic_cases.py`): x (criterion: all but one, 5): missed; gains +0.1"]


def test_memgate_card_names_the_missing_checkpoint(tmp_path, capsys):
    from memgate.commands.card import main

    with pytest.raises(SystemExit) as exit_:
        main(["--checkpoint", str(tmp_path / "nowhere")])
    assert exit_.value.code == 2
    assert "--checkpoint: no config.json in" in capsys.readouterr().err
