"""`datasize` from the hosts' real memory (MLPerf Storage Rules 3.1.2: the dataset is at least 5 x the hosts' memory
summed): two simulated hosts (hA, hB) with memory limits of their own (tests/multihost.py host_groups), one rank each
under Open MPI, each measuring its own host; without MPI, this host's memory, said to be taken for every host; and
`check` of a run across them, from the memory each host's ranks recorded."""

import json
import math
import subprocess

from conftest import REPO, set_args
from multihost import AGENT, HOSTS, dlio_argv, host_groups, launcher_command, run_env, run_on_limited_hosts

from dlio.config import load_config

GiB = 1 << 30
WORKLOAD = "resnet50_h100"  # small records (112 KiB): the memory term is the larger one with a few GiB
LIMITS = {"hA": {"memory": 1 * GiB}, "hB": {"memory": 3 * GiB}}
DATASIZE = ("datasize", "-w", WORKLOAD, "-n", 2)


def by_memory(total_bytes):
    """The rule's samples by memory, from the workload's record length."""
    record = float(load_config(workload=WORKLOAD).dataset.record_length_bytes)
    return math.ceil(total_bytes * 5 / record)


def lines_starting(text, word):
    return [line for line in text.splitlines() if line.startswith(word)]


def test_datasize_sums_each_hosts_own_memory():
    with host_groups(LIMITS) as env:
        cmd = launcher_command("openmpi", HOSTS, 1, dlio_argv(*DATASIZE, "--hosts", 2))
        p = subprocess.run(cmd, env=run_env(**env), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    # one answer (rank 0's), from both hosts' limits: 1 GiB + 3 GiB, not 2 x rank 0's
    [line] = lines_starting(p.stdout, "by memory")
    assert line.startswith(f"by memory           {by_memory(4 * GiB)} samples = (1.0 GiB + 3.0 GiB) x 5 / "), p.stdout
    [mem] = lines_starting(p.stdout, "memory ")
    assert "measured on each host by its ranks: hA 1.0 GiB (" in mem and ", hB 3.0 GiB (" in mem, mem
    for h in HOSTS:  # each figure names the control group file that sets it
        assert f"/{h}/memory.limit_in_bytes)" in mem or f"/{h}/memory.max)" in mem, mem
    assert "2 accelerator(s) on 2 host(s) (1 per host), RAM 1.0 GiB + 3.0 GiB" in p.stdout


def test_datasize_hosts_that_do_not_match_the_launch_is_one_line():
    with host_groups(LIMITS) as env:
        cmd = launcher_command("openmpi", HOSTS, 1, dlio_argv(*DATASIZE, "--hosts", 3))
        p = subprocess.run(cmd, env=run_env(**env), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and not lines_starting(p.stdout, "by memory")
    said = [line for line in p.stderr.splitlines() if line.startswith("dlio-fast:")]
    assert said == [
        "dlio-fast: error: --hosts 3, but the 2 ranks run on 2 host(s) (hA, hB): launch a rank on each of the "
        "3 hosts, or leave --hosts out"
    ], p.stderr[-2000:]


def test_datasize_without_mpi_says_it_took_this_hosts_memory_for_each():
    # one process on hA (through the agent, as ssh would start it), in hA's 1 GiB group: no launcher, no MPI
    with host_groups({"hA": LIMITS["hA"]}) as env:
        p = subprocess.run(
            [AGENT, "hA", *dlio_argv(*DATASIZE, "--hosts", 2)],
            env=run_env(**env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    [line] = lines_starting(p.stdout, "by memory")
    assert line.startswith(f"by memory           {by_memory(2 * GiB)} samples = 2 x 1.0 GiB x 5 / "), p.stdout
    [mem] = lines_starting(p.stdout, "memory ")
    assert mem.startswith("memory              measured on this host only (hA 1.0 GiB (") and mem.endswith(
        "taken for each of the 2 hosts: run it under mpirun with a rank on every host to measure each one, "
        "or give --host-memory"
    ), mem


def test_check_sums_the_memory_each_host_measured(tmp_path):
    """A run's ranks record their host's memory; `check` sums the hosts' (1 GiB + 3 GiB), not rank 0's x 2."""
    out = tmp_path / "out"
    argv = dlio_argv(
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'data'}",
            "dataset.num_files_train=8",
            "train.epochs=1",
            "train.computation_time=0.001",
            "workflow.evaluation=false",
        ),
        "-o",
        out,
    )
    p = run_on_limited_hosts(argv, LIMITS)
    assert p.returncode == 0, p.stderr[-2000:]
    ranks = json.loads((out / "dlio-fast.json").read_text())["ranks"]
    assert [(r["hostname"], r["host_memory_usable_bytes"]) for r in ranks] == [("hA", GiB), ("hB", 3 * GiB)]
    p = subprocess.run(dlio_argv("check", out), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    [line] = [x for x in p.stdout.splitlines() if "dataset >= 5x host RAM" in x]
    assert "need >= 5 x (1.0 GiB + 3.0 GiB) RAM of the 2 hosts = 20.0 GiB" in line, p.stdout
