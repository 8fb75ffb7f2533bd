"""Batches with a fixed share per triple source (``data.source_shares``, issue 32).

``SourceShareBatchSampler`` yields index batches of ``batch_size`` examples in which source ``s``
fills ``n_s`` places: ``share_s * batch_size`` rounded by largest remainder (ties: the source
listed first), so every batch has the same composition. Within a source the examples follow a
seeded permutation, drawn anew each time it is used up (a small source repeats within an epoch, a
large one is seen in part). An epoch is ``ceil(N / batch_size)`` batches, as without shares, so the
learning-rate schedule and the validation points do not move.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler

from memgate.contract.config import ConfigError
from memgate.contract.seeding import component_rng


def batch_counts(shares: dict, batch_size: int) -> dict:
    """Places per source in one batch (largest remainder; sums to ``batch_size``)."""
    raw = {s: float(v) * batch_size for s, v in shares.items()}
    counts = {s: int(math.floor(v)) for s, v in raw.items()}
    order = sorted(raw, key=lambda s: (-(raw[s] - counts[s]), list(shares).index(s)))
    for s in order[: batch_size - sum(counts.values())]:
        counts[s] += 1
    return counts


class SourceShareBatchSampler(Sampler):
    def __init__(self, sources: Sequence[str], shares: dict, batch_size: int, seed: int):
        self.batch_size = batch_size
        self.n = len(sources)
        names = np.asarray(list(sources), dtype=object)
        self.pools = {s: np.flatnonzero(names == s) for s in shares}
        for s, share in shares.items():
            if share > 0 and len(self.pools[s]) == 0:
                raise ConfigError(f"data.source_shares.{s}: no training triples of that source to draw from")
        self.counts = {s: c for s, c in batch_counts(shares, batch_size).items() if c > 0}
        self.rng = component_rng(seed, "source_share_batches")
        self.queue = {s: np.empty(0, dtype=np.int64) for s in self.counts}

    def __len__(self) -> int:
        return max(1, math.ceil(self.n / self.batch_size))

    def _take(self, source: str, k: int) -> list:
        out = []
        while k > 0:
            if not len(self.queue[source]):
                self.queue[source] = self.rng.permutation(self.pools[source])
            got, self.queue[source] = self.queue[source][:k], self.queue[source][k:]
            out.extend(int(i) for i in got)
            k -= len(got)
        return out

    def __iter__(self) -> Iterator[list]:
        for _ in range(len(self)):
            batch = []
            for source, k in self.counts.items():
                batch += self._take(source, k)
            yield batch
