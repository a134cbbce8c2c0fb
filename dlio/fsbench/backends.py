"""Who runs an io grid or a ceiling search: files on this host (the C core), MPI-IO under mpiexec, or an
object store (S3). Each declares the options it takes; the others, when given, are refused in one
message shape before anything is measured. The storage kind comes from the path (dlio.storage.kind_of):
the same choice every job makes.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Mapping, Optional

from dlio.base.errors import DlioError
from dlio.base.units import fmt_size
from dlio.config.engines import MPIIO
from dlio.fsbench.request import CEILING_FLAGS, IO_FLAGS, CeilingRequest, Console, IoRequest
from dlio.storage import kind_of

# Options every io backend takes.
IO_COMMON = frozenset({"rws", "bss", "threads", "runtime_ns", "size", "ramp_ns", "json_path", "csv_path", "keep"})
CEILING_COMMON = frozenset({"runtime_ns", "max_threads", "max_qd", "json_path", "keep"})


class IoBackend:
    label = ""  # how messages name the paths it serves
    io_options: FrozenSet[str] = frozenset()
    mixed_rw = False  # mixed read/write points (--rw readwrite / randrw)
    ceiling_options: Optional[FrozenSet[str]] = None  # None: no ceiling search

    def check_io(self, req: IoRequest) -> None:
        _refuse_others(self, req.given, IO_COMMON | self.io_options, IO_FLAGS, "io_options")
        if req.json_path == "-" and req.csv_path == "-":
            raise DlioError("--json - and --csv -: only one of them can write to stdout")
        if req.runtime_ns is not None and req.size is not None:
            raise DlioError("give --runtime or --size, not both")
        mixed = [r for r in req.rws if r in ("readwrite", "randrw")]
        if mixed and not self.mixed_rw:
            raise DlioError(f"--rw {mixed[0]}: mixed read/write points run on files, not on {self.label}")

    def run_io(self, req: IoRequest, console: Console) -> Dict[str, Any]:
        raise NotImplementedError

    def check_ceiling(self, req: CeilingRequest) -> None:
        if self.ceiling_options is None:
            raise DlioError(f"ceiling does not search {self.label}")
        _refuse_others(self, req.given, CEILING_COMMON | self.ceiling_options, CEILING_FLAGS, "ceiling_options")

    def run_ceiling(self, req: CeilingRequest, console: Console) -> Dict[str, Any]:
        raise NotImplementedError


class LocalIo(IoBackend):
    label = "files"
    io_options = frozenset(
        {"engines", "qds", "direct", "file_size", "cache", "fixedbufs", "regfiles", "trace_path", "rwmixread"}
    )
    mixed_rw = True
    ceiling_options = frozenset({"file_size"})

    def check_io(self, req: IoRequest) -> None:
        super().check_io(req)
        for b in req.bss:
            if b < 512 or b > 64 << 20:
                raise DlioError(f"--bs {fmt_size(b)}: transfer size must be between 512 bytes and 64 MiB")

    def run_io(self, req: IoRequest, console: Console) -> Dict[str, Any]:
        from dlio.fsbench import grid

        return grid.run_local(req, console)

    def run_ceiling(self, req: CeilingRequest, console: Console) -> Dict[str, Any]:
        from dlio.fsbench import ceiling

        return ceiling.run(req, console)


class MpiIo(IoBackend):
    label = "--engine mpiio"
    io_options = frozenset(
        {"engines", "qds", "direct", "file_size", "cache", "layouts", "collective", "reorder", "mpiio_hints"}
    )

    def check_io(self, req: IoRequest) -> None:
        super().check_io(req)
        if list(req.engines) != [MPIIO] or req.direct or list(req.qds) != [1]:
            raise DlioError("--engine mpiio runs alone, buffered, at queue depth 1 (one MPI call at a time)")

    def run_io(self, req: IoRequest, console: Console) -> Dict[str, Any]:
        from dlio.fsbench import ior

        return ior.main(req, console)


class S3Io(IoBackend):
    label = "s3:// paths"
    io_options = frozenset({"qds", "file_size", "cache", "endpoint", "timeout_ns", "create_bucket"})
    ceiling_options = frozenset({"object_size", "endpoint", "timeout_ns", "create_bucket"})

    def check_io(self, req: IoRequest) -> None:
        from dlio.fsbench import s3_io

        super().check_io(req)
        s3_io.check(req)

    def run_io(self, req: IoRequest, console: Console) -> Dict[str, Any]:
        from dlio.fsbench import s3_io

        return s3_io.run_io(req, console)

    def check_ceiling(self, req: CeilingRequest) -> None:
        if "file_size" in req.given:
            raise DlioError("--file-size is for filesystem paths; on s3:// give --object-size")
        super().check_ceiling(req)

    def run_ceiling(self, req: CeilingRequest, console: Console) -> Dict[str, Any]:
        from dlio.fsbench import s3_ceiling

        return s3_ceiling.run(req, console)


# storage kind (dlio.storage) -> its io backend; MPI-IO is the files' backend under --engine mpiio
IO_BACKENDS: Mapping[str, IoBackend] = {"local_fs": LocalIo(), "s3": S3Io()}
MPI_IO = MpiIo()


def io_backend(paths: Any, engines: Any = ()) -> IoBackend:
    """The backend of a request's paths (one storage kind for all of them)."""
    kinds = {kind_of(p) for p in paths}
    if len(kinds) > 1:
        raise DlioError(f"{', '.join(paths)}: one kind of storage per command (files, or one s3:// prefix)")
    backend = IO_BACKENDS[kinds.pop()]
    return MPI_IO if backend is IO_BACKENDS["local_fs"] and MPIIO in engines else backend


def _refuse_others(
    backend: IoBackend, given: FrozenSet[str], takes: FrozenSet[str], flags: Mapping[str, str], kind: str
) -> None:
    """Options given that this backend does not take: refused, naming who takes them."""
    extra = sorted(given - takes, key=list(flags).index)
    if not extra:
        return
    owners = [b for b in (*IO_BACKENDS.values(), MPI_IO) if getattr(b, kind) is not None]

    def who(field: str) -> str:
        return ", ".join(b.label for b in owners if field in getattr(b, kind)) or "another command"

    if len(extra) == 1:
        f = extra[0]
        raise DlioError(f"--{flags[f]} is for {who(f)} only: not used on {backend.label}; leave it out")
    words = ", ".join(f"--{flags[f]} (for {who(f)})" for f in extra)
    raise DlioError(f"{words}: not used on {backend.label}; leave them out")
