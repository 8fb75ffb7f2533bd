"""The table in docs/integrations/memory.md: each allowed-action preset's action per epistemic state for
an everyday memory (current, no risk level, no source type; the last column: no status and the
provenance ``user_stated`` that ``memgate.Memory.add`` records), computed by
:func:`memgate.actions.decide_action`."""

from __future__ import annotations

from memgate import actions
from memgate.contract import markdown as md

STATES = (None, "verified", "summary", "inference", "unresolved", "contested")


def preset_table() -> str:
    policy = actions.load_policy()
    query = actions.ActionQuery(intent="current_state")
    head = md.row("preset", "missing risk counts as",
                  *("no status (untagged)" if s is None else f"`{s}`" for s in STATES),
                  "no status, provenance `user_stated`")
    lines = [head, md.rule(len(STATES) + 3)]
    for name, preset in policy.presets.items():
        cells = []
        for state, provenance in [(s, None) for s in STATES] + [(None, "user_stated")]:
            pair = []
            for strength in (None, 0.9):
                memory = {"memory_id": "m", "lifecycle_state": "current", "epistemic_status": state,
                          "evidence_strength": strength, "provenance": provenance}
                pair.append(actions.decide_action(memory, query, name, policy).action)
            cells.append(f"{pair[0]} / {pair[1]}")
        lines.append(md.row(f"`{name}`", preset.missing_risk, *cells))
    return "\n".join(lines)


__all__ = ["STATES", "preset_table"]
