"""Test helper: the real-data root, or a skip (a failure under ``CI=true``) when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

from memgate.real_data.paths import ENV_VAR, real_data_available, real_data_root


def require_real_data(root: Path | None = None) -> Path:
    """Return the real-data root; ``pytest.skip`` with the reason when it is absent, or
    ``pytest.fail`` when the environment says ``CI=true`` (CI must run the real-data tests)."""
    import pytest

    root = real_data_root() if root is None else Path(root)
    if real_data_available(root):
        return root
    reason = f"real data not found at {root} (no SHA256SUMS; set {ENV_VAR} or real_data_root)"
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason}; CI=true requires it")
    pytest.skip(reason)
    raise AssertionError("unreachable")
