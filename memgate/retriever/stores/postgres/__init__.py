"""The PostgreSQL store: one schema with pgvector through psycopg 3 (:class:`PostgresStore`; its
back-end :mod:`.backend`, tables :mod:`.tables`, connection :mod:`.connection`, search
:mod:`.search`, a local server for trying it :mod:`.local`). Importing it imports psycopg."""

from memgate.retriever.stores.postgres.store import URL_ENV, PostgresStore

__all__ = ["URL_ENV", "PostgresStore"]
