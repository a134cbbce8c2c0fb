"""Simulated hosts on this machine for multi-host MPI tests.

tools/simhost-agent is a remote-shell agent (what ssh is to a launcher): it runs each "remote" command in a UTS
namespace named after the host, so `mpirun --host hA:2,hB:2 -n 4` starts ranks that see gethostname() hA, hA,
hB, hB, each host with its own launcher daemon (Open MPI's orted, MPICH's hydra_pmi_proxy), as on a cluster.
Everything else (files, memory, network) is this machine's, and all traffic stays on the loopback.

What it takes here, found by trying:
- the host names need not resolve: the daemons call back to the launcher's address, not to their own name;
- Open MPI: --mca plm_rsh_agent AGENT; the loopback named for its out-of-band and TCP transports
  (oob_tcp_if_include / btl_tcp_if_include lo), because Open MPI leaves 127.0.0.0/8 out by default and the
  other interfaces of a container or CI machine may lead nowhere; btl self,vader,tcp (tcp between hosts:
  Open MPI uses shared memory only between ranks of one daemon);
- MPICH (hydra): -launcher ssh -launcher-exec AGENT; hydra passes ssh's `-x` first, which the agent skips;
- root, or unprivileged user namespaces, for unshare --uts (the agent adds --user --map-root-user when not root).

Hosts of different speed (host_groups, root): each host's processes in control groups of its own, with a memory
limit, a CPU quota, and an I/O throttle on the disk of the run's data folder (bytes/s or operations/s, reads and
writes). What an I/O throttle holds back depends on the cgroup version (IO_KEYS below): under v1 (blkio), reads
that reach the device, buffered or O_DIRECT, and O_DIRECT writes, but not buffered writes (their writeback is the
flusher threads', outside the host's group, unless its own fsync starts it); v2 (io.max) throttles buffered
writeback too. A read served from the page cache passes any throttle, and the simulated hosts share one page
cache: read with O_DIRECT (dlio_fast.engine=odirect) or drop the dataset's pages (--cache drop) for a throttle to
show. A memory filesystem (tmpfs, /dev/shm) has no device to throttle.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from conftest import REPO

AGENT = os.path.join(REPO, "tools", "simhost-agent")
HOSTS = ("hA", "hB")
VENV_MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")  # the mpich wheel's (hydra)

# Open MPI's flags for simulated hosts (see the module's docstring for why each)
OPEN_MPI_FLAGS = [
    "--allow-run-as-root",
    "--oversubscribe",
    *("--mca", "plm_rsh_agent", AGENT),
    *("--mca", "btl", "self,vader,tcp"),
    *("--mca", "btl_tcp_if_include", "lo"),
    *("--mca", "oob_tcp_if_include", "lo"),
]


# What keeps the surviving ranks alive when a host is lost, so that dlio-fast's own watch (dlio.system.liveness)
# stops them with their results written: Open MPI's mpirun SIGTERMs them odls_base_sigkill_timeout seconds after
# the loss (1 by default, too short to find the loss and write), MPICH's hydra kills them at once unless told not
# to (docs/multihost.md)
KEEP_SURVIVORS = {
    "openmpi": ["--mca", "odls_base_sigkill_timeout", "10"],
    "mpich": ["-disable-auto-cleanup"],
}


def host_list(hosts: Sequence[str], per_host: int) -> str:
    return ",".join(f"{h}:{per_host}" for h in hosts)


def open_mpi_command(
    mpirun: str, hosts: Sequence[str], per_host: int, argv: Sequence[str], more: Sequence[str] = ()
) -> List[str]:
    """Open MPI's mpirun of argv, per_host ranks on each simulated host (the -host line mlpstorage writes)."""
    n = len(hosts) * per_host
    return [mpirun, *OPEN_MPI_FLAGS, *more, "--host", host_list(hosts, per_host), "-n", str(n), *argv]


def mpich_command(hosts: Sequence[str], per_host: int, argv: Sequence[str], more: Sequence[str] = ()) -> List[str]:
    """The mpich wheel's hydra mpiexec of argv, per_host ranks on each simulated host."""
    n = len(hosts) * per_host
    return [VENV_MPIEXEC, "-launcher", "ssh", "-launcher-exec", AGENT, *more, "-hosts", host_list(hosts, per_host)] + [
        "-n",
        str(n),
        *argv,
    ]


def open_mpi() -> Tuple[Optional[str], Optional[str]]:
    """(Open MPI's mpirun, None), or (None, why the Open MPI tests skip)."""
    from mlpstorage_lines import open_mpi_mpirun

    return open_mpi_mpirun()


def namespaces_missing() -> Optional[str]:
    """Why simulated hosts cannot be made here, or None."""
    if shutil.which("unshare") is None:
        return "no unshare (util-linux) to give each simulated host its own hostname"
    ns = ["--uts"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--uts"]
    p = subprocess.run(["unshare", *ns, "hostname", "hX"], capture_output=True, text=True)
    if p.returncode != 0:
        return f"unshare {' '.join(ns)} fails here ({p.stderr.strip()[-200:]}): no UTS namespace per host"
    return None


def launcher_command(
    launcher: str, hosts: Sequence[str], per_host: int, argv: Sequence[str], keep_survivors: bool = False
) -> List[str]:
    """The command of `launcher` ("openmpi" / "mpich") for argv on the simulated hosts; pytest.skip when it
    or the namespaces are missing here (each with its reason). keep_survivors: the launcher leaves the other
    ranks alive when some die (KEEP_SURVIVORS)."""
    more = KEEP_SURVIVORS[launcher] if keep_survivors else []
    import pytest

    why = namespaces_missing()
    if why:
        pytest.skip(why)
    if launcher == "openmpi":
        mpirun, why = open_mpi()
        if mpirun is None:
            pytest.skip(why or "no Open MPI")
        return open_mpi_command(mpirun, hosts, per_host, argv, more)
    if not os.path.exists(VENV_MPIEXEC):
        pytest.skip("no mpiexec in this venv (pip install mpich)")
    return mpich_command(hosts, per_host, argv, more)


def dlio_argv(*args: object) -> List[str]:
    """`python -m dlio ARGS` with this venv's python (the ranks run this tree: PYTHONPATH is set by run_env)."""
    return [sys.executable, "-m", "dlio", *map(str, args)]


def run_env(**more: str) -> dict:
    """The ranks' environment: this tree first on PYTHONPATH (the agent passes the launcher's environment on, as
    `mpirun -x` would on a cluster)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(more)
    return env


# --- each simulated host's own control group: its memory limit, CPU quota and I/O throttle -------------------------

CPU_PERIOD_US = 100_000  # the CPU quota's period: a host of 0.25 CPUs runs 25 ms of every 100 ms
# Each host's group weighs as this many ordinary processes against the rest of the machine: on a busy machine
# (CI, other tests) a host without a quota still gets the CPU its ranks ask for, so the hosts differ by their
# quotas, not by the machine's load (the tests' runs last seconds)
CPU_WEIGHT = 8
# A host's I/O throttle, on the block device of the run's data folder (io_device): bytes/s and operations/s,
# each direction. What they hold back (the kernel's blk-throttle, at the device's queue):
# - cgroup v1 (blkio.throttle.*): reads, buffered or O_DIRECT, that reach the device (not those the page cache
#   serves: drop the dataset's pages, `--cache drop`, or read with O_DIRECT), and O_DIRECT writes. Not buffered
#   writes: the kernel's flusher threads write them back, outside the host's group (only the writeback its own
#   fsync starts is throttled), so they go at the device's speed; writing with O_DIRECT is what throttles them.
# - cgroup v2 (io.max): the same, and buffered writeback too (v2 charges the dirty pages to the group that wrote
#   them, with the memory controller on beside io).
# Neither can throttle a memory filesystem (tmpfs, /dev/shm): there is no block device (io_device skips).
IO_KEYS = {"read_bps": "rbps", "write_bps": "wbps", "read_iops": "riops", "write_iops": "wiops"}
V1_IO_FILES = {k: f"blkio.throttle.{k}_device" for k in IO_KEYS}


def _v2_root() -> Optional[str]:
    """/sys/fs/cgroup when it is cgroup v2 with the cpu and memory controllers, else None."""
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
            return "/sys/fs/cgroup" if {"cpu", "memory"} <= set(f.read().split()) else None
    except OSError:
        return None


def _v1_own(controller: str) -> str:
    """This process's own cgroup v1 folder of a controller: the hosts' groups go under it, so they stay inside
    whatever limits this process already has."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller in ctrls.split(","):
                return os.path.join("/sys/fs/cgroup", controller, path.strip("/"))
    raise OSError(f"no cgroup v1 {controller} controller here")


def io_controller_missing(v2: Optional[str]) -> Optional[str]:
    """Why a host's I/O cannot be throttled here (no io controller under v2, no blkio under v1), or None."""
    if v2:
        with open(os.path.join(v2, "cgroup.subtree_control")) as f:
            return None if "io" in f.read().split() else f"cgroup v2 without the io controller in {v2}"
    try:
        own = _v1_own("blkio")
    except OSError:
        return "no blkio controller (cgroup v1) or io controller (v2) here"
    return None if os.path.exists(os.path.join(own, V1_IO_FILES["read_bps"])) else f"{own}: no blkio.throttle files"


def io_device(folder: str) -> str:
    """'MAJ:MIN' of the whole disk that holds `folder` (a partition's parent: the kernel throttles a disk's queue,
    and takes no partition), as the throttle files key it; pytest.skip where the folder is on no block device
    (tmpfs, NFS, an overlay without one)."""
    import pytest

    from dlio.system import counters

    t = counters.resolve(folder)
    if t.kind != "block" or t.device is None:
        pytest.skip(
            f"{folder} is on no block device to throttle ({t.fstype} at {t.mount}{': ' + t.why if t.why else ''})"
        )
    sysfs = os.path.realpath(f"/sys/dev/block/{t.device[0]}:{t.device[1]}")
    if os.path.exists(os.path.join(sysfs, "partition")):
        with open(os.path.join(os.path.dirname(sysfs), "dev")) as f:
            return f.read().strip()
    return f"{t.device[0]}:{t.device[1]}"


def _write(folder: str, name: str, value: str) -> None:
    with open(os.path.join(folder, name), "w") as f:
        f.write(value)


def _limit(folder: str, v2: bool, lim: Dict[str, float], device: Optional[str]) -> None:
    """Set one host's group: memory (bytes), cpus (a quota of CPU_PERIOD_US periods) and its I/O throttle
    (IO_KEYS on `device`) in the files of the group's version (v1: a folder per controller, so only the
    controller's own files exist in each)."""
    memory, cpus = lim.get("memory"), lim.get("cpus")
    if memory is not None and (v2 or os.path.exists(os.path.join(folder, "memory.limit_in_bytes"))):
        _write(folder, "memory.max" if v2 else "memory.limit_in_bytes", str(int(memory)))
    if v2 or os.path.exists(os.path.join(folder, "cpu.shares")):
        _write(folder, "cpu.weight" if v2 else "cpu.shares", str(CPU_WEIGHT * (100 if v2 else 1024)))
    if cpus is not None and (v2 or os.path.exists(os.path.join(folder, "cpu.cfs_quota_us"))):
        quota = int(cpus * CPU_PERIOD_US)
        if v2:
            _write(folder, "cpu.max", f"{quota} {CPU_PERIOD_US}")
        else:
            _write(folder, "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(folder, "cpu.cfs_quota_us", str(quota))
    io = {k: int(lim[k]) for k in IO_KEYS if lim.get(k) is not None}
    if io and v2:
        _write(folder, "io.max", f"{device} " + " ".join(f"{IO_KEYS[k]}={v}" for k, v in io.items()))
    elif io and os.path.exists(os.path.join(folder, V1_IO_FILES["read_bps"])):
        for k, v in io.items():
            _write(folder, V1_IO_FILES[k], f"{device} {v}")


@contextlib.contextmanager
def host_groups(limits: Dict[str, Dict[str, float]], io_folder: Optional[str] = None) -> Iterator[Dict[str, str]]:
    """Control groups for simulated hosts, {host: {"memory": bytes, "cpus": CPUs, "read_bps": bytes/s, ...}}
    (each optional; the I/O throttles of IO_KEYS apply to the disk of io_folder, the run's data folder), made
    here and removed after: yields the environment that has tools/simhost-agent put each host's processes
    (its launcher daemon and its ranks) in its group. pytest.skip, with the reason, where groups cannot be made
    (not root, no cgroup filesystem, no io/blkio controller, a data folder on no block device)."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("making a control group per simulated host needs root")
    throttled = any(lim.get(k) is not None for lim in limits.values() for k in IO_KEYS)
    if throttled and io_folder is None:
        raise ValueError("an I/O throttle needs io_folder: the folder whose disk it throttles")
    name = f"simhost-{uuid.uuid4().hex[:8]}"
    v2 = _v2_root()
    device = None
    if throttled:
        why = io_controller_missing(v2)
        if why:
            pytest.skip(f"cannot throttle a simulated host's I/O: {why}")
        device = io_device(str(io_folder))
    made: List[str] = []
    try:
        if v2:
            roots = [os.path.join(v2, name)]
            os.mkdir(roots[0])
            made.append(roots[0])
            _write(roots[0], "cgroup.subtree_control", "+cpu +memory" + (" +io" if throttled else ""))
        else:
            controllers = ("cpu", "memory", "blkio") if throttled else ("cpu", "memory")
            roots = [os.path.join(_v1_own(c), name) for c in controllers]
            for r in roots:
                os.mkdir(r)
                made.append(r)
        for root in roots:
            _limit(root, bool(v2), {}, None)  # the weight: the hosts' parent is what competes with the machine
            for host, lim in limits.items():
                folder = os.path.join(root, host)
                os.mkdir(folder)
                made.append(folder)
                _limit(folder, bool(v2), lim, device)
    except OSError as e:
        _remove(made)
        pytest.skip(f"cannot make a control group per simulated host here: {e}")
    try:
        yield {"SIMHOST_CGROUP_ROOT": " ".join(roots)}
    finally:
        _remove(made)


def _remove(folders: List[str]) -> None:
    """rmdir the groups, the hosts' before their root (a group empties a moment after its last process exits)."""
    for g in reversed(folders):
        for _ in range(50):
            try:
                os.rmdir(g)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


def run_on_limited_hosts(
    argv: Sequence[str],
    limits: Dict[str, Dict[str, float]],
    timeout: int = 240,
    per_host: int = 1,
    io_folder: Optional[str] = None,
):
    """argv on HOSTS, per_host ranks each, under Open MPI, each host in its control groups of `limits`
    (host_groups; io_folder: the folder whose disk an I/O throttle holds back)."""
    with host_groups(limits, io_folder) as env:
        cmd = launcher_command("openmpi", HOSTS, per_host, argv)
        return subprocess.run(cmd, env=run_env(**env), cwd=REPO, capture_output=True, text=True, timeout=timeout)
