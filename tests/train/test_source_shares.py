"""data.source_shares and data.list_sources (issue 32): strict keys, exact batch composition."""

from collections import Counter

import pytest

from memgate.contract.config import ConfigError, from_dict
from memgate.train.batching import SourceShareBatchSampler, batch_counts
from memgate.train.config import TrainConfig


def _config(**data):
    return from_dict(TrainConfig, {"data": {"sources": ["template", "gatemem", "phrasing_jailbreak"], **data}})


def test_source_shares_must_name_listed_sources_and_sum_to_one():
    assert _config().data.source_shares is None and _config().data.list_sources == ("gatemem",)
    ok = _config(source_shares={"template": 0.6, "gatemem": 0.3, "phrasing_jailbreak": 0.1})
    assert ok.data.source_shares["phrasing_jailbreak"] == 0.1
    with pytest.raises(ConfigError, match="data.source_shares must sum to 1"):
        _config(source_shares={"template": 0.6, "gatemem": 0.3})
    with pytest.raises(ConfigError, match="data.source_shares.mined"):
        _config(source_shares={"template": 0.5, "mined": 0.5})
    with pytest.raises(ConfigError, match="data.source_shares.gatemem"):
        _config(source_shares={"template": 1.5, "gatemem": -0.5})
    with pytest.raises(ConfigError, match="data.list_sources"):
        _config(list_sources=["gatemem", "reddit"])
    assert _config(list_sources=["gatemem", "dialogue"]).data.list_sources == ("gatemem", "dialogue")


def test_every_batch_has_the_configured_composition_and_the_epoch_keeps_its_length():
    sources = ["template"] * 900 + ["gatemem"] * 90 + ["phrasing_jailbreak"] * 10
    shares = {"template": 0.5, "gatemem": 0.3, "phrasing_jailbreak": 0.2}
    assert batch_counts(shares, 64) == {"template": 32, "gatemem": 19, "phrasing_jailbreak": 13}
    sampler = SourceShareBatchSampler(sources, shares, 64, seed=0)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 16  # ceil(1000 / 64), as without shares
    for batch in batches:
        assert Counter(sources[i] for i in batch) == {"template": 32, "gatemem": 19, "phrasing_jailbreak": 13}
    seen = Counter(i for b in batches for i in b if sources[i] == "phrasing_jailbreak")
    assert set(seen) == set(range(990, 1000)) and max(seen.values()) - min(seen.values()) <= 1  # cycled evenly
    assert [list(b) for b in SourceShareBatchSampler(sources, shares, 64, seed=0)] == batches  # seeded
    assert [list(b) for b in SourceShareBatchSampler(sources, shares, 64, seed=1)] != batches
    with pytest.raises(ConfigError, match="data.source_shares.phrasing_jailbreak"):
        SourceShareBatchSampler(["template"] * 10, {"template": 0.5, "phrasing_jailbreak": 0.5}, 8, seed=0)


def test_the_data_module_draws_its_batches_by_share():
    from memgate.model.encoder import Encoder, EncoderConfig
    from memgate.train.modules import PreferenceDataModule

    rows = [{"query_text": f"q{i}", "pos_text": f"p{i}", "neg_text": f"n{i}", "source": s}
            for i, s in enumerate(["template"] * 24 + ["phrasing_jailbreak"] * 4)]
    dm = PreferenceDataModule(rows, rows[:2], Encoder(EncoderConfig(cache_dir=None)), 8, False, 1, seed=0,
                              source_shares={"template": 0.5, "phrasing_jailbreak": 0.5})
    q_source = {int(dm.train.q[i]): s for i, s in enumerate(dm.train.source)}
    batches = [Counter(q_source[int(q)] for q in batch[0]) for batch in dm.train_dataloader()]
    assert len(batches) == 4 and all(b == {"template": 4, "phrasing_jailbreak": 4} for b in batches)


def test_a_shares_override_replaces_the_base_shares_and_sections_still_merge():
    """A base that sets data.source_shares (here the overrides; an ablation row's config, or a mix a
    user writes): a later mapping replaces it whole (merged, the base's keys stayed beside the override's:
    a row without GateMem triples failed "not in data.sources"), and ``=null`` goes back to
    concatenated sources, while sections still merge."""
    from memgate.contract.config import REPO_ROOT, load_config

    default = REPO_ROOT / "configs/train/default.yaml"
    mixed = load_config(TrainConfig, default, [
        "data.sources=[template,gatemem,phrasing_jailbreak]",
        "data.source_shares={template: 0.5, gatemem: 0.4, phrasing_jailbreak: 0.1}"])
    shares = {"template": 0.9, "phrasing_jailbreak": 0.1}
    config = load_config(TrainConfig, default, [
        "data.sources=[template,gatemem,phrasing_jailbreak]",
        "data.source_shares={template: 0.5, gatemem: 0.4, phrasing_jailbreak: 0.1}"],
        values={"data": {"sources": ["template", "phrasing_jailbreak"], "source_shares": shares}})
    assert mixed.data.source_shares["gatemem"] == 0.4
    assert config.data.source_shares == shares  # replaced whole: no gatemem key left from the base
    assert config.data.list_size == load_config(TrainConfig, default).data.list_size  # section merged
    off = load_config(TrainConfig, default, [
        "data.source_shares={template: 0.5, gatemem: 0.4, phrasing_jailbreak: 0.1}"],
        values={"data": {"sources": ["gatemem"], "source_shares": None}})
    assert off.data.source_shares is None and off.data.sources == ("gatemem",)
