"""The one markdown-table helper: ``| a | b |`` rows and their ``|---|`` rule (torch-free, in the
contract layer so every layer's reports can use it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def row(*cells: object) -> str:
    """One table row: ``| c1 | c2 | ... |`` (cells through ``str``)."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def rule(columns: int | Sequence[str]) -> str:
    """The header rule: ``|---|---|`` for a column count, or one marker per column
    (``"---"``, ``"---:"``, ...) for aligned columns."""
    marks = ["---"] * columns if isinstance(columns, int) else list(columns)
    return "|" + "".join(f"{m}|" for m in marks)


def table(header: Sequence[object], rows: Iterable[Sequence[object]],
          align: Sequence[str] | None = None) -> list[str]:
    """The lines of a table: header row, rule (``align`` markers, default ``---``), body rows."""
    return [row(*header), rule(len(header) if align is None else align), *(row(*r) for r in rows)]


__all__ = ["row", "rule", "table"]
