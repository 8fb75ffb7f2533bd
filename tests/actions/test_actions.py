"""Allowed-action policy (memgate.actions) against the scenario suite and its invariants."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

from memgate.actions import (
    ACTION_ORDER,
    EPISTEMIC_STATUSES,
    PRESETS,
    RISK_LEVELS,
    SOURCE_TYPES,
    ActionInput,
    ActionPolicy,
    ActionPolicyError,
    ActionQuery,
    Conflict,
    InadmissibleMemoryError,
    compare,
    decide_action,
    decide_actions,
    is_more_permissive,
    least_permissive,
    load_policy,
    permissiveness,
    suite,
)
from memgate.actions import report as action_report
from memgate.actions.policy import DEFAULT_POLICY_PATH
from memgate.commands import actions as actions_command

SUITE = suite.load_suite()
RECORDED = json.loads(suite.EXPECTED_RESULTS_PATH.read_text(encoding="utf-8"))
POLICY = load_policy()


def _memory(**overrides) -> ActionInput:
    base = {
        "memory_id": "m",
        "lifecycle_state": "current",
        "epistemic_status": "verified",
        "source_type": "source_document",
        "risk": "low",
        "evidence_strength": 0.95,
    }
    base.update(overrides)
    return ActionInput(**base)


@pytest.fixture(scope="module")
def computed() -> dict:
    return {preset: action_report.evaluate_preset(SUITE, preset, POLICY) for preset in PRESETS}


# --------------------------------------------------------------------------- the suite


def test_suite_size_and_annotations():
    assert len(SUITE.scenarios) >= 12
    assert len(SUITE.memories) >= 35
    for _, memory in SUITE.memories:
        assert memory["expected_action"] in ACTION_ORDER
        assert memory["rationale"].strip() and "\n" not in memory["rationale"]


def test_suite_covers_the_required_kinds():
    memories = [m for _, m in SUITE.memories]
    kinds = {
        "correction": any(m["source_type"] == "correction" for m in memories),
        "unresolved question": any(m["epistemic_status"] == "unresolved" for m in memories),
        "stale plan": any(
            m["source_type"] == "plan" and m["lifecycle_state"] in ("stale", "superseded")
            for m in memories
        ),
        "current source file": any(
            m["source_type"] == "source_document" and m["lifecycle_state"] == "current"
            for m in memories
        ),
        "past preference": any(
            m["source_type"] == "preference" and m["lifecycle_state"] in ("stale", "superseded")
            for m in memories
        ),
        "draft marked final": any(
            m["source_type"] == "draft" and m["status"] == "final" for m in memories
        ),
        "contested claim": any(m["epistemic_status"] == "contested" for m in memories),
        "ready but not next": any(
            m["status"] == "ready" and m["priority"] != "next" for m in memories
        ),
        "low-risk settled": any(
            m["risk"] == "low" and m["epistemic_status"] == "verified" for m in memories
        ),
    }
    assert all(kinds.values()), [k for k, v in kinds.items() if not v]


def test_recorded_expectations_match_the_suite():
    """Editing an expected action in the suite must be a deliberate, re-recorded change."""
    assert RECORDED["suite_version"] == SUITE.version
    for preset in PRESETS:
        recorded = RECORDED["presets"][preset]["actions"]
        assert set(recorded) == {m["id"] for _, m in SUITE.memories}
        for _, memory in SUITE.memories:
            assert recorded[memory["id"]]["expected"] == memory["expected_action"], memory["id"]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("memory_id", [m["id"] for _, m in SUITE.memories])
def test_every_suite_action_matches_the_recorded_figures(computed, preset, memory_id):
    row = next(d for d in computed[preset]["decisions"] if d["memory_id"] == memory_id)
    assert row["actual"] == RECORDED["presets"][preset]["actions"][memory_id]["actual"], (
        f"{preset}/{memory_id}: policy now says {row['actual']!r}; "
        "re-record only with a version bump"
    )
    assert row["policy_version"] == POLICY.version


@pytest.mark.parametrize("preset", PRESETS)
def test_per_preset_figures_match_the_record(computed, preset):
    figures = {
        k: computed[preset][k] for k in ("correct", "total", "false_certainty", "overblocks")
    }
    recorded = {k: RECORDED["presets"][preset][k] for k in figures}
    assert figures == recorded
    assert (
        figures["correct"] + figures["false_certainty"] + figures["overblocks"] == figures["total"]
    )
    assert RECORDED["policy_version"] == POLICY.version


@pytest.mark.parametrize("preset", ["strict", "balanced"])
def test_zero_false_certainty_for_strict_and_balanced(computed, preset):
    bad = [
        d["memory_id"] for d in computed[preset]["decisions"] if d["outcome"] == "false_certainty"
    ]
    assert bad == []


def test_presets_are_ordered_by_permissiveness_on_the_suite(computed):
    """strict is never more permissive than balanced, which is never more than risk-adjusted."""
    by = {p: {d["memory_id"]: d["actual"] for d in computed[p]["decisions"]} for p in PRESETS}
    for memory_id in by["strict"]:
        assert not is_more_permissive(by["strict"][memory_id], by["balanced"][memory_id]), memory_id
        assert not is_more_permissive(
            by["balanced"][memory_id], by["balanced_risk_adjusted"][memory_id]
        ), memory_id


# --------------------------------------------------------------------------- order


def test_action_order_and_permissiveness():
    assert ACTION_ORDER == (
        "answer",
        "answer_context",
        "warn",
        "verify_first",
        "archive_only",
        "block",
    )
    for i, a in enumerate(ACTION_ORDER):
        for j, b in enumerate(ACTION_ORDER):
            assert is_more_permissive(a, b) == (i < j)
    assert [permissiveness(a) for a in ACTION_ORDER] == [5, 4, 3, 2, 1, 0]
    assert least_permissive(["answer", "warn", "answer_context"]) == "warn"
    assert least_permissive([]) == "answer"
    assert compare("answer", "warn") == "false_certainty"
    assert compare("block", "verify_first") == "overblock"
    assert compare("warn", "warn") == "correct"
    with pytest.raises(ActionPolicyError, match="action"):
        is_more_permissive("allow", "block")


# --------------------------------------------------------------------------- invariants


def _grid(epistemics=EPISTEMIC_STATUSES):
    """Every exposed (memory, query) combination over a coarse grid of attributes."""
    for (
        state,
        intent,
        epistemic,
        source,
        risk,
        strength,
        verify,
        asks,
        priority,
    ) in itertools.product(
        ("current", "stale", "superseded", "unknown"),
        ("current_state", "history", "unknown"),
        epistemics,
        SOURCE_TYPES + (None,),
        RISK_LEVELS,
        (0.3, 0.75, 1.0),
        (False, True),
        ("fact", "priority", "action"),
        ("next", None),
    ):
        if state in ("stale", "superseded") and intent == "current_state":
            continue  # inadmissible: excluded before this step
        memory = _memory(
            lifecycle_state=state,
            epistemic_status=epistemic,
            source_type=source,
            risk=risk,
            evidence_strength=strength,
            verification_required=verify,
            priority=priority,
            forbids=("do_it",) if source == "correction" else (),
        )
        query = ActionQuery(
            intent=intent, asks=asks, proposed_action="do_it" if asks == "action" else None
        )
        yield memory, query


@pytest.mark.parametrize("preset", PRESETS)
def test_unresolved_and_contested_never_answer(preset):
    count = 0
    for memory, query in _grid(("unresolved", "contested")):
        decision = decide_action(memory, query, preset)
        assert decision.action != "answer", (memory, query)
        count += 1
    assert count > 1000
    for _, memory in SUITE.memories:
        if memory["epistemic_status"] in ("unresolved", "contested"):
            assert memory["expected_action"] != "answer", memory["id"]


@pytest.mark.parametrize("preset", PRESETS)
def test_certainty_never_exceeds_evidence(preset):
    """`answer` needs verified/summary status, no verification requirement, enough evidence."""
    chosen = POLICY.preset(preset)
    floor = min([*chosen.answer_threshold.values(), chosen.settled_low_risk_threshold or 1.0])
    for memory, query in _grid(("verified", "summary", "inference")):
        action = decide_action(memory, query, preset).action
        if action == "answer":
            assert memory.epistemic_status in ("verified", "summary")
            assert not memory.verification_required
            assert memory.evidence_strength >= floor
            assert memory.lifecycle_state == "current" or query.intent == "history"


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize(
    "state,intent",
    [
        ("current", "current_state"),
        ("unknown", "current_state"),
        ("stale", "unknown"),
        ("superseded", "history"),
    ],
)
@pytest.mark.parametrize("risk", RISK_LEVELS)
def test_correction_forbidding_the_proposed_action_blocks(preset, state, intent, risk):
    correction = _memory(
        source_type="correction",
        lifecycle_state=state,
        risk=risk,
        evidence_strength=1.0,
        forbids=("deploy_on_friday",),
    )
    query = ActionQuery(intent=intent, asks="action", proposed_action="deploy_on_friday")
    decision = decide_action(correction, query, preset)
    assert decision.action == "block"
    assert "forbids_proposed_action" in decision.binding
    other = ActionQuery(intent=intent, asks="action", proposed_action="deploy_on_monday")
    assert decide_action(correction, other, preset).action != "block"


def test_suite_blocks_are_corrections_forbidding_the_action():
    for scenario, memory in SUITE.memories:
        if memory["expected_action"] == "block":
            assert scenario.query["proposed_action"] in memory["forbids"]


def test_negative_evidence_beats_strong_positive_evidence():
    strong = {
        "epistemic_status": "verified",
        "source_type": "source_document",
        "evidence_strength": 1.0,
        "risk": "low",
    }
    q = ActionQuery(intent="current_state")
    assert (
        decide_action(
            _memory(**strong, verification_required=True), q, "balanced_risk_adjusted"
        ).action
        == "verify_first"
    )
    assert (
        decide_action(
            _memory(**{**strong, "epistemic_status": "contested"}), q, "balanced_risk_adjusted"
        ).action
        == "warn"
    )
    assert (
        decide_action(
            _memory(**{**strong, "risk": "high", "epistemic_status": "unresolved"}), q, "balanced"
        ).action
        == "verify_first"
    )
    peer = _memory(**strong, conflicts=(Conflict("other", "source_document"),))
    assert decide_action(peer, q, "balanced").action == "verify_first"
    outranked = _memory(
        **{**strong, "source_type": "summary"}, conflicts=(Conflict("other", "source_document"),)
    )
    assert decide_action(outranked, q, "balanced").action == "warn"
    outranks = _memory(**strong, conflicts=(Conflict("other", "summary"),))
    assert decide_action(outranks, q, "balanced").action == "answer"


def test_archive_answers_history_without_becoming_current_truth():
    old = _memory(
        lifecycle_state="superseded", source_type="plan", evidence_strength=0.95, risk="medium"
    )
    assert decide_action(old, ActionQuery(intent="history"), "strict").action == "answer"
    assert (
        decide_action(old, ActionQuery(intent="unknown"), "balanced_risk_adjusted").action
        == "archive_only"
    )
    with pytest.raises(InadmissibleMemoryError, match="excluded"):
        decide_action(old, ActionQuery(intent="current_state"), "balanced")
    with pytest.raises(InadmissibleMemoryError, match="forgotten"):
        _memory(lifecycle_state="forgotten")


def test_status_is_not_priority():
    ready_later = _memory(
        source_type="plan", status="ready", priority="later", evidence_strength=0.9
    )
    next_item = _memory(
        source_type="plan", status="in_progress", priority="next", evidence_strength=0.9
    )
    what_next = ActionQuery(intent="current_state", asks="priority")
    what_ready = ActionQuery(intent="current_state", asks="status")
    for preset in PRESETS:
        assert decide_action(ready_later, what_next, preset).action == "answer_context"
        assert decide_action(next_item, what_next, preset).action == "answer"
        assert decide_action(ready_later, what_ready, preset).action == "answer"


def test_draft_marked_final_is_still_a_draft():
    for risk, expected in (("low", "warn"), ("high", "verify_first")):
        draft = _memory(source_type="draft", status="final", evidence_strength=1.0, risk=risk)
        decision = decide_action(
            draft, ActionQuery(intent="current_state"), "balanced_risk_adjusted"
        )
        assert decision.action == expected
        assert "source_draft" in decision.binding


def test_missing_metadata_is_never_imputed_as_benign():
    bare = ActionInput(
        memory_id="m", lifecycle_state="current", epistemic_status=None, source_type=None
    )
    decision = decide_action(bare, ActionQuery(intent="current_state"), "balanced_risk_adjusted")
    assert decision.action == "verify_first"
    codes = [r.code for r in decision.reasons]
    assert {"risk_missing", "epistemic_missing", "evidence_missing"} <= set(codes)


def test_risk_adjusted_only_relaxes_low_risk_settled_items():
    settled = _memory(source_type="preference", evidence_strength=0.72, risk="low")
    q = ActionQuery(intent="current_state")
    assert decide_action(settled, q, "balanced").action == "answer_context"
    assert decide_action(settled, q, "balanced_risk_adjusted").action == "answer"
    for unsettled in (
        _memory(source_type="preference", evidence_strength=0.72, risk="medium"),
        _memory(source_type="draft", evidence_strength=0.72, risk="low"),
        _memory(
            source_type="summary", evidence_strength=0.72, risk="low", lifecycle_state="unknown"
        ),
        _memory(
            source_type="summary",
            evidence_strength=0.72,
            risk="low",
            conflicts=(Conflict("x", "summary"),),
        ),
    ):
        assert decide_action(unsettled, q, "balanced_risk_adjusted").action != "answer"


# --------------------------------------------------------------------------- versioning and purity


def test_version_string_in_results_and_audit_entries(tmp_path):
    decision = decide_action(_memory(), ActionQuery(), "strict")
    assert decision.policy_version == POLICY.version == "actions-v3"
    assert decision.to_dict()["policy_version"] == "actions-v3"
    assert decision.to_dict()["preset"] == "strict"
    custom = yaml.safe_load(DEFAULT_POLICY_PATH.read_text(encoding="utf-8"))
    custom["version"] = "actions-test"
    policy = ActionPolicy.from_dict(custom)
    assert (
        decide_action(_memory(), ActionQuery(), "balanced", policy).policy_version == "actions-test"
    )
    assert actions_command.main(["--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["policy_version"] == "actions-v3"
    assert all(
        d["policy_version"] == "actions-v3"
        for r in results["presets"].values()
        for d in r["decisions"]
    )
    assert "actions-v3" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "tradeoff.png").stat().st_size > 0


def test_decisions_are_pure_and_results_reproducible():
    memory = _memory(risk="medium", evidence_strength=0.8)
    query = ActionQuery(intent="current_state")
    first, second = (
        decide_action(memory, query, "balanced"),
        decide_action(memory, query, "balanced"),
    )
    assert first == second
    with pytest.raises(AttributeError):
        memory.risk = "low"  # frozen: actions are computed, never written back
    assert not hasattr(memory, "action")
    a = action_report._dump(action_report.build_results(SUITE, POLICY))
    b = action_report._dump(action_report.build_results(SUITE, POLICY))
    assert a == b


def test_decide_actions_resolves_conflicts_among_exposed_memories():
    memories = [
        {
            "id": "doc",
            "lifecycle_state": "current",
            "epistemic_status": "verified",
            "source_type": "source_document",
            "risk": "medium",
            "evidence_strength": 0.95,
            "conflicts_with": ["sum", "gone"],
        },
        {
            "id": "sum",
            "lifecycle_state": "current",
            "epistemic_status": "summary",
            "source_type": "summary",
            "risk": "medium",
            "evidence_strength": 0.95,
            "conflicts_with": ["doc"],
        },
    ]
    doc, summ = decide_actions(memories, {"intent": "current_state"}, "balanced")
    assert (doc.action, summ.action) == ("answer", "warn")
    with pytest.raises(ActionPolicyError, match="duplicate"):
        decide_actions(memories + [memories[0]], {"intent": "current_state"})


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"epistemic_status": "probably"}, "epistemic_status"),
        ({"source_type": "email"}, "source_type"),
        ({"lifecycle_state": "archived"}, "lifecycle_state"),
        ({"risk": "extreme"}, "risk"),
        ({"status": "shipped"}, "status"),
        ({"priority": 1}, "priority"),
        ({"evidence_strength": 1.5}, "evidence_strength"),
        ({"evidence_strength": True}, "evidence_strength"),
        ({"verification_required": 1}, "verification_required"),
        ({"forbids": "do_it"}, "forbids"),
        ({"conflicts": ("other",)}, "conflicts"),
    ],
)
def test_invalid_memory_fields_are_named(overrides, field):
    with pytest.raises(ActionPolicyError, match=field):
        _memory(**overrides)


def test_invalid_query_preset_and_policy_are_named():
    with pytest.raises(ActionPolicyError, match="intent"):
        ActionQuery(intent="now")
    with pytest.raises(ActionPolicyError, match="proposed_action"):
        ActionQuery(asks="action")
    with pytest.raises(ActionPolicyError, match="asks"):
        ActionQuery(asks="why")
    with pytest.raises(ActionPolicyError, match="preset"):
        decide_action(_memory(), ActionQuery(), "lenient")
    with pytest.raises(ActionPolicyError, match="unknown field"):
        ActionInput.from_dict({"id": "m", "lifecycle_state": "current", "epistemic": "verified"})
    raw = yaml.safe_load(DEFAULT_POLICY_PATH.read_text(encoding="utf-8"))
    bad = json.loads(json.dumps(raw))
    bad["rules"]["verification_required"] = "maybe"
    with pytest.raises(ActionPolicyError, match="rules.verification_required"):
        ActionPolicy.from_dict(bad)
    bad = json.loads(json.dumps(raw))
    del bad["presets"]["strict"]["inference"]
    with pytest.raises(ActionPolicyError, match="strict.*inference"):
        ActionPolicy.from_dict(bad)
    bad = json.loads(json.dumps(raw))
    bad["presets"]["balanced"]["answer_threshold"]["low"] = 2
    with pytest.raises(ActionPolicyError, match="answer_threshold.low"):
        ActionPolicy.from_dict(bad)


def test_bundled_policy_has_the_three_presets():
    # plus agent_default (memgate.Memory's preset; tests/integrations/test_memory.py)
    assert tuple(POLICY.presets) == PRESETS + ("agent_default",)


def test_missing_risk_is_high_unless_the_preset_says_otherwise():
    untagged = {"memory_id": "m", "lifecycle_state": "current"}
    for preset in PRESETS:
        assert POLICY.presets[preset].missing_risk == "high"
        assert decide_action(untagged, ActionQuery(intent="current_state"), preset).action == "verify_first"
    decision = decide_action(untagged, ActionQuery(intent="current_state"), "agent_default")
    assert decision.action == "warn"
    assert any(r.code == "risk_missing" and "treated as low" in r.detail for r in decision.reasons)
    # a stated risk wins over the preset's default
    assert decide_action(untagged, ActionQuery(intent="current_state", risk="high"),
                         "agent_default").action == "verify_first"
    # agent_default is balanced with two differences: the missing risk and user_stated
    same = [k for k in POLICY.presets["balanced"].__dataclass_fields__
            if k not in ("name", "description", "missing_risk", "user_stated")]
    assert all(getattr(POLICY.presets["agent_default"], k) == getattr(POLICY.presets["balanced"], k)
               for k in same)
    bad = yaml.safe_load(DEFAULT_POLICY_PATH.read_text(encoding="utf-8"))
    bad["presets"]["balanced"]["missing_risk"] = "none"
    with pytest.raises(ActionPolicyError, match="missing_risk"):
        ActionPolicy.from_dict(bad)


def test_user_stated_self_facts_answer_in_agent_default_only():
    """A memory the user stated about themselves (provenance user_stated, no epistemic status or
    evidence strength: what memgate.Memory.add stores) answers at low risk in agent_default; the
    caps of every other rule still hold, and no other preset reads provenance."""
    stated = {"memory_id": "m", "lifecycle_state": "current", "provenance": "user_stated"}
    now = ActionQuery(intent="current_state")
    decision = decide_action(stated, now, "agent_default")
    assert decision.action == "answer" and {"user_stated", "evidence_user_stated"} <= {r.code for r in decision.reasons}
    assert decide_action({**stated, "provenance": None}, now, "agent_default").action == "warn"
    assert decide_action({**stated, "provenance": "agent_inferred"}, now, "agent_default").action == "warn"
    assert decide_action({**stated, "risk": "medium"}, now, "agent_default").action == "warn"
    assert decide_action({**stated, "risk": "high"}, now, "agent_default").action == "verify_first"
    assert decide_action({**stated, "epistemic_status": "unresolved"}, now, "agent_default").action == "warn"
    assert decide_action({**stated, "evidence_strength": 0.2}, now, "agent_default").action == "warn"
    assert decide_action({**stated, "lifecycle_state": "superseded"}, ActionQuery(intent="unknown"),
                         "agent_default").action == "archive_only"
    assert decide_action({**stated, "source_type": "draft"}, now, "agent_default").action == "warn"
    for preset in PRESETS:
        assert POLICY.presets[preset].user_stated is None
        assert decide_action(stated, now, preset).action == "verify_first"
    with pytest.raises(ActionPolicyError, match="provenance"):
        decide_action({**stated, "provenance": 3}, now, "agent_default")
    bad = yaml.safe_load(DEFAULT_POLICY_PATH.read_text(encoding="utf-8"))
    bad["presets"]["agent_default"]["user_stated"] = {"low": "maybe", "medium": "warn", "high": "warn"}
    with pytest.raises(ActionPolicyError, match="user_stated"):
        ActionPolicy.from_dict(bad)


def test_documented_figures_match_the_record():
    """The figures table in the docs (and the README, once merged) must be the measured ones."""
    root = Path(__file__).resolve().parents[2]
    checked = 0
    for doc in (root / "docs" / "actions.md", root / "README.md"):
        if not doc.exists() or "`balanced_risk_adjusted` |" not in doc.read_text(encoding="utf-8"):
            continue
        text = doc.read_text(encoding="utf-8")
        for preset in PRESETS:
            r = RECORDED["presets"][preset]
            row = (
                f"| `{preset}` | {r['correct']} / {r['total']} | {r['false_certainty']} | "
                f"{r['overblocks']} |"
            )
            assert row in text, f"{doc.name}: expected the row {row!r}"
        checked += 1
    assert checked >= 1


def test_a_bad_policy_file_names_the_field_and_its_line(tmp_path):
    """load_policy reads the file with the strict config loader: one error, field and file:line."""
    from memgate.actions import load_policy

    text = DEFAULT_POLICY_PATH.read_text(encoding="utf-8")
    lines = text.splitlines()
    bad = tmp_path / "policy.yaml"
    bad.write_text(text.replace("conflict_outranked: warn", "conflict_outranked: maybe", 1))
    line = next(i for i, x in enumerate(lines, 1) if x.startswith("  conflict_outranked:"))
    with pytest.raises(ActionPolicyError, match=rf"policy.yaml:{line}: field 'rules.conflict_outranked'"):
        load_policy(bad)
    bad.write_text(text + "\nextra_rules: {}\n")
    with pytest.raises(ActionPolicyError, match=rf"policy.yaml:{len(lines) + 2}: unknown config key\(s\): extra_rules"):
        load_policy(bad)


@pytest.mark.parametrize("preset,cap", [("strict", "verify_first"), ("balanced", "warn"),
                                        ("balanced_risk_adjusted", "warn"), ("agent_default", "warn")])
def test_a_memory_the_gate_flags_is_at_most_warn_and_verify_first_in_strict(preset, cap):
    """actions-v3: gate_risk >= gate_risk_warn caps a settled, well-supported memory (which
    answers otherwise); below the threshold, or with no threshold, nothing changes."""
    settled = {"memory_id": "m", "lifecycle_state": "current", "epistemic_status": "verified",
               "source_type": "source_document", "risk": "low", "evidence_strength": 0.97}
    query = ActionQuery(intent="current_state")
    assert decide_action(settled, query, preset).action == "answer"
    flagged = decide_action({**settled, "gate_risk": 0.71, "gate_risk_warn": 0.71}, query, preset)  # >=
    assert flagged.action == cap and flagged.binding == ("gate_risk_flagged",)
    for below in ({"gate_risk": 0.70, "gate_risk_warn": 0.71}, {"gate_risk": 0.99, "gate_risk_warn": None},
                  {"gate_risk": None, "gate_risk_warn": 0.1}):
        assert decide_action({**settled, **below}, query, preset).action == "answer"
    blocked = {**settled, "source_type": "correction", "forbids": ["x"], "gate_risk": 0.9, "gate_risk_warn": 0.5}
    assert decide_action(blocked, ActionQuery(intent="current_state", asks="action", proposed_action="x"),
                         preset).action == "block"  # a cap only ever makes it stricter
    with pytest.raises(ActionPolicyError, match="gate_risk"):
        decide_action({**settled, "gate_risk": 1.5}, query, preset)
    with pytest.raises(ActionPolicyError, match="gate_risk_warn"):
        decide_action({**settled, "gate_risk": 0.5, "gate_risk_warn": True}, query, preset)
