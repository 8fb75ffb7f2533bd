"""The versioned allowed-action policy (authority ranks, fixed rules, named presets) and its loader."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

from memgate.actions.inputs import ACTION_ORDER, SOURCE_TYPES, ActionPolicyError, _check_choice
from memgate.actions.presets import Preset, _preset_from_dict
from memgate.contract.config import ConfigError, load_config, load_yaml, yaml_line

DEFAULT_POLICY_PATH = Path(__file__).with_name("action_policy.yaml")

_RULE_KEYS = (
    "forbids_proposed_action",
    "archive_under_unknown_intent",
    "verification_required",
    "conflict_outranked",
    "conflict_unresolved",
    "status_is_not_priority",
)


@dataclass(frozen=True)
class ActionPolicy:
    """A versioned allowed-action policy: authority ranks, fixed rules and named presets."""

    version: str
    authority: Mapping[str, int]
    rules: Mapping[str, str]
    presets: Mapping[str, Preset]
    source: Optional[str] = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: Optional[str] = None,
                  path: Optional[Path] = None) -> ActionPolicy:
        """The policy in ``raw``; errors name the field (and, given the file ``path``, its line)."""
        where = f"action policy {source or '<dict>'}: "
        try:
            if not isinstance(raw, Mapping):
                raise ActionPolicyError("the policy must be a mapping")
            unknown = sorted(
                set(raw) - {"version", "action_order", "authority", "rules", "presets"}
            )
            if unknown:
                raise ActionPolicyError(f"unknown field(s) {unknown}")
            version = raw.get("version")
            if not isinstance(version, str) or not version:
                raise ActionPolicyError(
                    f"field 'version' must be a non-empty string, got {version!r}"
                )
            order = raw.get("action_order")
            if order is not None and tuple(order) != ACTION_ORDER:
                raise ActionPolicyError(
                    f"field 'action_order' must be {list(ACTION_ORDER)}, got {order!r}"
                )
            authority = raw.get("authority")
            if not isinstance(authority, Mapping) or set(authority) != set(SOURCE_TYPES):
                raise ActionPolicyError(f"field 'authority' must rank exactly {SOURCE_TYPES}")
            for key, rank in authority.items():
                if type(rank) is not int:
                    raise ActionPolicyError(
                        f"field 'authority.{key}' must be an integer, got {rank!r}"
                    )
            rules = raw.get("rules")
            if not isinstance(rules, Mapping) or set(rules) != set(_RULE_KEYS):
                raise ActionPolicyError(f"field 'rules' must set exactly {_RULE_KEYS}")
            for key, action in rules.items():
                _check_choice(action, ACTION_ORDER, f"rules.{key}")
            presets_raw = raw.get("presets")
            if not isinstance(presets_raw, Mapping) or not presets_raw:
                raise ActionPolicyError("field 'presets' must be a non-empty mapping")
            presets = {name: _preset_from_dict(name, spec) for name, spec in presets_raw.items()}
        except ActionPolicyError as exc:
            line = _line_of(path, str(exc)) if path is not None else None
            if line is not None:
                where = f"action policy {source or path}:{line}: "
            raise ActionPolicyError(where + str(exc)) from None
        return cls(
            version=version,
            authority=dict(authority),
            rules=dict(rules),
            presets=presets,
            source=source,
        )

    def preset(self, preset: Union[str, Preset]) -> Preset:
        if isinstance(preset, Preset):
            return preset
        if preset not in self.presets:
            raise ActionPolicyError(
                f"field 'preset' must be one of {tuple(self.presets)}, got {preset!r}"
            )
        return self.presets[preset]


@dataclass(frozen=True)
class PolicyFile:
    """The top level of a policy file, read by the strict config loader (memgate.contract.config):
    an unknown key or a wrongly typed section is one error naming it and file:line. What the
    sections hold is checked by :meth:`ActionPolicy.from_dict`."""

    version: Optional[str] = None
    action_order: Optional[list[str]] = None
    authority: Optional[dict[str, int]] = None
    rules: Optional[dict[str, str]] = None
    presets: Optional[dict[str, dict]] = None


_FIELD = re.compile(r"^(?:preset '([^']+)': )?(?:field '([^']+)')?")


def _line_of(path: Path, message: str) -> Optional[int]:
    """The line of the field an ActionPolicyError names (``preset 'p': field 'a.b'``)."""
    match = _FIELD.match(message)
    preset, field = match.groups() if match else (None, None)
    keys = (["presets", preset] if preset else []) + (field.split(".") if field else [])
    return yaml_line(path, keys) if keys else None


def _load(path: Path, source: str) -> ActionPolicy:
    try:
        load_config(PolicyFile, path)
    except ConfigError as exc:
        raise ActionPolicyError(f"action policy {exc}") from None
    return ActionPolicy.from_dict(load_yaml(path), source=source, path=path)


def load_policy(path: Union[str, Path, None] = None) -> ActionPolicy:
    """Load a policy file (default: the bundled ``memgate/actions/action_policy.yaml``)."""
    if path is None:
        return _default_policy()
    return _load(Path(path), str(path))


@lru_cache(maxsize=1)
def _default_policy() -> ActionPolicy:
    return _load(DEFAULT_POLICY_PATH, DEFAULT_POLICY_PATH.name)
