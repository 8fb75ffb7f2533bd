"""Deprecated path (one release): the PostgreSQL store's tables are
:mod:`memgate.retriever.stores.postgres.tables`."""

from memgate.retriever._moved import moved
from memgate.retriever.stores.postgres.tables import (
    _DDL,
    _HNSW,
    HNSW_MAX_DIM,
    OLDER_FORMATS,
    POSTGRES_FORMAT,
    as_array,
    check_schema_name,
    dumps,
    ensure_vector_extension,
    from_db,
    open_schema,
    statement,
    to_db,
)

moved(__name__)

__all__ = ["HNSW_MAX_DIM", "OLDER_FORMATS", "POSTGRES_FORMAT", "_DDL", "_HNSW", "as_array",
           "check_schema_name", "dumps", "ensure_vector_extension", "from_db", "open_schema", "statement",
           "to_db"]
