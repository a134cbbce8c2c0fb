"""What `dlio-fast io` and `dlio-fast ceiling` are asked: one request each, whatever runs it.

A request carries every option's value and the set of options the user gave. The backend that runs it
(dlio.fsbench.backends: local files, MPI-IO, S3) declares which options it takes and refuses the others
that were given, in one message shape, before anything is measured (IOR's ``check_params``, fio's
per-engine option tables).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, FrozenSet, Mapping, Optional, Tuple

# The access patterns (--rw), as fio names them; declared here, not with the points that run them, so that
# the command line's choices do not import numpy and the C core (bench/startup.py)
RW_MODES = ("read", "randread", "write", "randwrite", "readwrite", "randrw")
RW_ALIASES = {"rw": "readwrite"}  # fio's other spelling

# The option names as the command line spells them (without --), per request field.
IO_FLAGS: Mapping[str, str] = {
    "rws": "rw",
    "rwmixread": "rwmixread",
    "bss": "bs",
    "engines": "engine",
    "qds": "qd",
    "threads": "threads",
    "direct": "direct/--buffered",
    "file_size": "file-size",
    "runtime_ns": "runtime",
    "size": "size",
    "ramp_ns": "ramp",
    "cache": "cache",
    "fixedbufs": "fixedbufs",
    "regfiles": "regfiles",
    "json_path": "json",
    "csv_path": "csv",
    "keep": "keep",
    "layouts": "layout",
    "collective": "collective/--independent",
    "reorder": "reorder",
    "mpiio_hints": "mpiio-hint",
    "trace_path": "trace",
    "endpoint": "endpoint",
    "timeout_ns": "timeout",
    "create_bucket": "create-bucket",
}


@dataclasses.dataclass(frozen=True)
class IoRequest:
    """`dlio-fast io`: a grid of points (rw x bs x engine x qd x threads) on PATHS."""

    paths: Tuple[str, ...]
    rws: Tuple[str, ...] = ("read",)
    rwmixread: int = 50  # mixed patterns (readwrite, randrw): % of the requests that read
    bss: Tuple[int, ...] = (4096,)
    engines: Tuple[str, ...] = ("posix",)
    qds: Tuple[int, ...] = (1,)
    threads: Tuple[int, ...] = (1,)
    direct: Optional[bool] = None
    file_size: int = 256 << 20
    runtime_ns: Optional[int] = None
    size: Optional[int] = None
    ramp_ns: int = 0
    cache: Optional[str] = None
    fixedbufs: bool = False
    regfiles: bool = False
    json_path: Optional[str] = None
    csv_path: Optional[str] = None
    keep: bool = False
    layouts: Tuple[str, ...] = ("fpp",)
    collective: bool = False
    reorder: bool = False
    mpiio_hints: Tuple[str, ...] = ()
    trace_path: Optional[str] = None
    endpoint: Optional[str] = None
    timeout_ns: Optional[int] = None  # an object store's deadline (None: dlio_fast.storage_timeout's default)
    create_bucket: bool = False
    given: FrozenSet[str] = frozenset()  # the fields the user set

    @classmethod
    def from_options(cls, paths: Any, given: FrozenSet[str], **values: Any) -> "IoRequest":
        lists = {k: tuple(v) for k, v in values.items() if isinstance(v, list)}
        return cls(paths=tuple(paths), given=frozenset(given), **{**values, **lists})


CEILING_FLAGS: Mapping[str, str] = {
    "runtime_ns": "runtime",
    "file_size": "file-size",
    "object_size": "object-size",
    "max_threads": "max-threads",
    "max_qd": "max-qd",
    "endpoint": "endpoint",
    "json_path": "json",
    "keep": "keep",
    "timeout_ns": "timeout",
    "create_bucket": "create-bucket",
}


@dataclasses.dataclass(frozen=True)
class CeilingRequest:
    """`dlio-fast ceiling`: the best the storage under PATH does, found by a bounded search."""

    path: str
    runtime_ns: int = 2_000_000_000
    file_size: Optional[int] = None
    object_size: Optional[int] = None
    max_threads: Optional[int] = None
    max_qd: Optional[int] = None
    endpoint: Optional[str] = None
    json_path: Optional[str] = None
    keep: bool = False
    timeout_ns: Optional[int] = None
    create_bucket: bool = False
    given: FrozenSet[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Console:
    """Where a command's lines go: the result table (stdout, or stderr when a document goes to stdout),
    warnings (stderr), and the live display (None with -q)."""

    table: Callable[[str], None]
    warn: Callable[[str], None]
    progress: Any = None
