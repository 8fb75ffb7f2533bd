"""The query path's steps, each a part of :class:`memgate.retriever.GatedRetriever`: the encode step
(:mod:`.embed`), the query index and its refresh (:mod:`.index`), Kleene exclusion over cached
verdicts (:mod:`.exclusion`, :mod:`.verdicts`), ranking by cosine and the learned gate
(:mod:`.ranking`, :mod:`.gate`), the allowed actions (:mod:`.actions`), what a retrieval returns
(:mod:`.results`) and ``retrieve`` itself (:mod:`.path`)."""
