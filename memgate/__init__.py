"""memgate: admissible memory retrieval for long-term AI-agent memory.

``from memgate import MemGate, MemGateConfig`` works as before; the gate (and with it torch) is
imported on first use, so the torch-free parts (records, admissibility, real-data readers, the
data generator) start in a fraction of a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers and IDEs see
    from memgate.gate import MemGate, MemGateConfig

__all__ = ["MemGate", "MemGateConfig"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in __all__:
        from memgate import gate

        return getattr(gate, name)
    raise AttributeError(f"module 'memgate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
