"""Hook for real phrasing (issue 5): GateMem generator-episode turns as memory / query text.

Off by default (``real_text.enabled: false``). When enabled, the generator will draw a share of
its memory and query texts from ``memgate.real_data.gatemem.generator_turn_pairs`` (generator
episodes only; select/report episodes are refused there) and count them in meta.json
``real_text_triples``. Until that mixing is implemented, enabling it fails loudly rather than
silently producing template-only data under a config that claims otherwise.
"""

from __future__ import annotations


def check_real_text(cfg: dict) -> None:
    spec = cfg["real_text"]
    if spec["source"] != "gatemem":
        raise ValueError(f"config key 'real_text.source': only 'gatemem' is supported, got {spec['source']!r}")
    try:
        from memgate.real_data import gatemem  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the tree
        raise RuntimeError("real_text.enabled needs memgate.real_data.gatemem") from exc
    raise NotImplementedError(
        "real_text.enabled: mixing GateMem generator phrasing into the synthetic data is not "
        "implemented yet (issue 5); set real_text.enabled: false"
    )
