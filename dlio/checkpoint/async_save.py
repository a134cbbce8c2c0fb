"""Asynchronous checkpoints during training (``checkpoint.async_save: true``, PyTorch DCP's ``async_save``).

At each checkpoint the training loop blocks only while the rank's state is copied into a host buffer
(a memcpy in C with the GIL released, ``_core.copy_timed``: the snapshot), then a writer thread saves it
(dlio.checkpoint.save, through the storage backend: its C run or S3 worker releases the GIL) while the
next block of training steps reads on. At most one save is in flight, as in DCP: the next checkpoint
first waits for the previous save (``wait_s``). The run's end waits for the last one.

The host buffer holds the rank's whole state (the checkpoint plan's bytes), up to a bound: half the
available memory for the two buffers of all the host's ranks (the state's stand-in, the source, and
the host buffer), or ``checkpoint.async_host_buffer_bytes``. A state larger than the buffer is copied
through it in chunks (``staged: true``, ``copy_chunks``): the copy moves every byte, but the buffer
does not hold them all at once. There is no accelerator here: the copy is host memory to host
memory, where DCP's is the device's to host memory (its time is the PCIe link's).

A save's record is the synchronous save's (dlio.checkpoint.record: ``duration_s`` the write's window,
``GiB_per_second`` its rate) plus ``async: true`` and::

    wait_s          waiting for the previous save before the snapshot (training blocked)
    copy_s          the memcpy of the state into the host buffer (training blocked)
    blocked_s       what the step lost: wait + copy + starting the writer (from blocked_start_ns)
    write_s, write_GiB_per_second    the write's window and rate, under the training's reads
    write_start_ns, write_end_ns     the write on the training's clock (monotonic ns), around the save
    snapshot_start_ns, snapshot_end_ns
    snapshot_to_durable_s            the snapshot's start to the last fsync (files with
                                     checkpoint.fsync) or the last PUT's completion (S3): the window
                                     in which a crash loses this checkpoint; None when not fsynced
    interference    training's AU and read MiB/s in the steps during the write and outside every write
                    (dlio.report.interference, from the per-step timestamps the epoch records keep)
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from dlio import _core
from dlio.base.errors import DlioRunError, Interrupted, os_error_message
from dlio.base.units import GiB
from dlio.checkpoint import save as ckpt_save
from dlio.checkpoint.layout import plan_checkpoint
from dlio.checkpoint.transfers import TransferOptions
from dlio.config import Config
from dlio.report import interference
from dlio.report.result import RankRecord
from dlio.storage.base import FSYNC, Backend
from dlio.system import memcheck

PAGE = 4096


def buffer_bytes(state: int, asked: int, available: Optional[int], ranks_here: int) -> int:
    """The host buffer's size: ``asked`` when set, else the state, at most a quarter of the available
    memory per rank of the host (the source and the buffer: half of it); never above the state."""
    if asked:
        return max(1, min(state, asked))
    cap = available // (4 * max(1, ranks_here)) if available else state
    return max(1, min(state, max(PAGE, cap)))


class HostBuffer:
    """The state's stand-in (random bytes) and the host buffer, both faulted in before training."""

    def __init__(self, state: int, size: int) -> None:
        self.state = state
        self.size = size
        self.src = np.empty(size, dtype=np.uint8)
        self.dst = np.empty(size, dtype=np.uint8)
        _core.fill_random(self.src, 1)  # every page in memory before the first snapshot
        _core.fill_random(self.dst, 2)

    @property
    def staged(self) -> bool:
        return self.size < self.state

    @property
    def chunks(self) -> int:
        return -(-self.state // self.size)

    def snapshot(self) -> int:
        """Copy the state into the buffer; the memcpy's ns."""
        return _core.copy_timed(self.dst, self.src, self.state)


class AsyncSaver:
    """The asynchronous saves of one rank's training: ``start`` at a checkpoint, ``finish`` at the end."""

    def __init__(self, cfg: Config, comm: Any, backend: Backend, echo: Callable[[str], None], tracer: Any = None):
        self.cfg, self.comm, self.backend, self.echo, self.tracer = cfg, comm, backend, echo, tracer
        self.plan = plan_checkpoint(cfg, comm.rank, comm.size)
        state = max(1, sum(f.nbytes for f in self.plan.files))
        hosts = comm.allgather(socket.gethostname())
        size = buffer_bytes(
            state, cfg.checkpoint.async_host_buffer_bytes, memcheck.available_bytes(), hosts.count(hosts[comm.rank])
        )
        self.buffer = HostBuffer(state, size)
        self.thread: Optional[threading.Thread] = None
        self.inflight: Optional[Dict[str, Any]] = None
        self.error: Optional[BaseException] = None
        self.records: List[Dict[str, Any]] = []
        self.snapshot_cpu_s = 0.0  # this thread's CPU in the snapshots: the checkpoint's, not the benchmark's

    def start(self, point: Any) -> Dict[str, Any]:
        """The snapshot of checkpoint ``point`` (training blocks for it), then its write in the
        background; the record, completed when the write ends. A previous save's failure is raised."""
        t0 = time.monotonic_ns()
        busy = self.thread is not None and self.thread.is_alive()
        wait_s = self.wait()
        s0, c0 = time.monotonic_ns(), time.thread_time()
        copy_ns = self.buffer.snapshot()
        s1 = time.monotonic_ns()
        self.snapshot_cpu_s += time.thread_time() - c0
        b = self.buffer
        rec: Dict[str, Any] = {
            "kind": "save",
            "async": True,
            "rank": self.comm.rank,
            "epoch": point.epoch,
            "step": point.step,
            "block": point.block,
            "state_bytes": b.state,
            "host_buffer_bytes": b.size,
            "staged": b.staged,
            "copy_chunks": b.chunks,
            "wait_s": wait_s,
            "copy_s": copy_ns / 1e9,
            "copy_GiB_per_second": b.state / GiB / (copy_ns / 1e9) if copy_ns else 0.0,
            "blocked_start_ns": t0,
            "snapshot_start_ns": s0,
            "snapshot_end_ns": s1,
        }
        if b.staged:
            rec["note"] = (
                f"the state ({b.state} bytes) is larger than the host buffer ({b.size} bytes): copied through it "
                f"in {b.chunks} chunks"
            )
        self.inflight = rec
        self.thread = threading.Thread(target=self._write, args=(point, rec), name="dlio-fast-ckpt-writer")
        self.thread.start()
        rec["blocked_s"] = (time.monotonic_ns() - t0) / 1e9
        self.records.append(rec)
        if self.tracer is not None:
            self.tracer.span("checkpoint.snapshot", s0, s1 - s0, epoch=point.epoch, step=point.step)
        self.echo(
            f"Checkpoint {point.block} of epoch {point.epoch} after step {point.after_step}: training blocked "
            f"{rec['blocked_s']:.4f} s (copy {rec['copy_s']:.4f} s of {b.state / GiB:.3f} GiB"
            f"{f', waited {wait_s:.4f} s for the previous save' if busy else ''}); writing in the background"
        )
        return rec

    def _write(self, point: Any, rec: Dict[str, Any]) -> None:
        w0 = time.monotonic_ns()
        try:
            r = ckpt_save.save(
                self.cfg,
                self.comm,
                point.epoch,
                point.step,
                TransferOptions(delay_ns=self.cfg.dlio_fast.null_delay_ns, temp_names=True),
                plan=self.plan,
                backend=self.backend,
            )
        except BaseException as e:  # handed to the training loop at the next checkpoint or the end
            self.error = e
            rec["failed"] = str(e)
            return
        w1 = time.monotonic_ns()
        for k, v in r.items():
            rec.setdefault(k, v)
        durable = r["fsync"] or not self.backend.has(FSYNC)  # a completed PUT is durable
        rec.update(
            write_start_ns=w0,
            write_end_ns=w1,
            write_s=r["duration_s"],
            write_GiB_per_second=r["GiB_per_second"],
            snapshot_to_durable_s=(w1 - rec["snapshot_start_ns"]) / 1e9 if durable else None,
        )
        if not durable:
            rec["durable_note"] = "checkpoint.fsync is false: the write ends in the page cache, not on storage"

    def wait(self) -> float:
        """Wait for the save in flight (if any); seconds waited. Its failure is raised here."""
        if self.thread is None:
            return 0.0
        t0 = time.monotonic_ns()
        self.thread.join()
        waited = (time.monotonic_ns() - t0) / 1e9
        self.thread, rec = None, self.inflight
        if self.error is not None:
            e, self.error = self.error, None
            if isinstance(e, (DlioRunError, Interrupted)):
                raise e
            raise DlioRunError(
                "checkpoint write failed: "
                + (
                    os_error_message(e, hint="choose another checkpoint.checkpoint_folder")
                    if isinstance(e, OSError)
                    else str(e)
                )
            )
        if rec is not None:
            if self.tracer is not None:
                self.tracer.span("checkpoint.save", rec["write_start_ns"], rec["write_end_ns"] - rec["write_start_ns"])
            self.echo(
                f"Finished saving checkpoint {rec['block']} for epoch {rec['epoch']} in {rec['duration_s']:.4f} s; "
                f"Throughput: {rec['dlio_throughput_GB_per_second']:.4f} GB/s (in the background"
                + (
                    f"; durable {rec['snapshot_to_durable_s']:.4f} s after the snapshot)"
                    if rec["snapshot_to_durable_s"] is not None
                    else "; not fsynced)"
                )
            )
        return waited

    def finish(self, rank_rec: RankRecord, failure: Optional[BaseException]) -> Optional[BaseException]:
        """At the end of training: wait for the last save, add each save's interference figures; the
        run's failure (the save's own when training ended well)."""
        try:
            self.wait()
        except (DlioRunError, Interrupted) as e:
            failure = failure or e
        interference.annotate(rank_rec)
        return failure


def step_arrays(res: Dict[str, Any]) -> Dict[str, List[int]]:
    """The per-step timestamps an epoch record keeps when saves are asynchronous (monotonic ns)."""
    st = res["step_times"]
    n = int(res["steps_done"])
    keys = {"t_fetch_ns": "t_fetch", "t_end_ns": "t_end", "bytes": "bytes", "compute_ns": "compute_ns"}
    out = {k: np.asarray(st[v][:n], dtype=np.int64).tolist() for k, v in keys.items()}
    out["set_compute_ns"] = np.asarray(st.get("set_compute_ns", st["compute_ns"])[:n], dtype=np.int64).tolist()
    return out
