"""The store kinds, one package per back-end over :mod:`.base`: ``embedded`` (SQLite and a
vector file), ``qdrant`` (a Qdrant collection) and ``postgres`` (PostgreSQL with pgvector); a kind
is chosen by name from :mod:`.registry`. Each is the record rules of
:class:`memgate.retriever.records.rules.Records` over its back-end's primitives, plus its own
candidate search."""
