"""The store-contract fixture: a test that takes ``store_kind`` (or ``new_store``) runs once per
back-end in :data:`tests.retriever.store_helpers.KINDS` (embedded, Qdrant, PostgreSQL); a new
back-end joins every such test through that list."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes import IDENT
from tests.retriever.store_helpers import KINDS, make_store


@pytest.fixture(params=KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Each store kind in turn."""
    return str(request.param)


@pytest.fixture
def new_store(store_kind: str, tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """Opens empty stores of the kind under test (``new_store(name=, audit=, identity=)``: as
    :func:`tests.retriever.store_helpers.make_store`); each is closed after the test."""
    opened: list[Any] = []

    def open_store(name: str = "store", audit: Any = None, identity: dict[str, Any] = IDENT) -> Any:
        store = make_store(store_kind, tmp_path, name=name, audit=audit, identity=identity)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()
