"""Qdrant local mode (``path=``): the exclusive path lock memgate takes before qdrant-client
opens the folder, and how to tell a local client from a server client."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


class PathLock:
    """An exclusive lock on ``<path>/memgate.lock`` (``flock``), taken without waiting: another
    process holding the path is a ``RuntimeError`` (local mode admits one process per path)."""

    def __init__(self, path: Path):
        path.mkdir(parents=True, exist_ok=True)
        self._fd: Optional[int] = os.open(path / "memgate.lock", os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:  # pragma: no cover - no flock on this platform: qdrant-client's lock only
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise RuntimeError(f"Storage folder {path} is already accessed by another QdrantStore "
                               "(local mode admits one process per path; use a Qdrant server to "
                               "share a store)") from None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # (closing the descriptor releases the flock)
            self._fd = None

    __del__ = release  # a store dropped without close() frees the path, as qdrant-client's does


def is_local(client: Any) -> bool:
    inner = getattr(client, "_client", None)
    return type(inner).__name__ == "QdrantLocal"


__all__ = ["PathLock", "is_local"]
