"""Light commands import only what they need: the module list of a real `python -m dlio ...` process
(sys.modules at exit), so that an import that makes start-up heavy again fails here without timing."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP = (
    "import atexit, json, runpy, sys\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: json.dump(sorted(sys.modules), open(out, 'w')))\n"
    "sys.argv = ['dlio-fast', *sys.argv[2:]]\n"
    "runpy.run_module('dlio', run_name='__main__', alter_sys=True)\n"
)
NEVER = ("matplotlib", "h5py", "mpi4py", "rich")  # not for any of these commands
HEAVY = ("numpy", "dlio._core", "yaml", "dlio.config.load")  # not for a command's help


def imported(tmp_path, *args):
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "OMPI_", "MPI_"))}
    p = subprocess.run(
        [sys.executable, "-c", DUMP, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": REPO},
    )
    assert p.returncode == 0, p.stderr
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["io", "--help"], ["report", "--help"]])
def test_help_loads_no_numpy_no_c_core_no_config_loader(tmp_path, args):
    mods = imported(tmp_path, *args)
    assert "click" in mods and "dlio.cli.main" in mods  # the command line itself did load
    assert not [m for m in HEAVY + NEVER if m in mods]


@pytest.mark.parametrize("args", [["workloads"], ["--version"], ["run", "-w", "unet3d", "--dry-run"]])
def test_light_commands_load_no_plotting_hdf5_mpi_or_rich(tmp_path, args):
    mods = imported(tmp_path, *args)
    assert "dlio.config.load" in mods or args == ["--version"]  # they did their work
    assert not [m for m in NEVER if m in mods]


BLAS_THREADS = (
    "import os, sys, dlio, numpy\n"
    "from dlio.profile.capture import capture_env\n"
    "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'),\n"
    "      capture_env(sys.argv[1]).get('OPENBLAS_NUM_THREADS'))\n"
)


@pytest.mark.parametrize("user", [None, "2"])
def test_numpy_blas_helpers_not_started_unless_the_user_asks(tmp_path, user):
    """OpenBLAS's helper threads spin beside the writers (5 % of a generation's samples on 2 cores): dlio-fast,
    which does no linear algebra, loads numpy with one thread; a number the user set is theirs, and a job run
    under profile gets the user's environment, not dlio-fast's setting."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if user:
        env["OPENBLAS_NUM_THREADS"] = user
    p = subprocess.run(
        [sys.executable, "-c", BLAS_THREADS, str(tmp_path)], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert p.returncode == 0, p.stderr
    threads, ours, childs = p.stdout.split()
    if user is None:
        assert (threads, ours, childs) == ("1", "1", "None")  # no helper thread; the job's environment untouched
    else:
        assert (ours, childs) == (user, user)
