"""Checkpoints inside training, through `dlio-fast run`: DLIO's folders, blocks and fields."""

import json
import os

from conftest import set_args

from dlio.base.units import fmt_bytes

BASE = [
    "run",
    "--workload",
    "default",
    *set_args(
        "train.computation_time=0.001",
        "workflow.evaluation=false",
        "workflow.checkpoint=true",
        "model.model_size_bytes=1048576",
    ),
]


# torch.save({"a": int8 tensor of n bytes}), n a multiple of 64, is n + 1577 bytes: DLIO's own
# model_states-0.pt of 10240 bytes is 11817 on disk (current DLIO with torch 2.13)
PT_OVERHEAD = 1577


def load(p):
    with open(p) as f:
        return json.load(f)


def test_step_checkpoints_split_epochs_into_blocks(run_cli, tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    code, stdout, err = run_cli(
        *BASE,
        *set_args(
            f"dataset.data_folder={tmp_path / 'd'}",
            "train.epochs=2",
            "checkpoint.steps_between_checkpoints=4",
            f"checkpoint.checkpoint_folder={ck}",
        ),
        "-o",
        out,
    )
    assert code == 0, err
    # 64 files / batch 4 = 16 steps: checkpoints after steps 4, 8, 12, 16 of each epoch
    names = sorted(os.listdir(ck))
    assert names == sorted(f"global_epoch{e}_step{s}" for e in (1, 2) for s in (4, 8, 12, 16))
    for n in names:
        files = os.listdir(ck / n)
        assert files == ["model_states-0.pt"]
        assert os.path.getsize(ck / n / files[0]) == 1048576 + PT_OVERHEAD
    rank0 = load(out / "0_output.json")
    # current DLIO opens a block after each checkpoint: the one after step 16 stays empty
    assert sorted(rank0["1"]["load"]) == ["block1", "block2", "block3", "block4", "block5"]
    assert all(len(rank0["1"]["load"][f"block{i}"]) == 4 for i in range(1, 5)) and rank0["1"]["load"]["block5"] == []
    stats = load(out / "0_per_epoch_stats.json")
    assert sorted(k for k in stats["2"] if k.startswith("save_ckpt")) == [f"save_ckpt{i}" for i in range(1, 5)]
    assert stats["1"]["save_ckpt1"]["duration"] > 0
    m = load(out / "summary.json")["metric"]
    assert m["save_checkpoint_io_mean_GB_per_second"] > 0
    assert m["checkpoint_size_GB"] == 1048576 / 2**30
    doc = load(out / "dlio-fast.json")
    recs = doc["checkpoints"]["records"]
    assert len(recs) == 8 and all(r["bytes"] == 1048576 + PT_OVERHEAD for r in recs)
    # training bytes are unaffected by the blocks: each epoch reads the 64 train files once
    train_bytes = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(tmp_path / "d" / "train") for f in fs)
    assert [e["bytes"] for e in doc["ranks"][0]["epochs"]] == [train_bytes, train_bytes]
    assert all(e["steps_done"] == 16 for e in doc["ranks"][0]["epochs"])


def test_epoch_checkpoints(run_cli, tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    code, stdout, err = run_cli(
        *BASE,
        *set_args(
            f"dataset.data_folder={tmp_path / 'd'}",
            "train.epochs=3",
            "checkpoint.checkpoint_after_epoch=2",
            "checkpoint.epochs_between_checkpoints=1",
            f"checkpoint.checkpoint_folder={ck}",
        ),
        "-o",
        out,
    )
    assert code == 0, err
    # DLIO names epoch checkpoints with the step counter past the last step (16 + 1)
    assert sorted(os.listdir(ck)) == ["global_epoch2_step17", "global_epoch3_step17"]
    stats = load(out / "0_per_epoch_stats.json")
    assert "save_ckpt1" not in stats["1"] and "save_ckpt1" in stats["2"] and "save_ckpt1" in stats["3"]
    assert "Checkpoint save I/O Throughput" in stdout


def test_checkpoint_only_mode(run_cli, tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    code, stdout, err = run_cli(
        "run",
        "--workload",
        "llama_8b_zero3",
        "--scale",
        "0.0005",
        *set_args(
            f"checkpoint.checkpoint_folder={ck}",
            f"dataset.data_folder={tmp_path / 'data'}",
            "checkpoint.num_checkpoints_write=2",
            "checkpoint.num_checkpoints_read=1",
            "checkpoint.time_between_checkpoints=0",
        ),
        "-o",
        out,
    )
    assert code == 0, err
    assert sorted(os.listdir(ck)) == ["global_epoch1_step1", "global_epoch1_step2"]
    m = load(out / "summary.json")["metric"]
    assert m["save_checkpoint_duration_mean_seconds"] > 0 and m["load_checkpoint_duration_mean_seconds"] > 0
    doc = load(out / "dlio-fast.json")
    kinds = [r["kind"] for r in doc["checkpoints"]["records"]]
    assert kinds == ["save", "save", "load"]
    on_disk = sum(os.path.getsize(ck / "global_epoch1_step1" / f) for f in os.listdir(ck / "global_epoch1_step1"))
    assert doc["checkpoints"]["records"][0]["bytes"] == on_disk
    assert not (tmp_path / "data").exists()  # checkpoint-only runs need no dataset
    assert "Running dlio-fast [Checkpointing] with 1 process(es)" in stdout
    # the console shows the checkpoint figures, not a training AU of 0 marked "fail"
    assert "[METRIC] Checkpoint save I/O Throughput (GB/second)" in stdout
    assert "Training Accelerator Utilization" not in stdout and "train_au_meet_expectation" not in stdout
    # current DLIO writes no train_* fields for a checkpoint-only run, and epochs 0
    assert not [k for k in m if k.startswith("train_")] and load(out / "summary.json")["epochs"] == 0


def test_checkpoint_spans_in_the_trace(run_cli, tmp_path):
    from dlio.report.trace import read_pfw

    ck, out = tmp_path / "ck", tmp_path / "out"
    code, stdout, err = run_cli(
        "run",
        "--workload",
        "llama_8b_zero3",
        "--scale",
        "0.0005",
        "--trace",
        *set_args(
            f"checkpoint.checkpoint_folder={ck}",
            "checkpoint.num_checkpoints_write=2",
            "checkpoint.num_checkpoints_read=1",
            "checkpoint.time_between_checkpoints=0",
        ),
        "-o",
        out,
    )
    assert code == 0, err
    events = [e for e in read_pfw(out / "trace-0-of-1.pfw.gz") if e.get("cat") == "checkpoint"]
    recs = load(out / "dlio-fast.json")["checkpoints"]["records"]
    assert [e["name"] for e in events] == ["capture", "capture", "restart"]  # dft_ai's checkpoint events
    for e, r in zip(events, recs):
        assert e["args"]["bytes"] == r["bytes"]
        assert abs(float(e["dur"]) - r["duration_s"] * 1e6) < 5e3  # the same window (5 ms slack)


def fake_virtio(root, devices):
    """A /sys/bus/virtio/devices tree: {name: (device id, feature bits string)}."""
    for name, (dev, feats) in devices.items():
        d = root / name
        d.mkdir(parents=True)
        (d / "device").write_text(dev + "\n")
        (d / "features").write_text(feats + "\n")
    return str(root)


def test_free_page_reporting_read_from_the_balloon_features(tmp_path):
    from dlio.system.host import free_page_reporting

    bits = lambda *on: "".join("1" if i in on else "0" for i in range(64))  # noqa: E731
    assert free_page_reporting(
        fake_virtio(tmp_path / "a", {"virtio0": ("0x0005", bits(1, 2, 5)), "virtio1": ("0x0002", bits(5))})
    )
    assert not free_page_reporting(fake_virtio(tmp_path / "b", {"virtio0": ("0x0005", bits(1, 2))}))
    # bit 5 of another device (a block device) says nothing about the balloon
    assert not free_page_reporting(fake_virtio(tmp_path / "c", {"virtio1": ("0x0002", bits(5))}))
    assert not free_page_reporting(str(tmp_path / "missing"))


def test_balloon_note_for_buffered_checkpoint_writes_only(monkeypatch):
    from dlio.config import load_config
    from dlio.system import host
    from dlio.train import session

    said = []
    for reporting, engine, expect in ((True, "posix", 1), (True, "odirect", 0), (False, "posix", 0)):
        monkeypatch.setattr(host, "free_page_reporting", lambda r=reporting: r)
        said.clear()
        session.balloon_warning(load_config("llama_7b", env={}, sets=[f"dlio_fast.engine={engine}"]), said.append)
        assert len(said) == expect, (reporting, engine, said)
    monkeypatch.setattr(host, "free_page_reporting", lambda: True)
    session.balloon_warning(load_config("llama_7b", env={}), said.append)
    assert "free page reporting" in said[-1] and "odirect" in said[-1]


def test_checkpoint_plan_in_dry_run_and_results(run_cli, tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    args = [
        "run",
        "--workload",
        "llama_8b_zero3",
        "--scale",
        "0.0005",
        *set_args(
            f"checkpoint.checkpoint_folder={ck}",
            f"dataset.data_folder={tmp_path / 'data'}",
            "workflow.generate_data=true",
            "checkpoint.num_checkpoints_write=1",
            "checkpoint.num_checkpoints_read=1",
            "checkpoint.time_between_checkpoints=0",
        ),
    ]
    code, stdout, err = run_cli(*args, "--dry-run")
    assert code == 0, err
    assert "data folder" not in stdout and "steps per epoch" not in stdout  # no fake dataset plan
    lines = {l.split()[0]: l for l in stdout.splitlines() if l[:1].isalpha()}
    code, _, err = run_cli(*args, "-o", out)
    assert code == 0, err
    plan = load(out / "dlio-fast.json")["checkpoint_plan"]
    files = os.listdir(ck / "global_epoch1_step1")
    assert plan["bytes_total"] == sum(os.path.getsize(ck / "global_epoch1_step1" / f) for f in files)
    assert plan["files_total"] == len(files) and plan["ranks_needed"] == 1
    assert f"{fmt_bytes(plan['bytes_total'])} in {plan['files_total']} files" in lines["checkpoint"]
    assert "memory" in lines
    assert not (tmp_path / "data").exists()  # generate_data on a checkpoint-only run reads nothing: no dataset
