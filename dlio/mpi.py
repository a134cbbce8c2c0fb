"""Optional MPI glue. Without mpi4py, or without mpiexec, the job is one rank and nothing fails.

mpi4py is imported only when the process was started by an MPI launcher (the PMI/MPI environment
variables say so), so a plain `dlio-fast run` never pays MPI's start-up or needs a launcher.
"""
import os

_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID",
                  "SLURM_PROCID", "HYDRA_CONTROL_FD", "PMI_FD")


class Comm:
    """The few collective operations dlio-fast needs, on mpi4py's COMM_WORLD or on one rank."""

    def __init__(self, comm=None):
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.size = comm.Get_size() if comm is not None else 1

    @property
    def is_mpi(self):
        return self.comm is not None and self.size > 1

    def barrier(self):
        if self.comm is not None and self.size > 1:
            self.comm.Barrier()

    def barrier_or_stop(self, stop_event, poll_s=0.0):
        """A barrier that gives up when stop_event is set (Ctrl-C while another rank is gone):
        returns False then. Used as the per-step hook, where a plain Barrier could wait forever."""
        if self.comm is None or self.size == 1:
            return True
        req = self.comm.Ibarrier()
        while not req.Test():
            if stop_event.is_set():
                return False
        return True

    def bcast(self, obj, root=0):
        return self.comm.bcast(obj, root=root) if self.is_mpi else obj

    def allgather(self, obj):
        return self.comm.allgather(obj) if self.is_mpi else [obj]

    def gather(self, obj, root=0):
        return self.comm.gather(obj, root=root) if self.is_mpi else [obj]

    def allreduce_max(self, x):
        from_all = self.allgather(x)
        return max(from_all)

    def any_true(self, flag):
        return any(self.allgather(bool(flag)))

    def abort(self, code=1):
        if self.is_mpi:
            self.comm.Abort(code)


_WORLD = None


def launched_by_mpi(env=os.environ):
    return any(v in env for v in _LAUNCHER_VARS)


def world():
    """COMM_WORLD when launched under MPI with mpi4py importable; else a single rank."""
    global _WORLD
    if _WORLD is None:
        comm = None
        if launched_by_mpi():
            try:
                from mpi4py import MPI
                comm = MPI.COMM_WORLD
            except ImportError:
                comm = None
        _WORLD = Comm(comm)
    return _WORLD
