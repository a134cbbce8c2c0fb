"""Where the index files live: written in the build phase, made local for the search in the load phase.

This is the seam an object-store backend plugs into. Milvus keeps every index file in its object store
(MinIO/S3); at load the query node downloads a segment's files to a local folder and searches them there with
O_DIRECT. So the search always reads local files, and a store has three jobs:

  present()  is this index (layout, medoid, file sizes: the manifest) complete where the store keeps it?
  write()    the build phase: write every file (large sequential writes at the storage's speed, real bytes),
             then the manifest last; return the phase's record (bytes, seconds, counters).
  fetch()    the load phase: the local paths the search reads (index files, PQ files), and the phase's
             record. LocalStore searches the files where they are: nothing to copy. An S3 store downloads
             each object (ranged GETs in parallel) into a local folder, timed, and returns those paths.

LocalStore searches a local filesystem's files in place; dlio.vdb.object_store.ObjectStore keeps them in an
object store and searches a downloaded copy; dlio.vdb.object_store.store_for() picks one by the backend's
capabilities.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from dlio import _core
from dlio.base import inputs
from dlio.base.errors import DlioError
from dlio.base.units import fmt_bytes
from dlio.report.verdict import classify
from dlio.storage.places import Place, own_files
from dlio.system.counters import Phase, usable_cores
from dlio.vdb.config import VdbSpec

MANIFEST = "vdb-index.json"
NAMES = ("segment_*", MANIFEST)  # what a build makes in its index folder (dlio.storage.places)
FORMAT = "dlio-fast.vdb-index/1"
CHUNK = 1 << 20  # build writes and HNSW load reads: 1 MiB requests (sizes are whole 4 KiB sectors)


def file_sizes(spec: VdbSpec) -> List[Tuple[str, int]]:
    """Every file of the index with its size."""
    lay = spec.layout
    if lay.kind == "hnsw":
        return [(p, lay.hnsw_bytes(s)) for s, p in enumerate(spec.index_paths())]
    out = [(p, lay.index_bytes(s)) for s, p in enumerate(spec.index_paths())]
    out += [(p, lay.pq_file_bytes(s)) for s, p in enumerate(spec.pq_paths())]
    return out


def _plan(files: List[Tuple[str, int]], write: bool, threads: int) -> Tuple[np.ndarray, np.ndarray]:
    """CHUNK requests over the files, file f on thread f % threads; the last write of a file fsyncs it."""
    rows, first = [], [0]
    for t in range(threads):
        n = 0
        for f in range(t, len(files), threads):
            size = files[f][1]
            offs = np.arange(0, size, CHUNK, dtype=np.uint64)
            ops = np.zeros(len(offs), dtype=_core.OP_DTYPE)
            ops["file"], ops["op"], ops["offset"] = f, _core.OP_WRITE if write else _core.OP_READ, offs
            ops["length"] = np.minimum(CHUNK, size - offs)
            if write and len(ops):
                ops["flags"][-1] = _core.OPF_FSYNC
            rows.append(ops)
            n += len(ops)
        first.append(first[-1] + n)
    return np.concatenate(rows) if rows else np.zeros(0, _core.OP_DTYPE), np.array(first, dtype=np.uint64)


def io_pass(
    spec: VdbSpec, files: List[Tuple[str, int]], write: bool, on_tick: Optional[Callable[[Any], None]] = None
) -> Dict[str, Any]:
    """Write (or read) the files whole through the C core, timed, with the phase's counters and verdict."""
    from dlio.system.execute import execute

    paths = [p for p, _ in files]
    threads = max(1, min(len(files), usable_cores(), 8))
    ops, first = _plan(files, write, threads)
    qd = 4 if spec.engine == "io_uring" else 1
    phase = Phase(paths, spec.engine, residency=not write and spec.engine != "null")
    run = _core.Run(
        "io",
        spec.engine,
        paths,
        ops,
        threads=threads,
        qd=qd,
        direct=spec.direct,
        thread_first_op=first,
        delay_ns=spec.null_delay_ns,
    )
    res = execute(run, on_tick)
    wall = max(1e-9, (res["t_end"] - res["t_start"]) / 1e9)
    cpu = sum(t["cpu_ns"] for t in res["threads"]) / 1e9
    counters = phase.end(res["bytes"], res["ops"], cpu, threads, write=write)
    return {
        "phase": "build" if write else "load",
        "files": len(files),
        "bytes": int(res["bytes"]),
        "seconds": wall,
        "mb_per_s": res["bytes"] / wall / 1e6,
        "request_bytes": CHUNK,
        "engine": spec.engine,
        "direct": spec.direct,
        "counters": counters,
        "verdict": classify(counters),
    }


class LocalStore:
    """The index in a local folder (vdb.index_folder), searched in place."""

    remote = False

    def __init__(self, spec: VdbSpec, medoid: int) -> None:
        self.spec = spec
        self.medoid = medoid
        self.folder = spec.folder
        self.manifest = os.path.join(self.folder, MANIFEST)

    def describe(self) -> str:
        return self.folder

    def check(self) -> None:
        """Nothing to reach before the work: the folder is made when the index is built."""

    def places(self, key: str = "vdb.index_folder", what: str = "vector index folder") -> List[Place]:
        return [Place(self.folder, key, what, NAMES, made=True, on_host=True)]

    def want(self) -> Dict[str, Any]:
        return {
            "format": FORMAT,
            "layout": asdict(self.spec.layout),
            "medoid": self.medoid,
            "files": [[os.path.relpath(p, self.folder), n] for p, n in file_sizes(self.spec)],
        }

    def present(self) -> bool:
        text = inputs.read_if_there(
            self.manifest, inputs.MANIFEST_CAP, "vector index manifest", "remove it, or give another vdb.index_folder"
        )
        try:
            have = None if text is None else inputs.loads_json(text, self.manifest, "manifest")
        except DlioError:
            return False  # damaged: the build writes it again
        if have != self.want():
            return False
        return all(os.path.isfile(p) and os.path.getsize(p) == n for p, n in file_sizes(self.spec))

    def write(self, on_tick: Optional[Callable[[Any], None]] = None) -> Dict[str, Any]:
        """The build phase: every file written whole (O_DIRECT, 1 MiB, fsync), DiskANN's metadata in each
        _disk.index's sector 0, the manifest last (a partial index is never taken for a complete one)."""
        from dlio.system.output import write_json

        if os.path.lexists(self.manifest):
            os.unlink(self.manifest)
        files = file_sizes(self.spec)
        self._check_space(files)
        own_files(self.folder, [p for p, _ in files] + [self.manifest])  # no write through a planted link
        for p, _ in files:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
        rec = io_pass(self.spec, files, True, on_tick)
        if self.spec.engine != "null":
            self._write_metadata()
        write_json(self.manifest, self.want())
        return rec

    def _check_space(self, files: List[Tuple[str, int]]) -> None:
        """Refuse an index the filesystem cannot hold, before writing any of it (one line, the amounts)."""
        os.makedirs(self.folder, exist_ok=True)
        have = sum(os.lstat(p).st_size for p, _ in files if os.path.isfile(p) and not os.path.islink(p))
        need = sum(n for _, n in files) - have
        free = shutil.disk_usage(self.folder).free
        if need > free:
            raise DlioError(
                f"{self.folder}: the index needs {fmt_bytes(need)} more but {fmt_bytes(free)} is free; "
                "choose another vdb.index_folder, or fewer vdb.vectors"
            )

    def _write_metadata(self) -> None:
        lay = self.spec.layout
        if lay.kind == "hnsw":
            return
        for s, p in enumerate(self.spec.index_paths()):
            fd = os.open(p, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.pwrite(fd, lay.metadata(s, self.medoid % lay.nodes_in(s)), 0)
                os.fsync(fd)
            finally:
                os.close(fd)

    fetch_bytes = 0  # the load phase copies nothing

    def fetch(self, on_bytes: Optional[Callable[[int], None]] = None) -> Tuple[List[str], List[str], Dict[str, Any]]:
        """The local files the search reads: here, where they are (Milvus on local storage does the same)."""
        rec = {"phase": "load", "where": self.folder, "bytes": 0, "seconds": 0.0, "note": "searched in place"}
        return self.spec.index_paths(), self.spec.pq_paths(), rec | {"in_place": True}

    def search_note(self) -> Optional[str]:
        return None
