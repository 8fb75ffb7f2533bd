"""The two row shapes of the topic tables (:mod:`data_gen.topics_risk`,
:mod:`data_gen.topics_metadata`): a memory (kind, policy tags, phrasings) and a request (query
type, purpose, phrasings)."""

from __future__ import annotations


def memory(kind, tags, texts, **extra):
    return dict(kind=kind, tags=tags, texts=texts, **extra)


def request(qtype, purpose, texts):
    return dict(type=qtype, purpose=purpose, texts=texts)


__all__ = ["memory", "request"]
