"""Strict, typed configuration: YAML files mapped onto nested dataclasses, with ``key=value``
overrides on the command line (``optim.lr=3e-4 gate.hidden=256``).

Deliberately small (PyYAML + dataclasses, no framework): unknown keys raise naming the full
dotted path, values are type-checked against the dataclass annotations, and the resolved
config is written next to every run's outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

import yaml

T = TypeVar("T")



PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding memgate/ (a checkout's root)


def find_root(package_parent: Path = PACKAGE_PARENT) -> Path:
    """Where relative paths (configs, data, runs, reports, caches) resolve: ``$MEMGATE_HOME`` if set;
    else the source checkout that holds this package (it has pyproject.toml and configs/ beside
    ``memgate/``); else, for an installed wheel, the working directory, so that nothing is ever
    written into site-packages."""
    home = os.environ.get("MEMGATE_HOME")
    if home:
        return Path(home).expanduser().resolve()
    if (package_parent / "pyproject.toml").is_file() and (package_parent / "configs").is_dir():
        return package_parent
    return Path.cwd()


REPO_ROOT = find_root()


class ConfigError(ValueError):
    """A configuration problem; the message names the key."""


def _check_type(value: Any, annotation: Any, path: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin is Union:
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, path)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{path}: bad value {value!r}")
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        return from_dict(annotation, value, path)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        item = args[0] if args else Any
        checked = [_check_type(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(checked) if origin is tuple else checked
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        return dict(value)
    if annotation is bool:
        if type(value) is not bool:
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if annotation is int:
        if type(value) is not int:
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, str):
            # YAML 1.1 reads "3e-4" (no dot) as a string; accept any float literal.
            try:
                return float(value)
            except ValueError:
                raise ConfigError(f"{path}: expected a number, got {value!r}") from None
        if type(value) is bool or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], raw: dict, path: str = "") -> T:
    """Build dataclass ``cls`` from ``raw``; unknown keys and wrong types raise ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or cls.__name__}: expected a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        dotted = ", ".join(f"{path}.{k}" if path else k for k in unknown)
        raise ConfigError(f"unknown config key(s): {dotted} (known: {sorted(names)})")
    kwargs = {}
    for name, value in raw.items():
        kwargs[name] = _check_type(value, hints[name], f"{path}.{name}" if path else name)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(_named(str(exc), cls.__name__, path)) from None


def _named(message: str, class_name: str, path: str) -> str:
    """A config class's own check names ``ClassName.field``; at ``path`` that is ``path.field``."""
    if not path:
        return f"{class_name}: {message}" if not message.startswith(f"{class_name}.") else message
    message = message.replace(f"{class_name}.", f"{path}.")
    return message if message.startswith(f"{path}.") else f"{path}: {message}"


def to_dict(config: Any) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config)))


def parse_overrides(overrides: Iterable[str]) -> dict:
    """``["a.b=1", "c=x"]`` -> ``{"a": {"b": 1}, "c": "x"}``; values parsed as YAML scalars."""
    nested: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        key, value = item.split("=", 1)
        if not key:
            raise ConfigError(f"override {item!r} has an empty key")
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with another override")
        node[parts[-1]] = yaml.safe_load(value) if value != "" else None
    return nested


def deep_merge(base: dict, update: dict, cls: Optional[type] = None) -> dict:
    """``update`` over ``base``, mapping by mapping. With ``cls`` (the dataclass the result maps
    onto), a field declared ``field(metadata={"merge": "replace"})`` is one value and is replaced
    whole: ``data.source_shares`` (merged, a row's shares kept its base's keys beside its own
    and failed "not in data.sources"); every other mapping merges key by key."""
    merged = dict(base)
    fields = {f.name: f for f in dataclasses.fields(cls)} if cls is not None and dataclasses.is_dataclass(cls) else {}
    hints = typing.get_type_hints(cls) if fields else {}
    for key, value in update.items():
        spec = fields.get(key)
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and not (
                spec is not None and spec.metadata.get("merge") == "replace"):
            section = hints.get(key)
            merged[key] = deep_merge(merged[key], value, section if dataclasses.is_dataclass(section) else None)
        else:
            merged[key] = value
    return merged


def load_yaml(path: Union[str, Path]) -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return raw


def load_config(cls: type[T], path: Optional[Union[str, Path]], overrides: Iterable[str] = (),
                values: Optional[dict] = None) -> T:
    """``cls`` from the YAML file at ``path`` merged with ``key=value`` overrides (then ``values``,
    a nested dict of already-typed values from code); a bad key or value raises ConfigError naming
    the dotted key and where it came from (``file:line`` or the override)."""
    raw = load_yaml(path) if path is not None else {}
    overrides = list(overrides)
    raw = deep_merge(raw, parse_overrides(overrides), cls)
    raw = deep_merge(raw, dict(values or {}), cls)
    try:
        return from_dict(cls, raw)
    except ConfigError as exc:
        where = locate(exc, path, overrides, values)
        raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None


_KEY = re.compile(r"^(?:unknown config key\(s\): |config key ')?([A-Za-z_][\w.]*)(?:\[\d+\])*[':, (]")


def locate(exc: ConfigError, path: Optional[Union[str, Path]], overrides: Sequence[str] = (),
           values: Optional[dict] = None) -> str:
    """Where the key an error names was set: ``file:line``, ``key=value`` (the command line), or ''
    (a value passed from code, or a default)."""
    match = _KEY.match(str(exc))
    if not match:
        return ""
    key = match.group(1)
    node: Any = values or {}
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is not None:
        return ""
    for item in overrides:
        if item.split("=", 1)[0] == key:
            return f"override {item!r}"
    if path is None:
        return ""
    line = yaml_line(Path(path), key.split("."))
    return f"{path}:{line}" if line else ""


def yaml_line(path: Path, keys: Sequence[str]) -> Optional[int]:
    """The 1-based line of the nested mapping key ``keys`` in the YAML file, or None."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return line
        for key_node, value_node in node.value:
            if key_node.value == key:
                line, node = key_node.start_mark.line + 1, value_node
                break
        else:
            return line
    return line


def config_hash(config: Any) -> str:
    payload = json.dumps(to_dict(config), sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def write_resolved(config: Any, out_dir: Path, argv: Optional[list] = None, **extra: Any) -> Path:
    """Write ``config.resolved.yaml`` (config, argv, seed and anything else) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"config": to_dict(config), "argv": list(argv or []), **extra}
    path = out_dir / "config.resolved.yaml"
    path.write_text(yaml.safe_dump(payload, sort_keys=True), encoding="utf-8")
    return path


def resolve_path(path: Union[str, Path]) -> Path:
    """Relative paths in configs are relative to ``REPO_ROOT`` (the checkout; for a wheel, the
    working directory or ``$MEMGATE_HOME``), never to the installed package."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path
