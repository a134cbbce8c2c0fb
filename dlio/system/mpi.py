"""Optional MPI glue. Without mpi4py, or without mpiexec, the job is one rank and nothing fails.

mpi4py is imported only when the process was started by an MPI launcher (the PMI/MPI environment
variables say so), so a plain `dlio-fast run` never pays MPI's start-up or needs a launcher.

The MPI-IO engine and the trainer's C step barrier live in dlio._mpiio, a separate extension linked
to libmpi (dlio._core never is). Under MPI it is imported and its engine registered with the core;
register_mpiio() says why not when it cannot be.
"""

import importlib
import importlib.util
import os
import sys
import threading
import time
from types import ModuleType
from typing import Any, Callable, Dict, List, Mapping, MutableMapping, Optional, Tuple, TypeVar

from dlio.base.errors import DlioError, os_error_message

_LAUNCHER_VARS = (
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "OMPI_COMM_WORLD_RANK",
    "MPI_LOCALRANKID",
    "SLURM_PROCID",
    "HYDRA_CONTROL_FD",
    "PMI_FD",
)


T = TypeVar("T")

STOP_TAG = 17  # the stop notices' tag, on a communicator of their own


class Comm:
    """The few collective operations dlio-fast needs, on mpi4py's COMM_WORLD or on one rank."""

    def __init__(self, comm: Any = None) -> None:
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.size = comm.Get_size() if comm is not None else 1
        # A communicator of its own for the last meeting of an interrupted job (all_arrive): a
        # step barrier left behind on COMM_WORLD would otherwise be matched by it.
        self._exit_comm = comm.Dup() if comm is not None and self.size > 1 else None
        # And one for the stop notices (notify_stop / peer_stopped), polled by the main thread while a
        # run's trainer thread may be in an MPI call: only where MPI takes calls from several threads.
        self._stop_comm: Any = None
        if self._exit_comm is not None:
            from mpi4py import MPI  # loaded already: comm is one of its communicators

            if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
                self._stop_comm = comm.Dup()
        self._told: List[Any] = []

    @property
    def is_mpi(self) -> bool:
        return self.comm is not None and self.size > 1

    def barrier(self) -> None:
        if self.comm is not None and self.size > 1:
            self.comm.Barrier()

    def barrier_or_stop(self, stop_event: threading.Event, poll_s: float = 0.0) -> bool:
        """A barrier that gives up when stop_event is set (Ctrl-C while another rank is gone):
        returns False then. Used as the per-step hook, where a plain Barrier could wait forever."""
        if self.comm is None or self.size == 1:
            return True
        req = self.comm.Ibarrier()
        while not req.Test():
            if stop_event.is_set():
                return False
            if poll_s:
                time.sleep(poll_s)
        return True

    def all_arrive(self, timeout_s: float) -> bool:
        """A barrier that waits at most timeout_s (a rank may hang or be gone): True when every
        rank arrived. For the end of an interrupted job, where MPI_Finalize could wait forever."""
        if self._exit_comm is None:
            return True
        req = self._exit_comm.Ibarrier()
        deadline = time.monotonic() + timeout_s
        while not req.Test():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    def notify_stop(self, signum: int, what: str) -> None:
        """Tell the other ranks that this one stops (by signal `signum`: `what` says why): each stops its
        run within a tick, as if signalled, and writes what it measured (dlio.system.execute.watch_peers)."""
        if self._stop_comm is None or self._told:
            return
        for r in range(self.size):
            if r != self.rank:
                self._told.append(
                    self._stop_comm.isend((int(signum), f"rank {self.rank} {what}"), dest=r, tag=STOP_TAG)
                )

    def peer_stopped(self) -> Optional[Tuple[int, str]]:
        """(signum, why) of another rank's stop notice, or None; never waits."""
        if self._stop_comm is None:
            return None
        from mpi4py import MPI  # loaded already (see __init__)

        status = MPI.Status()
        if not self._stop_comm.iprobe(source=MPI.ANY_SOURCE, tag=STOP_TAG, status=status):
            return None
        signum, why = self._stop_comm.recv(source=status.Get_source(), tag=STOP_TAG)
        return signum, why

    def bcast(self, obj: T, root: int = 0) -> T:
        return self.comm.bcast(obj, root=root) if self.is_mpi else obj

    def allgather(self, obj: T) -> List[T]:
        return self.comm.allgather(obj) if self.is_mpi else [obj]

    def gather(self, obj: T, root: int = 0) -> Optional[List[T]]:
        return self.comm.gather(obj, root=root) if self.is_mpi else [obj]

    def agree(self, check: Callable[[], T]) -> T:
        """check() on rank 0 only (one request to storage, one probe of a folder), its answer on every
        rank. A DlioError or OSError it raises is raised on every rank (rank 0 raises its own; the others a
        DlioError with its message), so no rank goes on to a collective the others left."""
        problem: Optional[str] = None
        answer, error = None, None
        if self.rank == 0:
            try:
                answer = check()
            except DlioError as e:
                problem, error = str(e), e
            except OSError as e:
                problem = os_error_message(e)
                error = DlioError(problem)
        problem, answer = self.bcast((problem, answer))
        if error is not None:
            raise error
        if problem:
            raise DlioError(problem)
        return answer  # type: ignore[return-value]

    def agree_all(self, check: Callable[[], None]) -> None:
        """check() on every rank (each its own folder or memory): the first rank's DlioError, by rank, is
        raised on every rank."""
        problem: Optional[str] = None
        try:
            check()
        except DlioError as e:
            problem = str(e)
        problems = [p for p in self.allgather(problem) if p]
        if problems:
            raise DlioError(problems[0])

    def abort(self, code: int = 1) -> None:
        if self.is_mpi:
            self.comm.Abort(code)

    def step_barrier(self) -> Any:
        """The per-step barrier as a C hook (dlio._mpiio.StepBarrier: MPI_Ibarrier + MPI_Test
        without the GIL, stoppable), or None when it cannot be used (then the caller keeps the
        Python barrier_or_stop)."""
        mod = mpiio_module()
        if not self.is_mpi or mod is None:
            return None
        if mod.thread_level() not in ("serialized", "multiple"):
            return None  # the runner's trainer is not the main thread
        return mod.StepBarrier(self.comm)


_WORLD: Optional[Comm] = None


def current_world() -> Optional[Comm]:
    """The world made by world() so far, or None: error paths use it and must not start MPI."""
    return _WORLD


def launched_by_mpi(env: Mapping[str, str] = os.environ) -> bool:
    return any(v in env for v in _LAUNCHER_VARS)


# Open MPI's launcher (mpirun / mpiexec from openmpi-bin: MLPerf Storage's `mpirun -n N -host H:N`)
# speaks PMIx, which an MPICH library (the mpich wheel that `pip install` brings) cannot: it aborts
# every rank with "unsupported PMI version PMIx". mpi4py's wheel carries both ABIs and loads the
# library MPI4PY_LIBMPI names, so under Open MPI's launcher Open MPI's own library is named there.
OPENMPI_LIB = "libmpi.so.40"


def _openmpi_library(env: Mapping[str, str] = os.environ) -> Optional[str]:
    """The path of an Open MPI libmpi this process can load, or None: OPAL_PREFIX's, the one beside
    the mpirun on PATH, the dynamic loader's."""
    import ctypes.util
    import shutil
    import sysconfig

    prefixes = [env.get("OPAL_PREFIX")]
    launcher = shutil.which("mpirun", path=env.get("PATH"))
    if launcher:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(launcher))))
    subdirs = ["lib", "lib64", os.path.join("lib", sysconfig.get_config_var("MULTIARCH") or "")]
    candidates = [os.path.join(p, sub, OPENMPI_LIB) for p in filter(None, prefixes) for sub in subdirs]
    found = ctypes.util.find_library("mpi")
    if found:
        candidates.append(found)
    for path in candidates:
        if _is_openmpi(path):
            return path
    return None


def _is_openmpi(path: str) -> bool:
    """Whether path loads as an Open MPI library (loading one does not initialise MPI)."""
    import ctypes

    try:
        return hasattr(ctypes.CDLL(path, os.RTLD_LOCAL), "ompi_mpi_comm_self")
    except OSError:
        return False


def choose_library(env: MutableMapping[str, str] = os.environ) -> None:
    """Before mpi4py initialises MPI: under Open MPI's launcher, point mpi4py at Open MPI's library
    (unless MPI4PY_LIBMPI / MPI4PY_MPIABI already choose one). A DlioError saying what to do when
    there is none (instead of MPICH's raw PMIx abort on every rank)."""
    if "OMPI_COMM_WORLD_SIZE" not in env or "MPI4PY_LIBMPI" in env or "MPI4PY_MPIABI" in env:
        return
    if not _mpi4py_has_abi("openmpi"):
        return  # an mpi4py built against one MPI (the site's): it loads what it was built with
    lib = _openmpi_library(env)
    if lib is None:
        raise DlioError(
            "started by Open MPI's mpirun, but no Open MPI library (libmpi.so.40) to load: install it "
            "(apt-get install libopenmpi3), or start the job with the mpiexec of the mpich wheel "
            f"({os.path.join(os.path.dirname(sys.executable), 'mpiexec')})"
        )
    env["MPI4PY_LIBMPI"] = lib  # mpi4py reads it when mpi4py.MPI is imported


def _mpi4py_has_abi(abi: str) -> bool:
    """Whether the installed mpi4py can load an `abi` library (its wheels carry MPI.mpich and
    MPI.openmpi extensions); an mpi4py built from source has one MPI.*.so and no choice."""
    spec = importlib.util.find_spec("mpi4py")
    if spec is None or not spec.submodule_search_locations:
        return False
    folder = list(spec.submodule_search_locations)[0]
    return any(n.startswith(f"MPI.{abi}.") for n in os.listdir(folder))


def check_world_size(size: int, env: Mapping[str, str] = os.environ) -> None:
    """The ranks MPI sees must be the ranks the launcher started: an MPI library that does not
    speak the launcher's protocol starts each process as a job of its own (every rank 0 of 1)."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"):
        want = env.get(var)
        if want and want.isdigit() and int(want) != size:
            raise DlioError(
                f"the launcher started {want} processes ({var}) but MPI sees {size}: mpi4py's MPI library "
                "is not the launcher's; use the mpiexec of the MPI mpi4py was built with, or rebuild it "
                "against this one (MPICC=$(which mpicc) pip install --no-binary mpi4py mpi4py)"
            )
        if want:
            return


def world(force: bool = False) -> Comm:
    """COMM_WORLD when launched under MPI with mpi4py importable; else a single rank.

    force: initialise MPI through mpi4py even without a launcher (MPI's singleton start: one rank),
    for what needs MPI itself, such as the MPI-IO engine."""
    global _WORLD
    if _WORLD is None or (force and _WORLD.comm is None):
        comm = None
        if launched_by_mpi() or force:
            choose_library()
            try:  # importing mpi4py.MPI initialises MPI: only under a launcher (or forced)
                from mpi4py import MPI

                comm = MPI.COMM_WORLD
            except ImportError:
                comm = None
            if comm is not None:
                check_world_size(comm.Get_size())
        _WORLD = Comm(comm)
        if comm is not None:
            register_mpiio()
    return _WORLD


NOT_BUILT = "not built: no MPI compiler found at build time (pip install mpich mpi4py, then reinstall dlio-fast)"
_MPIIO: Dict[str, Any] = {"done": False, "module": None, "why": None}


def mpiio_module() -> Any:
    """dlio._mpiio once register_mpiio() succeeded, else None. (Any: the extension has no stub, and callers
    ask after register_mpiio() said None, e.g. fsbench/ior.py.)"""
    return _MPIIO["module"]


def register_mpiio() -> Optional[str]:
    """Import dlio._mpiio and register its engine with the core. None when done (or already
    done), else the reason it is unavailable (a sentence a person can act on)."""
    if _MPIIO["done"]:
        return _MPIIO["why"]
    why: Optional[str] = None
    mod: Optional[ModuleType] = None
    spec = importlib.util.find_spec("dlio._mpiio")
    mismatch = _abi_mismatch(spec.origin) if spec is not None else None
    if spec is None:
        why = NOT_BUILT
    elif mismatch:
        why = (
            f"dlio._mpiio was built for the {mismatch[0]} ABI but mpi4py loaded {mismatch[1]} (rebuild "
            "dlio-fast with that MPI's mpicc: MPICC=/path/to/mpicc pip install --no-binary dlio-fast .)"
        )
    else:
        try:  # the optional extension linked to libmpi: only when the MPI-IO engine is wanted
            mod = importlib.import_module("dlio._mpiio")
        except ImportError as e:
            why, mod = f"import dlio._mpiio failed: {e}", None
    if mod is not None and "mpi4py.MPI" in sys.modules:
        # Both must use one MPI library: mpi4py built against one MPI, dlio._mpiio against another
        # would crash at the first call.
        # Open MPI counts the string's terminating NUL in its length: mpi4py's copy ends with it
        theirs = sys.modules["mpi4py.MPI"].Get_library_version().replace("\0", "").strip()
        ours = mod.library_version().replace("\0", "").strip()
        if [x.strip() for x in theirs.splitlines()[:1]] != [x.strip() for x in ours.splitlines()[:1]]:
            why, mod = (
                (
                    f"dlio._mpiio was built against '{ours.splitlines()[0] if ours else '?'}' but "
                    f"mpi4py uses '{theirs.splitlines()[0]}' (rebuild dlio-fast with that MPI's "
                    "mpicc: MPICC=/path/to/mpicc pip install --no-binary dlio-fast .)"
                ),
                None,
            )
    if mod is not None:
        from dlio import _core  # the C core (numpy), loaded by the command that runs the engine

        _core.register_engine(mod.engine_capsule())
    _MPIIO.update(done=True, module=mod, why=why)
    return why


# The MPI ABIs by the soname of their library: MPICH's (also Intel MPI's, the mpich wheel's) and Open MPI's.
_ABI_OF_SONAME = {b"libmpi.so.12": "MPICH", b"libmpi.so.40": "Open MPI"}


def _abi_mismatch(extension: Optional[str]) -> Optional[Tuple[str, str]]:
    """(the ABI dlio._mpiio was linked for, the ABI mpi4py loaded) when they differ, else None. Read
    from the extension's file and mpi4py's loaded module (the ABI wheels' MPI.mpich / MPI.openmpi),
    before dlio._mpiio is imported: loading an MPICH-linked extension into an Open MPI process binds its
    calls to the wrong library (MPI_Comm is an int in one ABI, a pointer in the other)."""
    mpi_mod = sys.modules.get("mpi4py.MPI")
    loaded = os.path.basename(getattr(mpi_mod, "__file__", "") or "")
    theirs = "Open MPI" if ".openmpi." in loaded else "MPICH" if ".mpich." in loaded else None
    if theirs is None or not extension:
        return None
    try:
        with open(extension, "rb") as f:
            data = f.read()
    except OSError:
        return None
    ours = next((abi for soname, abi in _ABI_OF_SONAME.items() if soname in data), None)
    return (ours, theirs) if ours is not None and ours != theirs else None
