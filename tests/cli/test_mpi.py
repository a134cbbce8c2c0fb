"""MPI: several ranks under mpiexec (run, uneven datasets, a failing rank), the MPI-IO engine, and
the IOR-style plans of `io --engine mpiio` (those without MPI).

The MPI tests start real jobs with `mpiexec -n 2` / `-n 3` (oversubscribed on small CI machines)
and check the numbers against the dataset on disk and the planner. They are skipped, with the
reason, when mpiexec or mpi4py is missing.
"""

import glob
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import REPO, set_args, wait_for_text

from dlio import _core
from dlio.config import load_config
from dlio.dataset.spec import DatasetSpec, file_paths
from dlio.fsbench import ior
from dlio.train import planner

ROOT = REPO
HAVE_MPIEXEC = shutil.which("mpiexec") is not None
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
HAVE_MPIIO = importlib.util.find_spec("dlio._mpiio") is not None

needs_mpi = pytest.mark.skipif(
    not (HAVE_MPIEXEC and HAVE_MPI4PY), reason="needs mpiexec and mpi4py (pip install mpich mpi4py)"
)
needs_mpiio = pytest.mark.skipif(not HAVE_MPIIO, reason="dlio._mpiio not built (no MPI compiler at build time)")

FAST = ["--set", "train.computation_time=0.001", "--set", "evaluation.eval_time=0.001"]


def mpiexec(n, *args, timeout=90, script=None):
    """Run `mpiexec -n n python -m dlio args` (or python script): (exit status, stdout, stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = ["mpiexec", "-n", str(n), sys.executable]
    cmd += [str(script)] if script else ["-m", "dlio", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def load(path):
    with open(path) as f:
        return json.load(f)


# ---- without MPI ------------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("no_shm_leftovers")


def test_engines_lists_mpiio_with_reason():
    eng = {n: (ok, why) for n, _, ok, why in _core.engines()}
    assert "mpiio" in eng
    ok, why = eng["mpiio"]
    # in a process where MPI is not initialised it cannot run, and says why
    assert not ok and why
    if not HAVE_MPIIO:
        assert why.startswith("not built: no MPI compiler found")
    else:
        assert "MPI is not initialised" in why


@needs_mpiio
def test_register_engine_twice_is_a_noop():
    from dlio import _mpiio

    _core.register_engine(_mpiio.engine_capsule())
    _core.register_engine(_mpiio.engine_capsule())
    assert [e[0] for e in _core.engines()].count("mpiio") == 1


def test_ior_file_per_process_offsets():
    bs, per = 4096, 16 * 4096
    for r in range(3):
        p = ior.rank_plan("fpp", r, 3, bs, per)
        assert p.part == r and p.file_index == r
        assert (p.ops["offset"] == np.arange(16, dtype=np.uint64) * bs).all()
        assert (p.ops["length"] == bs).all() and (p.ops["op"] == _core.OP_READ).all()
        q = ior.rank_plan("fpp", r, 3, bs, per, shift=1)  # --reorder: the next rank's file
        assert q.part == (r + 1) % 3 and q.file_index == (r + 1) % 3


@pytest.mark.parametrize("layout", ["segmented", "strided"])
def test_ior_shared_layouts_cover_the_file_once(layout):
    bs, per, n = 4096, 8 * 4096, 3
    plans = [ior.rank_plan(layout, r, n, bs, per) for r in range(n)]
    offs = np.concatenate([p.ops["offset"] for p in plans])
    assert sorted(offs.tolist()) == list(range(0, n * per, bs))  # every block exactly once
    for r, p in enumerate(plans):
        assert p.file_index == 0
        o = p.ops["offset"].astype(np.int64)
        if layout == "segmented":
            assert o.tolist() == list(range(r * per, (r + 1) * per, bs))
        else:
            assert o.tolist() == [(k * n + r) * bs for k in range(per // bs)]
    # --reorder reads another rank's part; writes stay on the own part
    assert ior.rank_plan(layout, 0, n, bs, per, shift=1).ops["offset"].tolist() == plans[1].ops["offset"].tolist()
    w = ior.rank_plan(layout, 0, n, bs, per, rw="write", shift=1)
    assert w.part == 0 and (w.ops["op"] == _core.OP_WRITE).all()
    rnd = ior.rank_plan(layout, 2, n, bs, per, rw="randread")
    assert sorted(rnd.ops["offset"].tolist()) == sorted(plans[2].ops["offset"].tolist())


def test_ior_reorder_shift():
    assert ior.reorder_shift(["a"]) == 0
    assert ior.reorder_shift(["a", "a", "a"]) == 1  # one node: the next rank
    assert ior.reorder_shift(["a", "a", "b", "b"]) == 2  # a node's worth (IOR -C)
    assert ior.parse_hints(["romio_cb_read=enable", "cb_nodes = 2"]) == [("romio_cb_read", "enable"), ("cb_nodes", "2")]


def test_planner_union_of_three_ranks_is_each_sample_once():
    cfg = load_config(workload="default", env={})
    nfiles, spf, batch, size = 24, 1, 4, 3
    layout = planner.Layout(nfiles=nfiles, spf=spf, file_size=np.full(nfiles, 4096, dtype=np.uint64), whole_file=True)
    for shuffle in ("off", "seed"):
        st = planner.Settings(batch=batch, file_shuffle=shuffle, sample_shuffle=shuffle, seed=7)
        for epoch in (1, 2):
            per_rank = [
                planner.epoch_plan(layout, st, cfg.train.computation_time, r, size, epoch).samples for r in range(size)
            ]
            assert all(len(s) == nfiles * spf // size for s in per_rank)
            union = np.concatenate(per_rank)
            assert sorted(union.tolist()) == list(range(nfiles * spf))


# ---- under mpiexec ----------------------------------------------------------------------------


def rank_steps(out, nranks, epoch="1"):
    return [len(load(os.path.join(out, f"{r}_output.json"))[epoch]["load"]["block1"]) for r in range(nranks)]


@needs_mpi
def test_run_two_ranks_default_workload(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    code, so, se = mpiexec(
        2,
        "-q",
        "run",
        "--workload",
        "default",
        *set_args(f"dataset.data_folder={data}", "train.epochs=2", "workflow.evaluation=False"),
        *FAST,
        "-o",
        out,
    )
    assert code == 0, se
    names = set(os.listdir(out))
    assert {
        "summary.json",
        "0_output.json",
        "1_output.json",
        "0_per_epoch_stats.json",
        "1_per_epoch_stats.json",
        "dlio-fast.json",
    } <= names
    steps = 64 * 1 // (4 * 2)  # floor(files * spf / (bs * ranks))
    assert rank_steps(out, 2, "1") == [steps, steps] and rank_steps(out, 2, "2") == [steps, steps]

    s = load(out / "summary.json")
    assert s["num_accelerators"] == 2
    outs = [load(out / f"{r}_output.json") for r in range(2)]
    for i, e in enumerate(("1", "2")):
        au = [o[e]["au"]["block1"] for o in outs]
        thr = [o[e]["throughput"]["block1"] for o in outs]
        assert s["metric"]["train_au_percentage"][i] == pytest.approx(np.mean(au), rel=1e-9)  # AU averaged
        assert s["metric"]["train_throughput_samples_per_second"][i] == pytest.approx(np.sum(thr), rel=1e-9)  # summed

    # every sample once per epoch: the ranks' bytes add up to the train files' bytes
    files = glob.glob(os.path.join(str(data), "train", "**", "*.npz"), recursive=True)
    assert len(files) == 64
    on_disk = sum(os.path.getsize(f) for f in files)
    doc = load(out / "dlio-fast.json")
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    for ep in range(2):
        per_rank = [r["epochs"][ep]["bytes"] for r in doc["ranks"]]
        assert all(b > 0 for b in per_rank)
        assert sum(per_rank) == on_disk


@needs_mpi
@pytest.mark.parametrize("nfiles,batch", [(13, 4), (24, 4), (25, 4), (145, 16)])
def test_uneven_files_on_three_ranks_do_not_deadlock(tmp_path, nfiles, batch):
    data, out = tmp_path / "data", tmp_path / "out"
    code, so, se = mpiexec(
        3,
        "-q",
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={data}",
            f"dataset.num_files_train={nfiles}",
            "dataset.num_files_eval=0",
            f"reader.batch_size={batch}",
            "train.epochs=1",
            "workflow.evaluation=False",
            "dataset.record_length_bytes=512",
        ),
        *FAST,
        "-o",
        out,
        timeout=180,
    )
    assert code == 0, se
    steps = nfiles // (batch * 3)
    assert rank_steps(out, 3) == [steps] * 3


# The start-up check (every rank stats every file) catches a file that is bad before the run; this
# driver skips it, as if the file went bad after it, so that the failure is rank 1's read.
FAIL_DRIVER = """
import sys
import numpy as np
from dlio.train import files
files.check_files = lambda paths, sizes: (np.zeros(len(paths), dtype=bool), None)
from dlio.cli.main import main
main(sys.argv[1:])
"""


@needs_mpi
def test_failing_rank_stops_the_job_with_its_message(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    common = [
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={data}",
            "workflow.evaluation=False",
            "reader.file_shuffle=off",
            "reader.sample_shuffle=off",
            "train.epochs=1",
        ),
    ]
    code, so, se = mpiexec(2, "-q", "generate", *common)
    assert code == 0, se
    spec = DatasetSpec(
        data_folder=str(data),
        format="npz",
        num_files_train=64,
        num_files_eval=8,
        num_samples_per_file=1,
        record_length_bytes=4096,
        num_subfolders_train=2,
        num_subfolders_eval=2,
    )
    paths = file_paths(spec, "train")
    # no shuffling: rank 1 reads samples 32..63, i.e. files 32..63; rank 0 never touches file 40
    bad = paths[40]
    os.truncate(bad, 100)
    # the start-up check reports it on every rank (no I/O yet): one line, from rank 0
    code, so, se = mpiexec(2, "-q", "run", *common, *FAST, "-o", out, timeout=180)
    lines = [l for l in se.splitlines() if l.startswith("dlio-fast:")]
    assert code != 0 and len(lines) == 1 and "100 bytes" in lines[0], se
    # a read that fails on rank 1 only: rank 1 prints it once and the job stops (rank 0 would
    # otherwise wait in the step barrier forever)
    script = tmp_path / "fail_driver.py"
    script.write_text(textwrap.dedent(FAIL_DRIVER))
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, str(script), "-q", "run", *common, *FAST, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert p.returncode != 0
    lines = [l for l in p.stderr.splitlines() if l.startswith("dlio-fast:")]
    # the error once, by the failing rank; rank 0, told, stops and says its own results are written
    failing = [l for l in lines if l.startswith("dlio-fast: rank 1:")]
    assert len(failing) == 1 and os.path.basename(bad) in failing[0], p.stderr
    assert [l for l in lines if l not in failing] == [
        "dlio-fast: stopped because rank 1 failed; the results measured so far were written (marked incomplete)"
    ], p.stderr
    assert load(out / "dlio-fast.rank0.json")["complete"] is False
    assert "Traceback" not in p.stderr


DRIVER = """
import sys
from dlio import _core
from dlio.system import mpi
w = mpi.world()
from dlio import _mpiio
path = sys.argv[1]
if w.rank == 0:
    buf = bytearray(3 << 20)
    _core.fill_random(buf, 11)
    with open(path, "wb") as f:
        f.write(buf)
w.barrier()
ref = open(path, "rb").read()
off = 4097 + 333 * w.rank
assert _mpiio.read_range(path, off, 100000) == ref[off:off + 100000], "independent"
n = 1 << 20
got = _mpiio.read_range(path, w.rank * n, n, comm=w.comm, hints=[("romio_cb_read", "enable")])
assert got == ref[w.rank * n:(w.rank + 1) * n], "collective"
assert w.step_barrier() is not None                     # the trainer's C barrier is used
sb = w.step_barrier()
for k in range(50):
    sb(k)
got = w.gather(f"OK {w.rank} {_mpiio.thread_level()}")
if w.rank == 0:
    print("|".join(got))
"""


@needs_mpi
@needs_mpiio
def test_mpiio_engine_reads_known_content(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    p = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, str(script), str(tmp_path / "known.bin")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "OK 0 multiple|OK 1 multiple"


@needs_mpi
@needs_mpiio
@pytest.mark.parametrize("mode", ["--independent", "--collective"])
def test_io_mpiio_layouts(tmp_path, mode):
    js = tmp_path / "r.json"
    folder = tmp_path / "io"
    folder.mkdir()
    bs, fsize = 64 << 10, 1 << 20
    code, so, se = mpiexec(
        2,
        "-q",
        "io",
        folder,
        "--engine",
        "mpiio",
        mode,
        "--layout",
        "fpp,segmented,strided",
        "--bs",
        "64k",
        "--file-size",
        "1m",
        "--reorder",
        "--json",
        js,
        "--mpiio-hint",
        "romio_cb_read=enable",
        timeout=180,
    )
    assert code == 0, se
    doc = load(js)
    assert doc["complete"] and doc["ranks"] == 2
    assert [p["layout"] for p in doc["points"]] == ["fpp", "segmented", "strided"]
    for p in doc["points"]:
        assert p["mode"] == mode[2:] and p["errors"] == 0
        assert p["bytes"] == 2 * fsize and p["ops"] == 2 * fsize // bs  # one pass each
        assert p["lat_ns"]["count"] == p["ops"]
        assert p["hints"] == {"romio_cb_read": "enable"}
        assert [r["part"] for r in p["per_rank"]] == [1, 0]  # --reorder
        assert all(r["bytes"] == fsize for r in p["per_rank"])
    assert not os.listdir(folder)  # files removed


@needs_mpi
@needs_mpiio
def test_io_mpiio_collective_refuses_runtime(tmp_path):
    code, so, se = mpiexec(
        2,
        "-q",
        "io",
        tmp_path,
        "--engine",
        "mpiio",
        "--collective",
        "--layout",
        "segmented",
        "--bs",
        "64k",
        "--file-size",
        "256k",
        "--runtime",
        "1s",
        timeout=180,
    )
    assert code != 0
    assert "collective MPI-IO needs the same number of calls" in se


def rank_pids(marker):
    """{rank: pid} of the processes whose environment holds marker (DLIO_TEST_MARK) and a PMI rank."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = dict(kv.split("=", 1) for kv in open(f"/proc/{pid}/environ").read().split("\0") if "=" in kv)
        except OSError:
            continue
        if env.get("DLIO_TEST_MARK") == marker and "PMI_RANK" in env:
            found[int(env["PMI_RANK"])] = int(pid)
    return found


def alive(pid):
    """A process that exists and is not a zombie."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_long_run(tmp_path):
    """mpiexec -n 2 dlio-fast run of a long training; returns (Popen, data folder, output folder)
    once training is under way (its first epoch done)."""
    data, out, log = tmp_path / "data", tmp_path / "out", tmp_path / "stdout"
    env = {**os.environ, "PYTHONPATH": ROOT, "DLIO_TEST_MARK": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(
        [
            "mpiexec",
            "-n",
            "2",
            sys.executable,
            "-m",
            "dlio",
            "run",
            "--workload",
            "default",
            *set_args(
                f"dataset.data_folder={data}",
                "train.epochs=1000",
                "train.computation_time=0.01",
                "workflow.evaluation=False",
            ),
            "-o",
            str(out),
        ],
        stdout=open(log, "w"),
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    wait_for_text(log, "Ending epoch 1 ", p)
    return p, data, out


def assert_rank_partial(out, rank):
    doc = load(out / f"dlio-fast.rank{rank}.json")
    assert doc["complete"] is False and "SIGINT" in doc["reason"]
    epochs = doc["ranks"][0]["epochs"]
    assert epochs and epochs[-1]["steps_done"] > 0
    assert load(out / f"{rank}_output.json")
    assert not [f for f in os.listdir(out) if ".tmp" in f]


@needs_mpi
def test_ctrl_c_on_mpiexec_stops_every_rank_with_partial_results(tmp_path):
    p, data, out = start_long_run(tmp_path)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)  # mpiexec forwards it to every rank
    try:
        stdout, stderr = p.communicate(timeout=30)
    finally:
        p.kill()
    assert time.monotonic() - t0 < 15
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr and "not every rank stopped" not in stderr, stderr
    for rank in (0, 1):
        assert_rank_partial(out, rank)


@needs_mpi
@needs_mpiio
def test_ctrl_c_while_waiting_in_the_c_step_barrier(tmp_path):
    """Rank 1 is frozen (SIGSTOP: a hung node), so rank 0 sits in the trainer's C barrier; a Ctrl-C
    on rank 0 must release it, and rank 0 keeps what it measured in its own files."""
    pids = {}
    p, data, out = start_long_run(tmp_path)
    try:
        pids = rank_pids(str(tmp_path))
        assert sorted(pids) == [0, 1], pids
        os.kill(pids[1], signal.SIGSTOP)
        time.sleep(1.0)  # rank 0 is now waiting for rank 1
        t0 = time.monotonic()
        os.kill(pids[0], signal.SIGINT)
        while alive(pids[0]) and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        assert not alive(pids[0]), "rank 0 stayed in the barrier (or MPI_Finalize) after Ctrl-C"
        assert time.monotonic() - t0 < 15
    finally:
        for pid in [*pids.values(), p.pid]:  # the frozen rank too, wherever hydra put it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stdout, stderr = p.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr
    assert "SIGINT" in stderr and "results measured so far were written" in stderr, stderr
    assert "not every rank stopped" in stderr, stderr  # it did not wait for rank 1 in MPI_Finalize
    assert_rank_partial(out, 0)


@needs_mpi
def test_a_signal_to_one_rank_stops_the_others_with_their_results(tmp_path):
    """SIGTERM to rank 1 alone: it tells rank 0, which stops within a tick (as if signalled) and keeps
    what it measured in its own files, instead of waiting in the next barrier until the job is killed."""
    p, data, out = start_long_run(tmp_path)
    try:
        pids = rank_pids(str(tmp_path))
        assert sorted(pids) == [0, 1], pids
        t0 = time.monotonic()
        os.kill(pids[1], signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        p.kill()
    assert time.monotonic() - t0 < 15
    assert p.returncode == 143, stderr
    assert "Traceback" not in stderr and "stopped because rank 1 was interrupted by SIGTERM" in stderr, stderr
    doc = load(out / "dlio-fast.rank0.json")  # rank 0's measurements, kept
    assert doc["complete"] is False and "rank 1 was interrupted by SIGTERM" in doc["reason"]
    assert doc["ranks"][0]["epochs"] and load(out / "0_output.json")
    assert load(out / "dlio-fast.rank1.json")["complete"] is False
