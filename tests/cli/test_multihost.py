"""Runs across two simulated hosts (hA, hB) x 2 ranks on this machine, through Open MPI's mpirun and MPICH's
hydra (tests/multihost.py, tools/simhost-agent): every rank sees its host's name, so per-host logic (verdicts
per host, per-host figures) runs as on a cluster. Tiny workloads: a few seconds each."""

import json
import os
import subprocess

import pytest
from conftest import REPO, TINY_KV_CONFIG, TINY_MODEL_LOAD, set_args
from multihost import HOSTS, dlio_argv, launcher_command, run_env

LAUNCHERS = ["openmpi", "mpich"]
FAST = ("train.computation_time=0.001", "evaluation.eval_time=0.001")


def launch(launcher, *args, timeout=240):
    cmd = launcher_command(launcher, HOSTS, 2, dlio_argv(*args))
    p = subprocess.run(cmd, env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def load(path):
    with open(path) as f:
        return json.load(f)


def verdict_hosts(doc):
    return sorted({v["host"] for v in doc["verdicts"]})


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_each_host_has_its_name(launcher):
    cmd = launcher_command(launcher, HOSTS, 2, ["hostname"])
    p = subprocess.run(cmd, env=run_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()) == ["hA", "hA", "hB", "hB"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_training_with_checkpoints_and_evaluation(launcher, tmp_path):
    out = tmp_path / "out"
    code, so, se = launch(
        launcher,
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'data'}",
            "dataset.num_files_train=32",
            "dataset.num_files_eval=16",
            "reader.batch_size=2",
            "train.epochs=2",
            "workflow.checkpoint=true",
            "checkpoint.checkpoint_after_epoch=1",
            "checkpoint.epochs_between_checkpoints=1",
            f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
            "model.model_size=1048576",
            *FAST,
        ),
        "-o",
        out,
    )
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert doc["hostnames"] == ["hA", "hA", "hB", "hB"]
    assert verdict_hosts(doc) == ["hA", "hB"]  # a verdict per host
    assert {c["rank"] for c in doc["checkpoints"]["records"]} == {0, 1, 2, 3}
    assert all(ep.get("eval") for r in doc["ranks"] for ep in r["epochs"])

    m = doc["metrics"]
    hosts = m["per_host"]
    assert [(h["host"], h["ranks"]) for h in hosts] == [("hA", [0, 1]), ("hB", [2, 3])]
    # the hosts' figures add up to the run's: bytes read, and per epoch bytes and samples/s; the run's bytes/s
    # is all the bytes over the slowest host's window
    assert sum(h["bytes"] for h in hosts) == m["bytes_read"] > 0
    for i in range(len(hosts[0]["epochs"])):
        rows = [h["epochs"][i] for h in hosts]
        assert len({r["epoch"] for r in rows}) == 1 and all(r["bytes"] > 0 for r in rows)
        assert sum(r["samples_per_second"] for r in rows) == pytest.approx(m["samples_per_second"][i], rel=1e-9)
        window = max(r["window_s"] for r in rows)
        assert sum(r["bytes"] for r in rows) / window == pytest.approx(m["bytes_per_second"][i], rel=1e-9)
    assert len(hosts[0]["epochs"]) == 2
    # and the console says them
    assert "host hA (ranks 0,1): AU" in so and "host hB (ranks 2,3): AU" in so, so


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_checkpoint_only(launcher, tmp_path):
    out = tmp_path / "out"
    code, so, se = launch(
        launcher,
        "run",
        "--workload",
        "default",
        *set_args(
            "workflow.train=false",
            "workflow.generate_data=false",
            "workflow.checkpoint=true",
            f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
            "checkpoint.num_checkpoints_write=2",
            "checkpoint.num_checkpoints_read=1",
            "checkpoint.time_between_checkpoints=0",
            "model.model_size=1048576",
        ),
        "-o",
        out,
    )
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    recs = doc["checkpoints"]["records"]
    assert sorted({(r["kind"], r["rank"]) for r in recs}) == [(k, r) for k in ("load", "save") for r in range(4)]
    assert doc["hostnames"] == ["hA", "hA", "hB", "hB"]


KV_CONFIG = TINY_KV_CONFIG


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_kvcache(launcher, tmp_path):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(KV_CONFIG)
    out = tmp_path / "out"
    code, so, se = launch(
        launcher, "run", "--config", cfg, *set_args(f"kvcache.cache_dir={tmp_path / 'cache'}"), "-o", out
    )
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert sorted((r["rank"], r["host"]) for r in doc["records"]) == [(0, "hA"), (1, "hA"), (2, "hB"), (3, "hB")]
    assert doc["aggregate"]["reference"]["rank_count"] == 4
    assert verdict_hosts(doc) == ["hA", "hB"]


MODEL_LOAD = TINY_MODEL_LOAD


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_model_loading(launcher, tmp_path):
    out = tmp_path / "out"
    folder = f"checkpoint.checkpoint_folder={tmp_path / 'model'}"
    code, so, se = launch(launcher, "run", "-w", "load_llama3_8b", "--output", out, *set_args(*MODEL_LOAD, folder))
    assert code == 0, se
    doc = load(out / "dlio-fast.json")
    assert doc["comm_size"] == 4 and len(doc["loads"]) == 2
    assert verdict_hosts(doc) == ["hA", "hB"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_vector_search_refuses_many_ranks(launcher, tmp_path):
    code, so, se = launch(launcher, "-q", "run", "-w", "vdb_diskann_1m", *set_args(f"vdb.index_folder={tmp_path}"))
    assert code != 0
    lines = [line for line in se.splitlines() if line.startswith("dlio-fast:")]
    assert len(lines) == 1 and "vdb workloads run as one process (4 ranks here)" in lines[0], se
    assert "Traceback" not in se
    assert not os.listdir(tmp_path)  # refused before it wrote anything


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_host_that_cannot_start_is_one_line(launcher):
    cmd = launcher_command(launcher, ["hA", "hX"], 1, ["hostname"])
    p = subprocess.run(cmd, env=run_env(SIMHOST_HOSTS="hA hB"), capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    said = [line for line in p.stderr.splitlines() if line.startswith("simhost-agent:")]
    assert said == ["simhost-agent: no host 'hX' here (SIMHOST_HOSTS: hA hB)"], p.stderr[-2000:]
