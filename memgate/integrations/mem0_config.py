"""``Memory.from_config(dict)``: Mem0's configuration dict, read where its keys mean something here.

- ``vector_store``: ``{"provider": "embedded" | "qdrant" | "postgres" ("pgvector" too),
  "config": {"path" | "url", "collection_name", "api_key"}}``;
- ``embedder``: ``{"provider": "huggingface", "config": {"model": "all-MiniLM-L6-v2"}}`` (the
  packaged encoder is the only one offered: the stores and the gate are built on its vectors);
- ``llm``: ``{"provider": "openai", "config": {"model", "openai_base_url" | "base_url",
  "api_key"}}``: the extractor of ``add(..., infer=True)`` (:mod:`memgate.integrations.extraction`).

Any other key (``graph_store``, ``history_db_path``, ``custom_fact_extraction_prompt``, ...) is
refused with a one-line error naming it: a setting silently ignored would be a surprise later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOP_KEYS = ("vector_store", "embedder", "llm")
PROVIDERS = {"embedded": "embedded", "qdrant": "qdrant", "postgres": "postgres", "pgvector": "postgres"}
STORE_KEYS = {"path": "path", "url": "url", "collection_name": "collection", "api_key": "api_key"}
MODELS = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


def _section(config: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    section = config[name]
    if not isinstance(section, Mapping):
        raise ValueError(f"field {name!r} must be a mapping {{'provider', 'config'}}, got {section!r}")
    unknown = sorted(set(section) - {"provider", "config"})
    if unknown:
        raise ValueError(f"field '{name}.{unknown[0]}' is not known (known: provider, config)")
    provider = section.get("provider")
    if provider not in allowed:
        raise ValueError(f"field '{name}.provider' must be one of {list(allowed)}, got {provider!r}")
    inner = section.get("config") or {}
    if not isinstance(inner, Mapping):
        raise ValueError(f"field '{name}.config' must be a mapping, got {inner!r}")
    return str(provider), dict(inner)


def memory_kwargs(config: Any) -> dict[str, Any]:
    """``memgate.Memory`` keyword arguments for a Mem0 config dict (module docstring)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"field 'config' must be a mapping (Mem0's config dict), got {type(config).__name__}")
    unknown = sorted(set(config) - set(TOP_KEYS))
    if unknown:
        raise ValueError(f"field {unknown[0]!r} is not supported by memgate's from_config "
                         f"(supported: {', '.join(TOP_KEYS)})")
    kwargs: dict[str, Any] = {}
    if "vector_store" in config:
        provider, inner = _section(config, "vector_store", tuple(PROVIDERS))
        bad = sorted(set(inner) - set(STORE_KEYS))
        if bad:
            raise ValueError(f"field 'vector_store.config.{bad[0]}' is not known "
                             f"(known: {', '.join(STORE_KEYS)})")
        kwargs["store"] = PROVIDERS[provider]
        kwargs.update({STORE_KEYS[k]: v for k, v in inner.items()})
    if "embedder" in config:
        _, inner = _section(config, "embedder", ("huggingface",))
        bad = sorted(set(inner) - {"model"})
        if bad:
            raise ValueError(f"field 'embedder.config.{bad[0]}' is not known (known: model)")
        if inner.get("model", MODELS[0]) not in MODELS:
            raise ValueError(f"field 'embedder.config.model' must be the packaged {MODELS[0]} "
                             f"(the stores and the gate are built on its vectors), got {inner['model']!r}")
    if "llm" in config:
        _, inner = _section(config, "llm", ("openai",))
        bad = sorted(set(inner) - {"model", "openai_base_url", "base_url", "api_key"})
        if bad:
            raise ValueError(f"field 'llm.config.{bad[0]}' is not known "
                             "(known: model, openai_base_url, base_url, api_key)")
        kwargs["extractor"] = {"base_url": inner.get("openai_base_url") or inner.get("base_url"),
                               "model": inner.get("model"),
                               **({"api_key": inner["api_key"]} if inner.get("api_key") else {})}
    return kwargs


__all__ = ["MODELS", "PROVIDERS", "TOP_KEYS", "memory_kwargs"]
