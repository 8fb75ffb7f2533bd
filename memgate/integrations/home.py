"""Where ``memgate.Memory()`` keeps its store when no path is given: ``$MEMGATE_HOME/store`` when
``MEMGATE_HOME`` is set, else the per-user data directory (``$XDG_DATA_HOME/memgate/store``, by
default ``~/.local/share/memgate/store``, on Linux; ``~/Library/Application Support/memgate/store``
on macOS; ``%LOCALAPPDATA%\\memgate\\store`` on Windows)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HOME_ENV = "MEMGATE_HOME"


def user_data_dir() -> Path:
    """The per-user data directory of memgate (the platform's convention, no package needed)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "memgate"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "memgate"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "memgate"


def default_store_dir() -> Path:
    """``$MEMGATE_HOME/store``, else ``user_data_dir() / "store"`` (module docstring)."""
    home = os.environ.get(HOME_ENV)
    return (Path(home) if home else user_data_dir()) / "store"


__all__ = ["HOME_ENV", "default_store_dir", "user_data_dir"]
