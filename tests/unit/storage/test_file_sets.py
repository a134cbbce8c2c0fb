"""The file-set runs (dlio.storage.file_sets) every family's local reads and writes go through."""

import os

import numpy as np
import pytest

from dlio import _core
from dlio.storage.file_sets import run_core, thread_plan


def test_io_uring_runs_with_registered_buffers_and_files_as_fio_at_its_best(tmp_path):
    """Checkpoints and model loads on io_uring register their buffers and files (fio's fixedbufs /
    registerfiles): the engine reports what it used, and the bytes read are the file's."""
    if not {n: ok for n, _, ok, _ in _core.engines()}.get("io_uring"):
        pytest.skip("io_uring is refused here (dlio-fast engines says why)")
    path = str(tmp_path / "f")
    data = np.random.default_rng(1).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        f.write(data)
    ops, first, threads = thread_plan([len(data)], 0, 1 << 20, 1, 1)
    res = run_core("io_uring", [path], ops, first, threads, 4, False, what="read")
    assert res["bytes"] == len(data)
    used = res["eng_flags_used"]
    assert used & _core.ENG_REGFILES, "files not registered"
    assert used & _core.ENG_REGBUFS or os.geteuid() != 0, "buffers not registered (root has no memlock limit)"
