"""The report-part I/O guard: training and selection code never reads a ``report`` part.

Two locks, both checked by every real-data adapter through ``check_part_access``:

1. the adapters refuse a ``report`` part unless the caller passes ``purpose="evaluation"``;
2. inside ``forbid_report_parts()`` (or under the environment variable
   ``MEMGATE_FORBID_REPORT=1``, for worker processes) a ``report`` part is refused even with
   ``purpose="evaluation"``. Training and model-selection entry points wrap their work in it (or
   use the ``no_report_access`` decorator), so no code path below them can reach report data.

The forbid flag is a process-wide counter (visible to every thread; forked workers inherit it), so
nesting works and leaving the outermost context clears it. Refusals raise ``PermissionError``.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

ENV_FORBID = "MEMGATE_FORBID_REPORT"
EVALUATION_PURPOSE = "evaluation"
REPORT_PART = "report"
PARTS = {
    "locomo": ("select", "report"),
    "gatemem": ("generator", "select", "report"),
    # real phrasing (memgate.datasets.real.phrasing)
    "phrasing_cross_domain": ("train", "select", "report"),
    "phrasing_sycophancy": ("train", "select", "report"),
    "phrasing_sycophancy_bio": ("train", "select", "report"),
    "phrasing_tool_drift": ("train", "select", "report"),
    "phrasing_jailbreak": ("train", "select", "report"),
    # natural sources (memgate.datasets.real.natural, issue 43)
    "natural_cross_domain": ("train", "select", "report"),
    "natural_sycophancy": ("train", "select", "report"),
    "natural_tool_drift": ("train", "select", "report"),
    "natural_injection": ("train", "select", "report"),
}

_LOCK = threading.Lock()
_DEPTH = 0

F = TypeVar("F", bound=Callable)


def report_parts_forbidden() -> bool:
    """True inside ``forbid_report_parts()`` or when ``MEMGATE_FORBID_REPORT`` is 1/true/yes."""
    env = os.environ.get(ENV_FORBID, "").strip().lower() in ("1", "true", "yes")
    with _LOCK:
        return env or _DEPTH > 0


@contextmanager
def forbid_report_parts() -> Iterator[None]:
    """Within this block every adapter raises ``PermissionError`` when asked for a report part."""
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1


def no_report_access(func: F) -> F:
    """Decorator for training / selection entry points: run ``func`` inside the guard."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with forbid_report_parts():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def check_part_access(source: str, part: str, purpose: str | None = None) -> None:
    """Raise unless ``part`` of ``source`` may be read for ``purpose``.

    Unknown sources or parts raise ``ValueError``; a report part raises ``PermissionError``
    inside the guard, or when ``purpose`` is not ``"evaluation"``.
    """
    if source not in PARTS:
        raise ValueError(f"unknown real-data source {source!r}; expected one of {sorted(PARTS)}")
    if part not in PARTS[source]:
        raise ValueError(f"{source}: unknown part {part!r}; expected one of {PARTS[source]}")
    if part != REPORT_PART:
        return
    if report_parts_forbidden():
        raise PermissionError(
            f"{source}: the {part!r} part is forbidden here (inside forbid_report_parts() or "
            f"{ENV_FORBID}=1): training and model selection never read report data"
        )
    if purpose != EVALUATION_PURPOSE:
        raise PermissionError(
            f"{source}: the {part!r} part is for evaluation only; pass "
            f"purpose={EVALUATION_PURPOSE!r} (got purpose={purpose!r})"
        )
