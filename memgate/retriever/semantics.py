"""Deprecated path (one release): the record rules are :mod:`memgate.retriever.records` (the
encoder identity :mod:`.records.identity`, index entries and signatures :mod:`.records.index`,
compare-and-set and links :mod:`.records.links`, the records class :mod:`.records.rules`)."""

from memgate.retriever._moved import moved
from memgate.retriever.records.identity import ENCODER_KEYS, UNIT_KEEP, normalize_identity
from memgate.retriever.records.index import (
    IndexEntry,
    index_entry,
    record_signature,
    signature_digest,
    signature_key,
)
from memgate.retriever.records.links import check_cas, check_namespace_arg
from memgate.retriever.records.suppression import Suppressed

moved(__name__)

__all__ = ["ENCODER_KEYS", "UNIT_KEEP", "IndexEntry", "Suppressed", "check_cas", "check_namespace_arg",
           "index_entry", "normalize_identity", "record_signature", "signature_digest", "signature_key"]
