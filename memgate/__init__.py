"""memgate: admissible memory retrieval for long-term AI-agent memory."""

from memgate.gate import MemGate, MemGateConfig

__all__ = ["MemGate", "MemGateConfig"]
__version__ = "0.1.0"
