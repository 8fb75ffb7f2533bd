"""Text-visible risk on the natural-phrasing sources (issue 33): what the learned gate adds to the
cosine, per source, per risk category and as the one macro figure that model selection maximises.

A **cell** is one source's part in one variant (``natural`` pairs, or the similarity-``matched``
pairs where ``1 - cos`` is weak): rows ``(query, memory, trap?)`` from
``memgate.datasets.real.phrasing.eval_rows``, clusters = the memory (the user for the biography
source). The natural sources of issue 43 (``memgate.datasets.real.natural``; in the panel when a
config lists them in ``selection.text_risk_sources``) have one variant: both memories of a pair
answer one query, so they are matched by construction; their select parts hold a topic family
that train lacks, so the guard and the figure see transfer to an unseen topic. Per cell and gate, with ``S`` the gated score and ``cos`` the ungated cosine:

- ``gated_minus_cos`` = AUC(1 - S) - AUC(1 - cos) for "trap": does the score a retriever ranks by
  separate traps from controls better than the cosine? (the selection figure);
- ``suppression_auc`` = AUC(cos - S): the direction the gate moves scores (the no-inversion guard:
  >= 0.5; it compares the gate with the cosine, so the biography source, whose ``1 - cos`` prefers
  the bait by construction, is judged like every other);
- ``activity`` = mean |cos - S| on traps and on controls.

**The macro figure**: per source the mean of its two variants, per category the mean of its
sources (sycophancy = ``phrasing_sycophancy`` and ``phrasing_sycophancy_bio``, plus
``natural_sycophancy`` where listed), and the mean over
the four categories (cross_domain, sycophancy, tool_drift, jailbreak), so each category weighs 1
whatever its number of sources or rows.

Uncertainty: a percentile cluster bootstrap (``n_boot`` replicates; per source one multinomial draw
of its clusters, shared by both variants, independent across sources). The weights are drawn once
per ``TextRiskPanel``, so the replicates of two gates on one panel are paired: the interval of
``macro(a) - macro(b)`` is ``reps(a) - reps(b)`` (``paired_difference``). AUCs under cluster weights
``w`` are exact: ``AUC(w) = w C w^T / ((w . P)(w . N))`` with ``C[a, b]`` = the number of (trap in
cluster a, control in cluster b) pairs the score orders right (ties 1/2) and ``P``, ``N`` the trap and
control counts per cluster (``ClusterAUC``), the same statistic as
``memgate.eval.transfer.transfer_analysis``'s pooled AUC, computed for every replicate at once.

``report_figures`` gives the same figures on the ``report`` parts through ``transfer_analysis``
(reporting only, ``purpose="evaluation"``); selection code opens ``select`` parts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from memgate.contract.seeding import component_rng
from memgate.datasets.real import natural, natural_sources
from memgate.datasets.real.phrasing import CATEGORY as PHRASING_CATEGORY
from memgate.datasets.real.phrasing import SOURCES, eval_rows
from memgate.eval.transfer import transfer_analysis

CATEGORIES = ("cross_domain", "sycophancy", "tool_drift", "jailbreak")
VARIANTS = ("natural", "matched")
CATEGORY = {**PHRASING_CATEGORY, **natural_sources.CATEGORY}
ALL_SOURCES = tuple(SOURCES) + tuple(natural_sources.SOURCES)


def variants_of(name: str) -> tuple:
    """A natural source's pairs share one query, so they are matched already: one variant."""
    return ("natural",) if name in natural_sources.SOURCES else VARIANTS


def rows_of(name: str, part: str, variant: str, *, purpose, root, seed, embed) -> dict:
    if name in natural_sources.SOURCES:
        return natural.eval_rows(name, part, purpose=purpose, root=root, seed=seed)
    if name not in SOURCES:
        raise ValueError(f"unknown text-risk source {name!r}; expected one of {list(ALL_SOURCES)}")
    return eval_rows(name, part, purpose=purpose, root=root, seed=seed,
                     embed=embed if variant == "matched" else None)
DEFAULT_N_BOOT = 1000
ALPHA = 0.05


class ClusterAUC:
    """AUC of ``scores`` for ``labels`` under cluster multiplicities, many replicates at once."""

    def __init__(self, scores: np.ndarray, labels: np.ndarray, cluster: np.ndarray, n_clusters: int):
        scores = np.asarray(scores, dtype=float)
        y = np.asarray(labels, dtype=bool)
        pos, neg = scores[y], scores[~y]
        if not len(pos) or not len(neg):
            raise ValueError("ClusterAUC: need both trap and control rows")
        right = (pos[:, None] > neg[None, :]).astype(float) + 0.5 * (pos[:, None] == neg[None, :])
        a = np.zeros((len(pos), n_clusters))
        a[np.arange(len(pos)), cluster[y]] = 1.0
        b = np.zeros((len(neg), n_clusters))
        b[np.arange(len(neg)), cluster[~y]] = 1.0
        self.C = a.T @ right @ b
        self.P, self.N = a.sum(axis=0), b.sum(axis=0)

    def __call__(self, w: np.ndarray) -> np.ndarray:
        """``w``: (R, clusters) multiplicities -> (R,) AUCs (NaN where a class is empty)."""
        num = ((w @ self.C) * w).sum(axis=1)
        den = (w @ self.P) * (w @ self.N)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    def value(self) -> float:
        return float(self(np.ones((1, len(self.P))))[0])


def interval(reps: np.ndarray, alpha: float = ALPHA) -> list:
    reps = np.asarray(reps, dtype=float)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return [None, None]
    lo, hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    return [float(lo), float(hi)]


@dataclass
class Cell:
    """One source's part in one variant, embedded: rows, clusters (indices into the source's
    cluster list, shared by its variants) and the cosine."""

    source: str
    category: str
    variant: str
    q: torch.Tensor  # (n, d) query vectors
    v: torch.Tensor  # (n, d) memory vectors
    cos: np.ndarray  # (n,) ungated cosine
    labels: np.ndarray  # (n,) True = trap
    cluster: np.ndarray  # (n,) int
    n_clusters: int

    @property
    def key(self) -> str:
        return f"{self.source}/{self.variant}"


def build_cells(encoder, part: str = "select", purpose: Optional[str] = "selection", root=None,
                seed: int = 0, sources: Sequence[str] = SOURCES) -> list[Cell]:
    """Every source's ``part`` in both variants, each text embedded once by ``encoder``."""
    embed = lambda texts: encoder.encode(list(texts), progress=False)  # noqa: E731
    cells = []
    for name in sources:
        rows = {variant: rows_of(name, part, variant, purpose=purpose, root=root, seed=seed, embed=embed)
                for variant in variants_of(name)}
        clusters = sorted({str(c) for r in rows.values() for c in r["clusters"]})
        index = {c: i for i, c in enumerate(clusters)}
        for variant, r in rows.items():
            texts = sorted(set(r["query_texts"]) | set(r["memory_texts"]))
            at = {t: i for i, t in enumerate(texts)}
            vec = np.ascontiguousarray(embed(texts), dtype=np.float32)
            q = vec[[at[t] for t in r["query_texts"]]]
            v = vec[[at[t] for t in r["memory_texts"]]]
            qn = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
            vn = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            cells.append(Cell(name, CATEGORY[name], variant, torch.from_numpy(q), torch.from_numpy(v),
                              np.sum(qn * vn, axis=1).astype(float), np.asarray(r["labels"], dtype=bool),
                              np.array([index[str(c)] for c in r["clusters"]], dtype=np.int64), len(clusters)))
    return cells


def macro_of(per_cell: dict, cells: Sequence[Cell]):
    """The macro figure (module doc) of per-cell values (floats or replicate arrays) keyed by
    ``cell.key``: (per source, per category, macro)."""
    sources: dict = {}
    for cell in cells:
        sources.setdefault(cell.source, []).append(per_cell[cell.key])
    by_source = {s: sum(v) / len(v) for s, v in sources.items()}
    categories: dict = {}
    for s, value in by_source.items():
        categories.setdefault(CATEGORY[s], []).append(value)
    by_category = {c: sum(categories[c]) / len(categories[c]) for c in CATEGORIES if c in categories}
    return by_source, by_category, sum(by_category.values()) / len(by_category)


class TextRiskPanel:
    """The natural sources' cells with fixed bootstrap weights: ``scores(gate)`` runs the gate once
    over every row, ``figures(scores)`` gives every figure of the module doc with its interval and
    the macro's replicates (``"_macro_reps"``, for paired comparisons between gates)."""

    def __init__(self, cells: Sequence[Cell], n_boot: int = DEFAULT_N_BOOT, seed: int = 0):
        if not cells:
            raise ValueError("TextRiskPanel: no cells")
        self.cells = list(cells)
        self.n_boot = n_boot
        self.weights: dict = {}
        for cell in self.cells:
            if cell.source not in self.weights:
                rng = component_rng(seed, f"text_risk/{cell.source}")
                n = cell.n_clusters
                self.weights[cell.source] = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
        self._cos = {c.key: ClusterAUC(1.0 - c.cos, c.labels, c.cluster, c.n_clusters) for c in self.cells}
        self._cos_reps = {k: auc(self.weights[k.split("/")[0]]) for k, auc in self._cos.items()}

    @torch.no_grad()
    def scores(self, gate) -> dict:
        """cell key -> the gated score S of every row (one batched gate pass per cell)."""
        out = {}
        for cell in self.cells:
            weight = next(gate.parameters(), None)
            q, v = cell.q, cell.v
            if weight is not None:
                q, v = q.to(device=weight.device, dtype=weight.dtype), v.to(device=weight.device, dtype=weight.dtype)
            out[cell.key] = gate(q, v.unsqueeze(1)).score[:, 0].double().cpu().numpy()
        return out

    def figures(self, scores: dict) -> dict:
        cells, gated_reps, diff_value = {}, {}, {}
        for cell in self.cells:
            s = np.asarray(scores[cell.key], dtype=float)
            if len(s) != len(cell.labels) or not np.isfinite(s).all():
                raise ValueError(f"text risk: {cell.key}: expected {len(cell.labels)} finite scores")
            w = self.weights[cell.source]
            gated = ClusterAUC(1.0 - s, cell.labels, cell.cluster, cell.n_clusters)
            supp = ClusterAUC(cell.cos - s, cell.labels, cell.cluster, cell.n_clusters)
            g_reps, s_reps = gated(w), supp(w)
            gated_reps[cell.key] = g_reps - self._cos_reps[cell.key]
            moved = np.abs(cell.cos - s)
            value = gated.value() - self._cos[cell.key].value()
            diff_value[cell.key] = value
            cells[cell.key] = {
                "source": cell.source, "category": cell.category, "variant": cell.variant,
                "n_rows": int(len(s)), "n_clusters": int(cell.n_clusters),
                "auc_one_minus_gated": gated.value(), "auc_one_minus_cos": self._cos[cell.key].value(),
                "gated_minus_cos": {"value": value, "ci": interval(gated_reps[cell.key])},
                "suppression_auc": {"value": supp.value(), "ci": interval(s_reps)},
                "activity_traps": float(moved[cell.labels].mean()),
                "activity_controls": float(moved[~cell.labels].mean()),
            }
        by_source, by_category, macro = macro_of(diff_value, self.cells)
        rep_source, rep_category, rep_macro = macro_of(gated_reps, self.cells)
        return {
            "cells": cells,
            "sources": {s: {"value": v, "ci": interval(rep_source[s])} for s, v in by_source.items()},
            "categories": {c: {"value": v, "ci": interval(rep_category[c])} for c, v in by_category.items()},
            "macro": {"value": macro, "ci": interval(rep_macro)},
            "n_boot": self.n_boot,
            "_macro_reps": rep_macro,
        }

    @staticmethod
    def paired_difference(a: dict, b: dict) -> dict:
        """macro(a) - macro(b) with its paired interval, from two ``figures`` of this panel."""
        return {"value": a["macro"]["value"] - b["macro"]["value"],
                "ci": interval(np.asarray(a["_macro_reps"]) - np.asarray(b["_macro_reps"]))}


def report_figures(gate, encoder, n_boot: int = 2000, seed: int = 0, root=None,
                   sources: Sequence[str] = SOURCES) -> dict:
    """Every source's ``report`` part, both variants, through ``transfer_analysis`` (memories as
    query and episode, as ``data_gen.phrasing_audit`` does), and the macro point figure.
    Reporting only: it reads report parts (``purpose="evaluation"``)."""
    cells = build_cells(encoder, "report", "evaluation", root=root, seed=0, sources=sources)
    out: dict = {"cells": {}}
    diff = {}
    with torch.no_grad():
        for cell in cells:
            s = gate(cell.q, cell.v.unsqueeze(1)).score[:, 0].double().numpy()
            clusters = cell.cluster.astype(str)
            a = transfer_analysis(cell.cos, s, cell.labels, clusters, clusters, n_boot=n_boot, seed=seed, cubic=False)
            out["cells"][cell.key] = {
                "source": cell.source, "category": cell.category, "variant": cell.variant,
                "n_rows": a["n_rows"], "n_clusters": a["n_episodes"],
                "auc_one_minus_gated": a["one_minus_gated"]["pooled_auc"],
                "auc_one_minus_cos": a["one_minus_cos"]["pooled_auc"],
                "gated_minus_cos": a["gated_minus_cos"]["pooled_auc"],
                "suppression_auc": a["suppression"]["pooled_auc"],
                "activity_traps": a["activity"]["positive"], "activity_controls": a["activity"]["negative"],
            }
            diff[cell.key] = a["gated_minus_cos"]["pooled_auc"]["value"]
    by_source, by_category, macro = macro_of(diff, cells)
    out.update(sources=by_source, categories=by_category, macro=macro, n_boot=n_boot)
    return out
