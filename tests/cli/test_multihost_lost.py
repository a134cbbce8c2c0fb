"""A host lost mid-run: hB's ranks killed (SIGKILL) during a training across hA and hB.

What the launchers do then (found with these tests): Open MPI's mpirun SIGTERMs the survivors
odls_base_sigkill_timeout (1 s) after it notices, SIGKILLs them 1 s later and exits 137 naming the rank and
node that died; MPICH's hydra SIGKILLs them at once and exits 255. So the run ends within seconds (no hang),
but the survivors have at most a second to write what they measured (Open MPI) or none (MPICH), and the exit
status is the launcher's. The test of the whole wish (exit 1, the survivors' results written and marked
incomplete, the lost host named by dlio-fast) is an expected failure until dlio-fast keeps its survivors alive
itself (issue 41)."""

import os
import signal
import subprocess
import time

import pytest
from conftest import REPO, set_args, wait_for_text
from multihost import HOSTS, dlio_argv, launcher_command, run_env

LOST_WITHIN_S = 10.0
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")


def ranks_of_host_b(mark):
    """{rank: pid} of the ranks 2 and 3 (hB's with --host hA:2,hB:2) of the run marked `mark`."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ") as f:
                env = dict(kv.split("=", 1) for kv in f.read().split("\0") if "=" in kv)
        except OSError:
            continue
        rank = next((env[v] for v in RANK_VARS if v in env), None)
        if env.get("DLIO_TEST_MARK") == mark and rank in ("2", "3"):
            found[int(rank)] = int(pid)
    return found


def lose_host_b(launcher, tmp_path):
    """Start a long training on hA and hB, kill hB's ranks once epoch 2 ended: (exit status, seconds from the
    kill to the launcher's exit, stderr, output folder)."""
    out, log = tmp_path / "out", tmp_path / "stdout"
    argv = dlio_argv(
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'data'}",
            "train.epochs=1000",
            "train.computation_time=0.01",
            "workflow.evaluation=False",
        ),
        "-o",
        out,
    )
    cmd = launcher_command(launcher, HOSTS, 2, argv)
    env = run_env(DLIO_TEST_MARK=str(tmp_path), PYTHONUNBUFFERED="1")
    with open(log, "w") as so:
        p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
        try:
            wait_for_text(log, "Ending epoch 2 ", p)
            victims = ranks_of_host_b(str(tmp_path))
            assert sorted(victims) == [2, 3], victims
            t0 = time.monotonic()
            for pid in victims.values():
                os.kill(pid, signal.SIGKILL)
            _, stderr = p.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return p.returncode, took, stderr, out


@pytest.mark.parametrize("launcher", ["openmpi", "mpich"])
def test_a_lost_host_ends_the_run_within_seconds(launcher, tmp_path):
    code, took, stderr, out = lose_host_b(launcher, tmp_path)
    assert code != 0 and took < LOST_WITHIN_S, (code, took, stderr[-2000:])
    if launcher == "openmpi":  # mpirun names the lost node itself
        assert "on node hB exited on signal 9" in stderr, stderr[-2000:]


@pytest.mark.xfail(
    reason="the launchers kill the survivors (mpirun within 2 s, hydra at once) and exit with their own status: "
    "dlio-fast does not yet keep its survivors alive to write and name the lost host (issue 41)",
    strict=False,
)
def test_a_lost_host_leaves_the_survivors_results_naming_it(tmp_path):
    code, took, stderr, out = lose_host_b("openmpi", tmp_path)
    assert took < LOST_WITHIN_S
    assert code == 1, stderr[-2000:]
    for rank in (0, 1):
        with open(out / f"dlio-fast.rank{rank}.json") as f:
            doc = f.read()
        assert '"complete": false' in doc and "hB" in doc
    assert "dlio-fast: " in stderr and "host hB" in stderr
