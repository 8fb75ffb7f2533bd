# ruff: noqa: F401  (the TYPE_CHECKING imports are the re-exports __getattr__ serves)
"""memgate: admissible memory retrieval for long-term AI-agent memory.

The public API is re-exported here (``from memgate import Memory, MemGate, QueryContext``); the
table below is the one list of it (docs/api.md shows the same). Each name is imported on first
use, so ``from memgate import Memory, MemGate, QueryContext`` imports no torch (docs/design.md
section 2): ``Memory`` is torch-free until its first encode or score, and the two names whose class
is a torch module (``TORCH_BACKED``) stand in as a :class:`LazyExport` until first used (then
they are the class itself).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see (names re-exported through __getattr__)
    from memgate.actions import (
        ActionDecision,
        ActionInput,
        ActionQuery,
        decide_action,
        decide_actions,
        load_policy,
    )
    from memgate.contract.admissibility import PolicyRules, SupersessionScope
    from memgate.contract.records import MemoryRecord, QueryContext
    from memgate.integrations.memory import Memory
    from memgate.integrations.rerank import rerank
    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.model.gate import MemGate
    from memgate.model.gate_config import MemGateConfig
    from memgate.model.scoring import FusedGateScorer
    from memgate.retriever import EmbeddedStore, GatedRetriever, RetrieverConfig, Supersedes
    from memgate.retriever.errors import (
        AmbiguousMemoryError,
        DamagedStoreError,
        EncoderMismatchError,
        ForgottenMemoryError,
        RepeatedDetailError,
        StaleRevisionError,
        StoreError,
        StoreFullError,
        SuppressedContentError,
        UnknownMemoryError,
    )

EXPORTS = {  # public name -> the module that defines it
    "MemGate": "memgate.model.gate",
    "MemGateConfig": "memgate.model.gate_config",
    "FusedGateScorer": "memgate.model.scoring",
    "Encoder": "memgate.model.encoder",
    "EncoderConfig": "memgate.model.encoder",
    "QueryContext": "memgate.contract.records",
    "MemoryRecord": "memgate.contract.records",
    "PolicyRules": "memgate.contract.admissibility",
    "SupersessionScope": "memgate.contract.admissibility",
    "GatedRetriever": "memgate.retriever",
    "RetrieverConfig": "memgate.retriever",
    "EmbeddedStore": "memgate.retriever",
    "Memory": "memgate.integrations.memory",  # the agent facade (the record: memgate.retriever.StoredMemory)
    "rerank": "memgate.integrations.rerank",
    "Supersedes": "memgate.retriever",
    "ActionInput": "memgate.actions",
    "ActionQuery": "memgate.actions",
    "ActionDecision": "memgate.actions",
    "decide_action": "memgate.actions",
    "decide_actions": "memgate.actions",
    "load_policy": "memgate.actions",
    # the errors a caller of Memory, the stores or the retriever catches (memgate.retriever.errors)
    "StoreError": "memgate.retriever.errors",
    "UnknownMemoryError": "memgate.retriever.errors",
    "StaleRevisionError": "memgate.retriever.errors",
    "ForgottenMemoryError": "memgate.retriever.errors",
    "SuppressedContentError": "memgate.retriever.errors",
    "RepeatedDetailError": "memgate.retriever.errors",
    "AmbiguousMemoryError": "memgate.retriever.errors",
    "EncoderMismatchError": "memgate.retriever.errors",
    "StoreFullError": "memgate.retriever.errors",
    "DamagedStoreError": "memgate.retriever.errors",
}

__all__ = list(EXPORTS)
__version__ = "0.1.0"

# Names whose class subclasses torch.nn.Module or holds torch tensors: importing the name does not
# import torch (a LazyExport stands in for it until its first use).
TORCH_BACKED = frozenset({"MemGate", "FusedGateScorer"})


class LazyExport:
    """``from memgate import MemGate`` without importing torch: a stand-in that imports the class
    at its first use and forwards that use to it: a call (``MemGate(config)``), an attribute
    (``MemGate.from_pretrained``), ``isinstance`` / ``issubclass``, a base class (``class
    MyGate(MemGate)``) or a union (``MemGate | None``). ``resolve()`` returns the class. Once the
    defining module is imported, ``memgate.MemGate`` is the class itself."""

    __slots__ = ("_module", "_name")

    def __init__(self, module: str, name: str):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_name", name)

    def resolve(self) -> Any:
        return getattr(importlib.import_module(self._module), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.resolve(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self.resolve(), attr, value)

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, self.resolve())

    def __subclasscheck__(self, cls: Any) -> bool:
        return issubclass(cls, self.resolve())

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (self.resolve(),)

    def __or__(self, other: Any) -> Any:
        return self.resolve() | other

    def __ror__(self, other: Any) -> Any:
        return other | self.resolve()

    def __repr__(self) -> str:
        return f"<memgate.{self._name}: {self._module}.{self._name}, imported at its first use>"


def __getattr__(name: str):
    if name in EXPORTS:
        module = EXPORTS[name]
        if name in TORCH_BACKED and module not in sys.modules:
            return LazyExport(module, name)
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'memgate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
