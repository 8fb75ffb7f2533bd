"""Deprecated path (one release): the record is :mod:`memgate.retriever.records.memory`, the errors
:mod:`memgate.retriever.errors`."""

from memgate.retriever._moved import moved
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
    is_disk_full,
)
from memgate.retriever.records.memory import (
    CONTENT_FIELDS,
    FORGET_DIRECTIVE_KIND,
    MAX_ATTRIBUTES_BYTES,
    MAX_ATTRIBUTES_DEPTH,
    MAX_TEXT_CHARS,
    UPDATABLE_FIELDS,
    Applicability,
    StoredMemory,
    SupersededIn,
    Supersedes,
    check_attributes,
    check_text_size,
    renamed_memory,
    scope_from_dict,
    scope_to_dict,
)

moved(__name__)

__all__ = ["CONTENT_FIELDS", "FORGET_DIRECTIVE_KIND", "MAX_ATTRIBUTES_BYTES", "MAX_ATTRIBUTES_DEPTH",
           "MAX_TEXT_CHARS", "UPDATABLE_FIELDS", "AmbiguousMemoryError", "Applicability",
           "DamagedStoreError", "EncoderMismatchError", "ForgottenMemoryError", "RepeatedDetailError",
           "StaleRevisionError", "StoreError", "StoreFullError", "StoredMemory", "SupersededIn",
           "Supersedes", "SuppressedContentError", "UnknownMemoryError", "check_attributes",
           "check_text_size", "is_disk_full", "scope_from_dict", "scope_to_dict"]


def __getattr__(name: str) -> type:
    if name == "Memory":
        return renamed_memory("memgate.retriever.schema")
    raise AttributeError(f"module 'memgate.retriever.schema' has no attribute {name!r}")
