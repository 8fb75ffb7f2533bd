"""The training configuration (``configs/train/*.yaml``), strict and typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memgate.contract.config import ConfigError
from memgate.contract.defaults import RERANK_DEPTH
from memgate.datasets.real.natural_sources import SOURCES as NATURAL_SOURCES
from memgate.datasets.real.phrasing import SOURCES as PHRASING_SOURCES
from memgate.model.architecture import GateArchitecture
from memgate.model.encoder import EncoderConfig
from memgate.train.loss_config import LossConfig

# The encoder, gate and loss sections are the real config classes (EncoderConfig, the gate's
# GateArchitecture, LossConfig): each field and default is declared once, by its owner, and
# their own checks run at load time, the loader naming the dotted key (gate.hidden, loss.kind).


# Every "source" a training triple can carry: the default three, plus the real-phrasing sources
# of the four risk categories (data_gen.real_phrasing; in a data dir only when its data config
# switches them on). DEFAULT_SOURCES is data.sources' default (the released gate's recorded
# config); the phrasing sources are opted into by listing them in data.sources.
DEFAULT_SOURCES = ("template", "mined", "gatemem")
TRIPLE_SOURCES = DEFAULT_SOURCES + PHRASING_SOURCES + NATURAL_SOURCES  # natural: issue 43
# Benign list files for the ranking-preservation term, by data.list_sources name (issue 32).
LIST_SOURCES = {"gatemem": "benign_lists.jsonl", "dialogue": "dialogue_lists.jsonl"}
# The grid that calibrates the risk scale a against the guards (score form mask_risk).
RISK_SCALE_GRID = (1.0, 0.75, 0.5, 0.25, 0.0)
# Keys added to the train config after the released gate was trained, with the default that keeps
# the behaviour it was trained with (tests/commands/test_release.py compares the rest). Empty since
# issue 44's release (2026-12-03), which recorded every key; a key added later goes here until the
# next release.
ADDED_SINCE_RELEASE: dict = {}
PRECISIONS = ("32-true", "32", "64-true", "64", "bf16-mixed", "bf16-true", "16-mixed", "16-true")


@dataclass(frozen=True)
class DataSection:
    data_dir: str = "data/default"
    data_config: str = "configs/data/default.yaml"
    regenerate_if_missing: bool = True
    use_mined: bool = True  # train on data_gen.mine's triples when they exist for this encoder
    text_visible_only: bool = True  # the gate only sees text: train on text-visible preferences
    group_negatives: bool = False  # (query, m+) examples with all their m- (listwise needs it)
    max_negatives: int = 8
    shuffle_labels: bool = False  # label-permutation control: swap m+/m- at random
    # which triples to train on, by their "source" field: template (data_gen scenarios),
    # mined (data_gen.mine's hard negatives), gatemem (real GateMem phrasing), phrasing_* (the
    # real-phrasing sources of the four risk categories; never by default)
    sources: tuple[str, ...] = DEFAULT_SOURCES
    # per-source share of each training batch ({source: share}, summing to 1; every source listed
    # in data.sources). null: one shuffled stream of every triple, so a source's share is its
    # share of the triples (the behaviour the released gate was trained with)
    source_shares: Optional[dict] = field(default=None, metadata={"merge": "replace"})  # an override replaces it whole
    # benign lists for the ranking-preservation term: gatemem (train/benign_lists.jsonl, the
    # GateMem-generator lists) and / or dialogue (train/dialogue_lists.jsonl, data config
    # dialogue_lists.enabled)
    list_sources: tuple[str, ...] = ("gatemem",)
    list_size: int = 16  # candidates per list (a seeded subset of a longer list, fixed per list)
    lists_per_step: int = 64  # lists drawn per optimiser step

    def __post_init__(self) -> None:
        for key in ("list_size", "lists_per_step"):
            value = getattr(self, key)
            if type(value) is not int or value < 1:
                raise ConfigError(f"data.{key} must be an integer >= 1, got {value!r}")
        if self.list_size < 2:
            raise ConfigError(f"data.list_size must be >= 2 (a one-item list has no ranking), got {self.list_size!r}")
        unknown = sorted(set(self.sources) - set(TRIPLE_SOURCES))
        if unknown or not self.sources:
            raise ConfigError(f"data.sources must be a non-empty subset of {list(TRIPLE_SOURCES)}, "
                              f"got {list(self.sources)}")
        if not self.list_sources or set(self.list_sources) - set(LIST_SOURCES) or \
                len(set(self.list_sources)) != len(self.list_sources):
            raise ConfigError(f"data.list_sources must be distinct names from {list(LIST_SOURCES)}, "
                              f"got {list(self.list_sources)}")
        if self.source_shares is not None:
            check_source_shares(self.source_shares, self.sources)


def check_source_shares(shares: dict, sources) -> None:
    """data.source_shares: numbers >= 0 for sources listed in data.sources, summing to 1."""
    if not isinstance(shares, dict) or not shares:
        raise ConfigError(f"data.source_shares must be a mapping source -> share (or null), got {shares!r}")
    for name, share in shares.items():
        if name not in sources:
            raise ConfigError(f"data.source_shares.{name}: not in data.sources {list(sources)}")
        if type(share) is bool or not isinstance(share, (int, float)) or not share >= 0:
            raise ConfigError(f"data.source_shares.{name} must be a number >= 0, got {share!r}")
    total = float(sum(shares.values()))
    if abs(total - 1.0) > 1e-6:
        raise ConfigError(f"data.source_shares must sum to 1, got {total:.6g} ({shares})")


@dataclass(frozen=True)
class OptimSection:
    lr: float = 1e-3
    weight_decay: float = 0.01
    batch_size: int = 256
    max_epochs: int = 4
    max_steps: int = -1
    warmup_steps: int = 20
    grad_clip: float = 1.0


@dataclass(frozen=True)
class TrainerSection:
    accelerator: str = "cpu"  # "auto" picks a GPU when one is present
    devices: int = 1
    strategy: str = "auto"  # "ddp" for multi-process training
    precision: str = "32-true"  # "bf16-mixed" on a GPU
    num_threads: int = 2
    log_every_n_steps: int = 10
    val_check_interval: float = 0.5
    logger: str = "csv"  # csv | tensorboard | wandb (offline unless WANDB_MODE says otherwise) | none
    progress_bar: bool = True
    deterministic: bool = True


SELECTION_METRICS = ("text_risk_macro", "dev_pref_acc_gated")


@dataclass(frozen=True)
class SelectionSection:
    # text_risk_macro: the macro AUC(1 - S) - AUC(1 - cos) over the natural sources' select parts
    # (needs text_risk_guard), ties within its paired CI to the earlier step; dev_pref_acc_gated:
    # synthetic-dev (or your dev set's) preference accuracy, ties to the earlier step
    metric: str = "text_risk_macro"
    locomo_guard: bool = True  # LoCoMo-select recall_required@20 drop <= max_recall_drop
    gatemem_routes_guard: bool = True  # GateMem-select hybrid vs kleene_gate within route_margin
    gatemem_guard: bool = True  # GateMem-select suppression AUC >= min_suppression_auc
    text_risk_guard: bool = True  # every natural source's select suppression AUC >= min_suppression_auc
    # the sources of the text-risk panel (guard and figure): the issue-15 phrasing sources, plus
    # the natural sources of issue 43 where the data has them (configs/train/textrisk_natural.yaml)
    text_risk_sources: tuple[str, ...] = PHRASING_SOURCES
    max_recall_drop: float = 0.01
    route_margin: float = 0.01  # violation_any / protected_exposure at most this above, recall at most this below
    min_suppression_auc: float = 0.5
    guard_k: int = 20
    guard_rerank_depth: int = RERANK_DEPTH
    guard_n_boot: int = 1000  # bootstrap replicates of the guards' CIs and of the selection figure
    # gate.score_form=mask_risk: multipliers of the learned risk scale a tried at every validation
    # point, largest first, until every guard passes (memgate.train.risk_scale; select parts only);
    # values above 1 let a grow beyond the learned one where the guards allow it
    risk_scale_grid: tuple[float, ...] = RISK_SCALE_GRID


@dataclass(frozen=True)
class ExportSection:
    name: str = "memgate-minilm-l6"
    checkpoints_dir: str = "checkpoints"
    runs_dir: str = "runs"
    headline: bool = True  # evaluate the export on synthetic test and write headline.json


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    real_data_root: Optional[str] = None  # default data/real in the repository (env MEMGATE_DATA)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    gate: GateArchitecture = field(default_factory=GateArchitecture)
    loss: LossConfig = field(default_factory=LossConfig)
    data: DataSection = field(default_factory=DataSection)
    optim: OptimSection = field(default_factory=OptimSection)
    trainer: TrainerSection = field(default_factory=TrainerSection)
    selection: SelectionSection = field(default_factory=SelectionSection)
    export: ExportSection = field(default_factory=ExportSection)

    def __post_init__(self) -> None:
        if self.loss.kind == "listwise" and not self.data.group_negatives:
            raise ConfigError(
                "loss.kind=listwise clashes with data.group_negatives=false: the listwise loss "
                "needs all negatives of a (query, m+) example; set data.group_negatives=true"
            )
        if self.data.shuffle_labels and self.data.group_negatives:
            raise ConfigError(
                "data.shuffle_labels=true clashes with data.group_negatives=true: the permutation swaps "
                "m+ with one m- and the other negatives would still carry the true labels"
            )
        if self.data.max_negatives < 1:
            raise ConfigError(f"data.max_negatives must be >= 1, got {self.data.max_negatives!r}")
        if self.selection.metric not in SELECTION_METRICS:
            raise ConfigError(f"selection.metric must be one of {list(SELECTION_METRICS)}, got {self.selection.metric!r}")
        if self.selection.metric == "text_risk_macro" and not self.selection.text_risk_guard:
            raise ConfigError(
                "selection.metric=text_risk_macro clashes with selection.text_risk_guard=false: the macro figure "
                "comes from the natural-source panel; set selection.metric=dev_pref_acc_gated to select without it")
        unknown = [s for s in self.selection.text_risk_sources if s not in PHRASING_SOURCES + NATURAL_SOURCES]
        if unknown or not self.selection.text_risk_sources:
            raise ConfigError(f"selection.text_risk_sources: unknown or empty {unknown or '[]'}; expected names "
                              f"from {list(PHRASING_SOURCES + NATURAL_SOURCES)}")
        if not 0 <= self.selection.route_margin < 1:
            raise ConfigError(f"selection.route_margin must be in [0, 1), got {self.selection.route_margin!r}")
        grid = self.selection.risk_scale_grid
        if not grid or any(type(m) not in (int, float) or not 0 <= m <= 10 for m in grid) or len(set(grid)) != len(grid):
            raise ConfigError(f"selection.risk_scale_grid must be distinct numbers in [0, 10], got {list(grid)}")
        if self.loss.risk_weight > 0 and self.gate.score_form != "mask_risk":
            raise ConfigError(f"loss.risk_weight={self.loss.risk_weight} clashes with gate.score_form="
                              f"{self.gate.score_form!r}: the calibration loss trains the risk head of "
                              "gate.score_form=mask_risk")
        if not 0 <= self.selection.min_suppression_auc <= 1:
            raise ConfigError(f"selection.min_suppression_auc must be in [0, 1], got {self.selection.min_suppression_auc!r}")
        if type(self.selection.guard_n_boot) is not int or self.selection.guard_n_boot < 100:
            raise ConfigError(f"selection.guard_n_boot must be an integer >= 100, got {self.selection.guard_n_boot!r}")
        if self.trainer.logger not in ("csv", "tensorboard", "wandb", "none"):
            raise ConfigError(f"trainer.logger must be csv, tensorboard, wandb or none, got {self.trainer.logger!r}")
        if self.optim.batch_size < 1:
            raise ConfigError("optim.batch_size must be >= 1")
        if self.trainer.num_threads < 1:
            raise ConfigError("trainer.num_threads must be >= 1")
        if not (isinstance(self.optim.lr, (int, float)) and self.optim.lr > 0):
            raise ConfigError(f"optim.lr must be > 0, got {self.optim.lr!r}")
        for key in ("weight_decay", "grad_clip", "warmup_steps"):
            if getattr(self.optim, key) < 0:
                raise ConfigError(f"optim.{key} must be >= 0, got {getattr(self.optim, key)!r}")
        if self.optim.max_steps == 0 or self.optim.max_steps < -1:
            raise ConfigError(f"optim.max_steps must be -1 (train max_epochs) or >= 1, got {self.optim.max_steps!r}")
        if self.optim.max_steps <= 0 and self.optim.max_epochs < 1:
            raise ConfigError(f"optim.max_epochs must be >= 1 (or set optim.max_steps), got {self.optim.max_epochs!r}")
        if self.trainer.precision not in PRECISIONS:
            raise ConfigError(f"trainer.precision must be one of {list(PRECISIONS)}, got {self.trainer.precision!r}")
        if not 0 < self.trainer.val_check_interval:
            raise ConfigError(f"trainer.val_check_interval must be > 0, got {self.trainer.val_check_interval!r}")
        if not 0 <= self.selection.max_recall_drop < 1:
            raise ConfigError("selection.max_recall_drop must be in [0, 1) (a recall drop of 1 or more "
                              f"would switch the real-data guard off), got {self.selection.max_recall_drop!r}")
