"""Where ``MemGate.from_pretrained(name_or_path)`` finds a checkpoint directory, and how its weights
are trusted.

**A released gate by name** (``"memgate-minilm-l6"``, any name pinned in
:mod:`memgate.model.release_pin`) resolves from the package's own location only: the bundled
directory of an installed wheel (``memgate/checkpoints/<name>/``), or ``checkpoints/<name>/`` of
the source checkout that holds this package file (an editable install). Never the working
directory, ``$MEMGATE_HOME`` or any relative path: a folder named ``memgate-minilm-l6`` beside the
process is not the released gate. Its weights must hash to the pinned sha256 (the pin is package
code, not a field beside the weights), else the load is refused in one line naming the file and
the fix.

**Anything else** is a user checkpoint: an existing directory (a path), a gate of that name in the
package's checkpoints/ that is not released, or a hub id (``"owner/name"``, downloaded with
``huggingface_hub`` into its user cache; offline runs refuse it with a one-line error). Its weights
are verified against the sha256 its own ``config.json`` records, and the load says (INFO, logger
``memgate.model.pretrained``; quiet unless logging is configured) that it is a user checkpoint.

**Exports**: training refuses to export under a released name, or into a released gate's
directory, except inside :func:`releasing` (``make release``), whose export rewrites the pin.

Only the checkpoint's JSON and safetensors files are read: nothing is unpickled.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from memgate.model import release_pin

CHECKPOINT_FILES = ("config.json", "model.safetensors", "headline.json", "README.md")
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the memgate package itself
PIN_FILE = Path(release_pin.__file__).resolve()
log = logging.getLogger(__name__)
_releasing: Optional[str] = None  # the name `make release` is exporting, inside releasing()
_said: set = set()


def checkout_root(package_dir: Optional[Path] = None) -> Optional[Path]:
    """The source checkout that holds the package (pyproject.toml and configs/ beside it), else None
    (an installed wheel). Found from the package file, never from the working directory."""
    parent = (package_dir or PACKAGE_DIR).parent
    return parent if (parent / "pyproject.toml").is_file() and (parent / "configs").is_dir() else None


def released_roots(package_dir: Optional[Path] = None) -> list[Path]:
    """Where released gates live: the wheel's bundled directory, then the checkout's checkpoints/."""
    package_dir = package_dir or PACKAGE_DIR
    checkout = checkout_root(package_dir)
    return [package_dir / "checkpoints"] + ([checkout / "checkpoints"] if checkout else [])


def released_names(package_dir: Optional[Path] = None) -> list[str]:
    """The released (pinned) gates that load by name here."""
    return sorted(name for name in release_pin.RELEASED_WEIGHTS_SHA256
                  if any((root / name / "config.json").is_file() for root in released_roots(package_dir)))


def released_dir(name: str, package_dir: Optional[Path] = None) -> Path:
    """The released gate ``name`` at the package's own location; FileNotFoundError if absent."""
    for root in released_roots(package_dir):
        if (root / name / "config.json").is_file():
            return root / name
    where = " or ".join(str(root) for root in released_roots(package_dir))
    raise FileNotFoundError(f"{name}: the released gate is not in {where} (reinstall memgate, or in a "
                            f"checkout restore checkpoints/{name} with git)")


def resolve_checkpoint(name_or_path: str | Path, package_dir: Optional[Path] = None) -> Path:
    """The checkpoint directory ``name_or_path`` names; FileNotFoundError saying what was tried."""
    text = str(name_or_path)
    if text in release_pin.RELEASED_WEIGHTS_SHA256:  # a released name: the package's copy, only
        return released_dir(text, package_dir)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if "/" not in text and "\\" not in text:  # a bare name: a gate in the package's checkpoints/
        for root in released_roots(package_dir):
            if (root / text / "config.json").is_file():
                return root / text
        raise FileNotFoundError(f"{text}: no checkpoint directory and no released gate of that name "
                                f"(released here: {', '.join(released_names(package_dir)) or 'none'})")
    owner = text.split("/")[0]
    if text.count("/") == 1 and not Path(owner).exists() and not text.startswith((".", "~")):
        return _from_hub(text)
    raise FileNotFoundError(f"{path}: no such checkpoint directory")


def released_name_of(directory: Path, package_dir: Optional[Path] = None) -> Optional[str]:
    """The released name whose package copy ``directory`` is (by its resolved path), else None."""
    where = Path(directory).resolve()
    for name in release_pin.RELEASED_WEIGHTS_SHA256:
        if any((root / name).resolve() == where for root in released_roots(package_dir)):
            return name
    return None


def verify_pin(data: bytes, directory: Path, weights_path: Path, package_dir: Optional[Path] = None) -> bool:
    """For a released gate's package copy: refuse weights that differ from the pin (True when it
    was one). Any other directory: say once that it is a user checkpoint (False); the caller
    verifies it against its config.json."""
    name = released_name_of(directory, package_dir)
    if name is None:
        key = str(Path(directory).resolve())
        if key not in _said:
            _said.add(key)
            log.info("loading %s as a user checkpoint (not a released gate): its weights are "
                     "verified against its own config.json", directory)
        return False
    pinned = release_pin.RELEASED_WEIGHTS_SHA256[name]
    actual = hashlib.sha256(data).hexdigest()
    if actual != pinned:
        fix = ("reinstall memgate (pip install --force-reinstall memgate)"
               if Path(directory).resolve().is_relative_to((package_dir or PACKAGE_DIR).resolve())
               else f"restore it (git checkout -- checkpoints/{name}) or run make release")
        raise ValueError(f"{weights_path}: sha256 {actual} is not the released {name}'s pinned "
                         f"{pinned} (memgate/model/release_pin.py): this copy of the released gate was changed "
                         f"(refusing to load); {fix}")
    return True


@contextmanager
def releasing(name: str) -> Iterator[Path]:
    """Inside it (``make release`` only) training may export ``name`` into its checkout directory,
    and that export rewrites the pin. Yields the directory."""
    global _releasing
    target = release_export_dir(name)
    previous, _releasing = _releasing, name
    try:
        yield target
    finally:
        _releasing = previous


def release_export_dir(name: str) -> Path:
    """Where ``make release`` exports ``name``: the checkout's checkpoints/ (never a wheel's copy)."""
    checkout = checkout_root()
    if checkout is None:
        raise RuntimeError(f"make release exports {name} into a source checkout's checkpoints/; this "
                           f"memgate ({PACKAGE_DIR}) is an installed package")
    return checkout / "checkpoints" / name


def refuse_released_export(out_dir: str | Path) -> None:
    """Training's export check: a released name or a released gate's directory is refused (one line
    naming the fix) unless :func:`releasing` exports that name into its own directory."""
    out = Path(out_dir)
    name = released_name_of(out) or (out.name if out.name in release_pin.RELEASED_WEIGHTS_SHA256 else None)
    if name is None:
        return
    if _releasing == name and out.resolve() == release_export_dir(name).resolve():
        return
    raise ValueError(f"{out}: {name} is the released gate's name; only `make release` exports under it "
                     "(it rewrites the pinned hash in memgate/model/release_pin.py): export under "
                     "another name (export.name=my-gate, or --out DIR)")


def record_release(out_dir: str | Path) -> Optional[str]:
    """After ``make release`` exported into ``out_dir``: pin its weights (rewrite release_pin.py and
    the loaded pin) and return the sha256; None for any other export."""
    out = Path(out_dir)
    if _releasing is None or out.name != _releasing or out.resolve() != release_export_dir(_releasing).resolve():
        return None
    sha = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    write_pin(_releasing, sha)
    return sha


def write_pin(name: str, sha: str, pin_file: Optional[Path] = None) -> None:
    """Rewrite ``name``'s line of the pin module (``PIN_FILE``) and the loaded pin to ``sha``."""
    pin_file = pin_file or PIN_FILE
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ValueError(f"{sha!r} is not a sha256 hex digest")
    text = pin_file.read_text(encoding="utf-8")
    line = re.compile(rf'^(\s*"{re.escape(name)}": )"[0-9a-f]{{64}}",$', re.M)
    if not line.search(text):
        raise ValueError(f"{pin_file}: no pinned line for {name!r} to rewrite")
    pin_file.write_text(line.sub(rf'\g<1>"{sha}",', text), encoding="utf-8")
    release_pin.RELEASED_WEIGHTS_SHA256[name] = sha


def _from_hub(repo_id: str) -> Path:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise FileNotFoundError(f"{repo_id}: not a local directory, and the hub is off (HF_HUB_OFFLINE=1); "
                                f"unset it to download the gate, or pass a checkpoint directory")
    try:
        from huggingface_hub import snapshot_download  # installed with sentence-transformers
    except ImportError as exc:  # pragma: no cover - sentence-transformers requires it
        raise FileNotFoundError(f"{repo_id}: a hub id needs huggingface_hub ({exc})") from None
    return Path(snapshot_download(repo_id, allow_patterns=list(CHECKPOINT_FILES)))
