"""Three-valued admissibility checked against the contract's own rule (docs/design.md section 3):

    "A derived value is None only if it differs across the possible resolutions of its unknown
    inputs."

Kleene AND/OR, the unknown row and column of the lifecycle table, unknown purposes and unknown
supersession applicability are all derived here by enumerating resolutions, not copied from a table.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import pytest

from memgate.contract.admissibility import (
    INTENTS,
    LIFECYCLE_STATES,
    POLICY_REASONS,
    PolicyRule,
    PolicyRules,
    SupersessionScope,
    Verdict,
    and3,
    check_tristate,
    effective_state,
    lifecycle_value,
    or3,
    relevance_value,
    scope_value,
    usability,
)

TRI = (True, False, None)


def resolve(fn: Callable[..., bool], inputs: Sequence, domains: Sequence[Iterable]) -> object:
    """Value of ``fn`` by the resolution rule: every None input ranges over its domain; the result
    is the common value if all resolutions agree, else None."""
    choices = [list(dom) if x is None else [x] for x, dom in zip(inputs, domains)]
    outcomes = {fn(*combo) for combo in itertools.product(*choices)}
    return outcomes.pop() if len(outcomes) == 1 else None


# --------------------------------------------------------------------------- Kleene AND / OR


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_and3_or3_follow_the_resolution_rule(n):
    checked = 0
    for combo in itertools.product(TRI, repeat=n):
        expected_and = resolve(lambda *v: all(v), combo, [(True, False)] * n)
        expected_or = resolve(lambda *v: any(v), combo, [(True, False)] * n)
        assert and3(*combo) is expected_and, combo
        assert or3(*combo) is expected_or, combo
        checked += 1
    assert checked == 3**n


def test_kleene_outputs_are_exact_singletons_not_truthy_values():
    # is-comparisons above would already catch 0/1; make the None/False distinction explicit.
    assert and3(None, True) is None
    assert and3(None, False) is False
    assert or3(None, False) is None
    assert or3(None, True) is True


@pytest.mark.parametrize("bad", [0, 1, 0.0, "True", "", []])
def test_and3_or3_reject_non_bool(bad):
    with pytest.raises(TypeError, match="argument 1"):
        and3(True, bad)
    with pytest.raises(TypeError, match="argument 0"):
        or3(bad, None)


def test_check_tristate_names_the_field_and_rejects_numbers():
    for ok in TRI:
        assert check_tristate(ok, "scope") is ok
    with pytest.raises(TypeError, match="my_field"):
        check_tristate(0, "my_field")
    with pytest.raises(TypeError, match="my_field"):
        check_tristate(1, "my_field")
    import numpy as np

    with pytest.raises(TypeError, match="flag"):
        check_tristate(np.bool_(True), "flag")


# --------------------------------------------------------------------------- lifecycle

# The only base facts: known states x known intents (docs/design.md section 3 table without its
# "unknown" row and column). Everything involving "unknown" is derived by resolution.
KNOWN_STATES = ("current", "stale", "superseded", "forgotten")
KNOWN_INTENTS = ("current_state", "history")
BASE = {
    ("current", "current_state"): True,
    ("current", "history"): True,
    ("stale", "current_state"): False,
    ("stale", "history"): True,
    ("superseded", "current_state"): False,
    ("superseded", "history"): True,
    ("forgotten", "current_state"): False,
    ("forgotten", "history"): False,
}


def test_known_block_of_the_lifecycle_table():
    for (state, intent), value in BASE.items():
        assert lifecycle_value(state, intent) is value, (state, intent)


@pytest.mark.parametrize("state", LIFECYCLE_STATES)
@pytest.mark.parametrize("intent", INTENTS)
def test_unknown_state_and_intent_follow_the_resolution_rule(state, intent):
    s = None if state == "unknown" else state
    i = None if intent == "unknown" else intent
    expected = resolve(lambda st, it: BASE[(st, it)], (s, i), (KNOWN_STATES, KNOWN_INTENTS))
    assert lifecycle_value(state, intent) is expected


def test_resolution_rule_gives_the_documented_unknown_intent_column():
    # The resolution helper itself must yield the three distinct behaviours of the column.
    assert lifecycle_value("stale", "unknown") is None  # False vs True -> differs
    assert lifecycle_value("superseded", "unknown") is None
    assert lifecycle_value("forgotten", "unknown") is False  # False for every intent
    assert lifecycle_value("current", "unknown") is True  # True for every intent
    for intent in INTENTS:
        assert lifecycle_value("unknown", intent) is None


def test_lifecycle_rejects_unknown_values():
    with pytest.raises(ValueError, match="lifecycle_state"):
        lifecycle_value("deleted", "history")
    with pytest.raises(ValueError, match="intent"):
        lifecycle_value("current", "future")
    with pytest.raises(ValueError, match="lifecycle_state"):
        effective_state("archived", None, None, None)


# --------------------------------------------------------------------------- scoped supersession


def test_scoped_supersession_inside_outside_missing():
    scope = SupersessionScope(subject="trip-lisbon", valid_from="2024-05-01", valid_to="2024-06-01")
    assert effective_state("superseded", scope, "trip-lisbon", "2024-05-15") == "superseded"
    assert effective_state("superseded", scope, "trip-lisbon", "2024-05-01") == "superseded"  # from: inclusive
    assert effective_state("superseded", scope, "trip-lisbon", "2024-06-01") == "current"  # to: exclusive
    assert effective_state("superseded", scope, "trip-oslo", "2024-05-15") == "current"
    assert effective_state("superseded", scope, "trip-lisbon", "2024-04-30") == "current"
    # missing applicability on the query where the scope constrains it -> unknown
    assert effective_state("superseded", scope, None, "2024-05-15") == "unknown"
    assert effective_state("superseded", scope, "trip-lisbon", None) == "unknown"
    assert effective_state("superseded", scope, None, None) == "unknown"
    # ... unless the known part already places the query outside the scope for every resolution
    assert effective_state("superseded", scope, None, "2024-07-01") == "current"
    assert effective_state("superseded", scope, "trip-oslo", None) == "current"


def test_scoped_supersession_matches_the_resolution_rule():
    scope = SupersessionScope(subject="s1", valid_from="2024-03-01", valid_to="2024-09-01")
    subjects = ("s1", "s2")
    times = ("2024-01-01", "2024-03-01", "2024-06-01", "2024-09-01", "2024-12-01")

    def inside(subject, time):
        return subject == "s1" and "2024-03-01" <= time < "2024-09-01"

    for subject in subjects + (None,):
        for time in times + (None,):
            expected = resolve(inside, (subject, time), (subjects, times))
            want = {True: "superseded", False: "current", None: "unknown"}[expected]
            assert effective_state("superseded", scope, subject, time) == want, (subject, time)


def test_scope_only_applies_to_superseded_and_unscoped_supersession_applies_everywhere():
    scope = SupersessionScope(subject="x")
    for state in ("current", "stale", "forgotten", "unknown"):
        assert effective_state(state, scope, "y", None) == state
    assert effective_state("superseded", None, None, None) == "superseded"
    assert effective_state("superseded", SupersessionScope(), None, None) == "superseded"


def test_link_expiry_rule_changed_for_new_links_keeps_old_rule_for_old_links():
    # "Shared links expire after 30 days" was superseded by "... after 7 days" for links created
    # on or after 2024-06-01. The query's applicability time is the link's creation date.
    old_rule_scope = SupersessionScope(valid_from="2024-06-01")

    def lifecycle_of_old_rule(link_created, intent="current_state"):
        state = effective_state("superseded", old_rule_scope, None, link_created)
        return lifecycle_value(state, intent)

    assert lifecycle_of_old_rule("2024-05-10") is True  # old link: the 30-day rule still holds
    assert lifecycle_of_old_rule("2024-06-10") is False  # new link: superseded by the 7-day rule
    assert lifecycle_of_old_rule("2024-06-10", "history") is True  # "how did the rule change?"
    assert lifecycle_of_old_rule(None) is None  # which link? unresolved, never imputed
    # The subject is unconstrained by this scope, so a missing query subject does not matter.
    assert effective_state("superseded", old_rule_scope, None, "2024-05-10") == "current"


# --------------------------------------------------------------------------- scope axis


def test_scope_value():
    assert scope_value("alice", ["alice", "team"]) is True
    assert scope_value("bob", ["alice", "team"]) is False
    assert scope_value("bob", []) is False
    assert scope_value(None, ["alice"]) is None
    assert scope_value("alice", None) is None


# --------------------------------------------------------------------------- policy

RULES = PolicyRules.from_dict(
    {
        "health": {"reason": "cross_domain", "allow_only": ["medical_care"]},
        "marketing_opt_out": {"reason": "purpose", "deny": ["marketing"]},
        "belief": {"reason": "sycophancy", "deny": ["fact_answer", "advice"]},
        "planted_roleplay": {"reason": "jailbreak", "deny": ["*"]},
        "public": {},
    }
)


def test_allow_only_rule():
    assert RULES.evaluate(["health"], "medical_care") == (True, ())
    assert RULES.evaluate(["health"], "marketing") == (False, ("cross_domain",))


def test_deny_rule_and_star():
    assert RULES.evaluate(["marketing_opt_out"], "marketing") == (False, ("purpose",))
    assert RULES.evaluate(["marketing_opt_out"], "support") == (True, ())
    for purpose in ("marketing", "support", "anything", None):
        assert RULES.evaluate(["planted_roleplay"], purpose) == (False, ("jailbreak",))
    assert RULES.evaluate(["public"], "anything") == (True, ())


def test_missing_tags_and_unknown_tags_are_unresolved():
    assert RULES.evaluate(None, "marketing") == (None, ())
    assert RULES.evaluate(["never_seen_tag"], "marketing") == (None, ())
    assert RULES.evaluate(["public", "never_seen_tag"], "marketing") == (None, ())


def test_a_false_tag_dominates_a_none_tag_and_reasons_only_when_false():
    assert RULES.evaluate(["never_seen_tag", "health"], "marketing") == (False, ("cross_domain",))
    assert RULES.evaluate(["health", "never_seen_tag"], "marketing") == (False, ("cross_domain",))
    # several denying tags: each reason reported once, in tag order
    value, reasons = RULES.evaluate(["belief", "health", "planted_roleplay"], "advice")
    assert value is False
    assert reasons == ("sycophancy", "cross_domain", "jailbreak")
    # a None result carries no reasons; a True one neither
    assert RULES.evaluate(["health", "never_seen_tag"], "medical_care") == (None, ())
    assert RULES.evaluate(["health", "public"], "medical_care") == (True, ())


RULE_SPECS = [
    {"allow_only": allow, "deny": deny}
    for allow in (None, [], ["a"], ["a", "b"])
    for deny in ([], ["a"], ["b"], ["a", "b"], ["*"])
]


@pytest.mark.parametrize("spec", RULE_SPECS, ids=str)
def test_unknown_purpose_follows_the_resolution_rule(spec):
    # Rules only test membership in their own sets (or "*"), so the purposes they mention plus one
    # fresh purpose cover every possible resolution of an unknown purpose.
    rule = PolicyRules.from_dict({"t": {k: v for k, v in spec.items() if v is not None}}).rules["t"]
    universe = ("a", "b", "some_other_purpose")
    for purpose in universe:  # known purposes: direct semantics
        allow, deny = spec["allow_only"], spec["deny"]
        want = not ("*" in deny or purpose in deny) and (allow is None or purpose in allow)
        assert rule.allows(purpose) is want, purpose
    expected = resolve(rule.allows, (None,), (universe,))
    assert rule.allows(None) is expected


def test_policy_rules_reject_unknown_keys_and_reasons():
    with pytest.raises(ValueError, match="allow_olny"):
        PolicyRules.from_dict({"t": {"allow_olny": ["x"]}})
    with pytest.raises(ValueError, match="reason"):
        PolicyRules.from_dict({"t": {"reason": "vibes"}})
    for reason in POLICY_REASONS:
        PolicyRule(reason=reason)


@pytest.mark.parametrize("key", ["allow_only", "deny"])
def test_policy_rules_reject_a_bare_string_purpose_list(key):
    # frozenset("marketing") would silently become a set of letters.
    with pytest.raises((TypeError, ValueError), match=key):
        PolicyRules.from_dict({"t": {key: "marketing"}})


def test_policy_rules_round_trip():
    again = PolicyRules.from_dict(RULES.to_dict())
    assert again == RULES
    assert again.to_dict() == RULES.to_dict()


# --------------------------------------------------------------------------- verdicts


def test_verdict_admissible_reasons_unresolved():
    v = Verdict(scope=True, policy=False, lifecycle=None, policy_reasons=("cross_domain", "jailbreak"))
    assert v.admissible is False
    assert v.exclusion_reasons == ("policy", "cross_domain", "jailbreak")
    assert v.unresolved_axes == ("lifecycle",)

    v = Verdict(scope=False, policy=None, lifecycle=False, policy_reasons=("purpose",))
    assert v.admissible is False
    assert v.exclusion_reasons == ("scope", "lifecycle")  # policy not False -> no policy codes
    assert v.unresolved_axes == ("policy",)

    v = Verdict(scope=True, policy=None, lifecycle=None)
    assert v.admissible is None
    assert v.exclusion_reasons == ()
    assert v.unresolved_axes == ("policy", "lifecycle")

    assert Verdict(True, True, True).admissible is True
    assert Verdict(True, True, True).exclusion_reasons == ()


def test_verdict_admissible_is_and3_of_the_axes_for_every_combination():
    for n, g, life in itertools.product(TRI, repeat=3):
        v = Verdict(n, g, life, ("purpose",))
        assert v.admissible is resolve(lambda *x: all(x), (n, g, life), [(True, False)] * 3)
        assert set(v.unresolved_axes) == {a for a, x in zip(("scope", "policy", "lifecycle"), (n, g, life)) if x is None}
        false_axes = [a for a, x in zip(("scope", "policy", "lifecycle"), (n, g, life)) if x is False]
        assert v.exclusion_reasons[: len(false_axes)] == tuple(false_axes)
        assert ("purpose" in v.exclusion_reasons) is (g is False)


@pytest.mark.parametrize("field", ["scope", "policy", "lifecycle"])
@pytest.mark.parametrize("bad", [0, 1])
def test_verdict_rejects_numeric_labels_naming_the_field(field, bad):
    kwargs = {"scope": True, "policy": True, "lifecycle": True, field: bad}
    with pytest.raises(TypeError, match=field):
        Verdict(**kwargs)


def test_pair_label_from_dict_rejects_numeric_labels():
    from memgate.contract.records import PairLabel

    base = {"query_id": "q", "memory_id": "m", "relevance": "required",
            "scope": True, "policy": True, "lifecycle": True}
    PairLabel.from_dict(dict(base))
    with pytest.raises(TypeError, match="scope"):
        PairLabel.from_dict({**base, "scope": 0})
    with pytest.raises(TypeError, match="policy"):
        PairLabel.from_dict({**base, "policy": 1})


# --------------------------------------------------------------------------- relevance, usability

REL_TRUTH = {"required": True, "supportive": True, "not_useful": False, "unresolved": None}


def test_relevance_value():
    for label, value in REL_TRUTH.items():
        assert relevance_value(label) is value
    with pytest.raises(ValueError, match="relevance"):
        relevance_value("maybe")


@pytest.mark.parametrize("relevance", list(REL_TRUTH))
@pytest.mark.parametrize("admissible", TRI)
def test_usability_is_and3_by_resolution(relevance, admissible):
    expected = resolve(lambda r, a: r and a, (REL_TRUTH[relevance], admissible), [(True, False)] * 2)
    assert usability(relevance, admissible) is expected


def test_usability_never_imputes_and_rejects_numbers():
    assert usability("unresolved", True) is None
    assert usability("required", None) is None
    assert usability("not_useful", None) is False
    with pytest.raises(TypeError, match="admissible"):
        usability("required", 1)
