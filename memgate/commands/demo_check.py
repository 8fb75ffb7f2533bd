"""``make demo-check`` (``memgate demo --check-release``): does a fresh clone's ``make demo``
reproduce the released gate on this machine?

It clones the checkout's HEAD into a temporary folder (no data, no runs, an empty embedding
cache: what a new user starts from; uncommitted changes are not in it), runs ``memgate demo`` there
with this interpreter, and compares the demo's gate with the released one (``checkpoints/`` of this
checkout): the weights' sha256, the largest elementwise difference of any tensor, the exported step,
the data hash and the printed headline table. Verdicts: **bit for bit** (the same sha256), **within
2e-5** (``TOLERANCE``: every weight within it, the same step and data hash), or **not reproduced**
(exit 1).

Why bit for bit is not a given: the encoder's fast backend (OpenVINO) gives a text's embedding
last-bit differences (up to ~2e-7) depending on the texts it shares a batch with, so a run whose
embedding cache holds vectors from other runs trains on slightly different inputs, and 560 steps
carry that to ~1e-5 in the weights. Two runs from an empty cache embed the same batches; ``make
release`` starts from an empty cache for that reason (``memgate.commands.release``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

TOLERANCE = 2e-5
WEIGHTS = "model.safetensors"
EMBED_CACHE = Path(".cache") / "embeddings" / "embeddings.sqlite"  # the pipeline's (checkout-relative)


def cached_vectors(root: Path) -> int:
    """How many vectors the checkout's embedding cache holds (0 when there is none)."""
    path = Path(root) / EMBED_CACHE
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT COUNT(*) FROM emb").fetchone()[0])
    except sqlite3.Error:
        return 0


def clear_embedding_cache(root: Path) -> int:
    """Remove the checkout's embedding cache (``make release`` embeds from an empty one, as a fresh
    clone does); returns how many vectors it held."""
    held = cached_vectors(root)
    path = Path(root) / EMBED_CACHE
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return held


def warm_cache_note(root: Path) -> str | None:
    """What ``make demo`` says when the embedding cache is not empty (None when it is)."""
    held = cached_vectors(root)
    if not held:
        return None
    return (f"memgate demo: the embedding cache ({EMBED_CACHE}) holds {held:,} vectors from earlier runs; the demo "
            "reproduces the release bit for bit from an empty cache or one filled by make demo / make release, "
            "while vectors embedded by other runs (the workbench quickstart, other data) can move its weights "
            f"by ~1e-5 (make demo-check runs the demo in a fresh clone)")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def compare_gates(demo_dir: Path, release_dir: Path) -> dict:
    """What the demo's gate shares with the released one (torch-free: safetensors' numpy reader)."""
    import numpy as np
    from safetensors.numpy import load_file

    a, b = load_file(str(Path(demo_dir, WEIGHTS))), load_file(str(Path(release_dir, WEIGHTS)))
    if set(a) != set(b) or any(a[k].shape != b[k].shape for k in a):
        max_diff, worst = float("inf"), "tensor names or shapes differ"
    else:
        diffs = {k: float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in sorted(a)}
        worst = max(diffs, key=diffs.get)
        max_diff = diffs[worst]
        worst = worst if max_diff > 0 else "every tensor equal"
    exports = [json.loads(Path(d, "config.json").read_text())["export"] for d in (demo_dir, release_dir)]
    tables = [headline_lines(d) for d in (demo_dir, release_dir)]
    out = {
        "demo_sha256": sha256_file(Path(demo_dir, WEIGHTS)),
        "release_sha256": sha256_file(Path(release_dir, WEIGHTS)),
        "max_abs_diff": max_diff,
        "worst_tensor": worst,
        "steps": [e.get("selection", {}).get("step") for e in exports],
        "data_hashes": [e.get("data_hash") for e in exports],
        "same_headline_table": tables[0] == tables[1],
    }
    same_run = out["steps"][0] == out["steps"][1] and out["data_hashes"][0] == out["data_hashes"][1]
    if same_run and out["demo_sha256"] == out["release_sha256"]:
        out["verdict"] = "bit for bit"
    elif same_run and max_diff <= TOLERANCE:
        out["verdict"] = f"within {TOLERANCE:g}"
    else:
        out["verdict"] = "not reproduced"
    return out


def headline_lines(gate_dir: Path) -> list[str]:
    """The headline table ``make demo`` prints, from a gate's headline.json."""
    from memgate.eval.report.markdown import headline_table

    return headline_table(json.loads(Path(gate_dir, "headline.json").read_text()))


def report_lines(result: dict) -> list[str]:
    steps, hashes = result["steps"], result["data_hashes"]
    return [
        f"demo weights sha256    {result['demo_sha256']}",
        f"release weights sha256 {result['release_sha256']}",
        f"largest weight difference {result['max_abs_diff']:.3g} ({result['worst_tensor']}); tolerance {TOLERANCE:g}",
        f"step {steps[0]} (release {steps[1]}); data hash {str(hashes[0])[:12]} (release {str(hashes[1])[:12]})",
        f"headline table: {'the same' if result['same_headline_table'] else 'differs'}",
        f"verdict: {result['verdict']}",
    ]


def run_demo_in_fresh_clone(root: Path, demo_args: Sequence[str]) -> tuple[Path, float]:
    """Clone ``root``'s HEAD into a temporary folder, run ``memgate demo`` there; (the clone, seconds)."""
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                           capture_output=True, text=True, check=True).stdout.strip()
    if dirty:
        print("memgate demo --check-release: uncommitted changes are not in the clone (it runs HEAD)",
              file=sys.stderr)
    clone = Path(tempfile.mkdtemp(prefix="memgate-demo-check-")) / "memgate"
    subprocess.run(["git", "clone", "--quiet", str(root), str(clone)], check=True)
    env = {**os.environ, "PYTHONPATH": str(clone)}  # the clone's memgate, not the installed one
    env.pop("MEMGATE_HOME", None)
    started = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "memgate", "demo", *demo_args], cwd=clone, env=env, check=True)
    except subprocess.CalledProcessError:
        print(f"the demo failed in {clone} (kept)", file=sys.stderr)
        raise
    return clone, time.perf_counter() - started


def check_release(root: Path, release_dir: Path, demo_args: Sequence[str], keep: bool = False) -> int:
    """The whole check; 0 when the demo reproduces the release bit for bit or within TOLERANCE."""
    clone, seconds = run_demo_in_fresh_clone(root, demo_args)
    result = compare_gates(clone / "runs" / "demo" / "checkpoint", release_dir)
    print(f"\n== demo in a fresh clone ({seconds:.0f} s) against the released gate ==")
    print("\n".join(report_lines(result)))
    Path(root, "runs").mkdir(exist_ok=True)
    Path(root, "runs", "demo_check.json").write_text(json.dumps({**result, "seconds": seconds}, indent=2) + "\n")
    if keep:
        print(f"clone kept: {clone}")
    else:
        shutil.rmtree(clone.parent, ignore_errors=True)
    return 0 if result["verdict"] != "not reproduced" else 1
