"""Objects on an S3 endpoint (storage.storage_type s3, s3:// paths), through s3dlio in worker processes.

Names are ``s3://BUCKET/KEY`` URIs. DLIO's spellings place things: storage.storage_root is the bucket,
dataset.data_folder and checkpoint.checkpoint_folder are prefixes in it (or s3://BUCKET/PREFIX). A
dataset's manifests are fetched into a local folder that stands for its prefix, so planning reads them
as on a filesystem; every planned read becomes a GET of the object or a range GET of the sample's bytes
(dlio.storage.s3.trainrun). Objects are PUT whole, so a dataset is generated into a local staging folder
and uploaded batch by batch (``uploader``). A set of whole objects (a checkpoint) is PUT or GET by up to
MAX_SET_THREADS threads at once, each object of MULTIPART_MIN bytes or more as a multipart upload with
PART_INFLIGHT parts in flight (what s3torchconnector's checkpoint writer and the AWS CRT do), and timed in
the worker from the first request to the last completion.
"""

from __future__ import annotations

import atexit
import base64
import functools
import os
import shutil
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from dlio.base.errors import ConfigError, DlioRunError
from dlio.config import Config
from dlio.config.engines import S3_ENGINE
from dlio.storage.base import (
    BUCKETS,
    MAX_SET_THREADS,
    Backend,
    RunLike,
    SetContent,
    SetOptions,
    SetResult,
    TrainOptions,
)
from dlio.storage.s3 import client, limits, listing
from dlio.storage.s3.settings import S3Settings, parse_uri, resolve
from dlio.system import counters

PART_INFLIGHT = 8
CACHE_NOTE = "n/a (object store)"


def split(uri: str) -> Tuple[str, str]:
    """'s3://bucket/a/b' -> ('bucket', 'a/b') (the key as it is, no trailing '/' added)."""
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def _place(folder: str, root: str, key: str, what: str) -> str:
    """The URI of ``folder`` as DLIO spells it on S3: s3://BUCKET[/PREFIX], or a prefix inside the bucket
    storage.storage_root names. Always ends with '/'."""
    folder, root = str(folder or "").strip(), str(root or "").strip()
    if folder.startswith("s3://"):
        bucket, prefix = parse_uri(folder)
        if what == "dataset" and root not in ("", "./", ".") and root.strip("/") != bucket:
            raise ConfigError(
                f"{key} {folder!r} is in bucket {bucket!r} but storage.storage_root is {root!r}; "
                "make them name the same bucket",
                "storage.storage_root",
                root,
            )
        return f"s3://{bucket}/{prefix}"
    if root.strip("/") in ("", "."):
        raise ConfigError(
            f"storage.storage_type = 's3' needs the bucket in storage.storage_root (e.g. "
            f"storage.storage_root=mybucket) or {key}=s3://BUCKET/PREFIX",
            "storage.storage_root" if what == "dataset" else key,
            root if what == "dataset" else folder,
        )
    rel = folder
    while rel.startswith("./"):
        rel = rel[2:]
    bucket, prefix = parse_uri(f"s3://{root.strip('/')}/{rel.strip('/')}")
    return f"s3://{bucket}/{prefix}"


def containers(overlays: Optional[Sequence[Any]], n: int) -> Tuple[List[List[List[Any]]], List[Optional[int]]]:
    """The distinct containers among the files' overlays ([[offset, base64 literal], ...] each, the
    worker's form) and, per file, the index of its own (None for a raw file)."""
    table: List[List[List[Any]]] = []
    index: Dict[Any, int] = {}
    of: List[Optional[int]] = []
    for segs in overlays or [None] * n:
        if segs is None:
            of.append(None)
            continue
        key = tuple((int(o), bytes(b)) for o, b in segs)
        if key not in index:
            index[key] = len(table)
            table.append([[o, base64.b64encode(b).decode()] for o, b in key])
        of.append(index[key])
    return table, of


class WorkerPhase:
    """A phase's counters (dlio.system.counters.Phase) on S3: the worker processes' CPU is the client's, so it
    is counted as this process's (they read and write for it), not as other processes'."""

    def __init__(self, engine: str) -> None:
        self.phase = counters.Phase([], engine, residency=False)
        self.phase.target = counters.Target(
            "s3", "s3", "object store", "none", why="an object store: its devices are not visible from the client"
        )
        self.cpu0 = tuple(client.WORKER_CPU)

    def end(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """The counters, the workers' CPU measured over the phase (their rusage) as worker_cpu_s, over an
        estimate the caller may give."""
        measured = sum(now - then for now, then in zip(client.WORKER_CPU, self.cpu0))
        if measured > 0:
            kwargs["worker_cpu_s"] = measured
        return self.phase.end(*args, **kwargs)


class S3Backend(Backend):
    name = "s3"
    label = "S3"
    # no page cache, no C trace, no O_DIRECT, no file engines; objects are PUT whole; buckets made on request
    caps = frozenset({BUCKETS})

    def __init__(
        self,
        storage_options: Optional[Mapping[str, Any]] = None,
        endpoint: Optional[str] = None,
        timeout_s: Optional[float] = None,
        timeout_key: str = "dlio_fast.storage_timeout",
    ) -> None:
        self._options = storage_options
        self._endpoint = endpoint
        self._timeout = (timeout_s, timeout_key)
        self._views: Dict[str, str] = {}

    @functools.cached_property
    def settings(self) -> S3Settings:
        """Endpoint, keys and deadline, resolved on first use: a missing key is a one-line error then."""
        return resolve(self._endpoint, self._options, timeout_s=self._timeout[0], timeout_key=self._timeout[1])

    # ---- engine and settings ----
    def engine_spec(self, cfg: Config, checkpoint: bool = False) -> Tuple[str, bool]:
        return S3_ENGINE, False

    def engine_for(self, file_engine: str, direct: bool = False) -> Tuple[str, bool]:
        return S3_ENGINE, False

    def check_config(self, cfg: Config) -> None:
        super().check_config(cfg)
        if cfg.dlio_fast.engine != S3_ENGINE and cfg.origin("dlio_fast.engine") != "default":
            self.refuse(
                "dlio_fast.engine",
                cfg.dlio_fast.engine,
                f"a file engine; objects are read by the S3 client, {S3_ENGINE}",
                "leave --engine out",
            )
        if cfg.reader.odirect and cfg.origin("reader.odirect") != "default":
            self.refuse("reader.odirect", True, "O_DIRECT bypasses a client page cache, and S3 has none")

    def addressing_note(self) -> Optional[str]:
        return self.settings.addressing_note()

    # ---- names ----
    def dataset_root(self, cfg: Config) -> str:
        return _place(cfg.dataset.data_folder, cfg.storage.storage_root, "dataset.data_folder", "dataset")

    def checkpoint_root(self, cfg: Config) -> str:
        return _place(
            cfg.checkpoint.checkpoint_folder, cfg.storage.storage_root, "checkpoint.checkpoint_folder", "checkpoint"
        )

    def folder_root(self, cfg: Config, key: str) -> str:
        return _place(cfg.get(key), cfg.storage.storage_root, key, "checkpoint")

    def kv_relay(self, root: str, workers: int, slot_len: int, null: bool = False) -> Any:
        from dlio.storage.s3.kvrelay import KvRelay  # its helper process starts only for a KV-cache run

        client.require_client()
        return KvRelay(self.settings, root, workers, slot_len, null)

    def local_path(self, name: str) -> Optional[str]:
        return None

    def join(self, root: str, *parts: str) -> str:
        return root.rstrip("/") + "/" + "/".join(p.strip("/") for p in parts)

    def names(self, root: str, local_root: str, paths: Sequence[str]) -> List[str]:
        cut = len(local_root.rstrip("/")) + 1
        return [self.join(root, p[cut:]) for p in paths]

    def check_access(self, roots: Sequence[str], create: bool = False) -> None:
        client.require_client()
        for root in dict.fromkeys(roots):
            bucket, prefix = parse_uri(root)
            client.check_access(self.settings, bucket, prefix, create=create)

    def create_bucket(self, root: str) -> None:
        bucket, _ = parse_uri(root)
        client.run_task(self.settings, {"task": "create_bucket", "bucket": bucket}, f"creating bucket {bucket!r}")

    # ---- small objects and listings ----
    def local_view(self, root: str, rels: Sequence[str]) -> Tuple[str, List[bool]]:
        """A temporary folder (removed at exit) with the objects ``rels`` under ``root`` downloaded."""
        if root not in self._views:
            d = tempfile.mkdtemp(prefix="dlio-fast-s3-")
            atexit.register(shutil.rmtree, d, True)
            self._views[root] = d
        folder = self._views[root]
        if not rels:
            return folder, []
        dests = [os.path.join(folder, r) for r in rels]
        for d in dests:
            os.makedirs(os.path.dirname(d), exist_ok=True)
        out = client.run_task(
            self.settings, {"task": "fetch", "uris": [self.join(root, r) for r in rels], "dests": dests}
        )
        return folder, list(out["found"])

    def list(self, root: str) -> List[str]:
        bucket, prefix = parse_uri(root)
        return list(client.run_task(self.settings, {"task": "list_all", "bucket": bucket, "prefix": prefix})["uris"])

    def exist(self, names: Sequence[str]) -> bool:
        """One listing under the names' common folder; every name must be in it."""
        if not len(names):
            return True
        common = os.path.commonprefix(list(names))
        root = common[: common.rfind("/") + 1]
        listed = np.array(sorted(self.list(root)) or [""])
        return bool(np.isin(np.asarray(names), listed).all())

    def sizes(self, names: Sequence[str]) -> np.ndarray:
        return listing.object_sizes(self.settings, names)

    def remove_tree(self, root: str) -> None:
        bucket, prefix = parse_uri(root)
        client.run_task(self.settings, {"task": "delete", "bucket": bucket, "prefix": prefix})

    def remove(self, names: Sequence[str]) -> None:
        if names:
            client.run_task(self.settings, {"task": "delete_keys", "uris": list(names)})

    def lease(self, name: str, what: str, key: str) -> Any:
        from dlio.storage.s3 import lease

        return lease.take(self.settings, name, what, key)

    def io_bench(self, root: str) -> Any:
        from dlio.storage.s3.bench import S3Bench  # only the io and ceiling commands measure points

        return S3Bench(self, root)

    def uploader(self, root: str, multipart_min: Optional[int] = None) -> Any:
        from dlio.storage.s3.upload import Uploader  # its worker process starts only for a generation

        bucket, prefix = parse_uri(root)
        return Uploader(self.settings, bucket, prefix, multipart_min)

    # ---- timed transfers ----
    def train_run(
        self, names: Sequence[str], sizes: np.ndarray, ops: np.ndarray, steps: np.ndarray, opts: TrainOptions
    ) -> RunLike:
        from dlio.storage.s3.trainrun import S3Run

        inflight = max(1, opts.threads) * max(1, opts.qd)
        files = limits.check_open_files(
            inflight,
            f"reader.read_threads {max(1, opts.threads)} x dlio_fast.qd {max(1, opts.qd)}",
            "lower dlio_fast.qd or reader.read_threads",
        )
        return S3Run(
            self.settings,
            names,
            sizes,
            ops,
            steps,
            threads=max(1, opts.threads),
            qd=opts.qd,
            prefetch=opts.prefetch,
            compute_mode=opts.compute_mode,
            preprocess_ns=opts.preprocess_ns,
            step_hook=opts.step_hook,
            files=files,
        )

    def write_set(self, names: Sequence[str], sizes: Sequence[int], content: SetContent, opts: SetOptions) -> SetResult:
        return self._set("save", names, sizes, content, opts)

    def read_set(self, names: Sequence[str], sizes: Sequence[int], opts: SetOptions) -> SetResult:
        return self._set("load", names, sizes, SetContent(), opts)

    def read_ranges(self, names: Sequence[str], sizes: Sequence[int], ops: np.ndarray, opts: SetOptions) -> SetResult:
        """Range GETs of the ops, ``opts.threads`` x ``opts.qd`` in flight (worker_data.task_ranges)."""
        inflight = max(1, (opts.threads or 1) * opts.qd)
        task = {
            "task": "ranges",
            "uris": list(names),
            "ops": np.stack([ops["file"], ops["offset"], ops["length"]], axis=1).astype(np.int64).tolist(),
            "inflight": inflight,
        }
        out = self._task(task, names, f"range GETs of {len(names)} objects", opts)
        return self._window_result(out, opts.threads or 1, opts.qd, opts.transfer)

    def _set(
        self, kind: str, names: Sequence[str], sizes: Sequence[int], content: SetContent, o: SetOptions
    ) -> SetResult:
        overlays, overlay_of = containers(content.overlays, len(names))
        threads = min(o.threads or MAX_SET_THREADS, max(1, len(names)))
        task = {
            "task": "ckpt",
            "kind": kind,
            "items": [[u, int(n)] for u, n in zip(names, sizes)],
            "fills": content.fills,
            "overlays": overlays,
            "overlay_of": overlay_of,
            "threads": threads,
            "part_inflight": PART_INFLIGHT,
        }
        what = f"{'PUT' if kind == 'save' else 'GET'} of {len(names)} checkpoint objects"
        out = self._task(task, names, what, o)
        return self._window_result(out, threads, PART_INFLIGHT, int(out["part_size"]))

    def upload_files(self, names: Sequence[str], paths: Sequence[str], opts: SetOptions) -> SetResult:
        """PUTs (multipart from shared.MULTIPART_MIN bytes) of up to ``opts.threads`` files at once."""
        threads = min(opts.threads or MAX_SET_THREADS, max(1, len(names)))
        task = {"task": "put_files", "uris": list(names), "paths": list(paths), "threads": threads}
        out = self._task(task | {"part_inflight": PART_INFLIGHT}, names, f"PUT of {len(names)} objects", opts)
        return self._window_result(out, threads, PART_INFLIGHT, int(out["part_size"]))

    def download_files(
        self, names: Sequence[str], sizes: Sequence[int], paths: Sequence[str], opts: SetOptions
    ) -> SetResult:
        """Range GETs written into the files as they arrive (worker_files.task_get_files), their folders made."""
        for p in paths:
            os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        threads = opts.threads or MAX_SET_THREADS
        task = {
            "task": "get_files",
            "uris": list(names),
            "sizes": [int(n) for n in sizes],
            "paths": list(paths),
            "transfer": int(opts.transfer),
            "inflight": max(1, threads * opts.qd),
        }
        out = self._task(task, names, f"download of {len(names)} objects", opts)
        return self._window_result(out, threads, opts.qd, int(opts.transfer))

    def _task(self, task: Dict[str, Any], names: Sequence[str], what: str, o: SetOptions) -> Dict[str, Any]:
        """Run a set's task in a worker, right after ``o.before_window``; a failure is one line naming
        ``what`` was done where (a deadline's message already does)."""
        if o.before_window is not None:
            o.before_window()
        doing = f"{what} at {os.path.commonprefix(list(names)) if names else '?'}"
        on_bytes = o.on_bytes
        tick = None if on_bytes is None else (lambda s: on_bytes(s.progress()[1]))
        try:
            return client.run_task(self.settings, task, doing, on_tick=tick)
        except client.WorkerFailed as e:
            raise DlioRunError(str(e) if e.kind == "timeout" else f"{doing}: {e}") from None

    @staticmethod
    def _window_result(out: Dict[str, Any], threads: int, qd: int, transfer: int) -> SetResult:
        """A set's result from a worker task's reply: its window timed in the worker, first request to last."""
        window = int(out["window_ns"])
        return SetResult(
            bytes=int(out["bytes"]),
            bytes_issued=int(out["bytes"]),
            wall_start_s=out["start_wall_ns"] / 1e9,
            m0=0,
            m1=window,
            prepare_s=0.0,
            io_s=window / 1e9,
            io_window_s=window / 1e9,
            fsync_s=int(out.get("fsync_ns", 0)) / 1e9,
            engine=S3_ENGINE,
            direct=False,
            threads=threads,
            qd=qd,
            transfer_size=transfer,
            cache=CACHE_NOTE,
        )

    def drop_cache(self, names: Sequence[str], mode: str) -> str:
        return CACHE_NOTE

    def phase(self, names: Sequence[str], engine: str) -> Any:
        return WorkerPhase(engine)
