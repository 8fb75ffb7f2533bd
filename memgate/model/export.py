"""Export directory of a trained gate: config.json, model.safetensors, headline.json, README.md."""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from memgate.contract.config import REPO_ROOT
from memgate.model.card import write_model_card
from memgate.model.gate import MemGate
from memgate.model.pretrained import record_release, refuse_released_export


def git_state() -> dict:
    """The commit the code came from and whether the tree had uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=REPO_ROOT, capture_output=True, text=True,
                                    check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": None, "git_dirty": None}
    return {"git_sha": sha, "git_dirty": dirty}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for package in ("torch", "lightning", "sentence-transformers", "transformers", "numpy"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = None
    return out


def write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def export_gate(gate: MemGate, out_dir: Path, export_info: dict) -> Path:
    """Save weights and config (with ``export_info`` primitives) into ``out_dir``. A released gate's
    name or directory is refused outside ``make release``, whose export rewrites the pin
    (``memgate.model.pretrained``)."""
    out_dir = Path(out_dir)
    refuse_released_export(out_dir)
    gate.save_pretrained(out_dir, extra_config=export_info)
    record_release(out_dir)
    return out_dir


__all__ = ["export_gate", "git_state", "versions", "write_json", "write_model_card"]
