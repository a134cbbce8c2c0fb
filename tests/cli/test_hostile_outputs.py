"""Never damage what is not ours: result files, test files, names from the config, concurrent runs."""

import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest
from conftest import one_line, set_args

from dlio.base import tmpclaim
from dlio.base.errors import ConfigError, DlioError
from dlio.system import output


def _reader(path, got):
    with open(path) as f:
        got.append(f.read())


def _fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("kind", ["absent", "regular", "symlink", "dangling", "fifo", "symlink-to-fifo", "chardev"])
def test_result_files_are_atomic_for_files_and_written_through_for_devices(tmp_path, kind):
    target, path, got = tmp_path / "real.json", tmp_path / "out.json", []
    t = None
    if kind == "regular":
        path.write_text("old")
    elif kind in ("symlink", "dangling"):
        if kind == "symlink":
            target.write_text("old")
        path.symlink_to(target)
    elif kind in ("fifo", "symlink-to-fifo"):
        fifo = _fifo(tmp_path)
        if kind == "fifo":
            path = fifo
        else:
            path.symlink_to(fifo)
        t = threading.Thread(target=_reader, args=(fifo, got))
        t.start()
    elif kind == "chardev":  # a private /dev/null: mknod needs root
        if os.geteuid() != 0:
            pytest.skip("mknod of a character device needs root")
        path = tmp_path / "null"
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    output.write_json(str(path), {"a": 1})
    if t is not None:
        t.join(10)
        assert got == ['{\n  "a": 1\n}\n']
        assert stat.S_ISFIFO(os.stat(path).st_mode)
    elif kind == "chardev":
        assert stat.S_ISCHR(os.lstat(path).st_mode)
    elif kind in ("symlink", "dangling"):
        assert os.path.islink(path) and target.read_text() == '{\n  "a": 1\n}\n'
    else:
        assert path.read_text() == '{\n  "a": 1\n}\n'
    assert not [f for f in os.listdir(tmp_path) if output.TMP_MARK in f]


# A process that claims a folder, writes a temporary file under its claim and dies (os._exit: no clean-up).
DIES_WRITING = """
import os, sys
from dlio.base import tmpclaim
d, name = os.path.split(sys.argv[1])
t = os.path.join(d, f".{name}{tmpclaim.claim(d)}-1")
open(t, "w").write("half")
print(t, flush=True)
os._exit(9)
"""
# One that claims it and stays alive (its temporary file is being written).
WRITING = DIES_WRITING.replace("os._exit(9)", "sys.stdin.read()")


def test_only_temporaries_a_claim_proves_ours_are_removed(tmp_path):
    """Leftovers are removed by proof (the claim of a dead process), never by their name: a user's file
    named like one of ours stays, and so does a live run's temporary file."""
    dead = subprocess.run(
        [sys.executable, "-c", DIES_WRITING, str(tmp_path / "r.json")], capture_output=True, text=True
    )
    stale = dead.stdout.strip()
    live = subprocess.Popen(
        [sys.executable, "-c", WRITING, str(tmp_path / "s.json")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        writing = live.stdout.readline().strip()
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        users = tmp_path / f".notes{output.TMP_MARK}{int(gone.stdout)}-1"  # named like a temporary file of old
        users.write_text("mine")
        removed = tmpclaim.sweep(str(tmp_path))
        assert removed == [stale] and not os.path.exists(stale)
        assert os.path.exists(writing) and users.read_text() == "mine"
        assert [f for f in os.listdir(tmp_path) if f.startswith(tmpclaim.CLAIM)] == [
            os.path.basename(next(p for p in os.listdir(tmp_path) if p.startswith(tmpclaim.CLAIM)))
        ]  # the live claim only
    finally:
        live.communicate("")


def test_io_json_to_a_fifo_and_csv_through_a_symlink(run_cli, tmp_path):
    fifo, got = _fifo(tmp_path), []
    t = threading.Thread(target=_reader, args=(fifo, got))
    t.start()
    (tmp_path / "real.csv").write_text("")
    os.symlink(tmp_path / "real.csv", tmp_path / "link.csv")
    data = tmp_path / "d"
    data.mkdir()
    code, out, err = run_cli(
        "io",
        data,
        "--engine",
        "null",
        "--runtime",
        "100ms",
        "--ramp",
        "0",
        "--json",
        fifo,
        "--csv",
        tmp_path / "link.csv",
    )
    t.join(10)
    assert code == 0, err
    assert got and got[0].startswith("{")
    assert os.path.islink(tmp_path / "link.csv") and (tmp_path / "real.csv").read_text().count("\n") >= 2


@pytest.mark.parametrize("plant", ["symlink", "fifo", "dir", "foreign"])
def test_write_test_never_writes_through_what_it_did_not_create(run_cli, tmp_path, plant):
    data = tmp_path / "d"
    data.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    name = data / "dlio-fast-io.0.dat"
    if plant == "symlink":
        name.symlink_to(victim)
    elif plant == "fifo":
        os.mkfifo(name)
    elif plant == "dir":
        name.mkdir()
    else:
        if os.geteuid() != 0:
            pytest.skip("a file of another user needs root to make")
        name.write_bytes(b"x" * 65536)
        os.chown(name, 65534, 65534)
    code, out, err = run_cli("io", data, "--rw", "write", "--bs", "64k", "--file-size", "64k", "--size", "64k")
    assert code == 2
    assert "dlio-fast-io.0.dat" in one_line(err)
    assert victim.read_text() == "precious"
    assert os.path.lexists(name)


def test_write_test_removes_leftover_temporaries(run_cli, tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", DIES_WRITING, str(tmp_path / "dlio-fast-io.0.dat")], capture_output=True, text=True
    )
    left = dead.stdout.strip()
    token = left.rsplit(output.TMP_MARK, 1)[1].split("-")[0]
    assert os.path.exists(tmp_path / (tmpclaim.CLAIM + token))
    code, out, err = run_cli("io", tmp_path, "--rw", "write", "--bs", "64k", "--file-size", "64k", "--size", "64k")
    assert code == 0, err
    assert not os.path.exists(left) and not os.path.exists(tmp_path / (tmpclaim.CLAIM + token))


@pytest.mark.parametrize("prefix", ["../x", "a/b", "..", "", "/etc/passwd", "x..y", "a\0b"])
def test_file_prefix_cannot_leave_the_data_folder(prefix):
    from dlio.dataset.spec import DatasetSpec

    with pytest.raises(ConfigError) as e:
        DatasetSpec(data_folder="/tmp/d", file_prefix=prefix)
    assert e.value.key == "dataset.file_prefix" and "dataset.file_prefix" in str(e.value)


def test_file_prefix_from_the_command_line_is_one_line(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "--workload",
        "default",
        *set_args(f"dataset.data_folder={tmp_path}/d", "dataset.file_prefix=../../escape"),
        "-o",
        tmp_path / "o",
    )
    assert code == 2 and "dataset.file_prefix" in one_line(err)
    assert not (tmp_path / "escape").exists()


class _OneRank:
    rank, size = 0, 1

    def bcast(self, x, root=0):
        return x


def test_default_output_folders_differ_in_the_same_second(tmp_path):
    from dlio.config.load import load_config
    from dlio.jobs.folder import output_folder

    cfg = load_config(workload="default")
    code = (
        "import sys; from dlio.config.load import load_config; from dlio.jobs.folder import output_folder;"
        "print(output_folder(load_config(workload='default'), None, type('C', (), {'bcast': lambda s, x: x})()))"
    )
    others = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() for _ in range(2)
    }
    mine = output_folder(cfg, None, _OneRank())
    assert len(others | {mine}) == 3


def test_second_run_into_a_folder_in_use_is_refused_and_a_dead_lock_is_not(tmp_path):
    from dlio.jobs.runlock import lock_output_folder

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from dlio.jobs.runlock import "
            "lock_output_folder as l; l(sys.argv[1]); print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DlioError) as e:
            lock_output_folder(str(tmp_path))
        assert f"pid {holder.pid}" in str(e.value) and str(tmp_path) in str(e.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock_output_folder(str(tmp_path))  # the killed run's lock went with it


def test_concurrent_run_cli_refused(run_cli, tmp_path, dlio_cmd):
    out = tmp_path / "o"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from dlio.jobs.runlock import "
            "lock_output_folder as l; l(sys.argv[1]); print('held', flush=True); time.sleep(60)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        code, _, err = dlio_cmd("run", "--workload", "default", "--set", f"dataset.data_folder={tmp_path}/d", "-o", out)
        assert code == 2 and "another dlio-fast run" in one_line(err) and time.monotonic() - t0 < 30
        assert not (tmp_path / "d").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


@pytest.fixture(scope="module")
def a_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("run")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlio",
            "-q",
            "run",
            "--workload",
            "default",
            *set_args(f"dataset.data_folder={base}/d", "train.epochs=1", "train.computation_time=0"),
            "-o",
            str(base / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return base / "o"


@pytest.mark.parametrize("opt", ["--json", "--csv", "--markdown", "--html"])
def test_report_outputs_to_a_fifo_are_written_through(run_cli, tmp_path, a_run, opt):
    out = a_run
    fifo, got = _fifo(tmp_path), []
    t = threading.Thread(target=_reader, args=(fifo, got))
    t.start()
    code, _, err = run_cli("report", out, opt, fifo)
    t.join(10)
    assert code == 0, err
    assert got and len(got[0]) > 20 and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not [f for f in os.listdir(tmp_path) if output.TMP_MARK in f]


def test_io_write_never_writes_through_a_hard_link(run_cli, tmp_path):
    """A test file name hard-linked to a file outside the folder: refused, the other file unchanged."""
    outside, data = tmp_path / "precious.dat", tmp_path / "d"
    data.mkdir()
    outside.write_bytes(b"precious" * 8192)
    os.link(outside, data / "dlio-fast-io.0.dat")
    code, out, err = run_cli("io", data, "--rw", "write", "--bs", "64k", "--file-size", "64k", "--size", "64k")
    assert code == 2 and "hard links" in one_line(err) and "dlio-fast-io.0.dat" in one_line(err)
    assert outside.read_bytes() == b"precious" * 8192


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_checkpoint_save_never_writes_through_a_link(tmp_path, kind):
    """A checkpoint file's name that is a link to a file elsewhere: the save makes a file of its own."""
    from dlio.checkpoint import save as ckpt_save
    from dlio.checkpoint.layout import plan_checkpoint, step_folder
    from dlio.config.load import load_config

    folder = tmp_path / "ck"
    cfg = load_config(
        workload="default",
        sets=["workflow.checkpoint=true", "model.model_size_bytes=65536", f"checkpoint.checkpoint_folder={folder}"],
        env={},
    )
    (first,) = [f.name for f in plan_checkpoint(cfg, 0, 1).files][:1]
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"v" * 100)
    target = folder / step_folder(1, 1) / first
    target.parent.mkdir(parents=True)
    os.link(victim, target) if kind == "hardlink" else target.symlink_to(victim)
    rec = ckpt_save.save(cfg, None, 1, 1)
    assert victim.read_bytes() == b"v" * 100
    assert not target.is_symlink() and os.stat(target).st_nlink == 1 and rec["bytes"] >= 65536


def test_two_io_runs_never_share_a_folder(run_cli, tmp_path):
    """While one run holds the folder's test files, a second is refused (they would overwrite and delete
    each other's files and both report clean figures)."""
    from dlio.fsbench import testfiles

    held = testfiles.lock_folder(str(tmp_path))  # another run, in the middle of its points
    try:
        code, out, err = run_cli("io", tmp_path, "--rw", "write", "--bs", "64k", "--file-size", "64k", "--size", "64k")
        assert code == 2 and "another dlio-fast io or ceiling run is using this folder" in one_line(err)
        assert not os.path.exists(tmp_path / "dlio-fast-io.0.dat")
    finally:
        os.close(held)
    code, out, err = run_cli("io", tmp_path, "--rw", "write", "--bs", "64k", "--file-size", "64k", "--size", "64k")
    assert code == 0, err
