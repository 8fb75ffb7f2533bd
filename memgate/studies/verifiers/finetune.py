"""``finetuned`` backend: fine-tune the local LM as a text-only verifier with TRL (SFT).

    python -m memgate.commands.verifier_finetune [--config configs/verifier/finetune.yaml] [key=value ...]

One example per labelled (query, memory) pair of the synthetic **train** split (scorer labels
are read here, for training only): the prompt is exactly the local backend's prompt (query text
and memory text, nothing else) and the completion is the answer word of the pair's admissibility
(``yes`` = True, ``no`` = False, ``unknown`` = None), so the fine-tuned model is scored by the
same next-token reading as the zero-shot one. Loss on the completion only (TRL prompt-completion
format); LoRA through peft optional (merged into the saved weights).

The output directory holds the model, its tokenizer and ``training_info.json``. A model is
*reportable* only after at least one epoch over the full train split (``full_split`` true,
``smoke`` false, ``epochs_completed`` >= 1); anything less (``max_steps`` > 0, ``max_pairs``
set) is a smoke run that proves the code path and never appears in a results table (the
evaluation's row then says "not trained").
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from memgate.contract.config import load_config, resolve_path
from memgate.contract.seeding import component_seed
from memgate.datasets.synthetic import load_split, read_meta
from memgate.studies.verifiers.base import truncate_utf8
from memgate.studies.verifiers.local import LocalVerifier
from memgate.studies.verifiers.prompts import LOCAL_TARGET_WORD


@dataclass(frozen=True)
class FinetuneConfig:
    """``configs/verifier/finetune.yaml`` (documented there), loaded by the strict config loader."""

    base_model: Optional[str] = None
    data: str = "data/default"
    out: str = "runs/verifier-smollm2-135m-sft"
    epochs: float = 1.0
    max_steps: int = -1
    max_pairs: Optional[int] = None
    learning_rate: float = 2e-4
    batch_size: int = 16
    grad_accum: int = 1
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    max_bytes: int = 2048
    seed: int = 0
    device: str = "auto"


DEFAULTS = asdict(FinetuneConfig())


def load_finetune_config(path: Optional[str] = None, overrides: Optional[dict] = None,
                         cli_overrides: Sequence[str] = ()) -> dict:
    """The fine-tuning config: the file, then ``key=value`` ``cli_overrides``, then ``overrides``
    (typed values from code); an unknown key or a wrong type raises naming it and file:line."""
    path = resolve_path(path or "configs/verifier/finetune.yaml")
    return asdict(load_config(FinetuneConfig, path, cli_overrides, values=overrides))


def answer_word(admissible) -> str:
    label = "unknown" if admissible is None else ("admissible" if admissible else "inadmissible")
    return LOCAL_TARGET_WORD[label]


def training_pairs(data_dir: Path, max_pairs: Optional[int] = None) -> list[tuple[str, str, str]]:
    """(query text, memory text, answer word) for every labelled train pair, in a fixed order;
    ``max_pairs`` keeps the pairs with the smallest hash of (query id, memory id)."""
    source = load_split(data_dir, "train", name="synthetic_train")
    queries = {q.query_id: q for q in source.queries}
    rows = []
    for qid, labels in sorted(source.labels.items()):
        for mid, label in sorted(labels.items()):
            key = hashlib.sha256(f"{qid}|{mid}".encode()).hexdigest()
            rows.append((key, queries[qid].text, source.memories[source.index_of[mid]].text,
                         answer_word(label.admissible)))
    if max_pairs is not None and max_pairs < len(rows):
        rows = sorted(sorted(rows)[:max_pairs], key=lambda r: r[0])
    return [r[1:] for r in rows]


def build_dataset(verifier, pairs, max_bytes: int):
    """TRL prompt-completion rows: the local backend's exact prompt text, then the answer word."""
    from datasets import Dataset

    eos = verifier.tokenizer.eos_token or ""
    prompts, completions = [], []
    for query, memory, word in pairs:
        before, after = verifier.prompt_parts(query)
        prompts.append(before + truncate_utf8(memory, max_bytes) + after)
        completions.append(word + eos)
    return Dataset.from_dict({"prompt": prompts, "completion": completions})


def finetune(cfg: dict, verifier=None) -> dict:
    """Train; save model, tokenizer and training_info.json to ``cfg['out']``; return the info.

    ``verifier``: a LocalVerifier to start from (default: built from ``base_model``)."""
    import torch
    from trl import SFTConfig, SFTTrainer

    started = time.perf_counter()
    data_dir = resolve_path(str(cfg["data"]))
    if verifier is None:
        device = cfg["device"]
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        verifier = LocalVerifier(model=cfg["base_model"], device=device)
    pairs = training_pairs(data_dir, cfg["max_pairs"])
    dataset = build_dataset(verifier, pairs, int(cfg["max_bytes"]))
    out = resolve_path(str(cfg["out"]))
    peft_config = None
    if cfg["lora"]:
        from peft import LoraConfig

        peft_config = LoraConfig(r=int(cfg["lora_r"]), lora_alpha=int(cfg["lora_alpha"]),
                                 lora_dropout=float(cfg["lora_dropout"]), target_modules="all-linear",
                                 task_type="CAUSAL_LM")
    on_cpu = verifier.device.type == "cpu"
    args = SFTConfig(
        output_dir=str(out / "trainer"), num_train_epochs=float(cfg["epochs"]), max_steps=int(cfg["max_steps"]),
        per_device_train_batch_size=int(cfg["batch_size"]), gradient_accumulation_steps=int(cfg["grad_accum"]),
        learning_rate=float(cfg["learning_rate"]), logging_steps=1 if int(cfg["max_steps"]) > 0 else 50,
        save_strategy="no", report_to="none", seed=component_seed(int(cfg["seed"]), "verifier_sft"),
        use_cpu=on_cpu, bf16=not on_cpu and torch.cuda.is_bf16_supported(), gradient_checkpointing=False,
        completion_only_loss=True, max_length=1024, dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = SFTTrainer(model=verifier.model, args=args, train_dataset=dataset,
                         processing_class=verifier.tokenizer, peft_config=peft_config)
    result = trainer.train()
    model = trainer.model
    if peft_config is not None:
        model = model.merge_and_unload()
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    verifier.tokenizer.save_pretrained(out)
    epochs = float(trainer.state.epoch or 0.0)
    smoke = int(cfg["max_steps"]) > 0 or cfg["max_pairs"] is not None
    info = {
        "base_model": verifier.model_id, "data": str(cfg["data"]),
        "data_hash": read_meta(data_dir).get("data_hash"), "train_pairs": len(pairs),
        "epochs_completed": round(epochs, 6), "steps": int(trainer.state.global_step),
        "full_split": cfg["max_pairs"] is None, "smoke": smoke,
        "train_loss": float(result.training_loss), "seconds": round(time.perf_counter() - started, 1),
        "config": {k: cfg[k] for k in sorted(cfg)}, "device": str(verifier.device),
    }
    (out / "training_info.json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    verifier.model = model
    return info


