"""What a storage backend is: the operations the jobs call, the capabilities it declares, and the one
shape of the message that refuses a setting it cannot honour.

A backend moves bytes to and from one kind of storage and times it; it knows nothing of training,
checkpoints or datasets. The jobs (dlio.train, dlio.checkpoint, dlio.dataset, dlio.fsbench) decide what
to move and build the records; they name things by the backend's names (a path for files, an
``s3://BUCKET/KEY`` URI for S3) and never test which backend they hold. A new backend implements this
class and adds one line to ``dlio.storage.BACKENDS`` (docs/design.md, "A new storage backend").
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Dict, FrozenSet, List, NoReturn, Optional, Protocol, Sequence, Tuple

import numpy as np

from dlio.base.errors import ConfigError
from dlio.config import Config
from dlio.system import counters

# Capabilities: what a backend can honour. A config or option asking for one the backend lacks is
# refused by `Backend.refuse` (one message shape), never silently dropped.
PAGE_CACHE = "page cache"  # a client page cache that --cache drop / drop-all act on
TRACE = "trace"  # the C core's per-request trace (--trace)
DIRECT = "O_DIRECT"  # requests that bypass a client cache
FILE_ENGINES = "file engines"  # the C engines (posix, io_uring, mmap, null) choose how requests go out
IN_PLACE = "in-place writes"  # a file is written where it stays (objects are PUT whole from a staging copy)
SCAN = "scan"  # a dataset made elsewhere (no manifest) can be scanned where it lies
C_STEP_HOOK = "C step hook"  # the trainer can call a C function per step (the MPI barrier) without the GIL
FSYNC = "fsync"  # writes can be made durable by the client (fsync)
STAT = "stat"  # a name's presence and size are read on this host, without a request (a dry run may look)
SPLIT_READS = "split reads"  # a long read goes out as requests of a bounded size (an object's range is one GET)
BUCKETS = "buckets"  # places that must exist before anything is written, made on request (--create-bucket)


class RunLike(Protocol):
    """What the train loop drives: the C core's ``_core.Run`` and the S3 worker's run both have it."""

    paths: List[str]

    def execute(self) -> Dict[str, Any]: ...

    def request_stop(self) -> None: ...

    def progress(self) -> Tuple[int, int, int]: ...


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """How a block of training steps is read (the C trainer's settings; a backend uses what it can)."""

    engine: str
    direct: bool
    threads: int
    qd: int
    prefetch: int
    compute_mode: int = 0
    preprocess_ns: int = 0
    step_hook: Optional[Callable[[int], None]] = None  # Python, called after each step's compute
    c_step_hook: Any = None  # a capsule of a C function: used instead of step_hook where C_STEP_HOOK
    trace: bool = False
    delay_ns: int = 0
    skip_bad_files: bool = False  # a sample whose file fails during the run is left out and counted


@dataclasses.dataclass(frozen=True)
class SetOptions:
    """How a set of whole files (objects) is written or read: a checkpoint's files."""

    engine: str
    direct: bool
    qd: int
    threads: Optional[int] = None  # None: one per file, up to MAX_SET_THREADS
    transfer: int = 16 << 20  # bytes per request
    fsync: bool = False  # writes: durable before the window closes
    drop: bool = False  # reads: the files' cached pages dropped first (outside the window)
    before_window: Optional[Callable[[], None]] = None  # e.g. a barrier right before the clock starts
    # the live display: called with the bytes moved so far, a few times a second, from the waiting thread
    on_bytes: Optional[Callable[[int], None]] = None
    delay_ns: int = 0  # engine null: the busy-wait per request (a storage of known latency)
    # writes: each file made under a temporary name and renamed to its own after the window (a process
    # killed mid-write leaves no half-written file under the final name; an object's PUT is atomic already)
    temp_names: bool = False


@dataclasses.dataclass(frozen=True)
class SetContent:
    """What a written set holds: random bytes (every 4 KiB block unique) unless ``fills`` gives an
    8-byte pattern per file; ``overlays`` per file, literal (offset, bytes) ranges laid over the content
    (a container's headers: dlio.checkpoint.torchzip), or None."""

    fills: Optional[List[int]] = None
    overlays: Optional[List[Any]] = None


@dataclasses.dataclass
class SetResult:
    """The timing of a set's transfer: wall clock at the start, the window on the monotonic clock
    (m0..m1 ns), and its parts."""

    bytes: int
    bytes_issued: int
    wall_start_s: float
    m0: int
    m1: int
    prepare_s: float
    io_s: float
    io_window_s: float
    fsync_s: float
    engine: str
    direct: bool
    threads: int
    qd: int
    transfer_size: int
    cache: str
    writer: Optional[str] = None
    # read_ranges on files: the reading threads' page faults while they read (getrusage
    # RUSAGE_THREAD in the C core), minor and major; None on objects
    minflt: Optional[int] = None
    majflt: Optional[int] = None


MAX_SET_THREADS = 4


class Backend:
    """One kind of storage. Subclasses set the class attributes and implement the operations."""

    name: ClassVar[str]  # the word storage.storage_type takes
    label: ClassVar[str]  # how messages name it: "files", "S3"
    caps: ClassVar[FrozenSet[str]]

    def has(self, cap: str) -> bool:
        return cap in self.caps

    def refuse(self, key: str, value: Any, why: str, fix: str = "leave it out") -> NoReturn:
        """The one message shape of a setting this backend cannot honour."""
        shown = str(value).lower() if isinstance(value, bool) else value
        raise ConfigError(f"{key} = {shown}: not available on {self.label} ({why}); {fix}", key, value)

    # ---- the engine and the settings a config asks of the storage ----
    def engine_spec(self, cfg: Config, checkpoint: bool = False) -> Tuple[str, bool]:
        """(engine word, O_DIRECT) the reads (or checkpoint files) of this config go through."""
        raise NotImplementedError

    def check_config(self, cfg: Config) -> None:
        """Refuse what the config asks that this backend cannot do, before any work."""
        if cfg.dlio_fast.cache in ("drop", "drop-all") and not self.has(PAGE_CACHE):
            self.refuse(
                "dlio_fast.cache",
                cfg.dlio_fast.cache,
                "no client page cache to drop; the server's caches are its own",
                "leave --cache out",
            )
        if cfg.dlio_fast.create_bucket and not self.has(BUCKETS):
            self.refuse(
                "dlio_fast.create_bucket", True, "a folder is created when the run writes into it", "leave it out"
            )
        if cfg.dlio_fast.trace and not self.has(TRACE):
            self.refuse(
                "dlio_fast.trace",
                True,
                "the trace records the C core's file requests; S3 requests are not traced yet",
                "leave --trace out",
            )

    def engine_for(self, file_engine: str, direct: bool = False) -> Tuple[str, bool]:
        """(engine word, O_DIRECT) of a job's requests that would go through ``file_engine``: that engine
        where the C engines issue the requests (FILE_ENGINES), else the backend's own client."""
        raise NotImplementedError

    # ---- names ----
    def local_path(self, name: str) -> Optional[str]:
        """The path on this host that ``name`` is, where a job can work on it in place; None where the
        bytes live elsewhere, so that working on them takes a copy (dlio.storage.staging)."""
        raise NotImplementedError

    def dataset_root(self, cfg: Config) -> str:
        """Where the dataset lives: a folder, or an s3://BUCKET/PREFIX/ URI."""
        raise NotImplementedError

    def checkpoint_root(self, cfg: Config) -> str:
        raise NotImplementedError

    def folder_root(self, cfg: Config, key: str) -> str:
        """Where the folder the config key ``key`` names lives (kvcache.cache_dir): a path, or an
        s3://BUCKET/PREFIX/ URI placed as DLIO places checkpoint_folder."""
        raise NotImplementedError

    def join(self, root: str, *parts: str) -> str:
        raise NotImplementedError

    def names(self, root: str, local_root: str, paths: Sequence[str]) -> List[str]:
        """Paths under a local view of ``root`` (``local_view``) -> this backend's names."""
        raise NotImplementedError

    # ---- before any work ----
    def check_access(self, roots: Sequence[str], create: bool = False) -> None:
        """One cheap request per root: a wrong endpoint, key or bucket is a one-line error now.
        create: a bucket that does not exist is made (BUCKETS; refused elsewhere)."""
        if create and not self.has(BUCKETS):
            self.create_bucket(roots[0] if roots else "")

    def create_bucket(self, root: str) -> None:
        """Make the bucket ``root`` lives in (BUCKETS)."""
        self.refuse("--create-bucket", True, "a folder is created when the run writes into it", "leave it out")

    def addressing_note(self) -> Optional[str]:
        return None

    # ---- small objects and listings ----
    def local_view(self, root: str, rels: Sequence[str]) -> Tuple[str, List[bool]]:
        """A local folder standing for ``root`` in which the small files ``rels`` (manifests) can be
        read, and which of them were found."""
        raise NotImplementedError

    def exist(self, names: Sequence[str]) -> bool:
        """Every one of ``names`` is there (a cheap check: a dataset is written in order)."""
        raise NotImplementedError

    def sizes(self, names: Sequence[str]) -> np.ndarray:
        """Each name's size in bytes (int64), -1 where it is not there: what was made is there only
        at the size it was made with."""
        raise NotImplementedError

    def list(self, root: str) -> List[str]:
        """Every name under ``root``."""
        raise NotImplementedError

    def remove_tree(self, root: str) -> None:
        raise NotImplementedError

    def remove(self, names: Sequence[str]) -> None:
        """Only ``names`` removed (the objects or files), nothing else under their prefix or folder."""
        raise NotImplementedError

    def lease(self, name: str, what: str, key: str) -> Any:
        """A lock on an object store's place, held by this process until its ``release()`` (the object
        ``name``: dlio.storage.s3.lease), or DlioError naming its holder; None where there is none to take."""
        return None

    def uploader(self, root: str, multipart_min: Optional[int] = None) -> Any:
        """Backends without IN_PLACE: a sink that PUTs staged files under ``root`` batch by batch."""
        raise NotImplementedError

    # ---- timed transfers ----
    def train_run(
        self, names: Sequence[str], sizes: np.ndarray, ops: np.ndarray, steps: np.ndarray, opts: TrainOptions
    ) -> RunLike:
        raise NotImplementedError

    def write_set(self, names: Sequence[str], sizes: Sequence[int], content: SetContent, opts: SetOptions) -> SetResult:
        """Write whole files (objects), timed; a failed write leaves none of them behind."""
        raise NotImplementedError

    def read_set(self, names: Sequence[str], sizes: Sequence[int], opts: SetOptions) -> SetResult:
        raise NotImplementedError

    def read_ranges(self, names: Sequence[str], sizes: Sequence[int], ops: np.ndarray, opts: SetOptions) -> SetResult:
        """Read the byte ranges ``ops`` (_core.OP_DTYPE: ``file`` indexes ``names``, ``offset``,
        ``length``) of whole files (objects) of ``sizes`` bytes, timed: a model's shards. The ops of a
        file stay in order on one thread (``opts.threads``, files balanced by bytes); the engine may
        be ``mmap`` (the pages of each range touched), buffered, O_DIRECT or io_uring on files."""
        raise NotImplementedError

    # ---- local copies: a job that works on local files kept elsewhere (no local_path; dlio.storage.staging) ----
    def upload_files(self, names: Sequence[str], paths: Sequence[str], opts: SetOptions) -> SetResult:
        """Local files ``paths`` (made on this host) stored whole as ``names``, timed."""
        raise NotImplementedError

    def download_files(
        self, names: Sequence[str], sizes: Sequence[int], paths: Sequence[str], opts: SetOptions
    ) -> SetResult:
        """``names`` of ``sizes`` bytes copied into the local files ``paths``, timed: range requests of
        ``opts.transfer`` bytes, ``opts.threads`` x ``opts.qd`` in flight; the files fsynced after the
        window (``fsync_s``, the local disk's)."""
        raise NotImplementedError

    def kv_relay(self, root: str, workers: int, slot_len: int, null: bool = False) -> Any:
        """Objects the C core has no client for (no local_path): the helper process of one C run of the relay
        KV store (src/dlio_core/kvcache/relay.c), its objects under ``root``, one slot of ``slot_len``
        bytes per C worker; ``null``: replies without requests (the relay's own cost). It has ``paths``
        (for _core.KvRun's relay=), ``watch(run)`` (the deadline, while the run goes), ``finish()`` (the
        helper's tally) and ``failure(err)`` (the run's error in the client's words)."""
        raise NotImplementedError

    # ---- the io and ceiling commands ----
    def io_bench(self, root: str) -> Any:
        """The io grid's and the ceiling's points under ``root`` where they are not the C core's file points
        (dlio.fsbench runs those itself): ``point``, ``check``, ``check_grid``, ``check_limits``, ``open``,
        ``create``, ``names``, ``measure``, ``close`` (dlio.storage.s3.bench.S3Bench)."""
        raise NotImplementedError

    # ---- the page cache and the kernel's counters around a phase ----
    def drop_cache(self, names: Sequence[str], mode: str) -> str:
        """The note of what was done to the client's cache before a phase."""
        return "n/a (no client cache)"

    def phase(self, names: Sequence[str], engine: str) -> counters.Phase:
        """The counters read at a phase's boundaries (dlio.system.counters)."""
        return counters.Phase([], engine, residency=False)
