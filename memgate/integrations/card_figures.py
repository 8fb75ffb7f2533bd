"""Plausibility of the figures a model card records, checked before the gate's default-on rule
(:mod:`memgate.integrations.gate_default`) reads any of them.

The rule trusts a guard's ``passed`` and the LoCoMo-report drop; a card whose ``headline.json``
says the drop is ``-5`` (a recall 5 higher than a recall can be) used to turn the gate on. Every
figure under the places the rule reads, whatever guards the card records, must be plausible:

- ``config.json`` -> ``export.selection.guard`` and ``export.selection.guards`` (every guard,
  the required ones and any other), ``export.locomo_report``;
- ``headline.json`` -> ``locomo_report``.

:data:`FIGURE_RANGES` says what each figure may be, by its key (the first matching pattern
wins); a number under any other key must still be finite. A figure of the wrong type counts as
implausible too. :func:`implausible_figures` lists the figures that break the table, each as
``file: path = value (why)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Optional

# key pattern -> (kind, low, high): "bool"; "number" in [low, high]; "interval" [a, b] with
# low <= a <= b <= high; "count" an int >= 0; "text" a string
FIGURE_RANGES: tuple[tuple[str, str, float, float], ...] = (
    ("passed", "bool", 0, 0),
    ("selected", "bool", 0, 0),
    ("*ci", "interval", -1.0, 1.0),        # drop_ci, ci: bootstrap intervals of a recall drop
    ("*drop", "number", -1.0, 1.0),        # a recall difference: both recalls are in [0, 1]
    ("*auc*", "number", 0.0, 1.0),         # suppression_auc, one_minus_cos_auc
    ("recall*", "number", 0.0, 1.0),       # recall_required@20_<route>
    ("*acc*", "number", 0.0, 1.0),
    ("rows", "count", 0, math.inf),
    ("n_*", "count", 0, math.inf),
    ("source", "text", 0, 0),
    ("metric", "text", 0, 0),
    ("route", "text", 0, 0),
    ("baseline", "text", 0, 0),
)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def check_figure(key: str, value: Any) -> Optional[str]:
    """Why ``value`` is not a plausible figure for ``key``, or None."""
    for pattern, kind, low, high in FIGURE_RANGES:  # noqa: B007 (the match is used after the loop)
        if fnmatchcase(key.lower(), pattern):
            break
    else:
        if _is_number(value) and not math.isfinite(value):
            return "not a finite number"
        return None
    if kind == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if kind == "text":
        return None if isinstance(value, str) else "must be a string"
    if kind == "count":
        return None if type(value) is int and value >= low else "must be an int >= 0"
    if kind == "interval":
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(map(_is_number, value))):
            return "must be a [low, high] pair of numbers"
        a, b = value
        if not (math.isfinite(a) and math.isfinite(b) and low <= a <= b <= high):
            return f"must be an interval inside [{low:g}, {high:g}], low <= high"
        return None
    if not _is_number(value) or not math.isfinite(value) or not low <= value <= high:
        return f"must be a number in [{low:g}, {high:g}]"
    return None


def _walk(value: Any, path: str, where: str, out: list[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(item, Mapping) or (isinstance(item, list) and not _leaf_list(str(key))):
                _walk(item, sub, where, out)
                continue
            problem = check_figure(str(key), item)
            if problem:
                out.append(f"{where}: {sub} = {item!r} ({problem})")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", where, out)


def _leaf_list(key: str) -> bool:
    """Keys whose list value is one figure (an interval), not a list of guards."""
    return any(fnmatchcase(key.lower(), p) for p, kind, _, _ in FIGURE_RANGES if kind == "interval")


def implausible_figures(config: Mapping[str, Any], headline: Optional[Mapping[str, Any]]) -> list[str]:
    """Every figure the default-on rule may read that breaks :data:`FIGURE_RANGES` (empty when
    all are plausible)."""
    out: list[str] = []
    found = config.get("export")
    export: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    chosen = export.get("selection")
    selection: Mapping[str, Any] = chosen if isinstance(chosen, Mapping) else {}
    for key in ("guard", "guards"):
        if key in selection:
            _walk({key: selection[key]}, "export.selection", "config.json", out)
    if "locomo_report" in export:
        _walk({"locomo_report": export["locomo_report"]}, "export", "config.json", out)
    if isinstance(headline, Mapping) and "locomo_report" in headline:
        _walk({"locomo_report": headline["locomo_report"]}, "", "headline.json", out)
    return out


__all__ = ["FIGURE_RANGES", "check_figure", "implausible_figures"]
