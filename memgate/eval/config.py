"""The evaluation configuration (``configs/eval/default.yaml``), strict and typed.

``memgate evaluate --config FILE key=value ...`` loads it with the same loader as training
(``memgate.contract.config.load_config``); the command's flags (``--n-boot``, ``--rerank-depth``,
...) are overrides of these keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from memgate.contract.config import ConfigError
from memgate.contract.defaults import RERANK_DEPTH
from memgate.eval.route_specs import route_spec

REAL_SOURCES = ("locomo", "gatemem")
VERIFIER_BACKENDS = ("local", "openai", "finetuned")
SWEEP_ROWS = ("first_seed", "all", "none")
DEFAULT_DATA = "data/default"  # the release's data directory


def checkpoint_data_dir(checkpoint: Path) -> str:
    """The data directory a checkpoint trained on (``train_config.data.data_dir``), else
    ``data/default`` (the release's; a mix row's gate trains on e.g. ``data/textrisk_dialogue``)."""
    try:
        info = json.loads((Path(checkpoint) / "config.json").read_text()).get("export", {})
    except (OSError, ValueError):
        return DEFAULT_DATA
    return info.get("train_config", {}).get("data", {}).get("data_dir") or DEFAULT_DATA


@dataclass(frozen=True)
class SweepSection:
    enabled: bool = False  # the metadata corruption sweep (routes_sweep.jsonl; slow)
    seeds: int = 10  # corruption seeds per rate
    # which sweep runs write routes_sweep.jsonl rows (none: seed 0 alone is ~340 MB on synthetic test)
    rows: str = "none"

    def __post_init__(self) -> None:
        if self.rows not in SWEEP_ROWS:
            raise ConfigError(f"sweep.rows must be one of {list(SWEEP_ROWS)}, got {self.rows!r}")
        if self.seeds < 1:
            raise ConfigError(f"sweep.seeds must be >= 1, got {self.seeds!r}")


@dataclass(frozen=True)
class VerifierSection:
    backends: tuple[str, ...] = ()  # text-only verifiers (local, openai, finetuned); none by default
    dev: int = 96  # dev queries for calibration
    test: int = 288  # test queries in the hashed subsample
    depth: int = 30  # cosine top-depth a verifier scores
    configs: dict[str, str] = field(default_factory=dict)  # backend -> config file (default configs/verifier/<backend>.yaml)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.backends) - set(VERIFIER_BACKENDS))
        if unknown:
            raise ConfigError(f"verifier.backends: unknown backend(s) {unknown}; known: {list(VERIFIER_BACKENDS)}")
        unknown = sorted(set(self.configs) - set(VERIFIER_BACKENDS))
        if unknown:
            raise ConfigError(f"verifier.configs: unknown backend(s) {unknown}; known: {list(VERIFIER_BACKENDS)}")
        for key in ("dev", "test", "depth"):
            if getattr(self, key) < 1:
                raise ConfigError(f"verifier.{key} must be >= 1, got {getattr(self, key)!r}")


@dataclass(frozen=True)
class EvalConfig:
    checkpoint: Optional[str] = "checkpoints/memgate-minilm-l6"  # the gate export to evaluate
    data: Optional[str] = None  # generated data directory (regenerated when missing); null: the one the checkpoint trained on
    out: Optional[str] = None  # output directory (null: reports/<checkpoint name>)
    routes: Optional[tuple[str, ...]] = None  # null: every core route
    real_sources: tuple[str, ...] = REAL_SOURCES  # real report parts ([] = synthetic test only)
    real_data_root: Optional[str] = None  # null: MEMGATE_DATA, else data/real
    n_boot: int = 10_000  # bootstrap replicates
    seed: int = 0  # bootstrap seed
    threads: int = 2  # torch threads
    rerank_depth: int = RERANK_DEPTH  # cosine top candidates a gated route re-scores
    gate_threads: Optional[int] = None  # torch threads of the gated routes' scoring (null: threads)
    sweep: SweepSection = field(default_factory=SweepSection)
    verifier: VerifierSection = field(default_factory=VerifierSection)

    def __post_init__(self) -> None:
        for key in ("n_boot", "threads", "rerank_depth"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)!r}")
        if self.gate_threads is not None and self.gate_threads < 1:
            raise ConfigError(f"gate_threads must be >= 1 or null, got {self.gate_threads!r}")
        if self.seed < 0:
            raise ConfigError(f"seed must be >= 0, got {self.seed!r}")
        unknown = sorted(set(self.real_sources) - set(REAL_SOURCES))
        if unknown:
            raise ConfigError(f"real_sources: unknown source(s) {unknown}; known: {list(REAL_SOURCES)}")
        if self.routes is not None:
            if not self.routes:
                raise ConfigError("routes must name at least one route (null: every core route)")
            unknown = [r for r in self.routes if route_spec(r) is None and r != "oracle_required"]
            if unknown:
                raise ConfigError(f"routes: unknown route(s) {unknown}")
