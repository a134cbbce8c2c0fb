"""The command line's shape: flags that set config keys reach the config as values, console flags
work after the subcommand, and a programming error keeps its traceback."""

import json

import pytest
from conftest import set_args

from dlio import _core
from dlio.base.errors import DlioError
from dlio.config import load_config
from dlio.config.engines import FILE_ENGINES, MPIIO, engine_spec, resolve

FAST = ["--set", "train.computation_time=0.001", "--set", "evaluation.eval_time=0.001", "--set", "train.epochs=1"]


def test_engine_words_match_the_c_registry():
    assert set(FILE_ENGINES) | {MPIIO} == {name for name, *_ in _core.engines()}


@pytest.mark.parametrize(
    "word, want",
    [
        ("posix", ("posix", False)),
        ("odirect", ("posix", True)),
        ("uring", ("io_uring", False)),
        ("null", ("null", False)),
    ],
)
def test_engine_spec_of_config_words(word, want):
    assert engine_spec(load_config(workload="default", sets=[f"dlio_fast.engine={word}"], env={})) == want


def test_reader_odirect_and_checkpoint_engines():
    cfg = load_config(workload="default", sets=["reader.odirect=true", "dlio_fast.engine=mmap"], env={})
    assert engine_spec(cfg) == ("mmap", True)
    assert engine_spec(cfg, checkpoint=True) == ("posix", False)  # mmap cannot write checkpoints
    assert resolve("odirect", direct=False) == ("posix", False)


def test_run_engine_null_is_the_null_engine_not_yaml_null(run_cli, tmp_path):
    # Before: the flag became the text `dlio_fast.engine=null`, parsed back as YAML's null.
    out = tmp_path / "out"
    code, so, se = run_cli(
        "run",
        "-w",
        "default",
        "--set",
        f"dataset.data_folder={tmp_path / 'data'}",
        *FAST,
        "--engine",
        "null",
        "-o",
        out,
        "-q",
    )
    assert code == 0, se
    doc = json.loads((out / "dlio-fast.json").read_text())
    assert doc["settings"]["engine"] == "null"
    assert doc["complete"] and doc["ranks"][0]["epochs"][0]["steps_done"] > 0


def test_flag_origin_is_named_in_errors():
    with pytest.raises(DlioError, match="--qd"):
        load_config(workload="default", options={"dlio_fast.qd": (0, "--qd")}, env={})


@pytest.mark.parametrize("flag", ["-q", "--quiet", "-v"])
def test_console_flags_after_the_subcommand(run_cli, tmp_path, flag):
    code, so, se = run_cli(
        "run", "-w", "default", "--set", f"dataset.data_folder={tmp_path / 'data'}", *FAST, "-o", tmp_path / "out", flag
    )
    assert code == 0, se
    if flag == "-v":
        assert "Rank 0 step 1: loaded" in so
    else:
        assert "\r" not in se


def test_a_programming_error_keeps_its_traceback(monkeypatch):
    from dlio.cli import fsbench
    from dlio.cli import main as cli_main

    def broken():
        raise ValueError("a bug, not bad input")

    monkeypatch.setattr(fsbench.engines, "callback", broken)
    with pytest.raises(ValueError, match="a bug"):
        cli_main.main(["engines"])


def test_object_storage_runs_are_refused_not_run_locally(run_cli, tmp_path):
    # Before: storage_type s3 ran against a local folder named `s3:/...`.
    code, out, err = run_cli(
        "run",
        "-w",
        "default",
        *set_args("storage.storage_type=s3", f"dataset.data_folder={tmp_path}"),
        "-o",
        tmp_path / "out",
    )
    assert code == 2 and "storage.storage_type = 's3'" in err
    assert not (tmp_path / "out").exists()
