"""Generator config: defaults, YAML loading, strict key checking and cross-field validation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

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

DEFAULT_CONFIG: dict[str, Any] = {
    "seed": 0,
    "splits": {
        "train": {"groups": 250},
        "dev": {"groups": 16},
        "test": {"groups": 52},
    },
    "group": {
        "principals": [2, 4],  # inclusive range of principals per group
        "instances": [6, 8],  # inclusive range of scenario instances per group
        "types": ["household", "team", "organisation"],
    },
    # relative weight of each scenario instance type (superseded instances also carry history queries)
    "scenario_weights": {name: 1.0 for name in INSTANCE_TYPES},
    "queries": {
        "risk": 3,  # risk queries per instance (distinct templates)
        "beneficial": 3,  # beneficial-control queries per instance (as many as risk queries)
        "history": 2,  # "how has it changed" queries per superseded instance (scenario history)
        "unknown_intent_share": 0.1,  # risk/control queries of policy scenarios with intent "unknown"
        "forgotten_history_share": 0.25,  # forgotten queries asked with history intent
    },
    "memories": {
        "extra_risky_share": 0.8,  # a second negative (planted instruction / second ux memory)
        "restatement_share": 0.6,  # a risky note or anchor stored twice, in two phrasings
        "older_value_share": 0.5,  # superseded chains with an even older value
        "optional_anchor_share": 0.8,  # a second required anchor where a topic has one
        "shared_namespace_share": 0.3,  # anchors and state stored in <group>/shared
        "past_phrasing_share": 0.4,  # superseded values phrased in the past tense (text-visible)
        # scoped-supersession old values phrased past / with their end date (text-visible)
        "scoped_past_phrasing_share": 0.4,
        # superseded instances with an on-topic memory inadmissible for every intent (a belief, a
        # cross-domain note, a personality trait): the text-visible negative of the history queries
        "history_risky_share": 0.6,
        "unresolved_relevance_share": 0.5,  # unknown-provenance notes with relevance "unresolved"
    },
    # share of policy-scenario negatives whose route-visible tag reveals the violation
    "metadata_coverage": 0.5,
    # share of superseded / forgotten / scoped memories whose released lifecycle reveals the state
    "lifecycle_metadata_coverage": 0.6,
    "triples": {
        # a=False memories of the query's own instance are always negatives; memories of other
        # instances of the group (the most word-overlapping first) are added per (query, m+):
        "fallback_negatives": 1,  # ... when the query has no instance negative
        "extra_negatives": 0,  # ... when it has one
        # per-split override of extra_negatives: more (easier) volume for training only, so that
        # dev/test triples stay the scenario pairs the hardness and preference figures are about
        "extra_negatives_train": 1,
    },
    "heldout": {
        "entity_group_share": 0.2,  # test groups drawn entirely from held-out entity pools
        "instance_share": 0.3,  # other test instances with held-out templates (and topics)
        "topic_share": 0.6,  # of those, the share that also use a held-out topic
    },
    "audit": {
        "enabled": True,
        "max_pairs": 8000,  # deterministic subsample per split
        "folds": 5,
        "c_grid": [0.1, 1.0, 10.0],
    },
    "real_text": {
        # Real phrasing (issue 5): candidate rows from GateMem generator episodes (data_gen.real_text);
        # data_gen.mine picks the negatives. Off in the code defaults (tests stay data-free);
        # configs/data/default.yaml turns it on.
        "enabled": False,
        "source": "gatemem",
        "real_data_root": None,  # None: MEMGATE_DATA, else data/real in the repository
        "max_positives": 16,  # include-matched turns kept per checkpoint (seeded sample)
        "negatives_per_positive": 1,  # mined triples per (query, m+) and relation
        # benign lists for ranking preservation: "probe" (positives of the episode's checkpoints)
        # or "wide" (every non-protected own-episode turn up to as_of; an ablation row)
        "benign_lists": "probe",
    },
    # Real phrasing for the four risk categories (issue 15, data_gen.real_phrasing): every source
    # off by default; switch one on with real_phrasing.sources.<name>: true.
    "real_phrasing": {
        "sources": {name: False for name in ("phrasing_cross_domain", "phrasing_sycophancy",
                                             "phrasing_tool_drift", "phrasing_jailbreak")},
        "split_seed": 0,  # the sources' train/select/report split
        "max_positives": 8,  # beneficial memories kept per query (seeded sample)
        "max_negatives": 16,  # trap memories kept per query (seeded sample)
        "negatives_per_positive": 1,  # mined triples per (query, m+)
        "max_triples_per_source": 2000,
        "real_data_root": None,  # None: MEMGATE_DATA, else data/real
    },
}


class ConfigError(ValueError):
    """A bad generator config; the message names the key."""


def _merge(base: dict, override: Mapping, path: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in base:
            raise ConfigError(f"unknown config key {where!r}")
        if isinstance(base[key], dict):
            if not isinstance(value, Mapping):
                raise ConfigError(f"config key {where!r} must be a mapping, got {value!r}")
            out[key] = _merge(base[key], value, where)
        else:
            out[key] = copy.deepcopy(value)
    return out


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
    return cfg


def resolve(raw: Optional[Mapping] = None, seed: Optional[int] = None) -> dict:
    """Defaults overridden by ``raw`` (unknown keys raise), then ``seed`` if given; validated."""
    cfg = _merge(DEFAULT_CONFIG, raw or {}, "")
    if seed is not None:
        cfg["seed"] = seed
    return validate(cfg)


def load_config(path: Path, seed: Optional[int] = None) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: the config must be a YAML mapping")
    try:
        return resolve(raw, seed)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
