"""Generator config: the schema and defaults (dataclasses), strict YAML loading with ``key=value``
overrides (memgate.contract.config), and cross-field validation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Optional

from memgate.contract.config import ConfigError, from_dict, locate, to_dict
from memgate.contract.config import load_config as strict_load

INSTANCE_TYPES = (
    "cross_domain",
    "sycophancy",
    "tool_drift",
    "jailbreak",
    "purpose",
    "wrong_scope",
    "superseded",  # also yields the history queries
    "forgotten",
    "scoped_supersession",
    "unknown_provenance",
)

# The schema and its defaults, one dataclass per section (memgate.contract.config loads them:
# unknown keys and wrong types raise naming the dotted key and file:line); the cross-field checks
# are validate()'s. Generation reads the resolved config as a plain dict (resolve()).


@dataclass(frozen=True)
class SplitSize:
    groups: int = 1


@dataclass(frozen=True)
class Splits:
    train: SplitSize = field(default_factory=lambda: SplitSize(250))
    dev: SplitSize = field(default_factory=lambda: SplitSize(16))
    test: SplitSize = field(default_factory=lambda: SplitSize(52))


@dataclass(frozen=True)
class Group:
    principals: list[int] = field(default_factory=lambda: [2, 4])  # inclusive range of principals per group
    instances: list[int] = field(default_factory=lambda: [6, 8])  # inclusive range of scenario instances per group
    types: list[str] = field(default_factory=lambda: ["household", "team", "organisation"])


# relative weight of each scenario instance type (superseded instances also carry history queries)
ScenarioWeights = make_dataclass(
    "ScenarioWeights", [(name, float, field(default=1.0)) for name in INSTANCE_TYPES], frozen=True)


@dataclass(frozen=True)
class Queries:
    risk: int = 3  # risk queries per instance (distinct templates)
    beneficial: int = 3  # beneficial-control queries per instance (as many as risk queries)
    history: int = 2  # "how has it changed" queries per superseded instance (scenario history)
    unknown_intent_share: float = 0.1  # risk/control queries of policy scenarios with intent "unknown"
    forgotten_history_share: float = 0.25  # forgotten queries asked with history intent


@dataclass(frozen=True)
class Memories:
    extra_risky_share: float = 0.8  # a second negative (planted instruction / second ux memory)
    restatement_share: float = 0.6  # a risky note or anchor stored twice, in two phrasings
    older_value_share: float = 0.5  # superseded chains with an even older value
    optional_anchor_share: float = 0.8  # a second required anchor where a topic has one
    shared_namespace_share: float = 0.3  # anchors and state stored in <group>/shared
    past_phrasing_share: float = 0.4  # superseded values phrased in the past tense (text-visible)
    # scoped-supersession old values phrased past / with their end date (text-visible)
    scoped_past_phrasing_share: float = 0.4
    # superseded instances with an on-topic memory inadmissible for every intent (a belief, a
    # cross-domain note, a personality trait): the text-visible negative of the history queries
    history_risky_share: float = 0.6
    unresolved_relevance_share: float = 0.5  # unknown-provenance notes with relevance "unresolved"


@dataclass(frozen=True)
class Triples:
    # a=False memories of the query's own instance are always negatives; memories of other
    # instances of the group (the most word-overlapping first) are added per (query, m+):
    fallback_negatives: int = 1  # ... when the query has no instance negative
    extra_negatives: int = 0  # ... when it has one
    # per-split override of extra_negatives: more (easier) volume for training only, so that
    # dev/test triples stay the scenario pairs the hardness and preference figures are about
    extra_negatives_train: int = 1


@dataclass(frozen=True)
class Heldout:
    entity_group_share: float = 0.2  # test groups drawn entirely from held-out entity pools
    instance_share: float = 0.3  # other test instances with held-out templates (and topics)
    topic_share: float = 0.6  # of those, the share that also use a held-out topic


@dataclass(frozen=True)
class Audit:
    enabled: bool = True
    max_pairs: int = 8000  # deterministic subsample per split
    folds: int = 5
    c_grid: list[float] = field(default_factory=lambda: [0.1, 1.0, 10.0])


@dataclass(frozen=True)
class RealText:
    # Real phrasing (issue 5): candidate rows from GateMem generator episodes (data_gen.real_text);
    # data_gen.mine picks the negatives. Off in the code defaults (tests stay data-free);
    # configs/data/default.yaml turns it on.
    enabled: bool = False
    source: str = "gatemem"
    real_data_root: Optional[str] = None  # None: MEMGATE_DATA, else data/real in the repository
    max_positives: int = 16  # include-matched turns kept per checkpoint (seeded sample)
    negatives_per_positive: int = 1  # mined triples per (query, m+) and relation
    # benign lists for ranking preservation: "probe" (positives of the episode's checkpoints)
    # or "wide" (every non-protected own-episode turn up to as_of; an ablation row)
    benign_lists: str = "probe"


@dataclass(frozen=True)
class PhrasingSources:
    phrasing_cross_domain: bool = False
    phrasing_sycophancy: bool = False
    phrasing_sycophancy_bio: bool = False
    phrasing_tool_drift: bool = False
    phrasing_jailbreak: bool = False
    # the natural sources of issue 43 (memgate.datasets.real.natural)
    natural_cross_domain: bool = False
    natural_sycophancy: bool = False
    natural_tool_drift: bool = False
    natural_injection: bool = False


@dataclass(frozen=True)
class RealPhrasing:
    # Real phrasing for the four risk categories (issue 15, data_gen.real_phrasing): every source
    # off by default; switch one on with real_phrasing.sources.<name>: true.
    sources: PhrasingSources = field(default_factory=PhrasingSources)
    split_seed: int = 0  # the sources' train/select/report split
    max_positives: int = 8  # beneficial memories kept per query (seeded sample)
    max_negatives: int = 16  # trap memories kept per query (seeded sample)
    negatives_per_positive: int = 1  # mined triples per (query, m+)
    max_triples_per_source: int = 4000
    max_triples_per_memory: int = 20  # a memory (either side) in at most this many triples of its source
    real_data_root: Optional[str] = None  # None: MEMGATE_DATA, else data/real


@dataclass(frozen=True)
class DialogueLists:
    # Benign ranking-preservation lists from the Synthetic-Persona-Chat conversations (issue 32,
    # data_gen.dialogue_lists): off by default; training uses them when data.list_sources has "dialogue".
    enabled: bool = False
    max_items: int = 24
    min_items: int = 4


@dataclass(frozen=True)
class GeneratorConfig:
    seed: int = 0
    splits: Splits = field(default_factory=Splits)
    group: Group = field(default_factory=Group)
    scenario_weights: ScenarioWeights = field(default_factory=ScenarioWeights)
    queries: Queries = field(default_factory=Queries)
    memories: Memories = field(default_factory=Memories)
    # share of policy-scenario negatives whose route-visible tag reveals the violation
    metadata_coverage: float = 0.5
    # share of superseded / forgotten / scoped memories whose released lifecycle reveals the state
    lifecycle_metadata_coverage: float = 0.6
    triples: Triples = field(default_factory=Triples)
    heldout: Heldout = field(default_factory=Heldout)
    audit: Audit = field(default_factory=Audit)
    real_text: RealText = field(default_factory=RealText)
    real_phrasing: RealPhrasing = field(default_factory=RealPhrasing)
    dialogue_lists: DialogueLists = field(default_factory=DialogueLists)




def _share(cfg: dict, dotted: str) -> None:
    node: Any = cfg
    for part in dotted.split("."):
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or not 0.0 <= node <= 1.0:
        raise ConfigError(f"config key {dotted!r} must be a number in [0, 1], got {node!r}")


def _count(cfg: dict, dotted: str, minimum: int = 0) -> None:
    node: Any = cfg
    for part in dotted.split("."):
        node = node[part]
    if type(node) is not int or node < minimum:
        raise ConfigError(f"config key {dotted!r} must be an integer >= {minimum}, got {node!r}")


def validate(cfg: dict) -> dict:
    if type(cfg["seed"]) is not int or cfg["seed"] < 0:
        raise ConfigError(f"config key 'seed' must be a non-negative integer, got {cfg['seed']!r}")
    for split in ("train", "dev", "test"):
        _count(cfg, f"splits.{split}.groups", 1)
    for key in ("principals", "instances"):
        lo_hi = cfg["group"][key]
        if (not isinstance(lo_hi, list) or len(lo_hi) != 2 or any(type(v) is not int for v in lo_hi)
                or lo_hi[0] > lo_hi[1]):
            raise ConfigError(f"config key 'group.{key}' must be [min, max] integers, got {lo_hi!r}")
    if cfg["group"]["principals"][0] < 2:
        raise ConfigError("config key 'group.principals': a group needs at least 2 principals "
                          "(wrong_scope pairs two of them)")
    if cfg["group"]["instances"][0] < 1:
        raise ConfigError("config key 'group.instances' must allow at least one instance")
    for name, weight in cfg["scenario_weights"].items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ConfigError(f"config key 'scenario_weights.{name}' must be a number >= 0, got {weight!r}")
    if sum(cfg["scenario_weights"].values()) <= 0:
        raise ConfigError("config key 'scenario_weights': at least one weight must be positive")
    for key in ("risk", "beneficial", "history"):
        _count(cfg, f"queries.{key}", 0)
    if cfg["queries"]["risk"] < 1:
        raise ConfigError("config key 'queries.risk' must be >= 1")
    if cfg["queries"]["risk"] > 4:
        raise ConfigError("config key 'queries.risk' must be <= 4 (held-out templates: 4 per frame type)")
    for key in ("unknown_intent_share", "forgotten_history_share"):
        _share(cfg, f"queries.{key}")
    for key in cfg["memories"]:
        _share(cfg, f"memories.{key}")
    _share(cfg, "metadata_coverage")
    _share(cfg, "lifecycle_metadata_coverage")
    _count(cfg, "triples.fallback_negatives", 0)
    _count(cfg, "triples.extra_negatives", 0)
    _count(cfg, "triples.extra_negatives_train", 0)
    for key in cfg["heldout"]:
        _share(cfg, f"heldout.{key}")
    _count(cfg, "audit.max_pairs", 100)
    _count(cfg, "audit.folds", 2)
    if not isinstance(cfg["audit"]["enabled"], bool):
        raise ConfigError("config key 'audit.enabled' must be a bool")
    if not cfg["audit"]["c_grid"] or any(
        isinstance(c, bool) or not isinstance(c, (int, float)) or c <= 0 for c in cfg["audit"]["c_grid"]
    ):
        raise ConfigError("config key 'audit.c_grid' must be a non-empty list of positive numbers")
    if not isinstance(cfg["real_text"]["enabled"], bool):
        raise ConfigError("config key 'real_text.enabled' must be a bool")
    root = cfg["real_text"]["real_data_root"]
    if root is not None and not isinstance(root, str):
        raise ConfigError(f"config key 'real_text.real_data_root' must be a path string or null, got {root!r}")
    if cfg["real_text"]["source"] != "gatemem":
        raise ConfigError(f"config key 'real_text.source': only 'gatemem' is supported, got "
                          f"{cfg['real_text']['source']!r}")
    if cfg["real_text"]["benign_lists"] not in ("probe", "wide"):
        raise ConfigError("config key 'real_text.benign_lists' must be 'probe' or 'wide', got "
                          f"{cfg['real_text']['benign_lists']!r}")
    _count(cfg, "real_text.max_positives", 1)
    _count(cfg, "real_text.negatives_per_positive", 1)
    from data_gen.real_phrasing import validate as validate_real_phrasing

    validate_real_phrasing(cfg, ConfigError)
    from data_gen.dialogue_lists import validate as validate_dialogue_lists

    validate_dialogue_lists(cfg, ConfigError)
    return cfg


def resolve(raw: Optional[Mapping] = None, seed: Optional[int] = None) -> dict:
    """Defaults overridden by ``raw`` (unknown keys and wrong types raise), then ``seed`` if given;
    validated. Returns the plain dict generation reads."""
    cfg = to_dict(from_dict(GeneratorConfig, dict(raw or {})))
    if seed is not None:
        cfg["seed"] = seed
    return validate(cfg)


def load_config(path: Path, seed: Optional[int] = None, overrides: Sequence[str] = ()) -> dict:
    """The generator config in the YAML file ``path`` with ``key=value`` ``overrides`` (the
    strict loader of memgate.contract.config); errors name the key and ``file:line``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    overrides = list(overrides)
    config = strict_load(GeneratorConfig, path, overrides)
    try:
        return resolve(to_dict(config), seed)
    except ConfigError as exc:
        where = locate(exc, path, overrides) or str(path)
        raise ConfigError(f"{where}: {exc}") from None
