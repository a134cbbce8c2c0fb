"""`dlio-fast profile` end to end: real jobs (tests/cli/jobs/profile_job.py) in every loader shape
(PyTorch-like reader threads and worker processes, a real torch DataLoader, a tf.data-like thread
pool, a queue fed by reader threads, a loop without readers) over datasets made by `dlio-fast
generate` (npz, hdf5, jpeg; flat and in subfolders; small and large files) or by the job itself,
in three file orders, captured by the LD_PRELOAD interposer. The inferred YAML must recover the
known batch, epochs, readers, compute, files, order and prefetch, and its replay must score as a
match (the cases and their table: tests/cli/jobs/profile_cases.py)."""

import os
import re
import sys

import numpy as np
import pytest
import yaml

from dlio.config.load import load_config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "jobs"))
import profile_cases as pc  # noqa: E402

JOB = pc.JOB
CLI = pc.CLI


def _run(args, cwd, check=True):
    return pc._run(args, str(cwd), check)


def _sizes(folder):
    return sorted(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


@pytest.mark.parametrize("case", pc.CASES, ids=[c.id for c in pc.CASES])
def test_profile_recovers_the_job_and_its_replay_matches(tmp_path, case):
    if case.needs_torch:
        pytest.importorskip("torch", reason="torch is not installed: the DataLoader jobs need it")
    r = pc.run_case(str(tmp_path), case)
    wl, report = r["workload"], r["report"]
    load_config(config_file=str(tmp_path / "prof" / "workload.yaml"), env={})
    ds, rd, tr = wl["dataset"], wl["reader"], wl["train"]
    assert ds["format"] == case.fmt
    assert ds["num_files_train"] == case.nfiles
    assert rd["batch_size"] == pc.BATCH
    assert tr["epochs"] == pc.EPOCHS
    threads = 0 if case.shape == "sync" else pc.THREADS
    assert rd["read_threads"] == threads
    # between the trainer's own measures of its compute and of its steps, 10 % either side
    assert pc.compute_ok(float(pc.report_value(report, "computation_time")), r), (r, report)
    want = pc.expected_order(case)
    assert rd["file_shuffle"] == want["file_shuffle"]
    assert tr.get("seed_change_epoch", True) == want["seed_change_epoch"]
    assert wl.get("dlio_fast", {}).get("file_order") == want["file_order"]
    assert ds.get("num_subfolders_train", 0) == (2 if case.layout == "sub" else 0)
    if threads and case.shape != "torch":  # the loader's prefetch depth, within a batch
        # (A DataLoader's depth shows only at a pass whose worker processes start cleanly: on a
        # busy host their start-up and first hand-over stall the fill. The table has its values.)
        assert abs(rd["prefetch_size"] - case.prefetch_size()) <= 1, report
    sizes = _sizes(r["data"])
    assert f"{len(sizes)} files, {min(sizes)}..{max(sizes)} bytes, {sum(sizes)} in all" in report
    if case.dataset == "generate":
        assert ds["record_length_bytes"] == case.record  # so the generator writes files of the same size
        assert _sizes(tmp_path / "replay_data" / "train") == sizes
    if case.dataset == "default":  # np.load reads a 4.5 KB npz in calls that read 8.9 KB
        assert re.search(r"^  epochs +2 .*read calls alone would say 3\.[5-9]\d passes", report, re.M), report
    if case.dataset == "written":
        assert f"the job wrote {pc.NFILES} of them before it read them" in report
    if pc.host_share(r) > pc.BUSY_SHARE:
        # A busy host stretched the job (the trainer waited for a CPU): the profile infers what a
        # step takes on an idle host (test_profile_busy.py) and the compute is held to the trainer's
        # own clock above; the replay's wall-clock times cannot match the stretched original's.
        assert set(pc.failed_figures(r["score"])) <= {"inter-burst gaps", "duration"}, r["score"] + report
        return
    assert r["score_rc"] == 0, r["score"] + report
    assert "8/8 figures within bounds: the replay matches" in r["score"]


def test_np_load_of_a_small_npz_is_one_pass_not_two(tmp_path):
    """The class of usability bug 1: np.load reads a 4.5 KB npz in calls that read its first 4 KiB
    twice; the visits count each file once per pass, whatever the library does inside."""
    from dlio.profile.dataview import data_view
    from dlio.profile.parsers import load_trace

    d = tmp_path / "d"
    d.mkdir()
    for i in range(6):
        np.savez(d / f"s{i}.npz", x=np.zeros((64, 64), np.uint8))
    size = (d / "s0.npz").stat().st_size
    job = (
        "import numpy as np, glob, sys\n"
        "for _ in range(3):\n"
        "    [np.load(p)['x'] for p in sorted(glob.glob(sys.argv[1] + '/*'))]\n"
    )
    _run(["profile", "-o", str(tmp_path / "prof"), "--", sys.executable, "-c", job, str(d)], tmp_path)
    dv = data_view(load_trace(str(tmp_path / "prof" / "raw")))
    assert dv.rd["size"].sum() > 1.5 * 3 * 6 * size  # the calls read more than twice the bytes
    assert np.all(dv.units["bytes"] == size) and len(dv.units) == 18
    assert np.allclose(dv.passes(), 3)
    report = (tmp_path / "prof" / "report.txt").read_text()
    assert re.search(r"^  epochs +3 ", report, re.M), report


def test_a_loop_without_readers_behind_a_shell_that_reads_first(tmp_path):
    """The trainer is a process's main thread that no traced process forked, not merely the first
    process to do I/O: here a shell's `cat` reads before the job starts."""
    d = tmp_path / "d"
    d.mkdir()
    for i in range(24):
        np.savez(d / f"s{i:02d}.npz", x=np.zeros((128, 128), np.uint8))
    job = f"{sys.executable} {JOB} --shape sync --data {d} --batch 4 --epochs 2 --compute 0.03"
    out = tmp_path / "prof"
    _run(["profile", "-o", str(out), "--", "sh", "-c", f"cat /etc/hostname > /dev/null; {job}"], tmp_path)
    wl = yaml.safe_load((out / "workload.yaml").read_text())
    report = (out / "report.txt").read_text()
    assert wl["reader"]["read_threads"] == 0 and wl["reader"]["batch_size"] == 4, report
    assert re.search(r"^  loader +synchronous ", report, re.M), report


def test_random_ranges_are_not_whole_files(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(np.random.default_rng(0).integers(0, 255, 16 << 20, dtype=np.uint8).tobytes())
    out = tmp_path / "prof"
    _run(["profile", "-o", str(out), "--", sys.executable, JOB, "--ranges", str(big), "--reads", "1500"], tmp_path)
    wl = yaml.safe_load((out / "workload.yaml").read_text())
    report = (out / "report.txt").read_text()
    assert re.search(r"^  pattern +ranges ", report, re.M), report
    assert wl["dataset"]["num_files_train"] == 1
    assert wl["dataset"]["record_length_bytes"] == 4096
    assert wl["dataset"]["num_samples_per_file"] == (16 << 20) // 4096
    assert wl["reader"]["sample_shuffle"] == "seed"


def test_profile_errors_are_one_line(tmp_path):
    p = _run(["profile", "-o", str(tmp_path / "p"), "--", "no-such-command-xyz"], tmp_path, check=False)
    assert p.returncode == 2 and "no-such-command-xyz: command not found" in p.stderr
    assert "Traceback" not in p.stderr
    p = _run(["profile", "--trace", str(tmp_path)], tmp_path, check=False)
    assert p.returncode == 2 and "no trace here" in p.stderr


def test_capture_keeps_every_path_past_the_name_buffer(tmp_path):
    """The interposer buffers path lines (64 KiB) and writes them with the records: 1500 opens of
    120-character paths overflow that buffer several times, in a parent and a forked child."""
    from dlio.profile.parsers import OP_READ, load_trace

    d = tmp_path / ("d" * 100)
    d.mkdir()
    names = [d / f"f{i:05d}.dat" for i in range(1500)]
    for i, p in enumerate(names):
        p.write_bytes(bytes([i % 251]) * 100)
    job = (
        "import os, sys\n"
        "fs = sorted(os.path.join(sys.argv[1], f) for f in os.listdir(sys.argv[1]))\n"
        "def rd(part):\n"
        "    for f in part:\n"
        "        with open(f, 'rb') as h: h.read()\n"
        "rd(fs[:700])\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    rd(fs[700:]); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    out = tmp_path / "prof"
    _run(["profile", "-o", str(out), "--", sys.executable, "-c", job, str(d)], tmp_path)
    tr = load_trace(str(out / "raw"))
    rd = tr.events[(tr.events["op"] == OP_READ) & (tr.events["size"] == 100)]
    assert sorted(set(tr.paths[rd["file"]].astype(str))) == [str(p) for p in names]
    assert len(np.unique(rd["pid"])) == 2
