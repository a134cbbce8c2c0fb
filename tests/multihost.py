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


# --- each simulated host's own control group: its memory limit and CPU quota --------------------------------------

CPU_PERIOD_US = 100_000  # the CPU quota's period: a host of 0.25 CPUs runs 25 ms of every 100 ms
# Each host's group weighs as this many ordinary processes against the rest of the machine: on a busy machine
# (CI, other tests) a host without a quota still gets the CPU its ranks ask for, so the hosts differ by their
# quotas, not by the machine's load (the tests' runs last seconds)
CPU_WEIGHT = 8


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


def _write(folder: str, name: str, value: str) -> None:
    with open(os.path.join(folder, name), "w") as f:
        f.write(value)


def _limit(folder: str, v2: bool, memory: Optional[int], cpus: Optional[float]) -> None:
    """Set one host's group: memory (bytes) and cpus (a quota of CPU_PERIOD_US periods) in the files of the
    group's version (v1: a folder per controller, so only the controller's own files exist in each)."""
    if memory is not None and (v2 or os.path.exists(os.path.join(folder, "memory.limit_in_bytes"))):
        _write(folder, "memory.max" if v2 else "memory.limit_in_bytes", str(memory))
    if v2 or os.path.exists(os.path.join(folder, "cpu.shares")):
        _write(folder, "cpu.weight" if v2 else "cpu.shares", str(CPU_WEIGHT * (100 if v2 else 1024)))
    if cpus is not None and (v2 or os.path.exists(os.path.join(folder, "cpu.cfs_quota_us"))):
        quota = int(cpus * CPU_PERIOD_US)
        if v2:
            _write(folder, "cpu.max", f"{quota} {CPU_PERIOD_US}")
        else:
            _write(folder, "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(folder, "cpu.cfs_quota_us", str(quota))


@contextlib.contextmanager
def host_groups(limits: Dict[str, Dict[str, float]]) -> Iterator[Dict[str, str]]:
    """Control groups for simulated hosts, {host: {"memory": bytes, "cpus": CPUs}} (either optional), made
    here and removed after: yields the environment that has tools/simhost-agent put each host's processes
    (its launcher daemon and its ranks) in its group. pytest.skip, with the reason, where groups cannot be made
    (not root, no cgroup filesystem)."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("making a control group per simulated host needs root")
    name = f"simhost-{uuid.uuid4().hex[:8]}"
    v2 = _v2_root()
    made: List[str] = []
    try:
        if v2:
            roots = [os.path.join(v2, name)]
            os.mkdir(roots[0])
            made.append(roots[0])
            _write(roots[0], "cgroup.subtree_control", "+cpu +memory")
        else:
            roots = [os.path.join(_v1_own(c), name) for c in ("cpu", "memory")]
            for r in roots:
                os.mkdir(r)
                made.append(r)
        for root in roots:
            _limit(root, bool(v2), None, None)  # the weight: the hosts' parent is what competes with the machine
            for host, lim in limits.items():
                folder = os.path.join(root, host)
                os.mkdir(folder)
                made.append(folder)
                memory = lim.get("memory")
                _limit(folder, bool(v2), int(memory) if memory is not None else None, lim.get("cpus"))
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


def run_on_limited_hosts(argv: Sequence[str], limits: Dict[str, Dict[str, float]], timeout: int = 240):
    """argv on HOSTS, one rank each, under Open MPI, each host in its control groups of `limits` (host_groups)."""
    with host_groups(limits) as env:
        cmd = launcher_command("openmpi", HOSTS, 1, argv)
        return subprocess.run(cmd, env=run_env(**env), cwd=REPO, capture_output=True, text=True, timeout=timeout)
