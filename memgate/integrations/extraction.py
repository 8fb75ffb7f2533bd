"""``Memory.add(..., infer=True)``: the user turns distilled into facts by an OpenAI-compatible
chat-completions endpoint the caller configures (``Memory(extractor={"base_url": ..., "model":
..., "api_key": ...})`` or ``Memory.from_config({"llm": {"provider": "openai", ...}})``).
memgate runs no LLM of its own: without an extractor, ``infer=True`` is refused.

The endpoint gets one request per add: a system prompt asking for a JSON object
``{"facts": ["...", ...]}`` and the user turns; each returned fact is stored as one memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

PROMPT = ("Extract the durable facts the user states about themselves from the user's messages. "
          'Answer with one JSON object {"facts": ["...", ...]} (short sentences, first person as the '
          "user wrote them; an empty list when there is none) and nothing else.")
NO_EXTRACTOR = ("field 'infer': extraction is not offered unless an OpenAI-compatible extractor is "
                "configured (Memory(extractor={'base_url', 'model'}) or from_config's 'llm'); "
                "pass infer=False to store the text as given")
KEYS = ("base_url", "model", "api_key", "timeout_s")


@dataclass(frozen=True)
class Extractor:
    base_url: str
    model: str
    api_key: Optional[str] = None
    timeout_s: float = 30.0

    @classmethod
    def from_mapping(cls, config: Any, where: str = "extractor") -> Extractor:
        if isinstance(config, Extractor):
            return config
        if not isinstance(config, Mapping):
            raise ValueError(f"field {where!r} must be a mapping with 'base_url' and 'model', got {config!r}")
        unknown = sorted(set(config) - set(KEYS))
        if unknown:
            raise ValueError(f"field '{where}.{unknown[0]}' is not known (known: {', '.join(KEYS)})")
        for key in ("base_url", "model"):
            if not isinstance(config.get(key), str) or not config[key].strip():
                raise ValueError(f"field '{where}.{key}' must be a non-empty string, got {config.get(key)!r}")
        timeout = config.get("timeout_s", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 3600:
            raise ValueError(f"field '{where}.timeout_s' must be a number of seconds in (0, 3600), got {timeout!r}")
        return cls(config["base_url"].rstrip("/"), config["model"], config.get("api_key"), float(timeout))

    def extract(self, turns: list[str]) -> list[str]:
        """The facts the endpoint distils from ``turns`` (module docstring); a malformed answer
        raises a one-line ValueError."""
        import httpx

        body = {"model": self.model, "temperature": 0,
                "messages": [{"role": "system", "content": PROMPT},
                             {"role": "user", "content": "\n".join(turns)}]}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        response = httpx.post(f"{self.base_url}/chat/completions", json=body, headers=headers,
                              timeout=self.timeout_s)
        if response.status_code != 200:
            raise RuntimeError(f"extractor {self.base_url}: HTTP {response.status_code}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
            facts = json.loads(content)["facts"]
        except (KeyError, IndexError, TypeError, ValueError):
            raise ValueError(f"extractor {self.base_url}: the answer is not a chat completion whose "
                             'content is {"facts": [...]}') from None
        if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
            raise ValueError(f"extractor {self.base_url}: 'facts' must be a list of strings")
        return [f for f in facts if f.strip()]


__all__ = ["NO_EXTRACTOR", "PROMPT", "Extractor"]
