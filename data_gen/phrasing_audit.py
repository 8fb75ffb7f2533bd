"""Audits of the real-phrasing sources (issue 15): ``python -m data_gen.phrasing_audit``.

Per source (``memgate.datasets.real.phrasing``), on its balanced pairs:

- ``memory_only_auc``: ``data_gen.audit``'s method (L2 logistic regression on TF-IDF unigrams and
  bigrams of the memory text alone, C by GroupKFold over memory families of the train part)
  trained on the ``train`` part, AUC of "trap" on the ``report`` part (bar: <= 0.75; near 0.5:
  the memory alone does not tell a trap from a control). ``query_only_auc`` likewise on the
  query text (information: a control differs from a trap by what the query asks, by design).
- ``red_flag(rows, suppression)``: with a suppression function (higher = the scorer pushes the
  memory down more for this query), the mean suppression on traps minus on beneficial controls
  and the AUC of suppression for "trap", each with a percentile bootstrap interval resampling
  memories (each memory has as many traps as controls, so the difference is paired within it).
  ``red_flag`` is True when the mean suppression on beneficial controls is >= the mean on traps
  (difference <= 0); ``red_flag_ci`` when the whole interval of the difference is <= 0.

Both on the natural pairs and on the similarity-matched variant (traps matched in cosine to the
controls, ``memgate.datasets.real.phrasing.balanced_pairs``; ``*_matched`` keys), where ``1 - cos``
is near chance by construction and a gate has to read the risk.

With a gate (``--gate``) also ``vs_cos`` per part and variant (issue 32,
``memgate.eval.transfer.transfer_analysis`` with the memory, or the user, as query and episode):
AUC(1 - S) beside AUC(1 - cos) and their paired difference (does the gated score separate traps
from controls better than the cosine?), the suppression AUC of ``cos - S`` (direction) and the
activity, mean ``|cos - S|`` on traps and on controls (``gate_figures`` condenses them), and
``by_family`` per part: the gate's suppression AUC on each topic family's pairs (natural variant),
the held-out family marked: a report part holds the source's held-out family, which no train or
select pair has, so this is where a gate that passed the select guards can still invert.

Suppression functions: ``cosine_suppression(encoder)`` is the baseline ``1 - cos``;
``gate_suppression(gate, encoder)`` is ``S_ref - S`` of a trained gate (as in the GateMem
transfer check). Any callable ``(query_texts, memory_texts) -> array`` works.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.datasets.real import natural
from memgate.datasets.real.phrasing import SOURCES
from memgate.datasets.real.phrasing import eval_rows as phrasing_eval_rows

DEFAULT_N_BOOT = 2000
Suppression = Callable[[Sequence[str], Sequence[str]], np.ndarray]


def _audit_rows(rows: dict, field: str) -> list[dict]:
    texts = rows["memory_texts"] if field == "m" else rows["query_texts"]
    return [{"group": f, field: t, "y": int(y)} for f, t, y in zip(rows["families"], texts, rows["labels"])]


def text_only_auc(train: dict, test: dict, field: str, c_grid=(0.1, 1.0, 10.0), folds: int = 5) -> Optional[float]:
    from data_gen.audit import _auc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _auc(_audit_rows(train, field), _audit_rows(test, field), field, list(c_grid), folds, text=True)


def red_flag(rows: dict, suppression: Suppression, n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
             alpha: float = 0.05) -> dict:
    """See the module doc; ``rows`` as returned by ``memgate.datasets.real.phrasing.eval_rows``."""
    from memgate.eval.transfer import _episode_weights, _EpisodeAUC, _interval

    s = np.asarray(suppression(rows["query_texts"], rows["memory_texts"]), dtype=float)
    y = np.asarray(rows["labels"], dtype=bool)
    if len(s) != len(y) or not np.isfinite(s).all():
        raise ValueError(f"red_flag: the suppression function returned {len(s)} finite values for {len(y)} rows")
    if y.all() or not y.any():
        raise ValueError("red_flag: need both trap and beneficial rows")
    clusters, idx = np.unique(np.asarray(rows["clusters"], dtype=object).astype(str), return_inverse=True)
    n_c = len(clusters)
    trap_sum = np.bincount(idx, weights=s * y, minlength=n_c)
    trap_n = np.bincount(idx, weights=y.astype(float), minlength=n_c)
    ben_sum = np.bincount(idx, weights=s * ~y, minlength=n_c)
    ben_n = np.bincount(idx, weights=(~y).astype(float), minlength=n_c)
    auc = _EpisodeAUC(s, y, idx, n_c)
    rng = np.random.default_rng(seed)
    diffs, aucs = np.empty(n_boot), np.empty(n_boot)
    block = 500
    for start in range(0, n_boot, block):
        w = _episode_weights(rng, n_c, min(block, n_boot - start))
        with np.errstate(invalid="ignore", divide="ignore"):
            diffs[start:start + len(w)] = (w @ trap_sum) / (w @ trap_n) - (w @ ben_sum) / (w @ ben_n)
            aucs[start:start + len(w)] = auc(w)
    mean_trap, mean_ben = float(s[y].mean()), float(s[~y].mean())
    diff = mean_trap - mean_ben
    lo, hi = _interval(diffs, alpha)
    return {
        "n_rows": int(len(y)), "n_traps": int(y.sum()), "n_beneficial": int((~y).sum()), "n_clusters": int(n_c),
        "mean_suppression_trap": round(mean_trap, 4), "mean_suppression_beneficial": round(mean_ben, 4),
        "difference": {"value": round(diff, 4), "ci": [round(lo, 4), round(hi, 4)]},
        "suppression_auc": {"value": round(float(auc(np.ones((1, n_c)))[0]), 4),
                            "ci": [round(v, 4) for v in _interval(aucs, alpha)]},
        "red_flag": bool(diff <= 0), "red_flag_ci": bool(hi <= 0),
        "n_boot": n_boot, "seed": seed, "alpha": alpha, "cluster": "memory",
    }


def cosine_suppression(encoder) -> Suppression:
    """``1 - cos(q, m)`` with ``encoder`` (``memgate.model.encoder.Encoder``; unit-norm embeddings)."""

    def fn(queries: Sequence[str], memories: Sequence[str]) -> np.ndarray:
        texts = sorted(set(queries) | set(memories))
        index = {t: i for i, t in enumerate(texts)}
        vec = encoder.encode(texts, progress=False)
        q = vec[[index[t] for t in queries]]
        m = vec[[index[t] for t in memories]]
        return 1.0 - np.sum(q * m, axis=1)

    return fn


def gate_suppression(gate, encoder) -> Suppression:
    """``S_ref - S`` of a ``memgate.model.gate.MemGate`` (the ungated minus the gated score)."""
    import torch

    def fn(queries: Sequence[str], memories: Sequence[str]) -> np.ndarray:
        texts = sorted(set(queries) | set(memories))
        index = {t: i for i, t in enumerate(texts)}
        vec = encoder.encode(texts, progress=False)
        q = torch.from_numpy(np.ascontiguousarray(vec[[index[t] for t in queries]]))
        v = torch.from_numpy(np.ascontiguousarray(vec[[index[t] for t in memories]])).unsqueeze(1)
        with torch.no_grad():
            out = gate(q, v)
        return (out.reference[:, 0] - out.score[:, 0]).double().numpy()

    return fn


def gate_figures(analysis: dict) -> dict:
    """The figures issue 32 reports from one ``transfer_analysis`` of a part (positives = traps)."""
    return {"auc_one_minus_gated": analysis["one_minus_gated"]["pooled_auc"],
            "auc_one_minus_cos": analysis["one_minus_cos"]["pooled_auc"],
            "gated_minus_cos": analysis["gated_minus_cos"]["pooled_auc"],
            "gated_minus_cos_within": analysis["gated_minus_cos"]["within_query_auc"],
            "suppression_auc": analysis["suppression"]["pooled_auc"],
            "activity_traps": analysis["activity"]["positive"], "activity_controls": analysis["activity"]["negative"],
            "n_rows": analysis["n_rows"], "n_clusters": analysis["n_episodes"]}


def vs_cos(rows: dict, one_minus_cos: np.ndarray, suppression: np.ndarray, n_boot: int = DEFAULT_N_BOOT,
           seed: int = 0, cubic: bool = False) -> dict:
    """``transfer_analysis`` of a gate on ``rows``: cos = 1 - (1 - cos), S = cos - suppression."""
    from memgate.eval.transfer import transfer_analysis

    cos = 1.0 - np.asarray(one_minus_cos, dtype=float)
    clusters = np.asarray(rows["clusters"], dtype=object)
    return transfer_analysis(cos, cos - np.asarray(suppression, dtype=float), np.asarray(rows["labels"], dtype=bool),
                             clusters, clusters, n_boot=n_boot, seed=seed, cubic=cubic)


def eval_rows(name: str, part: str, **kwargs) -> dict:
    """The pairs of a phrasing source (issue 15) or a natural source (issue 43, ``natural_*``)."""
    if name.startswith("natural_"):
        return natural.eval_rows(name, part, **kwargs)
    return phrasing_eval_rows(name, part, **kwargs)


def audit_source(name: str, suppressions: dict, parts=("select", "report"), root: Optional[Path] = None,
                 seed: int = 0, n_boot: int = DEFAULT_N_BOOT, embed=None) -> dict:
    """Memory-only / query-only AUC (train -> report) and the red flag of every suppression
    function in ``suppressions`` ({label: fn}) on each of ``parts``; with ``embed`` also on the
    similarity-matched variant of each part (``red_flag_matched``)."""
    variants = {"natural": None} if embed is None else {"natural": None, "matched": embed}
    out = {"source": name, "sizes": {}, "red_flag": {}}
    for variant, emb in variants.items():
        rows = {part: eval_rows(name, part, purpose="evaluation", root=root, seed=seed, embed=emb)
                for part in ("train",) + tuple(p for p in parts if p != "train")}
        suffix = "" if variant == "natural" else "_matched"
        out["sizes"][variant] = {p: r["info"] for p, r in rows.items()}
        for field, key in (("m", "memory_only_auc"), ("q", "query_only_auc")):
            out[key + suffix] = text_only_auc(rows["train"], rows["report"], field) if "report" in rows else None
        out["red_flag" + suffix] = {}
        for part in parts:
            scores = {label: np.asarray(fn(rows[part]["query_texts"], rows[part]["memory_texts"]), dtype=float)
                      for label, fn in suppressions.items()}
            out["red_flag" + suffix][part] = {label: red_flag(rows[part], lambda _q, _m, s=s: s, n_boot=n_boot,
                                                              seed=seed) for label, s in scores.items()}
            if "one_minus_cos" in scores and "gate" in scores:
                analysis = vs_cos(rows[part], scores["one_minus_cos"], scores["gate"], n_boot=n_boot, seed=seed)
                out.setdefault("vs_cos", {}).setdefault(part, {})[variant] = gate_figures(analysis)
                if variant == "natural":
                    out.setdefault("by_family", {})[part] = family_aucs(rows[part], scores["gate"])
            if "heldout" in rows[part] and variant == "natural":  # natural sources: the held-out-family cell
                out.setdefault("cells", {})[part] = heldout_cells(rows[part], scores, n_boot, seed)
    return out


def heldout_cells(rows: dict, scores: dict, n_boot: int, seed: int) -> dict:
    """``{"seen" | "heldout": {"pairs", "memories", <suppression label>: red_flag}}``: a natural
    source's part split into the pairs of the families that trained and those held out."""
    out = {}
    for cell, want in (("seen", False), ("heldout", True)):
        idx = [i for i, h in enumerate(rows["heldout"]) if h == want]
        sub = {k: [v[i] for i in idx] for k, v in rows.items() if isinstance(v, list)}
        sub["info"] = rows["info"]
        out[cell] = {"pairs": len(idx), "memories": len(set(sub["memory_ids"]))}
        if idx:
            for label, s in scores.items():
                out[cell][label] = red_flag(sub, lambda _q, _m, s=s[idx]: s, n_boot=n_boot, seed=seed)
    return out


def family_aucs(rows: dict, suppression: np.ndarray) -> dict:
    """family -> {"n", "suppression_auc" (None when the family lacks a trap or a control),
    "heldout"} of one part's pairs (``rows["families"]``, ``rows["labels"]``)."""
    from memgate.eval.metrics import rank_auc

    families = np.asarray(rows["families"], dtype=object)
    labels = np.asarray(rows["labels"], dtype=bool)
    heldout = rows["info"].get("heldout_family")
    held = {f for f, h in zip(rows["families"], rows["heldout"]) if h} if "heldout" in rows else {heldout}
    out = {}
    for family in sorted(set(families.tolist())):
        at = families == family
        both = bool(labels[at].any() and (~labels[at]).any())
        out[family] = {"n": int(at.sum()), "heldout": family in held,
                       "suppression_auc": float(rank_auc(suppression[at], labels[at])) if both else None}
    return out


def _ci(entry: dict, digits: int = 3) -> str:
    lo, hi = entry["ci"]
    return f"{entry['value']:.{digits}f}" + ("" if lo is None else f" [{lo:.{digits}f}, {hi:.{digits}f}]")


def markdown(result: dict) -> str:
    """The docs/real_phrasing.md tables of an audit: sizes, ``1 - cos`` per part and variant, and
    the gate's figures when the audit had one."""
    from memgate.datasets.real.phrasing import source_summary

    lines = ["| source | category | memories (origins) | queries (natural) | held-out family | "
             "select pairs / memories | report pairs / memories | memory-only AUC | query-only AUC |",
             "|---" * 9 + "|"]
    result = {name: result[name] for name in SOURCES if name in result}  # the sources' own order
    for name, audit in result.items():
        s = source_summary(name)
        origins = ", ".join(f"{k} {v:,}" for k, v in s["memory_origins"].items())
        sel, rep = audit["sizes"]["natural"]["select"], audit["sizes"]["natural"]["report"]
        lines.append(f"| `{name}` | {s['category']} | {s['memories']:,} ({origins}) | {s['queries']:,} "
                     f"({s['natural_queries']:,}) | {s['heldout_family']} | {sel['pairs']:,} / {sel['memories_used']:,} | "
                     f"{rep['pairs']:,} / {rep['memories_used']:,} | {audit['memory_only_auc']} | "
                     f"{audit['query_only_auc']} |")
    lines += ["", "| source | part | variant | mean 1 - cos traps / controls | AUC of 1 - cos for trap [95% CI] "
              "| red flag |", "|---" * 6 + "|"]
    for name, audit in result.items():
        for part in ("select", "report"):
            for variant, key in (("natural", "red_flag"), ("matched", "red_flag_matched")):
                if part not in audit.get(key, {}):
                    continue
                rf = audit[key][part]["one_minus_cos"]
                lines.append(f"| `{name}` | {part} | {variant} | {rf['mean_suppression_trap']:.4f} / "
                             f"{rf['mean_suppression_beneficial']:.4f} | {_ci(rf['suppression_auc'])} | "
                             f"{'yes' if rf['red_flag'] else 'no'} |")
    if any("vs_cos" in a for a in result.values()):
        lines += ["", "| source | part | variant | AUC(1 - S) | AUC(1 - cos) | AUC(1 - S) - AUC(1 - cos) [95% CI] "
                  "| suppression AUC (cos - S) [95% CI] | mean abs(cos - S) traps / controls |", "|---" * 8 + "|"]
        for name, audit in result.items():
            for part in ("select", "report"):
                for variant in ("natural", "matched"):
                    g = audit.get("vs_cos", {}).get(part, {}).get(variant)
                    if g is None:
                        continue
                    lines.append(f"| `{name}` | {part} | {variant} | {g['auc_one_minus_gated']['value']:.4f} | "
                                 f"{g['auc_one_minus_cos']['value']:.4f} | {_ci(g['gated_minus_cos'], 4)} | "
                                 f"{_ci(g['suppression_auc'])} | {g['activity_traps']['value']:.4f} / "
                                 f"{g['activity_controls']['value']:.4f} |")
    if any("by_family" in a for a in result.values()):
        lines += ["", "| source | part | the gate's suppression AUC by topic family (pairs; * = held-out family) |",
                  "|---" * 3 + "|"]
        for name, audit in result.items():
            for part, families in audit.get("by_family", {}).items():
                cells = ", ".join(f"{f}{'*' if e['heldout'] else ''} "
                                  f"{'—' if e['suppression_auc'] is None else format(e['suppression_auc'], '.3f')}"
                                  f" ({e['n']:,})" for f, e in families.items())
                lines.append(f"| `{name}` | {part} | {cells} |")
    return "\n".join(lines) + "\n"


def audit_markdown(result: dict) -> str:
    """The docs tables of an audit: the phrasing sources' (``markdown``), then the natural sources'
    (``natural_markdown``), each where the audit has them."""
    phrasing = {n: r for n, r in result.items() if not n.startswith("natural_")}
    natural_part = {n: r for n, r in result.items() if n.startswith("natural_")}
    return "\n\n".join(text for text, present in ((markdown(phrasing) if phrasing else "", phrasing),
                                                   (natural_markdown(natural_part) if natural_part else "", natural_part))
                        if present)


def natural_markdown(result: dict) -> str:
    """The natural sources' cells (issue 43): per source, part and cell (the families that trained,
    the held-out family) the pairs, memories, AUC(1 - cos) and, with a gate, its suppression AUC."""
    lines = ["| source | part | cell | pairs | memories | 1 − cos AUC [95 % CI] | gate suppression AUC [95 % CI] "
             "| gate red flag |", "| --- | --- | --- | ---: | ---: | --- | --- | --- |"]
    for name, r in sorted(result.items()):
        for part, cells in sorted((r.get("cells") or {}).items()):
            for cell in ("seen", "heldout"):
                c = cells.get(cell) or {}
                cos = (c.get("one_minus_cos") or {}).get("suppression_auc")
                gate = c.get("gate") or {}
                lines.append(f"| `{name}` | {part} | {cell} | {c.get('pairs', 0):,} | {c.get('memories', 0):,} | "
                             f"{_auc_ci(cos)} | {_auc_ci(gate.get('suppression_auc'))} | "
                             f"{'yes' if gate.get('red_flag') else ('no' if gate else '-')} |")
    return "\n".join(lines) + "\n"


def _auc_ci(entry) -> str:
    if not entry:
        return "-"
    return f"{entry['value']:.3f} [{entry['ci'][0]:.3f}, {entry['ci'][1]:.3f}]"


def encoder_embed(encoder):
    """texts -> unit vectors with ``encoder`` (for the matched variant)."""
    return lambda texts: encoder.encode(list(texts), progress=False)


def rebuild_markdown(json_path: Path, out: Path) -> None:
    """The tables again from a written audit JSON (no encoder needed)."""
    out.write_text(markdown(json.loads(Path(json_path).read_text(encoding="utf-8"))), encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_gen.phrasing_audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", nargs="*", default=list(SOURCES))
    parser.add_argument("--parts", nargs="*", default=["select", "report"])
    parser.add_argument("--gate", type=Path, default=None, help="an exported gate directory (adds its S_ref - S)")
    parser.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT)
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    parser.add_argument("--markdown", type=Path, default=None, help="write the docs tables here")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from data_gen.mine import load_encoder

    encoder = load_encoder(None)
    fns = {"one_minus_cos": cosine_suppression(encoder)}
    if args.gate is not None:
        from memgate.model.gate import MemGate

        gate = MemGate.from_pretrained(args.gate, expected_encoder=encoder.identity["id"])
        gate.eval()
        fns["gate"] = gate_suppression(gate, encoder)
    result = {name: audit_source(name, fns, args.parts, n_boot=args.n_boot,
                                 embed=None if name.startswith("natural_") else encoder_embed(encoder))
              for name in args.sources}  # natural pairs are matched by construction (one query, two memories)
    text = json.dumps(result, indent=2, sort_keys=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(audit_markdown(result), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
