"""A model's shards where its storage backend keeps them (checkpoint.checkpoint_folder: a folder, or
an S3 prefix): their names, whether they are there, and writing them.

The shards are written once and reused by later loads: ranks write shards round-robin through the
backend's ``write_set`` (the C core on files, multipart PUTs on S3), each shard's safetensors header
laid over its first bytes, the tensors random (every 4 KiB block unique on files, so a storage that
deduplicates or compresses gains nothing); rank 0 writes ``model.safetensors.index.json`` last, so that
an index that matches the model means every shard was written.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from dlio.base import inputs
from dlio.base.units import fmt_bytes
from dlio.modelload.shards import INDEX, Shard
from dlio.storage import staging
from dlio.storage.base import Backend, SetContent, SetOptions

WRITE_TRANSFER = 16 << 20


class StoredModel:
    """The shards of a model at ``root`` (the backend's names)."""

    def __init__(self, backend: Backend, root: str, shards: Sequence[Shard], index: bytes) -> None:
        self.backend = backend
        self.root = root
        self.shards = list(shards)
        self.index = index
        self.names = [backend.join(root, s.name) for s in self.shards]
        self.sizes = [s.size for s in self.shards]

    def present(self) -> bool:
        """The index is there with this model's text, and so is every shard at its size."""
        folder, found = staging.local_copy(self.backend, self.root, [INDEX])
        if not found[0]:
            return False
        # the folder's index, within bounds: a FIFO or /dev/zero planted at its name is refused, not waited on
        path = os.path.join(folder, INDEX)
        hint = "remove it, or give another checkpoint.checkpoint_folder"
        if inputs.read_regular(path, inputs.MANIFEST_CAP, "model index", None, hint) != self.index:
            return False
        return bool(np.array_equal(self.backend.sizes(self.names), self.sizes))  # on S3: one listing

    def write(self, comm: Any, echo: Any) -> None:
        """Every rank writes its shards (i mod size == rank); then rank 0 the index."""
        mine = [i for i in range(len(self.shards)) if i % comm.size == comm.rank]
        total = sum(self.sizes)
        echo(f"Writing the model's {len(self.shards)} shard(s), {fmt_bytes(total)}, at {self.root}")
        if mine:
            self.backend.write_set(
                [self.names[i] for i in mine],
                [self.sizes[i] for i in mine],
                SetContent(overlays=[[(0, self.shards[i].header)] for i in mine]),
                self._options(),
            )
        comm.barrier()
        if comm.rank == 0:
            self.backend.write_set(
                [self.backend.join(self.root, INDEX)],
                [len(self.index)],
                SetContent(overlays=[[(0, self.index)]]),
                self._options(),
            )
        comm.barrier()

    def _options(self) -> SetOptions:
        engine, direct = self.backend.engine_for("posix")
        return SetOptions(engine=engine, direct=direct, qd=1, transfer=WRITE_TRANSFER, fsync=True)
