"""memgate: admissible memory retrieval for long-term AI-agent memory.

``from memgate import MemGate, MemGateConfig`` works as before; the gate (and with it torch) is
imported on first use, so the torch-free parts (records, admissibility, real-data readers, the
data generator) start in a fraction of a second.
"""

from __future__ import annotations

__all__ = ["MemGate", "MemGateConfig"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in __all__:
        from memgate import gate

        return getattr(gate, name)
    raise AttributeError(f"module 'memgate' has no attribute {name!r}")
