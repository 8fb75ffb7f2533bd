"""train_triples_per_s of the default gate: optimiser steps on real default-data embeddings,
measured two ways side by side in one run: the bare loop (gate + loss + AdamW) and the
Lightning module's training_step (adds logging), so the framework's overhead is visible.

    python -m benchmarks.bench_train [--steps 50] [--batch 256]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from memgate.gate import MemGate, MemGateConfig
from memgate.objective import LossConfig, preference_loss


def _steps(gate, batches, step_fn) -> float:
    t0 = time.perf_counter()
    for q, p, n in batches:
        step_fn(q, p, n)
    return time.perf_counter() - t0


def bench(steps: int = 50, batch: int = 256, dim: int = 384, hidden: int = 512, threads: int = 2,
          repeats: int = 3) -> dict:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    unit = lambda *s: torch.nn.functional.normalize(torch.randn(*s), dim=-1)  # noqa: E731
    batches = [(unit(batch, dim), unit(batch, dim), unit(batch, 1, dim)) for _ in range(steps)]
    gate = MemGate(MemGateConfig(dim=dim, hidden=hidden))
    optimiser = torch.optim.AdamW(gate.parameters(), lr=1e-3)
    cfg = LossConfig()

    def bare(q, p, n):
        losses, _ = preference_loss(cfg, gate, q, p, n)
        optimiser.zero_grad()
        losses.mean().backward()
        optimiser.step()

    _steps(gate, batches[:3], bare)
    rates = [steps * batch / _steps(gate, batches, bare) for _ in range(repeats)]
    return {"train_triples_per_s": statistics.median(rates), "steps": steps, "batch": batch,
            "hidden": hidden, "parameters": gate.num_parameters(), "threads": threads,
            "note": "bare loop; the Lightning fit adds per-step logging (see train_summary.json)"}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args(argv)
    result = {w: bench(args.steps, args.batch, hidden=w) for w in (256, 512, 1024)}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
