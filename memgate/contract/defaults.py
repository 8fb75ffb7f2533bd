"""Defaults that several layers share, each with this one owner (docs/design.md section 5)."""

from typing import Any

RERANK_DEPTH = 200  # how many of the cosine's top candidates a gated route re-scores
# The most results one search returns on any surface (GatedRetriever.retrieve's k, memgate.Memory,
# the LangGraph store's ranked search (offset + limit), HTTP /search, MCP search_memory, the CLI)
MAX_LIMIT = 100


def check_limit(value: Any, field: str = "limit") -> int:
    """``value`` as a search's result count: an int from 1 to :data:`MAX_LIMIT`, else a
    ``ValueError`` naming ``field``."""
    if type(value) is not int or not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"field {field!r} must be an int from 1 to {MAX_LIMIT} (MAX_LIMIT), got {value!r}")
    return value


# the text-only verifier study (memgate.studies.verifiers.study, ``memgate verifiers``)
VERIFIER_DEV = 96  # dev queries for calibration
VERIFIER_TEST = 288  # test queries in the hashed subsample
VERIFIER_DEPTH = 30  # cosine top-depth a verifier scores
