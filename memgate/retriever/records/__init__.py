"""The record rules every store shares: the stored record (:mod:`.memory`), the encoder identity and
vector checks (:mod:`.identity`), what a query-time index keeps about records (:mod:`.index`), how
records name each other (:mod:`.links`), the suppression list of forgotten content
(:mod:`.suppression`) and forgetting (:mod:`.forgetting`), the primitives a back-end implements
(:mod:`.primitives`) and the one records class over them (:mod:`.rules`)."""
