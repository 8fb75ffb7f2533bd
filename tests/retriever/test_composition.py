"""The retriever composes instead of mixing in: ``GatedRetriever`` has no memgate base class (it
holds its parts), and no class of ``memgate.retriever`` but an exception (users catch
``UnknownMemoryError`` as ``KeyError``, ...) has more than one memgate base."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings

import memgate.retriever
from memgate.retriever import GatedRetriever
from memgate.retriever._moved import MOVED


def retriever_classes() -> list[type]:
    out = []
    for info in pkgutil.walk_packages(memgate.retriever.__path__, "memgate.retriever."):
        if info.name in MOVED:
            continue  # the old paths define nothing
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (no module of the new layout imports an old path)
            module = importlib.import_module(info.name)
        out += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == info.name]
    return out


def memgate_bases(cls: type) -> list[type]:
    return [b for b in cls.__bases__ if b.__module__.startswith("memgate.")]


def test_the_facade_has_no_memgate_base():
    assert GatedRetriever.__bases__ == (object,)


def test_no_class_but_an_exception_has_two_memgate_bases():
    classes = retriever_classes()
    assert len(classes) > 40  # (every module was walked)
    mixed = [f"{c.__module__}.{c.__qualname__}: {[b.__name__ for b in memgate_bases(c)]}" for c in classes
             if len(memgate_bases(c)) > 1 and not issubclass(c, BaseException)]
    assert not mixed, "\n".join(mixed)
    # the exceptions keep their several bases (a memgate one and a builtin)
    assert sum(len(c.__bases__) > 1 for c in classes if issubclass(c, BaseException)) >= 5
