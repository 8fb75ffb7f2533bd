"""The encoder's fast backends: the bundled model exported once to ONNX (run by ONNX Runtime) or
to OpenVINO IR, and run here without torch.

What runs per batch: the model's own tokenizer (``tokenizers``, from its ``tokenizer.json``,
truncated to ``max_seq_length``), the exported transformer (token embeddings), then the model's
mean pooling over the attention mask and its L2 normalisation in numpy: the same function as the
sentence-transformers pipeline (Transformer -> mean Pooling -> Normalize), checked against it on
every project text by ``benchmarks/bench_embed.py --check`` (max ``1 - cos`` in docs/benchmarks.md)
and on probe texts by every export (``memgate.model.encoder_export``), which refuses to write a
backend above ``MAX_ONE_MINUS_COS``.

Texts are batched by token length (longest first), so a batch pads to few extra tokens. The
backends never import torch; ``onnxruntime`` / ``openvino`` are imported when a backend is
opened (the ``[fast]`` extra installs them).

Where exports live: ``$MEMGATE_ENCODER_DIR`` when set, else ``$XDG_CACHE_HOME/memgate/encoders``
(``~/.cache/memgate/encoders``), one folder per encoder key (model id and revision), with a
``manifest.json`` naming the backend files, their sizes and SHA-256, and the export's own check.
``make install`` fills it (``memgate encoder export``); a wheel user's first encode does, once,
with a message.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

BACKENDS = ("torch", "onnx", "openvino")
FAST_BACKENDS = ("onnx", "openvino")
# the backend an ``auto`` encoder takes when its runtime is installed (docs/benchmarks.md: the
# fastest of the float32 backends whose embeddings stay within MAX_ONE_MINUS_COS of torch's)
PREFERRED = "openvino"
MAX_ONE_MINUS_COS = 1e-5
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
BACKEND_FILES = {"onnx": ("model.onnx",), "openvino": ("openvino_model.xml", "openvino_model.bin")}
RUNTIME_MODULE = {"onnx": "onnxruntime", "openvino": "openvino"}
ENV_BACKEND = "MEMGATE_ENCODER_BACKEND"
ENV_DIR = "MEMGATE_ENCODER_DIR"
ENV_THREADS = "MEMGATE_ENCODER_THREADS"
# batches of at most this many padded tokens, and OpenVINO inference streams (docs/benchmarks.md)
DEFAULT_MAX_TOKENS = 512
DEFAULT_STREAMS = 1


def export_root() -> Path:
    """Where exported encoders live (``$MEMGATE_ENCODER_DIR``, else the user cache)."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "memgate" / "encoders"


def runtime_installed(backend: str) -> bool:
    """Whether the runtime of a fast backend can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec(RUNTIME_MODULE[backend]) is not None


def requested_backend(backend: Optional[str]) -> str:
    """The backend asked for: the argument, else ``$MEMGATE_ENCODER_BACKEND``, else ``auto``."""
    value = backend if backend is not None else os.environ.get(ENV_BACKEND, "auto")
    if value not in (*BACKENDS, "auto"):
        source = "backend" if backend is not None else ENV_BACKEND
        raise ValueError(f"{source} must be one of auto, {', '.join(BACKENDS)}; got {value!r}")
    return value


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(folder: Path) -> Optional[dict]:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("format") != MANIFEST_FORMAT:
        return None
    return manifest


def exported(folder: Path, backend: str, identity: dict) -> bool:
    """Whether ``folder`` holds a checked export of ``backend`` for this encoder identity (id and
    revision, as ``encoder_identity`` writes them), every file of the right size."""
    manifest = read_manifest(folder)
    if manifest is None or backend not in manifest.get("backends", {}):
        return False
    if {k: manifest["encoder"].get(k) for k in ("id", "revision")} != {k: identity[k] for k in ("id", "revision")}:
        return False
    files = manifest["backends"][backend]["files"]
    return all((folder / name).is_file() and (folder / name).stat().st_size == meta["bytes"]
               for name, meta in files.items())


@dataclass(frozen=True)
class TextModel:
    """What the fast path needs of a sentence-transformers folder besides the exported graph."""

    tokenizer_file: Path
    max_seq_length: int
    normalize: bool  # the pipeline ends in a Normalize module
    dim: int


def text_model(model_dir: Path, max_seq_length: Optional[int]) -> TextModel:
    """Read a Transformer -> mean Pooling (-> Normalize) sentence-transformers folder; anything
    else raises (it would need another pooling than this module computes)."""
    modules = json.loads((model_dir / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ValueError(f"{model_dir}: a fast backend needs Transformer -> Pooling (-> Normalize), got {kinds}")
    if modules[0].get("path", "") not in ("", "."):
        raise ValueError(f"{model_dir}: the transformer must sit in the model folder itself")
    pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v not in (False, None))
    if modes != ["pooling_mode_mean_tokens"]:
        raise ValueError(f"{model_dir}: a fast backend computes mean pooling only, got {modes}")
    if max_seq_length is None:
        bert = json.loads((model_dir / "sentence_bert_config.json").read_text())
        max_seq_length = int(bert["max_seq_length"])
    return TextModel(model_dir / "tokenizer.json", int(max_seq_length), kinds[-1] == "Normalize",
                     int(pooling["word_embedding_dimension"]))


class FastEncoder:
    """Unit-normalised float32 sentence embeddings from an exported model, without torch.

    Batches hold at most ``batch_size`` texts and at most ``max_tokens`` padded tokens (texts
    sorted by token length, longest first; a text longer than the budget is a batch of its own):
    smaller batches keep the activations in cache (docs/benchmarks.md has the sweep). ``streams``
    (OpenVINO) runs that many batches at once, one inference stream each, splitting the threads.
    Calls from several threads are served one at a time (an OpenVINO request runs one inference
    at a time; the torch path behaves the same way, its threads busy with one batch).
    """

    def __init__(self, folder: Path, backend: str, model: TextModel, threads: Optional[int] = None,
                 max_tokens: Optional[int] = DEFAULT_MAX_TOKENS, streams: Optional[int] = None):
        if backend not in FAST_BACKENDS:
            raise ValueError(f"backend must be one of {FAST_BACKENDS}, got {backend!r}")
        from tokenizers import Tokenizer

        self.backend, self.model, self.max_tokens = backend, model, max_tokens
        self._lock = threading.Lock()
        self.tokenizer = Tokenizer.from_file(str(model.tokenizer_file))
        self.tokenizer.no_padding()  # batches pad to their own longest text below
        self.tokenizer.enable_truncation(max_length=model.max_seq_length)
        threads = threads if threads is not None else int(os.environ.get(ENV_THREADS, "0") or 0)
        streams = streams if streams is not None else (DEFAULT_STREAMS if backend == "openvino" else 1)
        if backend == "onnx":
            self._runner = _OnnxRunner(folder, threads)
        else:
            self._runner = _OpenVinoRunner(folder, threads, streams)

    def get_embedding_dimension(self) -> int:
        return self.model.dim

    def _batches(self, lengths: np.ndarray, batch_size: int):
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            width = int(lengths[order[start]])
            n = batch_size if not self.max_tokens else max(1, min(batch_size, self.max_tokens // max(1, width)))
            yield order[start:start + n], width
            start += n

    def encode(self, texts: Sequence[str], batch_size: int = 64, normalize: bool = True,
               progress: bool = False, desc: str = "embed") -> np.ndarray:
        """(n, dim) float32 embeddings of ``texts`` (L2-normalised when ``normalize`` or when the
        model's pipeline ends in Normalize, as sentence-transformers does); ``progress`` shows a
        bar over the texts (tqdm)."""
        if not texts:
            return np.zeros((0, self.model.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        out = np.empty((len(texts), self.model.dim), dtype=np.float32)
        bar = None
        if progress:
            from tqdm.auto import tqdm  # installed with sentence-transformers

            bar = tqdm(total=len(texts), desc=desc, unit="text")
        try:
            with self._lock:
                self._run_batches(encodings, lengths, batch_size, normalize or self.model.normalize, out, bar)
        finally:
            if bar is not None:
                bar.close()
        return out

    def _run_batches(self, encodings, lengths: np.ndarray, batch_size: int, unit: bool, out: np.ndarray,
                     bar=None) -> None:
        for rows, width in self._batches(lengths, batch_size):
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : lengths[i]] = encodings[i].ids
                mask[r, : lengths[i]] = 1

            def done(tokens, rows=rows, mask=mask):  # tokens: (batch, width, dim) float32
                out[rows] = mean_pool(tokens, mask, unit)
                if bar is not None:
                    bar.update(len(rows))

            self._runner.submit(ids, mask, np.zeros_like(ids), done)
        self._runner.wait()


def mean_pool(tokens: np.ndarray, mask: np.ndarray, normalize: bool) -> np.ndarray:
    """sentence-transformers' mean pooling (mask-weighted mean, count clamped at 1e-9), then its
    Normalize (L2, norm clamped at 1e-12), in float32."""
    weights = mask[..., None].astype(np.float32)
    pooled = np.einsum("bld,bl->bd", tokens, weights[..., 0]) / np.maximum(weights.sum(1), 1e-9)
    if normalize:
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32, copy=False)


class _OnnxRunner:
    def __init__(self, folder: Path, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: one per physical core
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])

    def submit(self, ids, mask, types, done) -> None:
        done(self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0])

    def wait(self) -> None:
        pass


class _OpenVinoRunner:
    def __init__(self, folder: Path, threads: int, streams: int):
        import openvino as ov

        # float32 inference: on CPUs with bf16 units OpenVINO's default precision would be bf16
        config = {"INFERENCE_PRECISION_HINT": "f32"}
        if streams > 1:
            config.update({"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": str(streams)})
        else:
            config["PERFORMANCE_HINT"] = "LATENCY"
        if threads:
            config["INFERENCE_NUM_THREADS"] = str(threads)
        compiled = ov.Core().compile_model(str(folder / "openvino_model.xml"), "CPU", config)
        self.streams = streams
        if streams > 1:
            self.queue = ov.AsyncInferQueue(compiled, streams)
            self.queue.set_callback(lambda request, done: done(request.get_output_tensor(0).data.copy()))
        else:
            self.request = compiled.create_infer_request()

    def submit(self, ids, mask, types, done) -> None:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        if self.streams > 1:
            self.queue.start_async(feeds, done)
        else:
            done(self.request.infer(feeds)[0])

    def wait(self) -> None:
        if self.streams > 1:
            self.queue.wait_all()


__all__ = ["BACKENDS", "FAST_BACKENDS", "FastEncoder", "MAX_ONE_MINUS_COS", "PREFERRED", "export_root",
           "exported", "mean_pool", "read_manifest", "requested_backend", "runtime_installed", "text_model"]
