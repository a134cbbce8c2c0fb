"""Limits the host sets are limits: a control group's memory.max and pids.max (v2; memory.limit_in_bytes
and pids.max in v1) are refused with one line naming them, before anything is allocated or started;
the kernel's OOM killer or a thread that fails to start never answers for the tool."""

import os
import shutil
import subprocess
import sys
import uuid

import pytest
from conftest import set_args

V2 = "/sys/fs/cgroup"
V1 = {"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids"}


def _v2_root():
    try:
        with open(os.path.join(V2, "cgroup.subtree_control")) as f:
            ctrl = f.read().split()
    except OSError:
        return None
    return V2 if {"memory", "pids"} <= set(ctrl) else None


@pytest.fixture
def limited(tmp_path):
    """A command prefix that runs its command inside a new control group of 3 GiB and 64 tasks."""
    if os.geteuid() != 0:
        pytest.skip("making a control group needs root")
    name = f"dlio-fast-test-{uuid.uuid4().hex[:8]}"
    made, joins = [], []
    try:
        root = _v2_root()
        if root:
            g = os.path.join(root, name)
            os.mkdir(g)
            made.append(g)
            open(os.path.join(g, "memory.max"), "w").write(str(3 << 30))
            open(os.path.join(g, "pids.max"), "w").write("64")
            joins.append(os.path.join(g, "cgroup.procs"))
        else:
            for ctl, base in V1.items():
                g = os.path.join(base, name)
                os.mkdir(g)
                made.append(g)
                limit = "memory.limit_in_bytes" if ctl == "memory" else "pids.max"
                open(os.path.join(g, limit), "w").write(str(3 << 30) if ctl == "memory" else "64")
                joins.append(os.path.join(g, "cgroup.procs"))
    except OSError as e:
        for g in made:
            os.rmdir(g)
        pytest.skip(f"cannot make a memory + pids control group here: {e}")
    script = tmp_path / "in-group.sh"
    script.write_text("#!/bin/sh\n" + "".join(f"echo $$ > {j}\n" for j in joins) + 'exec "$@"\n')
    script.chmod(0o755)
    yield [str(script)]
    for g in made:
        for _ in range(50):
            try:
                os.rmdir(g)
                break
            except OSError:
                import time

                time.sleep(0.1)


def _dlio(prefix, *args, cwd):
    exe = shutil.which("dlio-fast") or os.path.join(os.path.dirname(sys.executable), "dlio-fast")
    return subprocess.run([*prefix, exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def _refused(p, *words):
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    lines = [l for l in p.stderr.splitlines() if l.strip() and not l.startswith(("warning:", "note:"))]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_dry_run_that_would_not_fit_the_group_is_refused(limited, tmp_path):
    p = _dlio(limited, "run", "-w", "default", "--set", "dataset.num_files_train=40000000", "--dry-run", cwd=tmp_path)
    _refused(p, "dataset.num_files_train", "memory")


def test_io_buffers_beyond_the_group_are_refused(limited, tmp_path):
    p = _dlio(
        limited, "io", tmp_path, "--bs", "64m", "--qd", "32", "--threads", "4", "--engine", "io_uring", cwd=tmp_path
    )
    _refused(p, "--threads 4 x --qd 32", "memory")
    assert not [f for f in os.listdir(tmp_path) if f.startswith("dlio-fast-io")]  # refused before any file


def test_threads_beyond_the_task_limit_are_refused(limited, tmp_path):
    p = _dlio(
        limited, "io", tmp_path, "--bs", "64k", "--threads", "100", "--file-size", "1m", "--size", "8m", cwd=tmp_path
    )
    _refused(p, "--threads 100", "pids.max")
    data = tmp_path / "d"
    p = _dlio(
        limited,
        "run",
        "-w",
        "default",
        *set_args(f"dataset.data_folder={data}", "reader.read_threads=200"),
        "--output",
        tmp_path / "o",
        cwd=tmp_path,
    )
    _refused(p, "reader.read_threads 200", "pids.max")
