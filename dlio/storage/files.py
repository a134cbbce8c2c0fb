"""Files on a mounted filesystem (storage.storage_type local_fs): the C core issues every request, the
client's page cache is dropped on request and checked with mincore, O_DIRECT where the engine and the
filesystem take it."""

from __future__ import annotations

import os
import shutil
import stat
import time
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from dlio import _core
from dlio.config import Config, engines
from dlio.storage import base, file_sets
from dlio.storage.base import Backend, RunLike, SetContent, SetOptions, SetResult, TrainOptions
from dlio.system import counters
from dlio.system.host import drop_cache, drop_host_cache


class FileBackend(Backend):
    name = "local_fs"
    label = "files"
    caps = frozenset(
        {
            base.PAGE_CACHE,
            base.TRACE,
            base.DIRECT,
            base.FILE_ENGINES,
            base.IN_PLACE,
            base.SCAN,
            base.C_STEP_HOOK,
            base.FSYNC,
            base.STAT,
            base.SPLIT_READS,
        }
    )

    def engine_spec(self, cfg: Config, checkpoint: bool = False) -> Tuple[str, bool]:
        return engines.engine_spec(cfg, checkpoint)

    def engine_for(self, file_engine: str, direct: bool = False) -> Tuple[str, bool]:
        return file_engine, direct

    def check_config(self, cfg: Config) -> None:
        super().check_config(cfg)
        if cfg.dlio_fast.engine == engines.S3_ENGINE:
            self.refuse(
                "dlio_fast.engine",
                engines.S3_ENGINE,
                "s3dlio is the object store's client",
                f"choose a file engine ({', '.join(e for e in engines.CONFIG_ENGINES if e != engines.S3_ENGINE)}) "
                "or storage.storage_type=s3",
            )

    def dataset_root(self, cfg: Config) -> str:
        return cfg.dataset.data_folder or "."

    def checkpoint_root(self, cfg: Config) -> str:
        return os.path.abspath(cfg.checkpoint.checkpoint_folder)

    def folder_root(self, cfg: Config, key: str) -> str:
        return cfg.get(key)  # as the config gives it: the messages name it so

    def kv_relay(self, root: str, workers: int, slot_len: int, null: bool = False) -> Any:
        self.refuse(
            "storage.storage_type",
            self.name,
            "no relay: the C core's file stores write and read files themselves",
            "run the KV cache with kvcache.io_mode compat or direct",
        )

    def local_path(self, name: str) -> Optional[str]:
        return name

    def join(self, root: str, *parts: str) -> str:
        return os.path.join(root, *parts)

    def names(self, root: str, local_root: str, paths: Sequence[str]) -> List[str]:
        return list(paths)

    def local_view(self, root: str, rels: Sequence[str]) -> Tuple[str, List[bool]]:
        return root, [os.path.exists(os.path.join(root, r)) for r in rels]

    def exist(self, names: Sequence[str]) -> bool:
        # a dataset is written in order (and each file atomically): its first and last files stand for it
        return not len(names) or (os.path.exists(names[0]) and os.path.exists(names[-1]))

    def sizes(self, names: Sequence[str]) -> np.ndarray:
        out = np.full(len(names), -1, dtype=np.int64)
        for i, name in enumerate(names):
            try:
                st = os.stat(name)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):  # a FIFO or a device at the name is not what was made
                out[i] = st.st_size
        return out

    def list(self, root: str) -> List[str]:
        if not os.path.isdir(root):
            return []
        return sorted(os.path.join(d, n) for d, _, files in os.walk(root) for n in files)

    def remove_tree(self, root: str) -> None:
        shutil.rmtree(root, ignore_errors=True)

    def remove(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass

    def train_run(
        self, names: Sequence[str], sizes: np.ndarray, ops: np.ndarray, steps: np.ndarray, opts: TrainOptions
    ) -> RunLike:
        return _core.Run(
            "train",
            opts.engine,
            list(names),
            ops,
            threads=opts.threads,
            qd=opts.qd,
            direct=opts.direct,
            steps=steps,
            prefetch=opts.prefetch,
            compute_mode=opts.compute_mode,
            preprocess_ns=opts.preprocess_ns,
            step_hook=None if opts.c_step_hook is not None else opts.step_hook,
            c_step_hook=opts.c_step_hook,
            trace=opts.trace,
            delay_ns=opts.delay_ns,
            skip_bad_files=opts.skip_bad_files,
        )

    def write_set(self, names: Sequence[str], sizes: Sequence[int], content: SetContent, opts: SetOptions) -> SetResult:
        return file_sets.write_set(names, sizes, content, opts)

    def read_set(self, names: Sequence[str], sizes: Sequence[int], opts: SetOptions) -> SetResult:
        return file_sets.read_set(names, sizes, opts)

    def read_ranges(self, names: Sequence[str], sizes: Sequence[int], ops: np.ndarray, opts: SetOptions) -> SetResult:
        return file_sets.read_ranges(names, sizes, ops, opts)

    # ---- local copies: never needed for files (dlio.storage.staging works on them in place), but whole ----
    def upload_files(self, names: Sequence[str], paths: Sequence[str], opts: SetOptions) -> SetResult:
        return _copies(list(paths), list(names), opts)

    def download_files(
        self, names: Sequence[str], sizes: Sequence[int], paths: Sequence[str], opts: SetOptions
    ) -> SetResult:
        return _copies(list(names), list(paths), opts)

    def uploader(self, root: str, multipart_min: Optional[int] = None) -> Any:
        self.refuse("storage.storage_type", self.name, "a dataset is generated where it stays", "generate in place")

    def io_bench(self, root: str) -> Any:
        self.refuse(
            "storage.storage_type", self.name, "the io grid's file points are the C core's own", "run them as files"
        )

    def drop_cache(self, names: Sequence[str], mode: str) -> str:
        """keep; drop each file's pages (checked with mincore); drop-all the host's cache (root)."""
        if mode == "drop":
            return drop_cache(names)
        if mode == "drop-all":
            return drop_host_cache()
        return "kept"

    def phase(self, names: Sequence[str], engine: str) -> counters.Phase:
        return counters.Phase(names, engine)


def _copies(sources: List[str], dests: List[str], opts: SetOptions) -> SetResult:
    """Each source copied to its destination (folders made), timed; fsynced after the window, as an object
    store's downloads are."""
    if opts.before_window is not None:
        opts.before_window()
    wall, m0 = time.time(), time.monotonic_ns()
    for src, dst in zip(sources, dests):
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        shutil.copyfile(src, dst)
    m1 = time.monotonic_ns()
    for dst in dests:
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    nbytes = sum(os.path.getsize(d) for d in dests)
    return SetResult(
        bytes=nbytes,
        bytes_issued=nbytes,
        wall_start_s=wall,
        m0=m0,
        m1=m1,
        prepare_s=0.0,
        io_s=(m1 - m0) / 1e9,
        io_window_s=(m1 - m0) / 1e9,
        fsync_s=(time.monotonic_ns() - m1) / 1e9,
        engine="copy",
        direct=False,
        threads=1,
        qd=1,
        transfer_size=opts.transfer,
        cache="kept",
    )
