"""``memgate evaluate`` reads configs/eval/default.yaml with the strict loader: the file, key=value
and the old flags set the same keys, and a bad key is one line naming it and where it was set."""

from __future__ import annotations

import json

import pytest

from memgate.commands.cli import main
from memgate.commands.evaluate import DEFAULT_CONFIG, flag_overrides
from memgate.contract.config import ConfigError, load_config, resolve_path
from memgate.eval.config import EvalConfig
from tests.commands.test_bad_input_cli import cases_with, gate_dir


def test_the_default_file_states_the_code_defaults():
    assert load_config(EvalConfig, resolve_path(DEFAULT_CONFIG)) == EvalConfig()


def _parsed(argv):
    from memgate.commands.evaluate import build_parser

    return build_parser().parse_args(argv)


def test_flags_and_key_value_set_the_same_keys(tmp_path):
    flags = _parsed(["--n-boot", "7", "--rerank-depth", "30", "--routes", "global_dense,learned_gate",
                     "--no-real", "--sweep", "--sweep-rows", "all", "--verifier", "local",
                     "--verifier-config", "local=configs/verifier/local.yaml", "--out", str(tmp_path)])
    by_flag = load_config(EvalConfig, resolve_path(DEFAULT_CONFIG), flag_overrides(flags))
    by_key = load_config(EvalConfig, resolve_path(DEFAULT_CONFIG), [
        "n_boot=7", "rerank_depth=30", "routes=[global_dense,learned_gate]", "real_sources=[]",
        "sweep.enabled=true", "sweep.rows=all", "verifier.backends=[local]",
        "verifier.configs.local=configs/verifier/local.yaml", f"out={tmp_path}"])
    assert by_flag == by_key
    assert by_key.rerank_depth == 30 and by_key.routes == ("global_dense", "learned_gate")


@pytest.mark.parametrize("text, needle", [
    ("n_boot: 10\nrerank_depth: 0\n", "eval.yaml:2: rerank_depth must be >= 1"),
    ("sweep:\n  seeds: 2\n  rowz: all\n", "eval.yaml:3: unknown config key(s): sweep.rowz"),
    ("routes: [global_dense, nope]\n", "eval.yaml:1: routes: unknown route(s) ['nope']"),
])
def test_a_bad_key_in_the_file_is_one_line_naming_it(tmp_path, capsys, text, needle):
    path = tmp_path / "eval.yaml"
    path.write_text(text)
    assert main(["evaluate", "--config", str(path)]) == 1
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("memgate evaluate: error:")]
    assert needle in line


def test_a_bad_override_names_the_override():
    with pytest.raises(ConfigError, match="override 'n_boots=5'.*unknown config key"):
        load_config(EvalConfig, resolve_path(DEFAULT_CONFIG), ["n_boots=5"])


def test_rerank_depth_from_the_file_reaches_the_gated_routes(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text("n_boot: 10\nrerank_depth: 1\n")
    out = tmp_path / "out"
    assert main(["evaluate", "--config", str(path), "--cases", str(cases_with(tmp_path)),
                 f"checkpoint={gate_dir(tmp_path)}", f"out={out}"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    scored = [m["candidates_scored_gate"]["value"] for source in metrics.values() if isinstance(source, dict)
              for m in source.values() if isinstance(m, dict) and "candidates_scored_gate" in m]
    assert scored and max(scored) == 1.0  # one candidate per query re-scored by the gate


def test_the_default_data_is_the_one_the_checkpoint_trained_on(tmp_path):
    """`memgate evaluate` without --data reads the checkpoint's train_config.data.data_dir (a gate
    trained on a mix row's data, e.g. data/textrisk_dialogue, failed the data-hash check against
    data/default); a checkpoint that records none keeps data/default."""
    from memgate.eval.config import DEFAULT_DATA, checkpoint_data_dir

    assert EvalConfig().data is None
    (tmp_path / "config.json").write_text(json.dumps(
        {"export": {"train_config": {"data": {"data_dir": "data/textrisk_dialogue"}}}}))
    assert checkpoint_data_dir(tmp_path) == "data/textrisk_dialogue"
    (tmp_path / "config.json").write_text(json.dumps({"export": {}}))
    assert checkpoint_data_dir(tmp_path) == DEFAULT_DATA == "data/default"
    assert checkpoint_data_dir(tmp_path / "missing") == DEFAULT_DATA
