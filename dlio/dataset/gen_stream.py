"""Generation to a backend without in-place writes (an object store), spread over the ranks and
streamed: each rank generates its own files (the file generator's byte-balanced split,
dlio.dataset.gen_plan.rank_files) into a local staging folder a batch at a time (about
DLIO_FAST_S3_STAGE_BYTES of files, 512 MiB by default) and hands each batch to the backend's uploader
(for S3 one worker process: dlio.storage.s3.upload, parallel PUTs, multipart for large objects). The
next batch is generated while the worker uploads the last one, and a batch's files are removed once they
are up, so a rank's staging folder never holds more than two batches whatever the dataset's size. The
manifests go up last (rank 0 merges the ranks' parts), so that a dataset whose upload was cut short has
no manifest and counts as missing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Callable, Dict, List, Optional, Protocol, Tuple

import numpy as np
from numpy.typing import NDArray

from dlio.base.errors import DlioError
from dlio.base.units import parse_size
from dlio.dataset.gen_manifest import ranges_and_crcs, save_manifests
from dlio.dataset.gen_plan import GenPlan, plan, require_space
from dlio.dataset.gen_write import write_all
from dlio.dataset.manifest import manifest_path, merge_parts, save_manifest
from dlio.dataset.spec import MANIFEST_DIR, DatasetSpec, estimated_sizes
from dlio.storage.base import Backend
from dlio.system.mpi import Comm

STAGE_BYTES = 512 << 20
STAGE_BYTES_MAX = 64 << 30  # two batches of this sit on the local disk at once
Staged = Tuple[str, str, int]  # a staged file: (its name relative to the stage, its path, its bytes)


class Uploader(Protocol):
    """What Backend.uploader gives (dlio.storage.s3.upload.Uploader): PUTs staged files batch by batch."""

    def send(self, files: List[Staged]) -> None: ...
    def wait(self) -> int: ...
    def close(self) -> None: ...
    def kill(self) -> None: ...


def stage_bytes() -> int:
    """The staging batch: DLIO_FAST_S3_STAGE_BYTES (bytes, or with a unit: 256m, 1g) or STAGE_BYTES."""
    v = os.environ.get("DLIO_FAST_S3_STAGE_BYTES", "")
    if not v:
        return STAGE_BYTES
    try:
        n = int(parse_size(v))
    except (ValueError, DlioError):
        n = 0
    if not 1 <= n <= STAGE_BYTES_MAX:
        raise DlioError(f"DLIO_FAST_S3_STAGE_BYTES={v!r}: expected a size from 1 byte to 64g, such as 512m or 1g")
    return n


def batches(spec: DatasetSpec, dims: NDArray[np.int64], todo: List[int], limit: int) -> List[List[int]]:
    """The files in order, in runs of at most `limit` estimated bytes (at least one file each)."""
    if not todo:
        return []
    idx = np.asarray(todo, dtype=np.int64)
    est = estimated_sizes(spec, dims[idx]).astype(np.float64)
    out: List[List[int]] = []
    start, acc = 0, 0.0
    for k in range(len(idx)):
        if k > start and acc + est[k] > limit:
            out.append(idx[start:k].tolist())
            start, acc = k, 0.0
        acc += est[k]
    out.append(idx[start:].tolist())
    return out


def _staged(pl: GenPlan, batch: List[int], stage: str) -> List[Staged]:
    """(name relative to the stage, path, size) of a batch's files and their companions."""
    cut = len(stage.rstrip("/")) + 1
    out: List[Staged] = []
    for i in batch:
        for p in (*pl.fmt.companions(pl.paths[i], pl.spec), pl.paths[i]):
            out.append((p[cut:], p, os.path.getsize(p)))
    return out


def _remove(files: List[Staged]) -> None:
    for _, p, _ in files:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def generate_ranks(
    backend: Backend,
    root: str,
    spec: DatasetSpec,
    comm: Comm,
    threads: int,
    checksum: bool = False,
    progress: Optional[Callable[[int, int], None]] = None,
    multipart_min: Optional[int] = None,
) -> Tuple[int, int, int]:
    """Every rank generates and uploads its files, then rank 0 uploads the merged manifests.
    Returns this rank's (objects, bytes, largest bytes staged at once). Collective: a failure on
    any rank is a DlioError on every rank."""
    limit = stage_bytes()
    stage = tempfile.mkdtemp(prefix="dlio-fast-s3-stage-", dir=os.environ.get("DLIO_FAST_S3_STAGING"))
    lspec = dataclasses.replace(spec, data_folder=stage)
    up: Optional[Uploader] = None
    problem: Optional[str] = None
    nobj = nbytes = peak = 0
    try:
        up = backend.uploader(root, multipart_min)
        pl = plan(lspec, comm.rank, comm.size, check_space=False)
        done_b = done_f = 0
        pending: List[Staged] = []
        for batch in batches(lspec, pl.dims, pl.todo, limit):
            need = int(np.ceil(estimated_sizes(lspec, pl.dims[np.asarray(batch)]).sum()))
            require_space(lspec, need, 0)
            sub = dataclasses.replace(pl, todo=batch, skipped=[], present_bytes=0)
            cb = None
            if progress is not None:
                cb = lambda b, f, b0=done_b, f0=done_f: progress(b0 + b, f0 + f)  # noqa: E731
            done_b += write_all(sub, threads, cb, fsync=False)
            done_f += len(batch)
            ranges_and_crcs(sub, batch, checksum)  # from the files, while they are here
            files = _staged(pl, batch, stage)
            peak = max(peak, sum(f[2] for f in files) + sum(f[2] for f in pending))
            if pending:  # the last batch is up: its files go
                nbytes += up.wait()
                _remove(pending)
            up.send(files)
            nobj += len(files)
            pending = files
        if pending:
            nbytes += up.wait()
            _remove(pending)
        pl.todo = [int(i) for i in pl.mine]
        save_manifests(pl, checksum, comm.rank, comm.size, None)
    except Exception as e:  # noqa: BLE001  (any rank's failure ends every rank's generation)
        problem = str(e) or type(e).__name__
    problems = [p for p in comm.allgather(problem) if p]
    try:
        if problems:
            raise DlioError(problems[0])
        assert up is not None  # (made first in the try above: failing to make it is a problem)
        sink = up
        parts: Dict[str, bytes] = {}
        if comm.size > 1:
            for split in ("train", "valid"):
                if spec.num_files(split):
                    p = manifest_path(lspec, split, part=(comm.rank, comm.size))
                    with open(p, "rb") as f:
                        parts[os.path.basename(p)] = f.read()
        gathered = comm.gather(parts)

        def upload() -> None:
            try:
                _upload_manifests(sink, lspec, gathered or [], comm.size)
            except Exception as e:  # noqa: BLE001  (any failure on rank 0 must reach every rank, not hang them)
                raise e if isinstance(e, (DlioError, OSError)) else DlioError(str(e) or type(e).__name__) from e

        comm.agree(upload)
        sink.close()
        return nobj, nbytes, peak
    finally:
        if up is not None:
            up.kill()
        shutil.rmtree(stage, ignore_errors=True)


def _upload_manifests(up: Uploader, lspec: DatasetSpec, gathered: List[Dict[str, bytes]], size: int) -> None:
    """Rank 0: the ranks' manifest parts merged into one manifest per split, PUT last."""
    d = os.path.join(lspec.data_folder, MANIFEST_DIR)
    if size > 1:
        for parts in gathered:
            for name, data in parts.items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
        for split in ("train", "valid"):
            if lspec.num_files(split):
                m = merge_parts(lspec, split)
                if m is None:
                    raise DlioError(f"the ranks' {split} manifest parts do not cover the dataset")
                save_manifest(lspec, m)
                for r in range(size):
                    os.unlink(manifest_path(lspec, split, part=(r, size)))
    cut = len(lspec.data_folder.rstrip("/")) + 1
    files = sorted(
        (p[cut:], p, os.path.getsize(p)) for p in (os.path.join(d, n) for n in os.listdir(d)) if p.endswith(".npz")
    )
    up.send(files)
    up.wait()
