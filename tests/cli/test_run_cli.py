"""`dlio-fast run` end to end through the CLI (in-process): output files parsed, figures checked
against the dataset on disk (os.stat) and the manifest (what each format's real reader touches)."""

import glob
import json
import os

import numpy as np
import pytest
from conftest import one_line, set_args

from dlio.config import load_config
from dlio.dataset.manifest import load_manifest

FAST = ["--set", "train.computation_time=0.001", "--set", "evaluation.eval_time=0.001"]


def run_default(run_cli, tmp_path, *extra):
    data, out = tmp_path / "data", tmp_path / "out"
    code, so, se = run_cli(
        "-q",
        "run",
        "--workload",
        "default",
        *set_args(f"dataset.data_folder={data}", "train.epochs=2"),
        *FAST,
        "-o",
        out,
        *extra,
    )
    assert code == 0, se
    return data, out, so, se


def load_json(path):
    with open(path) as f:
        return json.load(f)


def split_files(data, split, ext):
    return sorted(glob.glob(os.path.join(str(data), split, "**", f"*.{ext}"), recursive=True))


def test_run_default_workload(run_cli, tmp_path):
    data, out, so, se = run_default(run_cli, tmp_path)
    names = set(os.listdir(out))
    assert {"summary.json", "0_output.json", "0_per_epoch_stats.json", "config.yaml", "dlio-fast.json"} <= names

    steps = 64 // 4  # floor(files * spf / (bs * ranks))
    s = load_json(out / "summary.json")
    assert s["epochs"] == 2 and s["num_accelerators"] == 1
    assert (s["num_files_train"], s["num_files_eval"], s["num_samples_per_file"]) == (64, 8, 1)
    m = s["metric"]
    assert len(m["train_au_percentage"]) == 2
    assert all(0 < a <= 100 for a in m["train_au_percentage"])
    assert 0 < m["train_au_mean_percentage"] <= 100
    assert m["train_au_meet_expectation"] in ("success", "fail")
    assert m["train_io_mean_MB_per_second"] == pytest.approx(
        m["train_throughput_mean_samples_per_second"] * 4096 / 2**20
    )
    assert len(m["eval_au_percentage"]) == 2  # eval after every epoch

    o = load_json(out / "0_output.json")
    for e in ("1", "2"):
        rec = o[e]
        assert len(rec["load"]["block1"]) == len(rec["proc"]["block1"]) == len(rec["compute"]["block1"]) == steps
        assert all(c >= 0.001 for c in rec["compute"]["block1"])  # spun at least the set time
        assert 0 < rec["au"]["block1"] <= 100
        assert len(rec["load"]["eval"]) == 8  # 8 eval files, batch 1
    assert "3" not in o
    pe = load_json(out / "0_per_epoch_stats.json")
    assert set(pe) == {"1", "2"}
    for e in pe.values():
        assert {"start", "end", "duration", "block1", "eval"} <= set(e)
        float(e["duration"]), float(e["block1"]["duration"])

    d = load_json(out / "dlio-fast.json")
    eps = d["ranks"][0]["epochs"]
    assert [e["steps_done"] for e in eps] == [steps, steps]
    assert all(e["complete"] for e in eps) and d["complete"] is True
    # every train file read whole once per epoch, every valid file once per eval (batch_size_eval 1)
    train = split_files(data, "train", "npz")
    valid = split_files(data, "valid", "npz")
    assert len(train) == 64 and len(valid) == 8
    per_epoch = sum(os.stat(p).st_size for p in train) + sum(os.stat(p).st_size for p in valid)
    assert d["metrics"]["bytes_read"] == 2 * per_epoch
    assert [e["bytes"] for e in eps] == [per_epoch, per_epoch]

    cfg = load_config(config_file=str(out / "config.yaml"))
    assert cfg.dataset.data_folder == str(data)
    assert cfg.train.epochs == 2 and cfg.reader.batch_size == 4
    assert cfg.steps_per_epoch(1) == steps
    assert "[METRIC] Training Accelerator Utilization [AU] (%)" in so

    # a second run reuses the dataset (no regeneration) and measures the same bytes
    mtimes = {p: os.stat(p).st_mtime_ns for p in train}
    code, so2, se2 = run_cli(
        "-q",
        "run",
        "--workload",
        "default",
        *set_args(f"dataset.data_folder={data}", "train.epochs=1", "workflow.evaluation=False"),
        *FAST,
        "-o",
        tmp_path / "out2",
    )
    assert code == 0, se2
    assert {p: os.stat(p).st_mtime_ns for p in train} == mtimes
    d2 = load_json(tmp_path / "out2" / "dlio-fast.json")
    assert d2["metrics"]["bytes_read"] == sum(os.stat(p).st_size for p in train)


SMALL = [
    *set_args(
        "dataset.num_files_train=8",
        "dataset.record_length_bytes=4096",
        "reader.batch_size=2",
        "workflow.evaluation=False",
        "train.epochs=2",
    ),
]


@pytest.mark.parametrize("fmt", ["npz", "npy", "hdf5", "tfrecord", "jpeg", "png", "csv", "indexed_binary", "synthetic"])
def test_run_each_format_reads_what_the_reader_reads(run_cli, tmp_path, fmt):
    spf = 1 if fmt in ("jpeg", "png") else 2  # an image file holds one sample
    data, out = tmp_path / "data", tmp_path / "out"
    code, so, se = run_cli(
        "-q",
        "run",
        "--workload",
        "default",
        *set_args(f"dataset.data_folder={data}", f"dataset.format={fmt}", f"dataset.num_samples_per_file={spf}"),
        *SMALL,
        *FAST,
        "-o",
        out,
    )
    assert code == 0, se
    steps = 8 * spf // 2
    d = load_json(out / "dlio-fast.json")
    eps = d["ranks"][0]["epochs"]
    assert [e["steps_done"] for e in eps] == [steps, steps]
    assert [e["steps_planned"] for e in eps] == [steps, steps]

    cfg = load_config(config_file=str(out / "config.yaml"))
    assert cfg.dataset.format == fmt and cfg.dataset.num_samples_per_file == spf
    from dlio.dataset.spec import dataset_spec

    m = load_manifest(dataset_spec(cfg), "train")
    rf, rs, ro, rl = m.ranges()
    # steps * batch == files * spf: every sample is read exactly once per epoch
    per_epoch = int(np.asarray(rl, dtype=np.int64).sum())
    sizes = [os.stat(p).st_size for p in m.paths]
    assert len(sizes) == 8
    if fmt in ("npz", "npy", "csv", "jpeg", "png"):  # whole file per sample
        assert per_epoch == spf * sum(sizes)
    elif fmt in ("hdf5", "indexed_binary"):  # the sample's bytes only
        assert per_epoch == 8 * spf * 4096
        assert per_epoch < sum(sizes) or fmt == "indexed_binary"
    elif fmt == "tfrecord":  # framed records cover the file
        assert per_epoch == sum(sizes)
        assert len(rl) == 8 * spf
    if fmt in ("tfrecord", "indexed_binary"):  # fixed-size records: planned by arithmetic
        assert m.table.uniform
    elif fmt == "synthetic":
        per_epoch = 0
    assert [e["bytes"] for e in eps] == [per_epoch, per_epoch]
    assert d["metrics"]["bytes_read"] == 2 * per_epoch
    s = load_json(out / "summary.json")
    assert s["epochs"] == 2
    assert all(0 < a <= 100 for a in s["metric"]["train_au_percentage"])
    o = load_json(out / "0_output.json")
    assert len(o["2"]["compute"]["block1"]) == steps


def test_dry_run_touches_nothing(run_cli, tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    code, so, se = run_cli(
        "run",
        "--workload",
        "default",
        *set_args(f"dataset.data_folder={data}", "reader.batch_size=3"),
        "--dry-run",
        "-o",
        out,
    )
    assert code == 0, se
    line = [l for l in so.splitlines() if l.startswith("steps per epoch")]
    assert len(line) == 1 and line[0].split()[3] == str(64 // 3)
    assert not data.exists() and not out.exists()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--workload", "default", "--set", "dataset.bogus=1"], "dataset.bogus"),
        (["--workload", "default", "--set", "reader.batch_size=0"], "reader.batch_size"),
        ([], "--workload"),
    ],
)
def test_bad_config_exits_2_one_line(run_cli, tmp_path, args, needle):
    code, so, se = run_cli(
        "-q", "run", *args, "--set", f"dataset.data_folder={tmp_path / 'data'}", "-o", tmp_path / "out"
    )
    assert code == 2
    assert needle in one_line(se)
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


def test_a_phase_that_measures_nothing_says_so(run_cli, tmp_path):
    """One training step (DLIO excludes the first) and an evaluation with 0 steps: each is said, not
    printed as AU 0 % / 0 samples/s with no word."""
    code, out, err = run_cli(
        "run",
        "-w",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'd'}",
            "dataset.num_files_train=4",
            "train.epochs=1",
            "train.computation_time=0.001",
            "workflow.evaluation=true",
            "dataset.num_files_eval=2",
            "reader.batch_size_eval=4",
        ),
        "-o",
        tmp_path / "o",
    )
    assert code == 0, err
    text = out + err
    assert "warning: epoch 1: 1 step(s) and output.metric.exclude_start_steps=1" in text
    assert "warning: evaluation after epoch 1: 0 steps: 2 eval files" in text


def test_too_few_steps_rule():
    from dlio.train.loop import too_few_steps

    assert too_few_steps(1, (1, 0)) and too_few_steps(2, (0, 0)) and too_few_steps(3, (2, 1))
    assert too_few_steps(3, (1, 0)) is None and too_few_steps(500, (1, 1)) is None
