"""The one command line: every verb answers --help under its own name, errors are one line with the
key and file:line, --debug shows the traceback, python -m memgate is the same program."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memgate
from memgate.commands import cli
from memgate.contract.config import ConfigError, load_config
from memgate.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_verb(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in cli.VERBS:
        assert f"\n  {verb} " in out, verb
    assert cli.main([]) == 2  # no verb: the help, as a usage error


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"memgate {memgate.__version__}"


@pytest.mark.parametrize("verb", sorted(cli.VERBS))
def test_every_verb_has_help_under_its_name(verb, capsys):
    module = cli.VERBS[verb][0]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:  # an optional extra this environment lacks
        pytest.skip(f"{verb}: {exc}")
    assert cli.main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: memgate {verb}"), out[:200]


def test_unknown_verb_is_a_usage_error(capsys):
    assert cli.main(["trian"]) == 2
    err = capsys.readouterr().err
    assert "unknown verb 'trian'" in err and "train" in err and len(err.strip().splitlines()) == 1


def test_a_bad_config_value_is_one_line_with_file_line(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("seed: 1\noptim:\n  lr: fast\n")
    assert cli.main(["train", "--config", str(config)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"memgate train: error: {config}:3: optim.lr: expected a number")


def test_unknown_key_names_the_line_and_the_known_keys(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("optim:\n  lr: 0.1\n  lrr: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: unknown config key\(s\): optim.lrr \(known: \["):
        load_config(TrainConfig, config)


def test_an_override_error_names_the_override():
    with pytest.raises(ConfigError, match=r"^override 'optim.lr=abc': optim.lr: expected a number"):
        load_config(TrainConfig, None, ["optim.lr=abc"])


def test_debug_shows_the_traceback(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("optim:\n  lr: fast\n")
    with pytest.raises(ConfigError):
        cli.main(["--debug", "train", "--config", str(config)])


def test_a_missing_checkout_folder_or_extra_names_the_fix():
    missing = ModuleNotFoundError("No module named 'data_gen'", name="data_gen")
    assert "source checkout" in cli._missing(missing, "generate")
    missing = ModuleNotFoundError("No module named 'lightning'", name="lightning")
    assert "pip install 'memgate[train]'" in cli._missing(missing, "train")


def test_the_memgate_script_finds_the_checkouts_generator_from_any_directory(tmp_path):
    """The README's researcher quickstart runs `memgate generate` after `make install`: the script's
    sys.path has its bin folder, not the checkout, so data_gen/ was "not installed with the wheel"."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "memgate").symlink_to(ROOT / "memgate", target_is_directory=True)  # memgate alone importable
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}
    code = "import sys; from memgate.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    for verb in ("generate", "mine"):
        done = subprocess.run([sys.executable, "-c", code, verb, "--help"], cwd=tmp_path, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: memgate {verb}")


def test_python_dash_m_memgate_is_the_same_program():
    out = subprocess.run([sys.executable, "-m", "memgate", "audit", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("usage: memgate audit")
    out = subprocess.run([sys.executable, "-m", "memgate", "--version"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"memgate {memgate.__version__}"


def test_rerank_depth_has_one_default_and_evaluate_sets_it():
    import inspect

    from memgate.commands.evaluate_run import evaluate
    from memgate.contract.defaults import RERANK_DEPTH
    from memgate.eval.evaluation import EvalSettings
    from memgate.eval.routes import RouteRunner
    from memgate.train.config import SelectionSection

    assert EvalSettings(routes=[]).rerank_depth == RERANK_DEPTH
    assert inspect.signature(RouteRunner).parameters["rerank_depth"].default == RERANK_DEPTH
    assert SelectionSection().guard_rerank_depth == RERANK_DEPTH
    assert inspect.signature(evaluate).parameters["rerank_depth"].default == RERANK_DEPTH
    from memgate.eval.config import EvalConfig
    from memgate.integrations.memory import Memory
    from memgate.integrations.opening import open_retriever
    from memgate.retriever import RetrieverConfig

    assert EvalConfig().rerank_depth == RetrieverConfig().rerank_depth == RERANK_DEPTH
    for fn in (Memory.__init__, open_retriever):
        assert inspect.signature(fn).parameters["rerank_depth"].default == RERANK_DEPTH
    # no second literal default anywhere in the library
    import re
    literal = re.compile(r"rerank_depth\w*\s*(?::\s*int\s*)?=\s*\d")
    assert not [p for p in (ROOT / "memgate").rglob("*.py") if literal.search(p.read_text())]
    assert "--rerank-depth" in subprocess.run(
        [sys.executable, "-m", "memgate", "evaluate", "--help"], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout
