"""Low-level readers of the real-data files (internal).

These return the files' JSON as is, with no part guard: only ``splits`` (which needs ids, not
contents) and the guarded adapters in ``locomo`` and ``gatemem`` call them. Results are cached per
process and per file; treat them as read-only.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from memgate.contract.jsonl import read_jsonl

LOCOMO_FILE = "locomo/locomo10.json"
GATEMEM_DIR = "gatemem"
GATEMEM_DOMAINS = ("education", "household", "medical", "office")


@functools.lru_cache(maxsize=4)
def _load_json(path: str) -> object:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@functools.lru_cache(maxsize=16)
def _load_jsonl(path: str) -> tuple:
    return tuple(read_jsonl(Path(path)))


def locomo_conversations(root: Path) -> list[dict]:
    """The LoCoMo conversations (list of dicts with ``sample_id``, ``conversation``, ``qa``)."""
    data = _load_json(str((Path(root) / LOCOMO_FILE).resolve()))
    if not isinstance(data, list):
        raise TypeError(f"{Path(root) / LOCOMO_FILE}: expected a JSON list of conversations")
    return data


def gatemem_domains(root: Path) -> list[str]:
    """Domains present under ``<root>/gatemem`` (folders holding episodes.jsonl), sorted."""
    base = Path(root) / GATEMEM_DIR
    return sorted(p.name for p in base.iterdir() if (p / "episodes.jsonl").is_file())


def gatemem_episodes(root: Path, domain: str) -> tuple:
    return _load_jsonl(str((Path(root) / GATEMEM_DIR / domain / "episodes.jsonl").resolve()))


def gatemem_checkpoints(root: Path, domain: str) -> tuple:
    return _load_jsonl(str((Path(root) / GATEMEM_DIR / domain / "checkpoints.jsonl").resolve()))
