"""Planning costs what a rank reads in the steps it runs, not the dataset's sample count: DLIO 2.0.0's own
dlrm.yaml (one indexed_binary file of 4,195,198,976 samples) plans, scaled down only by its steps, under an
address-space limit, and what cannot fit is refused naming the steps."""

import os

import numpy as np
from conftest import one_line
from test_hostile_bounds import limited

from dlio.config import load_config
from dlio.dataset import ranges
from dlio.dataset.spec import dataset_spec
from dlio.system.mpi import Comm
from dlio.train import planner
from dlio.train.loop import Trainer

DLRM_200 = os.path.join(os.path.dirname(__file__), "..", "data", "dlio-workloads", "2.0.0", "dlrm.yaml")
SAMPLES = 4_195_198_976  # dlrm.yaml's dataset.num_samples_per_file (one file)
RECORD = 327_680  # its dataset.record_length
BATCH = 2048  # its reader.batch_size


def _run(tmp_path, *sets, dry=True):
    args = ["run", "--config", DLRM_200, "--set", f"dataset.data_folder={tmp_path}/d", "-o", tmp_path / "o"]
    for s in sets:
        args += ["--set", s]
    return limited(*args, *(["--dry-run"] if dry else []))


def test_dlio_200_dlrm_dry_run_plans_its_steps_under_a_memory_limit(tmp_path):
    code, out, err = _run(tmp_path, "train.total_training_steps=100")
    assert code == 0, err
    lines = {line[:20].strip(): line[20:] for line in out.splitlines() if len(line) > 20}
    assert lines["steps per epoch"].startswith(f"100 (batch {BATCH})")
    assert lines["plan per rank"].startswith(f"{100 * BATCH:,} samples, about {100 * BATCH:,} reads")
    assert lines["ranks"].startswith(f"1: 1 files and {SAMPLES:,} samples per rank")


def test_dlio_200_dlrm_without_a_step_cap_is_refused_naming_the_steps(tmp_path):
    code, out, err = _run(tmp_path, "train.total_training_steps=-1")
    assert code == 2, err
    line = one_line(err.replace(err.split("dlio-fast: error:")[0], ""))
    assert f"{SAMPLES // BATCH:,} steps of batch {BATCH}" in line
    assert "set train.total_training_steps" in line and "GiB" in line
    assert not (tmp_path / "d").exists()


def test_a_dataset_whose_ranges_are_listed_per_sample_is_still_refused(tmp_path):
    # records of varying size: the manifest lists 24 bytes per sample, 24 GB for 10^9 samples
    code, out, err = _run(
        tmp_path, "train.total_training_steps=1", "dataset.record_length_bytes_stdev=1000", "dataset.format=tfrecord"
    )
    assert code == 2, err
    line = one_line(err.replace(err.split("dlio-fast: error:")[0], ""))
    assert "dataset.num_files_train = 1 (4195198976 samples per file)" in line and "GiB" in line


def test_each_rank_plans_a_few_mb_of_its_own_shuffled_block():
    cfg = load_config(config_file=DLRM_200, sets=["train.total_training_steps=100"], env={})
    spec = dataset_spec(cfg)
    table = ranges.Table(first=np.zeros(1, np.uint64), stride=RECORD, length=RECORD, count=SAMPLES)
    layout = planner.Layout(
        nfiles=1, spf=SAMPLES, file_size=np.full(1, SAMPLES * RECORD, np.uint64), whole_file=False, table=table
    )
    settings = Trainer(cfg, Comm(), print).settings("train")
    assert settings.sample_shuffle == "random" and settings.max_steps == 100 and spec.num_samples_per_file == SAMPLES
    plans = planner.epoch_plans(layout, settings, cfg.train.computation_time, 4, epoch=1, random_seed=7)
    seen = np.concatenate([p.samples for p in plans])
    for p in plans:
        assert p.nsteps == 100 and len(p.samples) == 100 * BATCH
        assert p.ops.nbytes + p.steps.nbytes + p.samples.nbytes < 8 << 20  # a few MB, not 4 G entries
        assert np.array_equal(p.ops["offset"], p.samples.astype(np.uint64) * np.uint64(RECORD))
        assert (p.ops["length"] == RECORD).all()
    assert len(np.unique(seen)) == len(seen) == 4 * 100 * BATCH  # the ranks' blocks of one permutation
    assert seen.min() >= 0 and seen.max() < SAMPLES
    assert np.median(seen) > SAMPLES // 4  # shuffled over the whole file, not its first samples
