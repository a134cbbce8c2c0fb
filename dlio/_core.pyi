"""Types of the C core's binding (dlio/_core.pyx and the files it includes, dlio/_core_parts/*.pxi), for the
type checker; tests/unit/test_core_stub.py checks it names what the module has.

A Run's result and the histograms are plain dicts (their keys are listed in the .pyx docstrings and
dlio.report.result); they are typed as Dict[str, Any] here."""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

HIST_NR: int
COMPUTE_SPIN_NS: int
CAP_ASYNC: int
CAP_DIRECT: int
CAP_WRITE: int
CAP_NOIO: int
ENG_REGBUFS: int
ENG_REGFILES: int
ENG_SQPOLL: int
ENG_FADV_RANDOM: int
ENG_FADV_SEQ: int
OP_DTYPE: np.dtype
OVERLAY_DTYPE: np.dtype
STEP_DTYPE: np.dtype
TRACE_DTYPE: np.dtype
GEN_SEG_DTYPE: np.dtype
TRACE_LANES: int
OP_READ: int
OP_WRITE: int
OPF_OPEN: int
OPF_CLOSE: int
OPF_FSYNC: int
# the kinds of a trace event (TRACE_DTYPE's "kind")
TR_READ: int
TR_WRITE: int
TR_SAMPLE: int
TR_FETCH: int
TR_COMPUTE: int

class RunError(OSError):
    path: Optional[str]
    offset: Optional[int]
    what: Optional[str]
    result: Optional[Dict[str, Any]]
    def __init__(
        self,
        err: int,
        message: str,
        path: Optional[str] = ...,
        offset: Optional[int] = ...,
        what: Optional[str] = ...,
        result: Optional[Dict[str, Any]] = ...,
    ) -> None: ...

def now_ns() -> int: ...
def timer_overhead_ns(n: int = ...) -> int: ...
def timer_source() -> str: ...
def compute(ns: int, mode: int = ...) -> int: ...
def fill_random(buf: Any, seed: int) -> None: ...
def write_random(fd: int, offset: int, length: int, seed: int, chunk: int = ...) -> None: ...
def crc32c(data: Any, crc: int = ...) -> int: ...
def copy_timed(dst: Any, src: Any, nbytes: int) -> int: ...  # ns the GIL-free copy took
def crc32(data: Any, crc: int = ...) -> int: ...
def dio_align(path: str) -> Tuple[int, int, bool]: ...
def drop_files_cache(paths: Sequence[str], durable: bool = False) -> None: ...
def drop_all_caches() -> None: ...
def buffers_reused() -> int: ...
def trim_buffers() -> None: ...
def engines() -> List[Tuple[str, int, bool, str]]: ...
def register_engine(capsule: Any) -> None: ...
def hist_bucket_values() -> np.ndarray: ...
def hist_index(ns: int) -> int: ...
def hist_from_values(values: Any) -> Dict[str, Any]: ...
def hist_from_array(ns: Any) -> Dict[str, Any]: ...
def write_trace(
    dest: Any,
    events: np.ndarray,
    paths: Sequence[str],
    pid: int,
    t0_ns: int,
    id_base: int = ...,
    cat: str = ...,
    seen: Any = ...,
) -> Tuple[int, np.ndarray, np.ndarray]: ...  # the next event id, the new file hashes, the lanes per tid
def json_escape(s: str) -> str: ...
def trace_fhash(path: str) -> int: ...
def gen_size(segs: Any) -> int: ...
def gen_render(segs: Any, blob: Any, seed: int) -> bytes: ...
def gen_files(
    tmps: Any,
    finals: Sequence[str],
    seeds: Any,
    first: Any,
    counts: Any,
    segs: Any,
    blob: Any,
    fsync: bool = ...,
    stop: Any = ...,
    counters: Any = ...,
    direct: bool = ...,
) -> bool: ...
def csv_row(values: Any) -> bytes: ...

class Run:
    kind: str
    paths: List[str]
    nthreads_stats: int
    def __init__(
        self,
        kind: str,
        engine: str,
        paths: Sequence[str],
        ops: np.ndarray,
        *,
        threads: int = ...,
        qd: int = ...,
        direct: bool = ...,
        thread_first_op: Any = ...,
        runtime_ns: int = ...,
        ramp_ns: int = ...,
        bytes_limit: int = ...,
        loop: bool = ...,
        steps: Any = ...,
        prefetch: int = ...,
        compute_mode: int = ...,
        preprocess_ns: int = ...,
        eng_flags: int = ...,
        delay_ns: int = ...,
        fail_nth: int = ...,
        fail_errno: int = ...,
        step_hook: Any = ...,
        c_step_hook: Any = ...,
        mpi_comm: int = ...,
        hints: Any = ...,
        trace: Any = ...,
        file_fill: Any = ...,
        file_overlay: Any = ...,
        skip_bad_files: bool = ...,
    ) -> None: ...
    def request_stop(self) -> None: ...
    def progress(self) -> Tuple[int, int, int]: ...
    def started_ns(self) -> int: ...
    def last_end_ns(self) -> int: ...
    def execute(self) -> Dict[str, Any]: ...

class VdbRun:
    index_paths: List[str]
    pq_paths: List[str]
    def __init__(
        self,
        engine: str,
        index_paths: Sequence[str],
        seg_nodes: Any,
        hop_first: Any,
        read_first: Any,
        nodes: Any,
        *,
        beam_width: int,
        read_bytes: int,
        nodes_per_sector: int,
        direct: bool = ...,
        pq_paths: Optional[Sequence[str]] = ...,
        pq_pages: Any = ...,
        pq_reads_per_hop: int = ...,
        cached: Any = ...,
        cached_bits: int = ...,
        first_search: int = ...,
        cpu_per_hop_ns: int = ...,
        compute_mode: int = ...,
        seed: int = ...,
        clients: int = ...,
        batch: int = ...,
        search_threads: int = ...,
        queries: int = ...,
        runtime_ns: int = ...,
        delay_ns: int = ...,
        eng_flags: int = ...,
    ) -> None: ...
    def request_stop(self) -> None: ...
    def progress(self) -> Tuple[int, int, int]: ...  # (reads, bytes, queries)
    def execute(self) -> Dict[str, Any]: ...

# The KV-cache request engine (_core_parts/kvcache.pxi): the plan's dtypes, its enum values, and the names of the
# result's counters and histograms in kvcache.h's order.
KV_REQ_DTYPE: np.dtype
KV_STEP_DTYPE: np.dtype
KV_ENTRY_DTYPE: np.dtype
KV_LOG_DTYPE: np.dtype
KV_SYNTH: int
KV_READ: int
KV_WRITE: int
KV_READ_OR_WRITE: int
KV_DEMOTE: int
KV_TIER_NONE: int
KV_TIER_CPU: int
KV_TIER_STORAGE: int
KV_PROBE: int
KV_PREFILL_ONLY: int
KV_WRITTEN_LATER: int
KV_LOG_READ: int
KV_LOG_WRITE: int
KV_PH_PREFILL: int
KV_PH_DECODE: int
KV_PH_EVICT: int
KV_COUNTS: Tuple[str, ...]
KV_HISTS: Tuple[str, ...]

def kv_store_check(
    store: Any, folder: Union[str, "os.PathLike[str]"], max_obj: int = ..., chunk: int = ..., qd: int = ...
) -> Optional[str]: ...

class KvRun:
    oplog: Optional[np.ndarray]  # KV_LOG_DTYPE records when log_cap was given
    def __init__(
        self,
        reqs: Any,
        steps: Any,
        entries: Any,
        conv_first: Any,
        conv_reqs: Any,
        *,
        store: Any,
        folder: Union[str, "os.PathLike[str]"] = ...,
        workers: int = ...,
        alloc_slots: int = ...,
        duration_s: float = ...,
        drain_s: float = ...,
        bytes_per_token: int = ...,
        decode_batch: int = ...,
        chunk_bytes: int = ...,
        gen_ns_per_token: int = ...,
        cpu_bytes: int = ...,
        storage_bytes: Optional[int] = ...,
        target_ratio: float = ...,
        skip_ratio: float = ...,
        asap: bool = ...,
        drain: bool = ...,
        seed: int = ...,
        stage_bytes: int = ...,
        direct_chunk: int = ...,
        direct_qd: int = ...,
        drop_check: int = ...,
        model: Tuple[int, int, int, int] = ...,
        log_cap: int = ...,
        virtual: bool = ...,
        store_opts: Any = ...,
        relay: Optional[Tuple[str, str, int]] = ...,
        conv_user: Any = ...,
        max_conversations: int = ...,
    ) -> None: ...
    def request_stop(self) -> None: ...
    def progress(self) -> Dict[str, int]: ...
    def execute(self) -> Dict[str, Any]: ...
