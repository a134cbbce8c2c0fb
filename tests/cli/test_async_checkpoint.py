"""checkpoint.async_save: the step blocks for the snapshot (a memcpy) while the write goes on in the
background, training reading on; the figures checked against what the test measures and recomputes
itself (its own memcpy, the per-step timestamps of the records)."""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import REPO, on_s3, s3_keys, set_args

MiB = 1 << 20
DELAY_NS = 20_000_000  # the null engine's busy-wait per request: a storage of known latency


def sets(tmp_path, *extra):
    base = (
        f"dataset.data_folder={tmp_path / 'data'}",
        f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
        "dataset.num_files_train=96",
        "workflow.evaluation=false",
        "workflow.checkpoint=true",
        "checkpoint.async_save=true",
        "checkpoint.steps_between_checkpoints=30",
        "train.epochs=1",
        "train.computation_time=0.03",
        "reader.batch_size=1",
        "reader.read_threads=4",
        "reader.prefetch_size=4",
    )
    out = []
    for s in base + extra:
        out += ["--set", s]
    return out


def doc_of(folder):
    with open(os.path.join(folder, "dlio-fast.json")) as f:
        return json.load(f)


def memcpy_s(nbytes, chunk):
    """This process's own memcpy of nbytes through a chunk-byte buffer (numpy's copy), best of 3."""
    src = np.random.default_rng(0).integers(0, 256, chunk, dtype=np.uint8)
    dst = np.ones(chunk, dtype=np.uint8)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(-(-nbytes // chunk)):
            np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return best


def recomputed(rank, w0, w1):
    """AU % and read MiB/s of the steps overlapping [w0, w1), and of those overlapping no write, from
    the epoch records' step arrays (the definitions of dlio.report.interference, applied here)."""
    st = {
        k: np.concatenate([np.asarray(ep["steps"][k], np.int64) for ep in rank["epochs"]])
        for k in ("t_fetch_ns", "t_end_ns", "bytes", "compute_ns", "set_compute_ns")
    }
    saves = [c for ep in rank["epochs"] for c in ep["checkpoints"]]
    hit = lambda a, b: (st["t_fetch_ns"] < b) & (st["t_end_ns"] > a)  # noqa: E731
    outside = ~np.any([hit(c["write_start_ns"], c["write_end_ns"]) for c in saves], axis=0)
    out = []
    for m in (hit(w0, w1), outside):
        d = (st["t_end_ns"][m] - st["t_fetch_ns"][m]).sum() / 1e9
        c = np.minimum(st["compute_ns"][m], st["set_compute_ns"][m]).sum() / 1e9
        out.append((int(m.sum()), 100 * c / d, st["bytes"][m].sum() / MiB / d))
    return out


def test_training_goes_on_during_a_write_longer_than_a_step(run_cli, tmp_path):
    state = 256 * MiB  # 16 requests of 16 MiB at DELAY_NS each: >= 0.32 s of write, about 10 steps
    buffer = 32 * MiB  # the host buffer: the state goes through it in chunks
    code, out, err = run_cli(
        "run",
        "-w",
        "default",
        "--output",
        tmp_path / "out",
        *sets(
            tmp_path,
            "workflow.generate_data=true",
            "dlio_fast.engine=null",
            f"dlio_fast.null_delay_ns={DELAY_NS}",
            f"model.model_size_bytes={state}",
            f"checkpoint.async_host_buffer_bytes={buffer}",
        ),
    )
    assert code == 0, err
    doc = doc_of(tmp_path / "out")
    (rank,) = doc["ranks"]
    saves = [c for ep in rank["epochs"] for c in ep["checkpoints"]]
    assert len(saves) == 3 and all(c["async"] for c in saves)
    own = memcpy_s(saves[0]["state_bytes"], buffer)
    step_s = np.median(np.diff(np.asarray(rank["epochs"][0]["steps"]["t_end_ns"]))) / 1e9
    for c in saves:
        nreq = -(-c["bytes"] // (16 * MiB))
        # the write: as long as its requests' known latency, several steps long
        assert c["write_s"] >= nreq * DELAY_NS / 1e9 > 2 * step_s
        assert c["write_start_ns"] >= c["snapshot_end_ns"] and c["write_end_ns"] > c["write_start_ns"]
        # the snapshot: a memcpy of the state through the buffer, as long as this process's own
        assert c["staged"] and c["host_buffer_bytes"] == buffer and "chunks" in c["note"]
        assert c["copy_chunks"] == -(-c["state_bytes"] // buffer) == 9  # 256 MiB and the .pt container
        assert own / 5 < c["copy_s"] < 5 * own + 0.05, (c["copy_s"], own)
        assert c["blocked_s"] == pytest.approx(c["wait_s"] + c["copy_s"], abs=0.05)
        assert c["snapshot_to_durable_s"] is None and "page cache" in c["durable_note"]  # the null engine
        # training went on while the write was in flight: the figures, recomputed from the steps
        (n_in, au_in, mib_in), (n_out, au_out, mib_out) = recomputed(rank, c["write_start_ns"], c["write_end_ns"])
        f = c["interference"]
        assert f["during"]["steps"] == n_in >= 3
        assert f["during"]["au_percentage"] == pytest.approx(au_in)
        assert f["during"]["read_MiB_per_second"] == pytest.approx(mib_in)
        assert f["outside"]["steps"] == n_out > 0 and f["outside"]["au_percentage"] == pytest.approx(au_out)
        assert f["au_drop_points"] == pytest.approx(au_out - au_in)
        assert f["read_MiB_per_second_ratio"] == pytest.approx(mib_in / mib_out)
    summ = doc["checkpoints"]["async"]
    assert summ["saves"] == 3 and summ["staged"]
    assert "Training during the checkpoint writes: AU" in out and "staging buffer" in out
    # the report shows the rows and the plot
    code, rep, err = run_cli("report", tmp_path / "out", "--plots-dir", tmp_path / "plots")
    assert code == 0, err
    assert "AU during checkpoint writes / outside" in rep and "async checkpoint: training blocked" in rep
    assert (tmp_path / "plots" / "interference.png").stat().st_size > 10000


def test_async_save_on_files_is_durable_after_fsync(run_cli, tmp_path):
    state = 24 * MiB
    code, out, err = run_cli(
        "run",
        "-w",
        "default",
        "--output",
        tmp_path / "out",
        *sets(tmp_path, "workflow.generate_data=true", f"model.model_size_bytes={state}", "checkpoint.fsync=true"),
    )
    assert code == 0, err
    (rank,) = doc_of(tmp_path / "out")["ranks"]
    saves = [c for ep in rank["epochs"] for c in ep["checkpoints"]]
    assert len(saves) == 3
    own = memcpy_s(saves[0]["state_bytes"], saves[0]["state_bytes"])
    for c in saves:
        assert not c["staged"] and c["copy_chunks"] == 1 and c["host_buffer_bytes"] == c["state_bytes"]
        assert own / 5 < c["copy_s"] < 5 * own + 0.05
        assert c["fsync"] and c["fsync_s"] > 0 and c["engine"] == "posix"
        assert c["snapshot_to_durable_s"] >= c["write_s"] > 0
        files = [os.path.join(c["folder"], f["name"]) for f in c["files"]]
        assert [os.path.getsize(p) for p in files] == [f["bytes"] for f in c["files"]]
        assert c["GiB_per_second"] == pytest.approx(c["bytes"] / 2**30 / c["duration_s"])


def test_async_save_on_s3(run_cli, s3env, bucket, tmp_path):
    pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")
    code, out, err = run_cli(
        "run",
        "-w",
        "default",
        "--output",
        tmp_path / "out",
        *sets(tmp_path, "workflow.generate_data=true", "model.model_size_bytes=70000000"),
        *set_args(**on_s3(bucket), **{"dataset.data_folder": "data", "checkpoint.checkpoint_folder": "ck"}),
    )
    assert code == 0, err
    (rank,) = doc_of(tmp_path / "out")["ranks"]
    saves = [c for ep in rank["epochs"] for c in ep["checkpoints"]]
    objects = s3_keys(s3env, bucket, "ck/")
    assert len(saves) == 3
    for c in saves:
        assert c["async"] and c["engine"] == "s3dlio"
        assert c["snapshot_to_durable_s"] >= c["write_s"] > 0  # the last PUT's completion
        assert c["interference"]["outside"] is not None
        for f in c["files"]:
            assert objects[f"ck/{c['folder'].rsplit('/', 1)[1]}/{f['name']}"] == f["bytes"]


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs mpiexec (pip install mpich mpi4py)")
def test_async_save_under_two_ranks(run_cli, tmp_path):
    pytest.importorskip("mpi4py")
    code, _, err = run_cli("generate", "-w", "default", *sets(tmp_path))
    assert code == 0, err
    cmd = [
        "mpiexec",
        "-n",
        "2",
        sys.executable,
        "-m",
        "dlio",
        "run",
        "-w",
        "default",
        "--output",
        str(tmp_path / "out"),
        *map(str, sets(tmp_path, "model.model_size_bytes=16000000", "checkpoint.fsync=true")),
    ]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = doc_of(tmp_path / "out")
    assert doc["comm_size"] == 2
    for rank in doc["ranks"]:
        saves = [c for ep in rank["epochs"] for c in ep["checkpoints"]]
        assert len(saves) == 1 and saves[0]["rank"] == rank["rank"] and "interference" in saves[0]
        assert saves[0]["snapshot_to_durable_s"] > 0
    assert doc["checkpoints"]["async"]["saves"] == 2
    assert "Asynchronous checkpoints (2 saves, all ranks)" in p.stdout


def test_async_save_without_training_is_refused(run_cli, tmp_path):
    from conftest import one_line

    code, _, err = run_cli("run", "-w", "llama_8b_zero3", "--set", "checkpoint.async_save=true", "--dry-run")
    assert code == 2 and "checkpoint.async_save" in one_line(err) and "workflow.train" in err


def test_docs_example_prints_the_benchmarks_cpu_not_zero(run_cli, tmp_path):
    """docs/checkpoints.md's example (smaller): the saves wait for each other, and the waiting (wall
    time, not CPU) was taken off the process's CPU, which printed `benchmark CPU per sample 0ns`. The
    benchmark's CPU holds at least its reader threads' (measured by the C core on their own clocks)."""
    code, out, err = run_cli(
        "run",
        "-w",
        "default",
        "--output",
        tmp_path / "out",
        *set_args(
            "train.epochs=2",
            "train.computation_time=0.02",
            "workflow.evaluation=false",
            "workflow.checkpoint=true",
            "checkpoint.steps_between_checkpoints=8",
            f"model.model_size_bytes={64 * MiB}",
            "checkpoint.async_save=true",
            "checkpoint.fsync=true",
            "dataset.num_files_train=64",
            f"dataset.data_folder={tmp_path / 'data'}",
            f"checkpoint.checkpoint_folder={tmp_path / 'ck'}",
        ),
    )
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("benchmark CPU per sample")]
    printed = line.split()[4]
    assert printed not in ("0ns", "-"), line
    (rank,) = doc_of(tmp_path / "out")["ranks"]
    for ep in rank["epochs"]:
        acc = ep["cpu_accounts"]
        assert ep["cpu_s"] == acc["benchmark_s"] >= acc["readers_s"] > 0, acc
    per_sample_ns = sum(ep["cpu_s"] for ep in rank["epochs"]) / sum(ep["samples"] for ep in rank["epochs"]) * 1e9
    from dlio.base.units import fmt_ns

    assert printed == fmt_ns(per_sample_ns)
