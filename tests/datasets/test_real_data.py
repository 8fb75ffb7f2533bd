"""Real-data plumbing: the data root, SHA256SUMS verification, deterministic splits, the I/O guard."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from memgate.datasets.real import io_guard, paths
from memgate.datasets.real.io_guard import (
    check_part_access,
    forbid_report_parts,
    no_report_access,
    report_parts_forbidden,
)
from memgate.datasets.real.paths import ChecksumError, real_data_root, repo_root, verify_checksums
from memgate.datasets.real.splits import gatemem_part_sizes, make_real_splits, split_gatemem, split_locomo


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- root


def test_root_default_resolves_against_repo_root_not_cwd(monkeypatch, tmp_path):
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert (repo_root() / "pyproject.toml").is_file()
    assert real_data_root() == (repo_root() / "data/real").resolve()
    assert real_data_root("data/real") == (repo_root() / "data/real").resolve()
    assert real_data_root(tmp_path / "abs") == (tmp_path / "abs").resolve()


def test_env_overrides_config(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "elsewhere"))
    assert real_data_root("ignored") == (tmp_path / "elsewhere").resolve()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(paths.ENV_VAR, "rel")
    assert real_data_root() == (tmp_path / "rel").resolve()


# --------------------------------------------------------------------------- checksums


def _fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "a").mkdir(parents=True)
    (root / "a" / "one.txt").write_bytes(b"one\n")
    (root / "two.json").write_bytes(b"[2]\n")
    (root / "SHA256SUMS").write_text(
        "sha256 of every data file, made with `sha256sum`\n"
        f"{_sha(b'one' + bytes([10]))}  a/one.txt\n"
        "\n"
        f"{_sha(b'[2]' + bytes([10]))}  two.json\n",
        encoding="utf-8",
    )
    return root


def test_checksums_pass_skip_headers_and_cache(tmp_path, monkeypatch):
    root = _fake_root(tmp_path)
    assert verify_checksums(root) == {"a/one.txt": _sha(b"one\n"), "two.json": _sha(b"[2]\n")}

    def boom(*args, **kwargs):
        raise AssertionError("re-hashed despite the per-process cache")

    monkeypatch.setattr(paths, "sha256_file", boom)
    verify_checksums(root)  # cached: no hashing
    with pytest.raises(AssertionError):
        verify_checksums(root, force=True)


def test_tampered_file_fails_naming_it(tmp_path):
    root = _fake_root(tmp_path)
    (root / "two.json").write_bytes(b"[3]\n")
    with pytest.raises(ChecksumError, match="two.json"):
        verify_checksums(root)


def test_missing_file_and_missing_sums_fail(tmp_path):
    root = _fake_root(tmp_path)
    (root / "a" / "one.txt").unlink()
    with pytest.raises(ChecksumError, match=r"one\.txt.*missing"):
        verify_checksums(root)
    (root / "SHA256SUMS").unlink()
    with pytest.raises(ChecksumError, match="SHA256SUMS"):
        verify_checksums(root)


def test_unsafe_path_in_sums_is_rejected(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    (root / "SHA256SUMS").write_text("0" * 64 + "  ../outside.txt\n", encoding="utf-8")
    with pytest.raises(ChecksumError, match="unsafe"):
        verify_checksums(root)


def test_real_data_verifies_and_a_tampered_copy_fails(data_root, tmp_path):
    sums = verify_checksums(data_root)
    assert "locomo/locomo10.json" in sums
    # A copy of one real file with its real checksum line passes; one changed byte fails.
    rel = "gatemem/LICENSE"
    copy = tmp_path / "copy"
    (copy / "gatemem").mkdir(parents=True)
    shutil.copyfile(data_root / rel, copy / rel)
    (copy / "SHA256SUMS").write_text(f"# header\n{sums[rel]}  {rel}\n", encoding="utf-8")
    verify_checksums(copy)
    data = bytearray((copy / rel).read_bytes())
    data[0] ^= 1
    (copy / rel).write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="gatemem/LICENSE"):
        verify_checksums(copy, force=True)


# --------------------------------------------------------------------------- splits


def test_split_functions_deterministic_disjoint_and_sized():
    ids = [f"conv-{i}" for i in range(10)]
    a = split_locomo(ids, seed=3)
    assert a == split_locomo(list(reversed(ids)), seed=3)  # order of input does not matter
    assert len(a["select"]) == 2 and len(a["report"]) == 8
    assert set(a["select"]).isdisjoint(a["report"]) and set(a["select"]) | set(a["report"]) == set(ids)
    assert any(split_locomo(ids, seed=s) != a for s in range(4, 10))

    by_domain = {"x": [f"x{i}" for i in range(21)], "y": [f"y{i}" for i in range(4)]}
    g = split_gatemem(by_domain, seed=0)
    assert g == split_gatemem(by_domain, seed=0)
    parts = [set(g[p]) for p in ("generator", "select", "report")]
    assert sum(map(len, parts)) == 25 and set.union(*parts) == set(by_domain["x"] + by_domain["y"])
    assert gatemem_part_sizes(4) == {"generator": 1, "select": 1, "report": 2}
    assert gatemem_part_sizes(21) == {"generator": 11, "select": 3, "report": 7}
    # adding a domain never reshuffles another one
    g2 = split_gatemem({**by_domain, "z": [f"z{i}" for i in range(9)]}, seed=0)
    for part in g:
        assert [e for e in g2[part] if not e.startswith("z")] == g[part]
    with pytest.raises(ValueError):
        gatemem_part_sizes(3)


def test_real_splits_recorded_shape(data_root):
    s = make_real_splits(data_root)
    assert s == make_real_splits(data_root, seed=0)
    assert json.loads(json.dumps(s)) == s
    assert set(s) == {"locomo", "gatemem", "seed", "rule"}
    assert len(s["locomo"]["select"]) == 2 and len(s["locomo"]["report"]) == 8
    assert set(s["locomo"]["select"]).isdisjoint(s["locomo"]["report"])
    g = s["gatemem"]
    assert {k: len(v) for k, v in g.items()} == {"generator": 45, "select": 14, "report": 32}
    assert not (set(g["generator"]) & set(g["select"]) or set(g["generator"]) & set(g["report"])
                or set(g["select"]) & set(g["report"]))
    for _domain, prefix in (("medical", "med_"), ("office", "office_"),
                           ("education", "education_"), ("household", "household_")):
        assert sum(e.startswith(prefix) for e in g["select"]) >= 1
        assert sum(e.startswith(prefix) for e in g["report"]) >= 2
    assert make_real_splits(data_root, seed=1) != s


# --------------------------------------------------------------------------- I/O guard


def test_guard_part_access_rules(monkeypatch):
    monkeypatch.delenv(io_guard.ENV_FORBID, raising=False)
    check_part_access("locomo", "select")
    check_part_access("gatemem", "generator")
    check_part_access("locomo", "report", purpose="evaluation")
    with pytest.raises(PermissionError, match="evaluation"):
        check_part_access("locomo", "report")
    with pytest.raises(PermissionError):
        check_part_access("gatemem", "report", purpose="training")
    with pytest.raises(ValueError):
        check_part_access("locomo", "generator")
    with pytest.raises(ValueError):
        check_part_access("nope", "select")
    with forbid_report_parts():
        with forbid_report_parts():
            assert report_parts_forbidden()
        assert report_parts_forbidden()
        check_part_access("gatemem", "select")
        with pytest.raises(PermissionError, match="forbidden"):
            check_part_access("gatemem", "report", purpose="evaluation")
    assert not report_parts_forbidden()
    monkeypatch.setenv(io_guard.ENV_FORBID, "1")
    with pytest.raises(PermissionError):
        check_part_access("locomo", "report", purpose="evaluation")


def test_adapters_refuse_report_without_evaluation_purpose(monkeypatch):
    """Refused before any file is opened, so this runs without the data too."""
    from memgate.datasets.real.gatemem import build_gatemem_source
    from memgate.datasets.real.locomo import build_locomo_source

    monkeypatch.delenv(io_guard.ENV_FORBID, raising=False)
    with pytest.raises(PermissionError):
        build_locomo_source(part="report")
    with pytest.raises(PermissionError):
        build_gatemem_source(part="report", purpose="model_selection")


def test_training_and_selection_cannot_read_report(data_root, monkeypatch):
    """The I/O guard on the adapter API: inside a training / selection entry point every path to
    report data raises, even with purpose="evaluation", even disguised as a select read."""
    from memgate.datasets.real.gatemem import build_gatemem_source, generator_turn_pairs
    from memgate.datasets.real.locomo import build_locomo_source

    monkeypatch.delenv(io_guard.ENV_FORBID, raising=False)
    splits = make_real_splits(data_root)
    report_conv = splits["locomo"]["report"][0]
    report_ep = splits["gatemem"]["report"][0]
    attempts = {}

    @no_report_access
    def train_and_select():
        # allowed: selection data
        sel = build_locomo_source(data_root, "select")
        attempts["select_queries"] = len(sel.queries)
        for name, call in {
            "locomo_report": lambda: build_locomo_source(data_root, "report", purpose="evaluation"),
            "locomo_report_as_select": lambda: build_locomo_source(
                data_root, "select", sample_ids=[report_conv], purpose="evaluation"),
            "gatemem_report": lambda: build_gatemem_source(data_root, None, "report",
                                                           purpose="evaluation"),
            "gatemem_report_as_select": lambda: build_gatemem_source(
                data_root, [report_ep], "select", purpose="evaluation"),
            "generator_text_from_report": lambda: generator_turn_pairs(data_root, [report_ep]),
        }.items():
            with pytest.raises(PermissionError):
                call()
            attempts[name] = "refused"

    train_and_select()
    assert attempts["select_queries"] > 0 and len(attempts) == 6
    # Outside the guard, evaluation may read the report part (only with its purpose).
    with pytest.raises(PermissionError):
        build_gatemem_source(data_root, [report_ep], "select")
    src = build_gatemem_source(data_root, [report_ep], "report", purpose="evaluation")
    assert src.queries


# --------------------------------------------------------------------------- vendored copy


def test_the_repository_ships_the_real_data_with_licences_and_sources(monkeypatch):
    """A clone is self-contained: data/real verifies against its SHA256SUMS, and each data set
    keeps its licence file and a README naming its source, commit and licence."""
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    root = real_data_root()
    assert root == (repo_root() / "data/real").resolve()
    sums = verify_checksums(root, force=True)
    assert {"locomo/locomo10.json", "locomo/LICENSE.txt", "gatemem/LICENSE"} <= set(sums)
    assert sum(rel.startswith("gatemem/") and rel.endswith(".jsonl") for rel in sums) == 8
    for name, licence_file, licence in (("locomo", "LICENSE.txt", "CC BY-NC 4.0"), ("gatemem", "LICENSE", "MIT")):
        readme = (root / name / "README.md").read_text(encoding="utf-8")
        assert (root / name / licence_file).is_file()
        assert licence in readme and "commit" in readme and "source" in readme
    assert "evaluation only, never training" in (root / "locomo" / "README.md").read_text().lower()
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):  # every vendored data set
        assert list(folder.glob("LICENSE*")), f"{folder.name}: no licence file"
        readme = (folder / "README.md").read_text(encoding="utf-8").lower()
        assert "licen" in readme and "commit" in readme, f"{folder.name}: README lacks licence or commit"
        listed = {rel.split("/", 1)[0] for rel in sums}
        assert folder.name in listed, f"{folder.name}: not covered by SHA256SUMS"


def test_locomo_guard_on_without_real_data_refuses_instead_of_selecting_silently(monkeypatch, tmp_path):
    from memgate.train.config import TrainConfig
    from memgate.train.selection import locomo_guard_for

    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="selection.locomo_guard"):
        locomo_guard_for(TrainConfig())
    import dataclasses

    off = dataclasses.replace(TrainConfig(), selection=dataclasses.replace(TrainConfig().selection, locomo_guard=False))
    assert locomo_guard_for(off) is None
