"""The index kept in an object store (names that are not local paths: S3), searched from a local copy, as Milvus does.

Milvus's index node builds a segment's index on its local disk and uploads every file to the object store
(MinIO/S3); at load the query node downloads the segment's files into a local folder and searches them there
with O_DIRECT. So here:

  build  the index is written by LocalStore into the local copy's folder (the real DiskANN layout, the same
         bytes a local build writes), each file is PUT as an object (timed: the build phase's figure is the
         upload, the object store's), then the manifest object last; the staged files are removed.
  load   every object is downloaded into the local copy's folder by range GETs in parallel (timed: the load
         phase's figure is the download, the object store's; the fsync after it is the local disk's, apart).
  search the C query engine reads the local copy with O_DIRECT: its figures are the local disk's, not S3's.

The local copy lives beside the index's local name: ``<vdb.index_folder>/<index>.s3-copy``; the objects under
``<bucket>/<vdb.index_folder>/<index>/`` (storage.storage_root names the bucket).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Callable, Dict, List, Optional, Tuple

from dlio.base import inputs
from dlio.base.errors import ConfigError, DlioError
from dlio.base.units import fmt_bytes
from dlio.config import Config
from dlio.config.sections import VdbConfig
from dlio.report.verdict import classify
from dlio.storage import backend_for, staging
from dlio.storage.base import SetOptions
from dlio.storage.places import Place
from dlio.system.output import write_json
from dlio.vdb.config import VdbSpec
from dlio.vdb.store import MANIFEST, NAMES, LocalStore, file_sizes

COPY_SUFFIX = ".s3-copy"
TRANSFER = 8 << 20  # download range GETs (Milvus's chunk manager reads objects in pieces of a few MiB)
THREADS, QD = 4, 2  # 8 range GETs in flight
UPLOAD_THREADS = 4


class ObjectStore:
    """The index as objects of ``backend``; the search reads a downloaded local copy."""

    remote = True  # present() makes requests: a dry run does not ask

    def __init__(self, cfg: Config, stage: staging.Stage, spec: VdbSpec, medoid: int) -> None:
        self.backend = backend = stage.backend
        self.stage = stage
        self.create_bucket = bool(cfg.dlio_fast.create_bucket)
        self.engine = backend.engine_spec(cfg)[0]  # the object store's client (the phases' counters)
        self.root = stage.root
        self.copy = LocalStore(dataclasses.replace(spec, folder=stage.folder), medoid)
        self.spec = self.copy.spec
        self.files = file_sizes(self.spec)
        self.names = stage.names([p for p, _ in self.files])
        self.manifest = backend.join(self.root, MANIFEST)
        self.fetch_bytes = sum(n for _, n in self.files)  # the load phase downloads the whole index
        self._checked = False

    def describe(self) -> str:
        return f"{self.root} (searched from a local copy in {self.copy.folder})"

    def check(self) -> None:
        """One cheap request before any work: a missing bucket or a wrong endpoint is one line now."""
        if not self._checked:
            self.backend.check_access([self.root], create=self.create_bucket)
            self._checked = True

    def places(self) -> List[Place]:
        """The index's prefix, and the local folder its copy is built and downloaded in."""
        return [Place(self.root, "vdb.index_folder", "vector index", NAMES)] + self.copy.places(
            "vdb.index_folder", "local copy of the vector index"
        )

    def present(self) -> bool:
        """The manifest object says this very index (layout, medoid, sizes) and every object is there at its
        size. The manifest is PUT after every index object, so a cut-short upload has none."""
        self.check()
        folder, found = staging.local_copy(self.backend, self.root, [MANIFEST])
        if not found[0]:
            return False
        path = os.path.join(folder, MANIFEST)
        text = inputs.read_if_there(
            path,
            inputs.MANIFEST_CAP,
            "vector index manifest (local copy)",
            "remove it, or give another vdb.index_folder",
        )
        try:
            have = None if text is None else inputs.loads_json(text, path, "manifest")
        except DlioError:
            return False  # damaged: the build writes it again
        return have == self.copy.want() and list(self.backend.sizes(self.names)) == [n for _, n in self.files]

    def write(self, on_tick: Optional[Callable[[Any], None]] = None) -> Dict[str, Any]:
        """The build phase: staged by LocalStore in the local copy's folder (its own record: the local
        disk's), uploaded (this phase's figure: the object store's), the manifest object last."""
        self.check()
        staged = self.copy.write(on_tick)
        paths = [p for p, _ in self.files]
        phase = self.backend.phase(self.names, self.engine)
        res = self.stage.upload(paths, SetOptions(engine="", direct=False, qd=1, threads=UPLOAD_THREADS))
        assert res is not None  # staged (store_for): the files go up
        counters = phase.end(res.bytes, len(paths), None, res.threads, write=True)
        self.stage.upload([self.copy.manifest], SetOptions(engine="", direct=False, qd=1))
        self._remove_copy()  # the load downloads it: nothing of the build is searched
        return {
            "phase": "build",
            "where": self.root,
            "objects": len(paths),
            "bytes": res.bytes,
            "seconds": res.io_window_s,
            "mb_per_s": res.bytes / max(1e-9, res.io_window_s) / 1e6,
            "request_bytes": res.transfer_size,
            "threads": res.threads,
            "engine": res.engine,
            "note": "the upload of the index files to the object store (built first in a local staging folder)",
            "staging": {k: v for k, v in staged.items() if k != "phase"} | {"where": self.copy.folder},
            "counters": counters,
            "verdict": classify(counters),
        }

    def _remove_copy(self) -> None:
        for p, _ in self.files:
            if os.path.exists(p):
                os.unlink(p)
        if os.path.exists(self.copy.manifest):
            os.unlink(self.copy.manifest)

    def _check_space(self) -> None:
        """The local copy must fit before a byte is downloaded (files already there are overwritten)."""
        os.makedirs(self.copy.folder, exist_ok=True)
        have = sum(os.path.getsize(p) for p, _ in self.files if os.path.isfile(p))
        need = sum(n for _, n in self.files) - have
        free = shutil.disk_usage(self.copy.folder).free
        if need > free:
            raise DlioError(
                f"{self.copy.folder}: the local copy of {self.root} needs {fmt_bytes(need)} more but "
                f"{fmt_bytes(free)} is free; choose another vdb.index_folder (the copy goes beside it)"
            )

    def fetch(self, on_bytes: Optional[Callable[[int], None]] = None) -> Tuple[List[str], List[str], Dict[str, Any]]:
        """The load phase: every object downloaded into the local copy (range GETs in parallel), timed; the
        search then reads those local files."""
        self._check_space()
        paths = [p for p, _ in self.files]
        phase = self.backend.phase(self.names, self.engine)
        res = self.stage.download(
            paths,
            [n for _, n in self.files],
            SetOptions(engine="", direct=False, qd=QD, threads=THREADS, transfer=TRANSFER, on_bytes=on_bytes),
        )
        assert res is not None  # staged (store_for): the files come down
        requests = sum(-(-n // TRANSFER) for _, n in self.files)
        counters = phase.end(res.bytes, requests, None, res.threads)
        # the copy is the index: its manifest says so (a local run pointed at the copy would keep it)
        write_json(self.copy.manifest, self.copy.want())
        rec = {
            "phase": "load",
            "where": self.root,
            "copy": self.copy.folder,
            "objects": len(paths),
            "bytes": res.bytes,
            "seconds": res.io_window_s,
            "mb_per_s": res.bytes / max(1e-9, res.io_window_s) / 1e6,
            "request_bytes": TRANSFER,
            "requests": requests,
            "in_flight": res.threads * res.qd,
            "fsync_s": res.fsync_s,
            "engine": res.engine,
            "note": "the download of the index objects into the local copy (the object store's figure; the "
            "fsync after it, fsync_s, is the local disk's)",
            "counters": counters,
            "verdict": classify(counters),
        }
        return self.spec.index_paths(), self.spec.pq_paths(), rec

    def search_note(self) -> str:
        return (
            f"the search reads the local copy in {self.copy.folder} (downloaded from {self.root}): "
            "its figures are the local disk's, not the object store's"
        )


def store_for(cfg: Config, spec: VdbSpec, medoid: int) -> Any:
    """The store of the config's storage backend: its files searched in place where the index folder is a
    local folder (LocalStore), else the index kept as objects and searched from a downloaded copy
    (ObjectStore), which goes beside the index's local name: <vdb.index_folder>/<index>.s3-copy."""
    backend = backend_for(cfg)
    if staging.in_place(backend, spec.folder) is not None:
        return LocalStore(spec, medoid)
    word, client = cfg.dlio_fast.engine, backend.engine_spec(cfg)[0]
    if spec.engine == "null" or word == client:
        why = "the null engine writes no index to upload" if spec.engine == "null" else f"{client} reads no files"
        raise ConfigError(
            f"dlio_fast.engine = {word}: on {backend.label} the index is built, and searched, as local files "
            f"(the copy a query node downloads): {why}; use io_uring",
            "dlio_fast.engine",
            word,
        )
    folder = cfg.section(VdbConfig).index_folder
    if "://" in str(folder):
        raise ConfigError(
            f"vdb.index_folder = {folder}: it is both the prefix in the bucket and the local folder "
            "the search's copy goes beside; give a path (storage.storage_root names the bucket)",
            "vdb.index_folder",
            folder,
        )
    root = backend.join(backend.folder_root(cfg, "vdb.index_folder"), os.path.basename(spec.folder))
    return ObjectStore(cfg, staging.stage_and_upload(backend, root, spec.folder + COPY_SUFFIX), spec, medoid)
