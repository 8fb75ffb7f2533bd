"""Build a verifier from ``configs/verifier/<backend>.yaml`` (the strict config loader: unknown keys
and wrong types raise naming the key and file:line)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import typing
from pathlib import Path
from typing import Optional, Union

from memgate.contract.config import ConfigError, load_yaml, resolve_path, yaml_line
from memgate.contract.config import load_config as strict_load
from memgate.studies.verifiers.base import Verifier
from memgate.studies.verifiers.local import LocalVerifier

CONFIG_KEYS = {
    "local": {"backend", "model", "gguf_file", "device", "dtype", "batch_size", "max_bytes", "cache_dir"},
    "openai": {"backend", "model", "base_url", "api_key_env", "timeout_s", "max_retries", "backoff_s",
               "max_backoff_s", "price_input_per_1m", "price_output_per_1m", "temperature", "max_bytes",
               "cache_dir"},
    "finetuned": {"backend", "model_dir", "device", "dtype", "batch_size", "max_bytes", "cache_dir"},
}
NOT_TRAINED = "not trained"


def _constructor(backend: str):
    if backend == "openai":  # the verifier extra (httpx, openai)
        from memgate.studies.verifiers.openai_backend import OpenAIVerifier

        return OpenAIVerifier.__init__
    return LocalVerifier.__init__


def config_class(backend: str) -> type:
    """The config dataclass of ``backend``: its keys (CONFIG_KEYS) with the types and defaults of
    the verifier's constructor, which owns them (finetuned: ``model_dir`` is required)."""
    if backend not in CONFIG_KEYS:
        raise ConfigError(f"unknown verifier backend {backend!r}; known: {sorted(CONFIG_KEYS)}")
    ctor = _constructor(backend)
    hints = typing.get_type_hints(ctor)
    params = inspect.signature(ctor).parameters
    specs: list = [("model_dir", str)] if backend == "finetuned" else []
    for name, param in params.items():
        if name in CONFIG_KEYS[backend] and name not in ("backend", "model_dir"):
            default = param.default
            specs.append((name, hints.get(name, typing.Any)) if default is inspect.Parameter.empty
                         else (name, hints.get(name, typing.Any), dataclasses.field(default=default)))
    specs.append(("backend", str, dataclasses.field(default=backend)))
    specs.sort(key=lambda spec: len(spec) == 3)  # fields without a default first
    return dataclasses.make_dataclass(f"{backend.capitalize()}VerifierConfig", specs, frozen=True)


def load_config(backend: str, path: Optional[Union[str, Path]] = None, **overrides) -> dict:
    """The keys set in ``configs/verifier/<backend>.yaml`` (or ``path``) and ``overrides``, checked
    by the strict loader (memgate.contract.config): an unknown key or a wrong type raises one
    ConfigError naming the key and ``file:line``. Unset keys are left to the constructor."""
    cls = config_class(backend)
    path = resolve_path(path or f"configs/verifier/{backend}.yaml")
    raw = {**load_yaml(path), **overrides}
    config = strict_load(cls, path, values=overrides)
    if config.backend != backend:
        raise ConfigError(f"{path}:{yaml_line(Path(path), ['backend'])}: backend {config.backend!r} "
                          f"does not match {backend!r}")
    return {key: getattr(config, key) for key in raw}


def training_status(model_dir: Union[str, Path], data_hash: Optional[str] = None) -> tuple[bool, str]:
    """(reportable, reason): a fine-tuned verifier is reported only after >= 1 epoch over the full
    train split, recorded in its ``training_info.json`` (smoke runs never are), and, when
    ``data_hash`` is given, only on the data it was trained on (another data directory's train
    split is not this evaluation's)."""
    info_path = resolve_path(str(model_dir)) / "training_info.json"
    if not info_path.exists():
        return False, f"{NOT_TRAINED} (no {info_path})"
    info = json.loads(info_path.read_text())
    if info.get("smoke") or not info.get("full_split") or float(info.get("epochs_completed", 0)) < 1.0:
        return False, (f"{NOT_TRAINED} (last run: {info.get('epochs_completed', 0):.3g} epochs, "
                       f"full split: {info.get('full_split')}, smoke: {info.get('smoke')})")
    if data_hash is not None and info.get("data_hash") != data_hash:
        return False, (f"{NOT_TRAINED} on this data (trained on data_hash {info.get('data_hash')}, "
                       f"evaluating {data_hash})")
    return True, "trained"


def build_verifier(backend: str, config: Optional[dict] = None,
                   data_hash: Optional[str] = None) -> Union[Verifier, str]:
    """A verifier, or (finetuned without a full run on ``data_hash``) the string saying why there is
    none."""
    cfg = dict(config if config is not None else load_config(backend))
    cfg.pop("backend", None)
    if backend == "local":
        return LocalVerifier(**cfg)
    if backend == "openai":
        from memgate.studies.verifiers.openai_backend import OpenAIVerifier

        return OpenAIVerifier(**cfg)
    if backend == "finetuned":
        model_dir = cfg.pop("model_dir")
        ok, reason = training_status(model_dir, data_hash)
        if not ok:
            return reason
        verifier = LocalVerifier(model=str(resolve_path(str(model_dir))), **cfg)
        verifier.backend = "finetuned"
        return verifier
    raise ValueError(f"unknown verifier backend {backend!r}; known: {sorted(CONFIG_KEYS)}")
