"""Chat messages as ``memgate.Memory.add`` takes them (the shape Mem0 and the chat APIs use):
``[{"role": "user", "content": "I'm vegetarian."}, {"role": "assistant", "content": ...}]``.

Each ``user`` turn is stored as one memory, word for word: no model reads the conversation to
extract or rewrite facts (memgate runs no LLM). Other roles (``assistant``, ``system``, ``tool``)
are context, not statements of the user, and are not stored. A malformed message raises
``ValueError`` naming ``messages[i]`` and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROLES = ("user", "assistant", "system", "tool")


def user_turns(messages: Any) -> list[str]:
    """The ``content`` of each ``user`` message, in order (module docstring)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, (list, tuple)):
        raise ValueError(f"messages must be a text or a list of chat messages, got {type(messages).__name__}")
    turns = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"messages[{i}] must be an object {{'role', 'content'}}, got {message!r}")
        unknown = sorted(set(message) - {"role", "content", "name"})
        if unknown:
            raise ValueError(f"messages[{i}]: unknown field(s) {unknown}")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{i}]: field 'role' must be one of {ROLES}, got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}]: field 'content' must be a string, got {type(content).__name__}")
        if role == "user" and content.strip():
            turns.append(content)
    return turns


__all__ = ["ROLES", "user_turns"]
