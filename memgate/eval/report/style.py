"""How a route looks in every plot: one colour per route family, one marker (bars: one hatch)
per variant inside the family, so no two routes of a plot share both; routes whose figures are
identical are drawn once and labelled together (``a = b``) instead of hiding under each other.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

# family -> (colour, variants in marker order); a route not listed falls into "other".
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "dense": ("#1f77b4", ("global_dense", "namespace_dense", "current_only", "random_partition")),
    "lexical / fused": ("#8c564b", ("global_bm25", "global_rrf", "global_recency")),
    "metadata gate": ("#2ca02c", ("kleene_gate", "kleene_gate_fail_closed", "post_filter_20",
                                  "post_filter_100", "post_filter_500")),
    "learned gate": ("#d62728", ("learned_gate", "learned_gate_namespace", "learned_gate_drop",
                                 "learned_gate_namespace_drop", "hybrid")),
    "embedding classifier": ("#9467bd", ("embed_classifier", "embed_classifier_drop")),
    "text verifier": ("#ff7f0e", ()),  # text_verifier_<backend>[_abstain]
    "oracle": ("#000000", ("oracle_required",)),
    "other": ("#7f7f7f", ()),
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "++", "--", "**", "OO", "||", "..//")


@dataclass(frozen=True)
class Style:
    family: str
    colour: str
    marker: str
    hatch: str

    def line(self) -> dict:
        return {"color": self.colour, "marker": self.marker}


def family_of(route: str) -> str:
    for family, (_, variants) in FAMILIES.items():
        if route in variants:
            return family
    if route.startswith("text_verifier"):
        return "text verifier"
    if route.startswith("learned_gate"):
        return "learned gate"
    return "other"


def route_styles(routes: Sequence[str]) -> dict[str, Style]:
    """A style per route, unique (colour, marker) and (colour, hatch) within ``routes``."""
    out: dict[str, Style] = {}
    used: dict[str, set] = {}
    order = {family: i for i, family in enumerate(FAMILIES)}
    for route in sorted(dict.fromkeys(routes), key=lambda r: (order[family_of(r)], r)):
        family = family_of(route)
        colour, variants = FAMILIES[family]
        taken = used.setdefault(family, set())
        slot = variants.index(route) if route in variants else len(variants)
        while slot in taken:
            slot += 1
        taken.add(slot)
        out[route] = Style(family, colour, MARKERS[slot % len(MARKERS)], HATCHES[slot % len(HATCHES)])
    return out


def sort_routes(routes: Sequence[str]) -> list[str]:
    """Routes grouped by family (the legend order), variants in their family's order."""
    styles = route_styles(routes)
    order = {family: i for i, family in enumerate(FAMILIES)}
    marker = {m: i for i, m in enumerate(MARKERS)}
    return sorted(styles, key=lambda r: (order[styles[r].family], marker[styles[r].marker], r))


def merge_identical(series: dict[str, Hashable]) -> list[list[str]]:
    """Routes grouped by identical figures (``series[route]`` hashable, e.g. a tuple of points),
    in first-seen order; each group is drawn once, labelled ``a = b``."""
    groups: dict = {}
    for route, figures in series.items():
        groups.setdefault(figures, []).append(route)
    return list(groups.values())


def label_of(group: Sequence[str], width: int = 48) -> str:
    """``a = b = c (identical)``, wrapped onto lines of about ``width`` characters."""
    if len(group) == 1:
        return group[0]
    lines, line = [], group[0]
    for route in group[1:]:
        if len(line) + 3 + len(route) > width:
            lines.append(line)
            line = "= " + route
        else:
            line += " = " + route
    return "\n".join(lines + [line + " (identical)"])


def legend_outside(ax_or_fig, handles=None, labels=None, title: str | None = None, fontsize: int = 7):
    """A legend right of the axes (or of the figure), never over the data."""
    kwargs = {"fontsize": fontsize, "frameon": False, "title": title, "title_fontsize": fontsize}
    if handles is not None:
        kwargs.update(handles=handles, labels=labels)
    elif not ax_or_fig.get_legend_handles_labels()[0]:
        return None  # nothing drawn on these axes
    return ax_or_fig.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)
