"""`dlio-fast io --engine mpiio` under mpiexec: IOR-style points on the MPI-IO engine.

Every rank moves `per_rank` bytes in transfers of `bs` (IOR's -t), in one of three layouts:

  fpp        file per process (IOR -F): rank r uses its own file, offsets 0, bs, 2 bs ...
  segmented  one shared file, rank r owns the contiguous segment [r * per_rank, (r + 1) * per_rank)
             (IOR -b per_rank -t bs -s 1)
  strided    one shared file, transfer k of rank r at (k * ranks + r) * bs: the ranks' transfers
             interleave (IOR -b bs -t bs -s per_rank/bs)

The data is written first, each part by the rank that owns it. --reorder (IOR's -C) makes rank r read
the part of rank (r + shift) % ranks, shift = ranks per node on several nodes (so the data comes
from another node and its client cache cannot serve it), 1 on one node. Reads at random (randread)
visit the same offsets in a per-rank random order.

Independent I/O opens each file on MPI_COMM_SELF and calls MPI_File_read_at / write_at; collective
I/O opens the shared file on COMM_WORLD and every rank calls MPI_File_read_at_all / write_at_all the
same number of times, which is why a collective point is a fixed amount of work (--size, or one
pass), never time based.

Results are reduced as IOR does: bandwidth = all ranks' bytes / (last end - first start) on
MPI_Wtime, with each rank's own window, bytes and latency next to it and the latency histograms
merged by addition.

The plan functions (layout_offsets, rank_plan, reorder_shift) need no MPI and are unit-tested.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import signal
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.base import tmpclaim
from dlio.base.errors import DlioError, Interrupted
from dlio.fsbench.grid import Sinks, combinations, run_grid
from dlio.fsbench.ior_ranks import LeftAlone, VotedStop, agreed_stop, every_rank, outcome
from dlio.fsbench.request import Console, IoRequest
from dlio.fsbench.testfiles import check_ours, create_exclusive, writing_test_data
from dlio.report.io_table import POINT_HEADER, point_line
from dlio.report.result import IO_SCHEMA, MpiIoPoint, MpiIoRank, new_io_doc
from dlio.system import stats
from dlio.system.execute import execute_partial
from dlio.system.host import drop_cache
from dlio.system.mpi import Comm

LAYOUTS = ("fpp", "segmented", "strided")
PREFIX = "dlio-fast-ior"


def reorder_shift(hosts: Sequence[str], rank_count: Optional[int] = None) -> int:
    """IOR -C: the shift of the read-back task order. hosts: hostname of every rank, in rank order.
    On several nodes a node's worth of ranks (so each rank reads data written on another node), on
    one node 1 (another rank's data at least). 0 with one rank."""
    size = len(hosts) if rank_count is None else rank_count
    if size <= 1:
        return 0
    nodes = len(set(hosts))
    if nodes <= 1:
        return 1
    per_node = max(1, size // nodes)
    return per_node % size or 1


def layout_offsets(layout: str, part: int, size: int, bs: int, per_rank: int) -> np.ndarray:
    """Offsets (uint64) of the transfers of `part` (the rank whose data it is), in order."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r} (choose from {', '.join(LAYOUTS)})")
    n = per_rank // bs
    k = np.arange(n, dtype=np.uint64)
    if layout == "fpp":
        return k * np.uint64(bs)
    if layout == "segmented":
        return np.uint64(part) * np.uint64(per_rank) + k * np.uint64(bs)
    return (k * np.uint64(size) + np.uint64(part)) * np.uint64(bs)


@dataclasses.dataclass
class RankPlan:
    part: int  # whose data this rank touches (== rank unless reordered)
    file_index: int  # which file of the set (fpp: part; shared: 0)
    ops: np.ndarray  # _core.OP_DTYPE, file field 0 (the rank's path table has one file)


def rank_plan(
    layout: str, rank: int, size: int, bs: int, per_rank: int, rw: str = "read", shift: int = 0, seed: int = 42
) -> RankPlan:
    """The ops of one rank. Writes always go to the rank's own part; reads to part
    (rank + shift) % size (shift from reorder_shift when --reorder, else 0)."""
    if bs <= 0 or per_rank < bs:
        raise DlioError(f"per-rank size {per_rank} is smaller than the transfer size {bs}")
    write = rw in ("write", "randwrite")
    part = rank if write else (rank + shift) % size
    off = layout_offsets(layout, part, size, bs, per_rank)
    if rw.startswith("rand"):
        off = np.random.default_rng((seed, rank)).permutation(off)
    ops = np.zeros(len(off), dtype=_core.OP_DTYPE)
    ops["file"] = 0
    ops["op"] = _core.OP_WRITE if write else _core.OP_READ
    ops["offset"] = off
    ops["length"] = bs
    return RankPlan(part=part, file_index=part if layout == "fpp" else 0, ops=ops)


def file_names(folder: str, layout: str, size: int) -> List[str]:
    if layout == "fpp":
        return [os.path.join(folder, f"{PREFIX}.{r}.dat") for r in range(size)]
    return [os.path.join(folder, f"{PREFIX}.shared.dat")]


# ---- under MPI -------------------------------------------------------------------------------


class Files:
    """The files of one run: created in a folder (each part written by its owner) or given.

    A file this run creates is written under a temporary name claimed by its writer (dlio.base.tmpclaim:
    the rank that holds the claim's flock), so that when a run dies, killed ranks and all, the next run
    in the folder removes it (tmpclaim.sweep), and a half-written file never passes for a kept one.
    With --keep each is renamed to its own name once written."""

    def __init__(
        self, paths: List[str], per_rank: int, created: List[Tuple[str, int]], folder: Optional[str] = None
    ) -> None:
        self.paths = paths
        self.per_rank = per_rank
        self.created = created  # [(path, rank that owns and removes it)]
        self.folder = folder  # claimed by this rank while created files are under temporary names

    def cleanup(self, comm: Comm, together: bool = True) -> None:
        """Remove the files this run created. together: every rank is here (barriers around, each file
        removed by its owner); else this rank is alone (the others hang or are gone) and removes every
        file it can, without a collective call."""
        if together:
            comm.barrier()
        for p, owner in self.created:
            if owner == comm.rank or not together:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)
        self.created = []
        if self.folder is not None:
            tmpclaim.release(self.folder)
            self.folder = None
        if together:
            comm.barrier()


def _claimed_name(folder: str, final: str) -> str:
    """A temporary name for `final` in this rank's claim on folder (tmpclaim's pattern)."""
    return os.path.join(folder, f".{os.path.basename(final)}{tmpclaim.claim(folder)}-0")


def prepare(
    comm: Comm, targets: List[str], layout: str, per_rank: int, bs: int, seed: int = 1, keep: bool = False
) -> Files:
    """Create (fully written, each part by its owner rank) or check the files. Collective."""
    size, rank = comm.size, comm.rank
    if len(targets) == 1 and os.path.isdir(targets[0]):
        from dlio.fsbench.testfiles import check_writable_dir

        folder = targets[0]

        # the test files of an earlier run that died are removed first (proven ours by their claims)
        def usable() -> None:
            check_writable_dir(folder)
            tmpclaim.sweep(folder)

        comm.agree(usable)
        finals = file_names(folder, layout, size)
        total = per_rank * size
        mine = finals[rank] if layout == "fpp" else (finals[0] if rank == 0 else None)
        _check_ours_all(comm, mine)
        want = per_rank if layout == "fpp" else total
        reuse = mine is None or (os.path.exists(mine) and os.path.getsize(mine) == want)
        if layout != "fpp":
            reuse = comm.bcast(reuse)
        tmp = _claimed_name(folder, mine) if not reuse and mine else None
        claimed = folder if tmp else None
        try:
            if tmp and layout != "fpp":  # rank 0 makes the shared file; every rank writes its part
                fd = create_exclusive(tmp)
                try:
                    os.ftruncate(fd, total)
                finally:
                    os.close(fd)
            if layout == "fpp":
                names = comm.allgather(tmp or finals[rank])  # fpp: mine is finals[rank]
                made = [(n, r) for r, n in enumerate(names) if n != finals[r]]
            else:
                names = [comm.bcast(tmp or finals[0])] if not reuse else finals  # rank 0's tmp
                made = [(names[0], 0)] if not reuse else []
            comm.barrier()

            def write() -> None:
                if layout == "fpp" and tmp:
                    _write_part(tmp, layout, rank, size, bs, per_rank, seed, create=True)
                elif layout != "fpp" and not reuse:
                    _write_part(names[0], layout, rank, size, bs, per_rank, seed, create=False)

            comm.agree_all(write)  # a rank's full disk stops every rank here, not in the next collective
        except BaseException:
            if tmp:
                _unlink_ours(tmp)
                tmpclaim.release(folder)
            raise
        files = Files(names, per_rank, made, claimed)
        if keep and made:  # written: each owner gives its file its own name
            for (p, owner), final in zip(made, [finals[o] if layout == "fpp" else finals[0] for _, o in made]):
                if owner == rank:
                    os.replace(p, final)
            files.cleanup(comm)  # releases the claims (the renamed files are gone from their old names)
            files = Files(finals, per_rank, [])
        return files
    for p in targets:
        if not os.path.isfile(p):
            raise DlioError(f"{p}: no such file (give one folder, or existing files)")
    if layout == "fpp":
        if len(targets) != size:
            raise DlioError(
                f"--layout fpp on existing files needs one file per rank: {size} files, {len(targets)} given"
            )
        per = min(os.path.getsize(p) for p in targets)
    else:
        if len(targets) != 1:
            raise DlioError(f"--layout {layout} uses one shared file: give one file, not {len(targets)}")
        per = os.path.getsize(targets[0]) // size
    per -= per % bs
    if per < bs:
        raise DlioError(f"the file(s) are too small for --bs {bs} on {size} ranks")
    return Files(list(targets), per, [])


def _check_ours_all(comm: Comm, path: Optional[str]) -> None:
    """check_ours on every rank's file, collectively: every rank stops with the first problem."""
    comm.agree_all(lambda: check_ours(path) if path else None)


def _unlink_ours(path: str) -> None:
    """Remove a stale test file of ours (checked by check_ours) so the new one is created O_EXCL."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _write_part(path: str, layout: str, part: int, size: int, bs: int, per_rank: int, seed: int, create: bool) -> None:
    """Write the bytes of `part` (the rank's own data) with the C core's fill (GIL released)."""
    if create:
        _unlink_ours(path)
        fd = create_exclusive(path)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with writing_test_data(path):
            if layout == "strided":
                for off in layout_offsets(layout, part, size, bs, per_rank):
                    _core.write_random(fd, int(off), bs, seed + part, 4 << 20)
            else:
                start = 0 if layout == "fpp" else part * per_rank
                _core.write_random(fd, start, per_rank, seed + part, 4 << 20)
            os.fsync(fd)
    finally:
        os.close(fd)


@dataclasses.dataclass(frozen=True)
class Point:
    rw: str
    bs: int
    layout: str
    collective: bool
    reorder: bool


def run_point(
    comm: Comm,
    point: Point,
    files: Files,
    runtime_ns: int = 0,
    ramp_ns: int = 0,
    size: int = 0,
    hints: Sequence[Tuple[str, str]] = (),
    cache: str = "keep",
) -> Optional[MpiIoPoint]:
    """One point on every rank; returns rank 0's reduced record (other ranks: None).

    Every rank makes the same collective calls whatever happens on one of them: a step that may fail
    on one rank (dropping the cache, the run) is followed by a vote, and every rank goes on or stops
    with the same error; a signal stops a collective run after the same request on every rank (the
    engine's vote, dlio/_mpiio.pyx)."""
    from mpi4py import MPI

    from dlio.system import mpi

    hosts = comm.allgather(MPI.Get_processor_name())
    shift = reorder_shift(hosts) if point.reorder else 0
    plan = rank_plan(point.layout, comm.rank, comm.size, point.bs, files.per_rank, point.rw, shift)
    path = files.paths[plan.file_index]
    if point.collective and (runtime_ns or ramp_ns):
        raise DlioError(
            "collective MPI-IO needs the same number of calls on every rank: give "
            "--size (or nothing: one pass), not --runtime / --ramp"
        )
    per_rank_budget = 0
    if size:
        per_rank_budget = max(point.bs, size // comm.size)
    comm_addr = 0
    if point.collective:
        # Shared layouts: every rank opens the one file on COMM_WORLD. File per process: each
        # rank its own file, collective calls on COMM_SELF (as IOR does with -F -c).
        use = comm.comm if point.layout != "fpp" else MPI.COMM_SELF
        comm_addr = MPI._addressof(use)

    def setup() -> Tuple[str, Any]:
        # A shared file's pages are dropped once per host: two ranks dropping them at once leave some behind.
        first_on_host = hosts.index(hosts[comm.rank]) == comm.rank
        note = "kept (the page cache is measured)"
        if cache == "drop" and (point.layout == "fpp" or first_on_host):
            note = drop_cache([path])
        run = _core.Run(
            "io",
            "mpiio",
            [path],
            plan.ops,
            threads=1,
            qd=1,
            thread_first_op=np.array([0, len(plan.ops)], dtype=np.uint64),
            runtime_ns=runtime_ns,
            ramp_ns=ramp_ns,
            bytes_limit=per_rank_budget,
            loop=bool(runtime_ns or per_rank_budget),
            mpi_comm=comm_addr,
            hints=list(hints),
        )
        return note, run

    cache_note, run = every_rank(comm, setup)
    cache_note = comm.bcast(cache_note)
    shared_collective = point.collective and point.layout != "fpp" and comm.size > 1
    engine = mpi.mpiio_module()
    engine.request_stop(False)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    comm.barrier()
    t0 = MPI.Wtime()
    w0 = time.monotonic_ns()
    voted = VotedStop(run, engine) if shared_collective else None
    try:
        res, failure = execute_partial(voted or run, on_tick=voted.tick if voted else None)
    except LeftAlone as e:  # stuck in a collective call whose peer froze
        res, failure = None, e
    t1 = MPI.Wtime()
    wall = max(1, time.monotonic_ns() - w0)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if engine.gave_up() or isinstance(failure, LeftAlone):
        # Another rank hangs or is gone: no collective call may follow (it would wait forever).
        raise failure if isinstance(failure, LeftAlone) else LeftAlone(getattr(failure, "signum", signal.SIGTERM))
    if res is None and failure is not None:
        res = getattr(failure, "result", None)
    mine: Optional[MpiIoRank] = None
    if res is not None:
        window = max(1, res["t_end"] - res["t_start"])
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        mine = {
            "rank": comm.rank,
            "host": hosts[comm.rank],
            "path": path,
            "part": plan.part,
            "ops": int(res["ops"]),
            "bytes": int(res["bytes"]),
            "errors": int(res["errors"]),
            "runtime_s": window / 1e9,
            "bw_MiB_s": res["bytes"] / 2**20 / (window / 1e9),
            "t_open": t0,
            "t_close": t1,
            "cpu_s": cpu * min(1.0, window / wall),
            "lat_ns": stats.summary(res["lat"]),
            "lat_hist": stats.to_json(res["lat"]),
        }
    outcomes = comm.allgather((mine, outcome(failure)))
    ranks = [m for m, _ in outcomes if m is not None]
    stop = agreed_stop(comm.rank, [o for _, o in outcomes])
    if stop is not None:
        if comm.rank == 0 and isinstance(stop, Interrupted) and sum(r["ops"] for r in ranks):
            stop.record = dict(
                reduce_ranks(point, ranks, shift, hints),
                cache=cache_note,
                interrupted=signal.Signals(stop.signum).name,
                stopped=True,
            )
        raise stop
    if comm.rank != 0:
        return None
    rec = reduce_ranks(point, ranks, shift, hints)
    rec["cache"] = cache_note
    return rec


def reduce_ranks(
    point: Point, ranks: Sequence[MpiIoRank], shift: int = 0, hints: Sequence[Tuple[str, str]] = ()
) -> MpiIoPoint:
    """IOR's reduction: bandwidth over the union of the ranks' windows; exact per-rank figures."""
    nbytes = sum(r["bytes"] for r in ranks)
    ops = sum(r["ops"] for r in ranks)
    span = max(r["t_close"] for r in ranks) - min(r["t_open"] for r in ranks)
    span = span if span > 0 else max(r["runtime_s"] for r in ranks)
    lat = stats.merge([stats.from_json(r["lat_hist"]) for r in ranks])
    cpu = sum(r["cpu_s"] for r in ranks)
    return {
        "rw": point.rw,
        "bs": point.bs,
        "engine": "mpiio",
        "qd": 1,
        "qd_used": 1,
        "threads": len(ranks),
        "direct": False,
        "cache": "kept",
        "ranks": len(ranks),
        "layout": point.layout,
        "mode": "collective" if point.collective else "independent",
        "reorder": point.reorder,
        "reorder_shift": shift,
        "hints": dict(hints),
        "runtime_s": span,
        "ops": ops,
        "bytes": nbytes,
        "errors": sum(r["errors"] for r in ranks),
        "bw_bytes_s": nbytes / span,
        "bw_MiB_s": nbytes / 2**20 / span,
        "iops": ops / span,
        "bw_sum_of_ranks_MiB_s": sum(r["bw_MiB_s"] for r in ranks),
        "slowest_rank_s": max(r["runtime_s"] for r in ranks),
        "lat_ns": stats.summary(lat),
        "lat_hist": stats.to_json(lat),
        "cpu_s": cpu,
        "cpu_us_per_io": cpu / ops * 1e6 if ops else None,
        "engine_flags_used": 0,
        "stopped": False,
        "per_rank": [_without_hist(r) for r in ranks],
    }


def _without_hist(r: MpiIoRank) -> MpiIoRank:
    """A rank's figures for the point's per_rank list: its histogram is in the point's merged one."""
    out = r.copy()
    out.pop("lat_hist", None)
    return out


def parse_hints(items: Sequence[str]) -> List[Tuple[str, str]]:
    """['key=value', ...] -> [(key, value)]."""
    out = []
    for it in items:
        if "=" not in it or not it.split("=", 1)[0].strip():
            raise DlioError(f"--mpiio-hint {it!r}: expected KEY=VALUE (e.g. romio_cb_read=enable)")
        k, v = it.split("=", 1)
        out.append((k.strip(), v.strip()))
    return out


def check_ready(comm: Comm, threads: Sequence[int], collective: bool) -> bool:
    """Raise DlioError unless the MPI-IO engine can run here with these settings."""
    from dlio.system import mpi

    why = mpi.register_mpiio()
    if why:
        raise DlioError(f"engine mpiio is not available: {why}")
    ok, why = mpi.mpiio_module().available()
    if not ok:
        raise DlioError(f"engine mpiio is not available: {why}")
    if list(threads) != [1]:
        raise DlioError(
            "--engine mpiio runs one I/O thread per rank (IOR's model): use mpiexec -n N "
            "for more streams, not --threads"
        )
    return True


def main(req: IoRequest, console: Console) -> Dict[str, Any]:
    """The `io --engine mpiio` grid on every rank (rank 0 prints and writes the sinks)."""
    from dlio.system import mpi

    comm = mpi.world(force=True)
    if comm.comm is None:
        raise DlioError(
            "engine mpiio needs mpi4py (pip install mpi4py mpich) and is run under "
            "mpiexec: mpiexec -n N dlio-fast io --engine mpiio ..."
        )
    paths, rws, bss, threads = req.paths, req.rws, req.bss, req.threads
    collective, reorder = req.collective, req.reorder
    runtime_ns, ramp_ns, size, cache = req.runtime_ns or 0, req.ramp_ns, req.size or 0, req.cache or "drop"
    check_ready(comm, threads, collective)
    hint_pairs = parse_hints(req.mpiio_hints)
    for r in rws:
        if r in ("write", "randwrite") and not (len(paths) == 1 and os.path.isdir(paths[0])):
            raise DlioError("write tests run only on files dlio-fast creates: give a folder, not files")

    def records() -> Iterator[Optional[MpiIoPoint]]:
        for layout in req.layouts:
            files = prepare(comm, list(paths), layout, req.file_size, max(bss), keep=req.keep)
            together = True
            try:
                for r, b in combinations(rws, bss):
                    if files.per_rank < b:
                        raise DlioError(f"--file-size {files.per_rank} is smaller than --bs {b}")
                    yield run_point(
                        comm,
                        Point(r, b, layout, collective, reorder),
                        files,
                        runtime_ns,
                        ramp_ns,
                        size,
                        hint_pairs,
                        cache,
                    )
            except BaseException as e:
                together = not getattr(e, "alone", False)  # alone: the other ranks are gone
                raise
            finally:
                files.cleanup(comm, together)

    def line(rec: MpiIoPoint) -> str:
        return (
            point_line(rec) + f" {rec['ranks']:>5} {rec['layout']:<10} {rec['mode']:<12} "
            f"{'shift ' + str(rec['reorder_shift']) if reorder else 'no'}"
        )

    say = console.table if comm.rank == 0 else (lambda *a, **k: None)
    doc = new_io_doc(IO_SCHEMA, paths=list(paths), ranks=comm.size)
    out = Sinks(req.json_path, req.csv_path, csv_extra=("ranks", "layout", "mode"), csv_drop=("per_rank", "hints"))
    out.check()  # on every rank, as before any point: a rank alone refusing would leave the others waiting
    run_grid(
        records(),
        doc,
        POINT_HEADER + f" {'ranks':>5} layout     mode         reorder",
        line,
        out,
        say,
        write=comm.rank == 0,
    )
    return doc
