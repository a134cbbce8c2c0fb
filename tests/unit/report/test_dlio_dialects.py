"""DLIO's result files in each dialect, figures recomputed here: /proc fields, the 2.0.0 throughput
formula, per-epoch stats with step checkpoints, checkpoint-only runs, .hydra/ and dlio.log."""

import copy
import json
from datetime import datetime

import numpy as np
import pytest
from test_report import OFF_NS, REC, later, make_result, wall_ns

from dlio.config.load import load_config
from dlio.report import exact, run_files
from dlio.report.dlio import files as dlio_files
from dlio.report.dlio import host as dlio_host
from dlio.report.dlio import hydra as hydra_files
from dlio.report.dlio import log as dlio_log

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu vme
power management:

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2299.998
power management:
"""


def test_lines_to_dict_as_dlio():
    """DLIO keeps the last CPU's fields, drops `processor`, and keeps a key without a value as ''."""
    assert dlio_host.lines_to_dict(CPUINFO) == {
        "vendor_id": "GenuineIntel",
        "model name": "Intel(R) Xeon(R) Processor",
        "flags": "fpu vme",
        "power management": "",
        "cpu MHz": "2299.998",
    }
    assert dlio_host.lines_to_dict("MemTotal:       24683652 kB\nMemFree:  1 kB\n") == {
        "MemTotal": "24683652 kB",
        "MemFree": "1 kB",
    }


def test_proc_info_reads_this_host():
    info = dlio_host.proc_info()
    with open("/proc/meminfo") as f:
        total = next(line.split(":")[1].strip() for line in f if line.startswith("MemTotal:"))
    assert info["meminfo"]["MemTotal"] == total
    with open("/proc/cpuinfo") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    if names:
        assert info["cpuinfo"]["model name"] == names[-1]
    assert "processor" not in info["cpuinfo"]
    missing = dlio_host.proc_info("/nonexistent/cpuinfo", "/nonexistent/meminfo")
    assert "cpuinfo" not in missing and "meminfo" not in missing


def _legacy(res):
    res["settings"]["dialect"] = "2.0.0"
    return res


def test_200_throughput_is_n_batch_over_block_time():
    res = _legacy(make_result(with_eval=False))
    m = dlio_files.summary(res)["metric"]
    batch = res["settings"]["batch_size"]
    thr, au = [], []
    for e in (1, 2):
        per_rank_thr, per_rank_au = [], []
        for r in (0, 1):
            b = res["ranks"][r]["epochs"][e - 1]["train"]
            wall = 1.25 + r + e / 10  # the block's duration_s
            per_rank_thr.append(3 * batch / wall)
            per_rank_au.append(100 * (0.1 + 0.1) / (wall - b["proc"][0]))
        thr.append(sum(per_rank_thr))
        au.append(sum(per_rank_au) / 2)
    assert m["train_throughput_samples_per_second"] == pytest.approx(thr)
    assert m["train_au_percentage"] == pytest.approx(au)
    assert m["train_io_mean_MB_per_second"] == pytest.approx(np.mean(thr) * REC / 2**20)
    doc = exact.exact(res)["dlio_compat"]
    assert doc["dialect"] == "2.0.0" and doc["throughput_formula"].startswith("n * batch / T")
    o = dlio_files.rank_output(res, 1)
    assert o["1"]["throughput"]["block1"] == pytest.approx(3 * batch / (1.25 + 1 + 0.1))
    assert "end" not in o["1"]  # 2.0.0's rank file has no epoch end
    # current: the recorded (n - 2) figures
    cur = exact.exact(make_result())["dlio_compat"]
    assert cur["dialect"] == "current" and cur["throughput_formula"].startswith("(n - 2) * batch")


def _ckpt(rank, epoch, block, step, start, seconds, kind="save"):
    return {
        "kind": kind,
        "rank": rank,
        "epoch": epoch,
        "step": step,
        "block": block,
        "start": start,
        "end": later(start, seconds),
        "wall_start_ns": wall_ns(start),
        "wall_end_ns": wall_ns(later(start, seconds)),
        "duration_s": seconds,
        "bytes": 2**20,
        "checkpoint_size_GB": 2**20 / 2**30,
        "dlio_throughput_GB_per_second": 2**20 / 2**30 / seconds,
        "GiB_per_second": 2**20 / 2**30 / seconds,
        "fsync": False,
    }


def _step_checkpointed(dialect):
    """Rank 0, epoch 1: two blocks of 3 steps, a checkpoint after each (steps 3 and 6, the last)."""
    res = make_result(with_eval=False)
    res["settings"]["dialect"] = dialect
    res["ranks"] = res["ranks"][:1]
    res["hostnames"], res["comm_size"] = ["hostA"], 1
    ep = res["ranks"][0]["epochs"][0]
    res["ranks"][0]["epochs"] = [ep]
    t0 = "2025-01-01T00:00:00.000000"
    b1, b2 = copy.deepcopy(ep["train"]), copy.deepcopy(ep["train"])
    b1["start_ns"], b1["end_ns"], b1["duration_s"] = wall_ns(later(t0, 1)) - OFF_NS, wall_ns(later(t0, 3)) - OFF_NS, 2.0
    b2["start_ns"], b2["end_ns"], b2["duration_s"] = wall_ns(later(t0, 4)) - OFF_NS, wall_ns(later(t0, 7)) - OFF_NS, 3.0
    ep["blocks"] = [b1, b2]
    ep["steps_done"] = ep["steps_planned"] = 6
    ep["checkpoints"] = [_ckpt(0, 1, 1, 3, later(t0, 3), 0.5), _ckpt(0, 1, 2, 6, later(t0, 7), 0.75)]
    ep["train_end"] = later(t0, 7.75)
    ep["end"] = later(t0, 8)
    return res


def test_per_epoch_stats_with_step_checkpoints_current():
    res = _step_checkpointed("current")
    t0 = "2025-01-01T00:00:00.000000"
    p = dlio_files.per_epoch_stats(res, 0)["1"]
    assert list(p) == ["start", "block1", "save_ckpt1", "block2", "save_ckpt2", "block3", "end", "duration"]
    assert p["block1"] == {"start": later(t0, 1), "end": later(t0, 3), "duration": "2.00"}
    assert p["block2"] == {"start": later(t0, 4), "end": later(t0, 7), "duration": "3.00"}
    # current DLIO closes an empty block after the checkpoint on the last step
    assert p["block3"] == {"start": later(t0, 7.75), "end": later(t0, 7.75), "duration": "0.00"}
    assert p["save_ckpt2"]["duration"] == 0.75 and p["save_ckpt2"]["throughput"] == pytest.approx(1 / 1024 / 0.75)
    assert p["duration"] == "7.75"  # end_train: after the last checkpoint
    assert p["end"] == later(t0, 8)  # end_epoch
    o = dlio_files.rank_output(res, 0)["1"]
    assert list(o["load"]) == ["block1", "block2", "block3"] and o["load"]["block3"] == []
    assert o["throughput"]["block3"] == 0.0
    # the epoch figure: step-weighted over the blocks (the empty one weighs nothing)
    assert dlio_files.summary(res)["metric"]["train_au_percentage"] == pytest.approx([(3 * 90 + 3 * 90) / 6])
    log = dlio_log.render(res, "/out")
    assert "Ending block 3 - 0 steps completed in 0.00 s" in log
    assert "Finished saving checkpoint 2 for epoch 1 in 0.7500 s" in log


def test_per_epoch_stats_with_step_checkpoints_200(tmp_path):
    res = _step_checkpointed("2.0.0")
    t0 = "2025-01-01T00:00:00.000000"
    p = dlio_files.per_epoch_stats(res, 0)["1"]
    assert list(p) == ["start", "block1", "ckpt1", "block2", "ckpt2", "end", "duration"]
    assert p["ckpt1"] == {"start": later(t0, 3), "end": later(t0, 3.5), "duration": "0.50"}
    assert p["end"] == later(t0, 7.75) and p["duration"] == "7.75"  # 2.0.0: end is end_train
    assert not [k for k in dlio_files.summary(res)["metric"] if "checkpoint" in k]  # 2.0.0 has none
    run_files.write_all(res, str(tmp_path))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "per_epoch_stats.json" in names and "0_per_epoch_stats.json" not in names
    log = (tmp_path / "dlio.log").read_text()
    assert "[INFO] " + later(t0, 3) + " Starting checkpoint 1 after total step 3 for epoch 1" in log
    assert "[INFO] Averaged metric over all epochs" in log


def test_checkpoint_only_run():
    res = make_result(with_eval=False)
    start, end = "2025-01-01T00:00:00.000000", "2025-01-01T00:00:10.000000"
    for r in res["ranks"]:
        r["epochs"] = []
        r["checkpoints"] = [
            _ckpt(r["rank"], 1, 1, 1, later(start, 1), 0.5),
            _ckpt(r["rank"], 1, 2, 2, later(start, 3), 1.0),
            _ckpt(r["rank"], 1, 1, 1, later(start, 5), 0.25, "load"),
        ]
        r["checkpoint_phase"] = {"start": start, "end": end}
    s = dlio_files.summary(res)
    assert s["epochs"] == 0
    assert not [k for k in s["metric"] if k.startswith(("train_", "eval_"))]
    assert s["metric"]["save_checkpoint_duration_mean_seconds"] == pytest.approx(0.75)
    assert s["metric"]["load_checkpoint_duration_mean_seconds"] == pytest.approx(0.25)
    p = dlio_files.per_epoch_stats(res, 1)
    assert list(p) == ["1"] and list(p["1"]) == ["start", "save_ckpt1", "save_ckpt2", "load_ckpt1", "end"]
    assert p["1"]["start"] == start and p["1"]["end"] == end
    o = dlio_files.rank_output(res, 1)["1"]
    assert o == {"start": start, "load": {}, "proc": {}, "throughput": {}, "au": {}, "compute": {}, "end": end}
    assert not [line for line in dlio_files.metric_lines(res) if "Training" in line]
    log = dlio_log.render(res, "/out")
    assert "Running DLIO [Checkpointing] with 2 process(es)" in log
    assert "[METRIC] Checkpoint save duration (seconds): 0.7500 (0.2500)" in log


def test_dlio_log_metric_block_is_the_summarys():
    res = make_result()
    m = dlio_files.summary(res)["metric"]
    lines = dlio_log.render(res, "/out").splitlines()
    au = f"{m['train_au_mean_percentage']:.4f} ({m['train_au_stdev_percentage']:.4f})"
    assert f"[METRIC] Training Accelerator Utilization [AU] (%): {au}" in lines
    assert "[METRIC] Number of Simulated Accelerators: 2 " in lines
    assert "[OUTPUT] Averaged metric over all steps/epochs" in lines
    e1 = res["ranks"][0]["epochs"][0]
    assert f"[OUTPUT] {e1['start']} Starting epoch 1: 3 steps expected" in lines
    started = [line for line in lines if line.endswith("Starting block 1")]
    assert started[0] == f"[OUTPUT] {later(e1['start'], 0.5)} Starting block 1"
    ts = [datetime.fromisoformat(line.split()[1]) for line in lines if line.startswith("[OUTPUT] 20")]
    assert ts[1:-2] == sorted(ts[1:-2])  # the run's lines in time order


@pytest.mark.parametrize("dialect", ["2.0.0", "current"])
def test_hydra_documents(dialect):
    rl = "record_length" if dialect == "2.0.0" else "record_length_bytes"
    cfg = load_config(
        dlio_overrides=["workload=unet3d_h100", f"++workload.dataset.{rl}=65536", "++workload.train.epochs=2"],
        sets=["reader.batch_size=2"],
    )
    assert cfg.dlio_fast.dialect == dialect
    import yaml

    docs = hydra_files.documents(cfg)
    w = yaml.safe_load(docs["config.yaml"])["workload"]
    assert w["dataset"][rl] == 65536 and w["train"]["epochs"] == 2 and w["reader"]["batch_size"] == 2
    assert w["reader"]["read_threads"] == 4  # from the workload file
    assert "dlio_fast" not in w and "profiling" not in w  # schema defaults are not Hydra's
    assert w["output"] == {"log_file": "dlio.log"}
    if dialect == "2.0.0":
        # model a mapping, record_length_bytes beside record_length: what mlpstorage reads (hydra.py)
        assert w["model"] == {"name": "unet3d"} and w["checkpoint"]["model_size"] == 499153191
        assert w["dataset"]["record_length_bytes"] == 65536
    else:
        assert w["model"]["name"] == "unet3d" and w["model"]["model_size_bytes"] == 499153191
    task = sorted(
        [
            "workload=unet3d_h100",
            f"++workload.dataset.{rl}=65536",
            "++workload.train.epochs=2",
            "++workload.reader.batch_size=2",
        ]
    )
    assert sorted(yaml.safe_load(docs["overrides.yaml"])) == task
    h = yaml.safe_load(docs["hydra.yaml"])["hydra"]
    assert h["overrides"]["task"] == yaml.safe_load(docs["overrides.yaml"])
    assert h["job"]["override_dirname"] == ",".join(task) and h["runtime"]["choices"] == {"workload": "unet3d_h100"}
    assert h["output_subdir"] == ".hydra" and h["job"]["name"] == "dlio-fast"


def test_hydra_yaml_records_the_run_dir_and_output_folder(tmp_path):
    """hydra.yaml: run.dir as given, runtime.output_dir the folder written, the hydra overrides."""
    import yaml

    cfg = load_config(dlio_overrides=["workload=default", "hydra.run.dir=out/x", "++hydra.output_subdir=dlio_config"])
    h = yaml.safe_load(hydra_files.documents(cfg, str(tmp_path / "out" / "x"))["hydra.yaml"])["hydra"]
    assert h["run"]["dir"] == "out/x" and h["runtime"]["output_dir"] == str(tmp_path / "out" / "x")
    assert h["output_subdir"] == "dlio_config"
    assert h["overrides"]["hydra"] == ["++hydra.run.dir=out/x", "++hydra.output_subdir=dlio_config", "hydra.mode=RUN"]


def test_write_all_writes_hydra_and_log(tmp_path):
    res = make_result()
    run_files.write_all(res, str(tmp_path), None, {"config.yaml": "workload: {}\n", "overrides.yaml": "[]\n"})
    assert (tmp_path / ".hydra" / "config.yaml").read_text() == "workload: {}\n"
    assert (tmp_path / "dlio.log").read_text() == dlio_log.render(res, str(tmp_path))
    assert json.loads((tmp_path / "summary.json").read_text())["host_cpuinfo"] == {"model name": "TestCPU"}


def test_hydra_subdir_as_mlperf_storage_sets_it(tmp_path):
    """MLPerf Storage runs DLIO with ++hydra.output_subdir=configs; its report reads configs/overrides.yaml."""
    res = make_result()
    docs = {"config.yaml": "workload:\n  model:\n    name: unet3d\n", "overrides.yaml": "- workload=unet3d_h100\n"}
    run_files.write_all(res, str(tmp_path / "a"), None, docs, hydra_subdir="configs")
    assert (tmp_path / "a" / "configs" / "overrides.yaml").read_text() == "- workload=unet3d_h100\n"
    assert not (tmp_path / "a" / ".hydra").exists()
    run_files.write_all(res, str(tmp_path / "b"), None, docs, hydra_subdir=None)  # hydra.output_subdir=null
    assert not [p for p in (tmp_path / "b").iterdir() if p.is_dir()]


def test_dlio_folder_reads_the_mlperf_layout(tmp_path):
    """A DLIO folder whose Hydra config is in configs/ (MLPerf Storage) is read like one with .hydra/."""
    import shutil

    from test_dlio_interchange import GOLDEN

    from dlio.report.dlio import folder as dlio_folder

    src = f"{GOLDEN}/current-train"
    shutil.copytree(src, tmp_path / "run")
    (tmp_path / "run" / ".hydra").rename(tmp_path / "run" / "configs")
    doc, _ = dlio_folder.load_dlio_folder(str(tmp_path / "run"))
    assert doc["workload"] == "unet3d" and doc["settings"]["batch_size"] == 2
