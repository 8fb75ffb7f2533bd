"""Which namespace a ``memgate.Memory`` call reads or writes, from Mem0's three ids.

| ids given | namespace | a call with the same ids sees |
|---|---|---|
| ``user_id`` (+ ``agent_id`` / ``run_id``) | ``user:<user_id>`` | the user's memories (those carrying the agent / run) |
| ``agent_id`` (+ ``run_id``) | ``agent:<agent_id>`` | the agent's own memories (those carrying the run) |
| ``run_id`` only | ``run:<run_id>`` | the run's own memories |

Fail-closed: an id only ever narrows. The namespace is chosen by the first of ``user_id``,
``agent_id``, ``run_id`` given; the others narrow within it (they are stored on the memory and
must match), so an agent-only call never sees a user's memories, nor a run-only call an agent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from memgate.integrations.inputs import check_no_surrogate

USER_PREFIX = "user:"
AGENT_PREFIX = "agent:"
RUN_PREFIX = "run:"
PREFIXES = (USER_PREFIX, AGENT_PREFIX, RUN_PREFIX)
SCOPE_KEYS = ("agent_id", "run_id")  # metadata keys that narrow within a namespace
MAX_ID = 256


def check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError(f"field 'user_id' must be a non-empty string, got {user_id!r}")
    if len(user_id) > MAX_ID or any(ord(c) < 32 or ord(c) == 127 for c in user_id):
        raise ValueError(f"field 'user_id' must be at most {MAX_ID} printable characters")
    check_no_surrogate(user_id, "user_id")
    return user_id


def check_scope(agent_id: Any = None, run_id: Any = None) -> dict[str, Any]:
    """``{"agent_id": ..., "run_id": ...}`` of the given ones (non-empty strings), checked."""
    scope = {}
    for name, value in (("agent_id", agent_id), ("run_id", run_id)):
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID or any(
                ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError(f"field {name!r} must be a non-empty string of at most {MAX_ID} "
                             f"printable characters, got {value!r}")
        check_no_surrogate(value, name)
        scope[name] = value
    return scope


@dataclass(frozen=True)
class Scope:
    """One call's namespace, the principal its writes and audit events carry, and the
    ``agent_id`` / ``run_id`` values that narrow within the namespace (stored on what it adds)."""

    namespace: str
    principal: str
    user_id: Optional[str]
    narrow: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> dict[str, Any]:
        """The catalog filter of the narrowing ids."""
        return {k: {"eq": v} for k, v in self.narrow.items()}

    def holds(self, attributes: dict[str, Any]) -> bool:
        """A record of this namespace with ``attributes`` is within the narrowing ids."""
        return all(attributes.get(k) == v for k, v in self.narrow.items())


def resolve(user_id: Any = None, agent_id: Any = None, run_id: Any = None) -> Scope:
    """The scope of a call (module docstring); none of the three ids: a one-line ValueError."""
    narrow = check_scope(agent_id, run_id)
    if user_id is not None:
        user = check_user_id(user_id)
        return Scope(USER_PREFIX + user, user, user, narrow)
    if "agent_id" in narrow:
        ns = AGENT_PREFIX + narrow["agent_id"]
        return Scope(ns, ns, None, narrow)
    if "run_id" in narrow:
        ns = RUN_PREFIX + narrow["run_id"]
        return Scope(ns, ns, None, narrow)
    raise ValueError("field 'user_id' is missing: pass user_id=, agent_id= or run_id= "
                     "(at least one)")


def scope_of_namespace(namespace: str) -> Optional[Scope]:
    """The unnarrowed scope that owns ``namespace`` (None: not an agent-surface namespace)."""
    if namespace.startswith(USER_PREFIX):
        return resolve(user_id=namespace[len(USER_PREFIX):])
    if namespace.startswith(AGENT_PREFIX):
        return Scope(namespace, namespace, None, {})
    if namespace.startswith(RUN_PREFIX):
        return Scope(namespace, namespace, None, {})
    return None


__all__ = ["AGENT_PREFIX", "MAX_ID", "PREFIXES", "RUN_PREFIX", "SCOPE_KEYS", "USER_PREFIX", "Scope",
           "check_scope", "check_user_id", "resolve", "scope_of_namespace"]
