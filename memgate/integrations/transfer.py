"""Export and import a store in memgate's own format (JSON lines + safetensors, never pickle).

An export is a directory:

    manifest.json        format "memgate-export/2", the encoder identity, counts, and the
                         sha256 of every file below
    records.jsonl        every record (``StoredMemory.to_dict()``, tombstones included), sorted by id;
                         a live record carries ``"_row"``, its row in the vectors file
    vectors.safetensors  one float32 tensor ``vectors`` (live records x dim)
    suppression.json     the suppression list: ``{"keys": {key id: hex key}, "entries": [...]}``
                         (keyed hashes of forgotten content with their normalisation versions,
                         never the content; the keys, because the hashes cannot be checked
                         without them: the export is as sensitive as the store)
    audit.jsonl          the store's audit log, when it has one (ids and metadata, never text)

Importing writes the records as they were (:meth:`RecordSemantics.restore_many`: ids,
revisions, timestamps, supersession and review state, tombstones) and the suppression list
(its keys kept beside the target's own) into an empty or disjoint store of the same encoder,
after checking every hash, the encoder identity, every record, every vector (finite, unit
norm) and every suppression entry, so what was forgotten before the export stays forgotten. An
export without a forget list (format 1, memgate before the suppression list travelled, or one
edited to claim it) whose records include forget directives is refused: what they forgot would
arrive unprotected. ``accept_unprotected=True`` (``memgate store import --accept-unprotected``)
imports it anyway, with a warning naming the namespaces and directives left without their
list; an export without directives imports as before. This is how a store moves from the embedded backend to a
Qdrant server and back. A Qdrant local-mode directory is never imported: qdrant-client keeps
its points there with pickle, so reading one can run code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from memgate.retriever.audit import iter_events
from memgate.retriever.records.identity import normalize_identity
from memgate.retriever.records.memory import FORGET_DIRECTIVE_KIND, StoredMemory
from memgate.retriever.records.suppression import Suppressed, key_id

EXPORT_FORMAT = "memgate-export/2"
READABLE_FORMATS = ("memgate-export/1", EXPORT_FORMAT)
MANIFEST, RECORDS, VECTORS, AUDIT = "manifest.json", "records.jsonl", "vectors.safetensors", "audit.jsonl"
SUPPRESSION = "suppression.json"
UNIT_TOLERANCE = 1e-3
log = logging.getLogger(__name__)


class ImportRefused(ValueError):
    """An export directory that fails a check; nothing was written."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_store(store: Any, out: str | Path, *, audit_path: Optional[Path] = None) -> dict[str, Any]:
    """Write ``store`` (an EmbeddedStore or QdrantStore) to the directory ``out`` (created; must
    be empty); returns the manifest."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty; export into a new directory")
    out.mkdir(parents=True, exist_ok=True)
    store.flush_outbox()
    # every record, by (id, namespace): ids are scoped per namespace, so reads name the namespace
    keys = sorted((e.memory_id, e.namespace) for e in store.changes_since(0)[1])
    rows: list[np.ndarray] = []
    with (out / RECORDS).open("w", encoding="utf-8") as handle:
        for start in range(0, len(keys), 1000):
            chunk = keys[start: start + 1000]
            records: dict[tuple[str, str], StoredMemory] = {}
            vectors: dict[tuple[str, str], np.ndarray] = {}
            for ns in sorted({n for _, n in chunk}):
                got = store.get_many([i for i, n in chunk if n == ns], namespace=ns)
                records.update(((i, ns), r) for i, r in got.items())
                live = [i for i, r in got.items() if not r.forgotten]
                vectors.update(((i, ns), v) for i, v in store.vectors_for(live, namespace=ns).items())
            for key in chunk:
                raw = records[key].to_dict()
                if not records[key].forgotten:
                    raw["_row"] = len(rows)
                    rows.append(np.asarray(vectors[key], dtype=np.float32))
                handle.write(json.dumps(raw, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")
    dim = int(store.dim)
    matrix = np.stack(rows).astype(np.float32) if rows else np.zeros((0, dim), dtype=np.float32)
    save_file({"vectors": matrix}, str(out / VECTORS), metadata={"format": EXPORT_FORMAT})
    suppression = store.export_suppression()
    (out / SUPPRESSION).write_text(json.dumps(suppression, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    files = {RECORDS: _sha256(out / RECORDS), VECTORS: _sha256(out / VECTORS),
             SUPPRESSION: _sha256(out / SUPPRESSION)}
    log = getattr(store, "audit", None)
    audit = audit_path or getattr(log, "path", None)
    if audit is not None and Path(audit).is_file():
        (out / AUDIT).write_bytes(Path(audit).read_bytes())
        files[AUDIT] = _sha256(out / AUDIT)
    elif audit is None and log is not None:  # a trail kept in the database (PostgreSQL's table)
        with (out / AUDIT).open("w", encoding="utf-8") as handle:
            for event in log.events():
                handle.write(json.dumps(event, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")
        files[AUDIT] = _sha256(out / AUDIT)
    manifest = {"format": EXPORT_FORMAT, "encoder": dict(store.encoder_identity),
                "records": len(keys), "vectors": len(rows), "suppressed": len(suppression["entries"]),
                "files": files,
                "source": type(store).__name__}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def _looks_like_qdrant_local(path: Path) -> bool:
    return (path / "collection").is_dir() or (path / ".lock").exists() or (
        (path / "meta.json").is_file() and not (path / MANIFEST).is_file())


def read_export(src: str | Path) -> tuple[dict[str, Any], list[Any], list[Any], Optional[dict[str, Any]]]:
    """Check an export directory and return ``(manifest, memories, vectors, suppression)`` (a
    vector per memory, None for tombstones; the suppression list, None in a format-1 export).
    Raises :class:`ImportRefused` naming the file and field."""
    src = Path(src)
    if not (src / MANIFEST).is_file():
        if src.is_dir() and _looks_like_qdrant_local(src):
            raise ImportRefused(
                f"{src} is a Qdrant local-mode directory: qdrant-client stores its points there with "
                "pickle, so memgate never imports one; on a machine that trusts it, run "
                f"`memgate store export --backend qdrant --store {src} --out EXPORT_DIR` and import that")
        raise ImportRefused(f"{src}: no {MANIFEST}; not a memgate export directory")
    try:
        manifest = json.loads((src / MANIFEST).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ImportRefused(f"{src / MANIFEST}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        raise ImportRefused(f"{src / MANIFEST}: field 'format' must be one of {READABLE_FORMATS}")
    files = manifest.get("files")
    needed = (RECORDS, VECTORS) + ((SUPPRESSION,) if manifest["format"] == EXPORT_FORMAT else ())
    if not isinstance(files, dict) or any(name not in files for name in needed):
        raise ImportRefused(f"{src / MANIFEST}: field 'files' must list {', '.join(needed)}")
    for name, digest in files.items():
        if name not in needed + (AUDIT,):
            raise ImportRefused(f"{src / MANIFEST}: field 'files' names an unknown file {name!r}")
        if not (src / name).is_file() or _sha256(src / name) != digest:
            raise ImportRefused(f"{src / name}: missing or its sha256 differs from the manifest")
    try:
        matrix = load_file(str(src / VECTORS))["vectors"]
    except (SafetensorError, KeyError, OSError) as exc:
        raise ImportRefused(f"{src / VECTORS}: no readable 'vectors' tensor ({exc})") from None
    dim = (manifest.get("encoder") or {}).get("dim")
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[1] != dim:
        raise ImportRefused(f"{src / VECTORS}: expected float32 (n, {dim}), got {matrix.dtype} {matrix.shape}")
    if len(matrix) and (not np.isfinite(matrix).all()
                        or np.abs(np.linalg.norm(matrix, axis=1) - 1).max() > UNIT_TOLERANCE):
        raise ImportRefused(f"{src / VECTORS}: every vector must be finite and unit-norm")
    memories: list[StoredMemory] = []
    vectors: list[Optional[np.ndarray]] = []
    seen_ids: set[tuple[str, str]] = set()
    seen_rows: set[int] = set()
    with (src / RECORDS).open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            where = f"{src / RECORDS}:{lineno}"
            try:
                raw = json.loads(line)
                row = raw.pop("_row", None) if isinstance(raw, dict) else None
                memory = StoredMemory.from_dict(raw)
            except (ValueError, TypeError, KeyError) as exc:
                raise ImportRefused(f"{where}: {exc}") from None
            if (memory.namespace, memory.memory_id) in seen_ids:  # (ids are scoped per namespace)
                raise ImportRefused(f"{where}: memory {memory.memory_id!r} appears twice in namespace "
                                    f"{memory.namespace!r}")
            seen_ids.add((memory.namespace, memory.memory_id))
            if memory.forgotten:
                if row is not None:
                    raise ImportRefused(f"{where}: field '_row' on a forgotten record")
                vectors.append(None)
            else:
                if type(row) is not int or not 0 <= row < len(matrix) or row in seen_rows:
                    raise ImportRefused(f"{where}: field '_row' must name an unused row of {VECTORS}")
                seen_rows.add(row)
                vectors.append(matrix[row])
            memories.append(memory)
    if len(memories) != manifest.get("records") or len(seen_rows) != len(matrix):
        raise ImportRefused(f"{src}: the record or vector count differs from the manifest")
    return manifest, memories, vectors, _read_suppression(src, manifest)


def _read_suppression(src: Path, manifest: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The export's suppression list, every entry and key checked (None in a format-1 export)."""
    if SUPPRESSION not in manifest["files"]:
        return None
    where = src / SUPPRESSION
    try:
        raw = json.loads(where.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ImportRefused(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or set(raw) != {"keys", "entries"} or not isinstance(raw["keys"], dict) \
            or not isinstance(raw["entries"], list):
        raise ImportRefused(f"{where}: must be an object with exactly 'keys' (an object) and 'entries' (a list)")
    for kid, hex_key in raw["keys"].items():
        try:
            key = bytes.fromhex(hex_key)
        except (TypeError, ValueError):
            key = b""
        if len(key) != 32 or key_id(key) != kid:
            raise ImportRefused(f"{where}: field 'keys.{kid}' is not a 32-byte hex key with that id")
    for i, entry in enumerate(raw["entries"]):
        try:
            parsed = Suppressed.from_dict(entry) if isinstance(entry, dict) else None
        except (ValueError, TypeError, KeyError) as exc:
            raise ImportRefused(f"{where}: field 'entries[{i}]': {exc}") from None
        if parsed is None or parsed.key_id not in raw["keys"]:
            raise ImportRefused(f"{where}: field 'entries[{i}]' must be an entry naming one of 'keys'")
    if len(raw["entries"]) != manifest.get("suppressed"):
        raise ImportRefused(f"{where}: the entry count differs from the manifest's 'suppressed'")
    return raw


def unprotected_directives(memories: list[StoredMemory], suppression: Optional[dict[str, Any]]) -> list[StoredMemory]:
    """The forget directives among ``memories`` when the export carries no forget list."""
    if suppression is not None:
        return []
    return [m for m in memories if m.kind == FORGET_DIRECTIVE_KIND and not m.forgotten]


def check_protection(src: str | Path, memories: list[StoredMemory], suppression: Optional[dict[str, Any]],
                     accept_unprotected: bool) -> None:
    """Refuse (or, accepted, warn about) directives that arrive without their forget list."""
    bare = unprotected_directives(memories, suppression)
    if not bare:
        return
    namespaces = sorted({m.namespace for m in bare})
    what = (f"{len(bare)} forget directive(s) in namespace(s) {namespaces[:5]} (e.g. {bare[0].memory_id!r}, "
            f"which forgot {bare[0].forgets!r}) arrive without the forget list that refuses their "
            "content: it could be stored again")
    if not accept_unprotected:
        raise ImportRefused(f"{src}: the export carries no {SUPPRESSION} but {what}; import it with "
                            "--accept-unprotected (accept_unprotected=True) to proceed anyway")
    message = f"{src}: imported without protection: {what}"
    warnings.warn(message, UserWarning, stacklevel=3)
    log.warning(message)


def import_store(store: Any, src: str | Path, loaded: Optional[tuple[Any, ...]] = None, *,
                 accept_unprotected: bool = False) -> int:
    """Import the export at ``src`` into ``store`` (same encoder; no id in common), all or none;
    the export's audit events are appended to the store's audit log. ``loaded``: the result of
    :func:`read_export` when the caller checked the export already; ``accept_unprotected``:
    import forget directives that come without a forget list (module doc). Returns the record
    count."""
    manifest, memories, vectors, suppression = loaded if loaded is not None else read_export(src)
    check_protection(src, memories, suppression, accept_unprotected)
    theirs = normalize_identity(manifest["encoder"])
    if theirs != dict(store.encoder_identity):
        raise ImportRefused(f"{src}: exported with encoder {theirs}, the store uses {store.encoder_identity}")
    clash = [m.memory_id for m in memories if store.get(m.memory_id, namespace=m.namespace) is not None][:3]
    if clash:
        raise ImportRefused(f"{src}: the store already holds {clash}; import into an empty or disjoint store")
    audit = getattr(store, "audit", None)
    events = []
    if audit is not None and (Path(src) / AUDIT).is_file():
        events = list(iter_events(Path(src) / AUDIT))
    if events:  # history first, so the restored records' trails begin where they began
        assert audit is not None  # (events are read only when the store keeps a log)
        audit.append_many(events)
    n: int = store.restore_many(memories, vectors, encoder=store.encoder_identity, suppression=suppression)
    return n


__all__ = ["EXPORT_FORMAT", "READABLE_FORMATS", "SUPPRESSION", "ImportRefused", "check_protection", "export_store",
           "import_store", "read_export", "unprotected_directives"]
