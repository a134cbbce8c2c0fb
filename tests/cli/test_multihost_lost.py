"""A host lost mid-run: hB's ranks killed (SIGKILL) during a training across hA and hB.

What the launchers do then (found with these tests): Open MPI's mpirun SIGTERMs the survivors
odls_base_sigkill_timeout (1 s) after it notices, SIGKILLs them 1 s later and exits 137 naming the rank and
node that died; MPICH's hydra SIGKILLs them at once and exits 255. So with the launchers' defaults the run
ends within seconds (no hang), but the survivors have at most a second to write what they measured (Open MPI)
or none (MPICH), and the exit status is the launcher's.

With the launcher told to leave the survivors alive (tests/multihost.py KEEP_SURVIVORS: a longer
odls_base_sigkill_timeout, hydra's -disable-auto-cleanup), dlio-fast's own watch (dlio.system.liveness) finds
hB silent, and every survivor writes its results marked incomplete, naming hB, and exits 1 within 10 s.
Hydra then sends SIGUSR1 to every rank's process group each time a rank exits (its fault notification): the
ranks live on (MPICH's MPI_Init catches SIGUSR1), and so must anything between the proxy and a rank
(exits_recorded), or the proxy SIGKILLs the rank with it."""

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import REPO, on_s3, set_args, wait_for_text
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
            with open(f"/proc/{pid}/cmdline") as f:
                if "-m\0dlio\0" not in f.read():
                    continue  # the shell around a rank (exits_recorded), not the rank
        except OSError:
            continue
        rank = next((env[v] for v in RANK_VARS if v in env), None)
        if env.get("DLIO_TEST_MARK") == mark and rank in ("2", "3"):
            found[int(rank)] = int(pid)
    return found


def exits_recorded(argv, folder):
    """argv run by a shell that writes its exit status into folder/RANK, the file's mtime its time (the
    launcher's status and the time it takes to exit are its own).

    The shell must outlive what the launcher sends the rank's process group, and not stand in for the rank:
    hydra's proxy sends SIGUSR1 to every process group it started each time one of its ranks exits (its fault
    notification; MPICH's MPI_Init catches it in the rank), and SIGKILLs the group of a child that dies. So the
    shell catches TERM and USR1 (a caught signal is the default again in the rank it execs, as without the
    shell), runs the rank in the foreground (a caught signal's trap waits until the rank has exited: $? is the
    rank's own status, which it exits with too), and forks nothing after it: a subshell or `date` there would die
    of the next USR1."""
    script = 'trap : TERM USR1; "$@"; s=$?; echo $s > "$EXITS/${OMPI_COMM_WORLD_RANK:-$PMI_RANK}"; exit $s'
    return ["sh", "-c", script, "sh", *argv]


def lose_host_b(launcher, tmp_path, keep_survivors=False, **storage):
    """Start a long training on hA and hB (storage: keys of another storage than files), kill hB's ranks once
    epoch 2 ended: (exit status, seconds from the kill to the launcher's exit, stderr, output folder, {rank: (exit
    status, seconds from the kill)} of the ranks that exited)."""
    out, log, exits = tmp_path / "out", tmp_path / "stdout", tmp_path / "exits"
    exits.mkdir()
    argv = dlio_argv(
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={'lost-host' if storage else tmp_path / 'data'}",
            "train.epochs=1000",
            "train.computation_time=0.01",
            "workflow.evaluation=False",
            **storage,
        ),
        "-o",
        out,
    )
    # the survivors' exits recorded where they may outlive the loss (the shell hides a rank's death by signal from
    # the launcher, so not otherwise: mpirun then names the signal)
    argv = exits_recorded(argv, exits) if keep_survivors else argv
    cmd = launcher_command(launcher, HOSTS, 2, argv, keep_survivors)
    env = run_env(DLIO_TEST_MARK=str(tmp_path), PYTHONUNBUFFERED="1", EXITS=str(exits))
    with open(log, "w") as so:
        p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
        try:
            wait_for_text(log, "Ending epoch 2 ", p)
            victims = ranks_of_host_b(str(tmp_path))
            assert sorted(victims) == [2, 3], victims
            t0, wall0 = time.monotonic(), time.time()
            for pid in victims.values():
                os.kill(pid, signal.SIGKILL)
            _, stderr = p.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
    codes = {}
    for f in exits.iterdir():
        if f.read_text().strip():
            codes[int(f.name)] = (int(f.read_text()), f.stat().st_mtime - wall0)
    return p.returncode, took, stderr, out, codes


@pytest.mark.parametrize("launcher", ["openmpi", "mpich"])
def test_a_lost_host_ends_the_run_within_seconds(launcher, tmp_path):
    code, took, stderr, out, _ = lose_host_b(launcher, tmp_path)
    assert code != 0 and took < LOST_WITHIN_S, (code, took, stderr[-2000:])
    if launcher == "openmpi":  # mpirun names the lost node itself
        assert "on node hB exited on signal 9" in stderr, stderr[-2000:]


# Open MPI's mpirun itself exits 2 x odls_base_sigkill_timeout after the loss (its daemons wait that long
# before each of their SIGTERM and SIGKILL, though the survivors are gone): no hang, but not within 10 s
LAUNCHER_GONE_S = 2 * 10 + 10


def survivors_results_name_host_b(launcher, tmp_path, **storage):
    code, took, stderr, out, exits = lose_host_b(launcher, tmp_path, keep_survivors=True, **storage)
    assert took < LAUNCHER_GONE_S, (took, stderr[-2000:])
    assert code != 0  # the launcher's own, from the killed ranks' 137 passed on by their shells (both say 137)
    # each survivor ended by itself within 10 s of the loss, exit 1
    assert sorted(exits)[:2] == [0, 1] and all(exits[r][0] == 1 for r in (0, 1)), (exits, stderr[-2000:])
    assert all(exits[r][1] < LOST_WITHIN_S for r in (0, 1)), exits
    for rank in (0, 1):
        doc = json.loads((out / f"dlio-fast.rank{rank}.json").read_text())
        assert doc["complete"] is False
        assert "host hB (ranks 2, 3)" in doc["reason"] and "lost" in doc["reason"], doc["reason"]
        assert doc["ranks"][0]["rank"] == rank and len(doc["ranks"][0]["epochs"]) >= 2  # what it measured
    assert not (out / "dlio-fast.rank2.json").exists()
    said = [line for line in stderr.splitlines() if line.startswith("dlio-fast:")]
    assert len(said) == 1, stderr[-2000:]  # said once, by the first survivor
    assert "host hB (ranks 2, 3) was lost" in said[0] and "marked incomplete" in said[0], said


@pytest.mark.parametrize("launcher", ["openmpi", "mpich"])
def test_a_lost_host_leaves_the_survivors_results_naming_it(launcher, tmp_path):
    survivors_results_name_host_b(launcher, tmp_path)


def test_a_lost_host_on_s3_under_hydra_leaves_the_survivors_results(s3env, bucket, tmp_path):
    """On S3 each rank's GETs are made by worker processes it starts. Hydra sends SIGUSR1 to every process group
    it started each time a rank exits; the workers run in a session of their own, so that it does not reach
    them (they would die of it, and the survivors' last block with them)."""
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")
    survivors_results_name_host_b("mpich", tmp_path, **on_s3(bucket))
