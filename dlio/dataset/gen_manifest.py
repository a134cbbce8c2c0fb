"""The last step of a generation: each file's sample ranges (formats that read part of a file) and
CRCs (with checksum), and the manifest of each split, or this rank's part of it."""

import os
from typing import Callable, List, Optional, Tuple

import numpy as np

from dlio.dataset import ranges
from dlio.dataset.formats import Extents
from dlio.dataset.gen_plan import READ_ONLY, GenPlan
from dlio.dataset.manifest import Manifest, file_crc, manifest_path, merge_parts, range_crcs, save_manifest
from dlio.dataset.spec import SPLITS


def ranges_and_crcs(pl: GenPlan, written: List[int], checksum: bool) -> None:
    """Sample ranges (formats that read part of a file) and CRCs (with checksum) of every file of
    this rank: from the format's layout or the files for written ones, from the old manifest when
    it has them for skipped ones."""
    spec, fmt, spf = pl.spec, pl.fmt, pl.spec.num_samples_per_file
    layout = fmt.layout_extents
    if not fmt.WHOLE_FILE:
        for i in written + pl.skipped:
            ext = _old_ranges(pl, i) if i in pl.skipped_set else None
            if ext is None and layout is not None:
                ext = layout(tuple(int(x) for x in pl.dims[i]), spf, spec)
            pl.per_file[i] = ranges.compact(*(ext if ext is not None else fmt.extents(pl.paths[i], spf, spec)))
    if checksum:
        for i in written + pl.skipped:
            c = _old_crc(pl, i) if i in pl.skipped_set else None
            pl.crcs[i] = c if c is not None else file_crc(pl.paths[i])
        if not fmt.WHOLE_FILE:
            for i in written:
                pl.range_crcs[i] = range_crcs(pl.paths[i], *ranges.as_arrays(pl.per_file[i])[1:])


def _old_file(pl: GenPlan, i: int) -> Tuple[Optional[Manifest], int]:
    """The previous generation's manifest of file i's split (None without one), and i's number in it."""
    ntrain = pl.spec.num_files_train
    return (pl.old.get("train"), i) if i < ntrain else (pl.old.get("valid"), i - ntrain)


def _old_ranges(pl: GenPlan, i: int) -> Optional[Extents]:
    m, j = _old_file(pl, i)
    known = m.table.of_file(j) if m is not None and m.table is not None else None
    return known if known is not None and known[0].size else None


def _old_crc(pl: GenPlan, i: int) -> Optional[int]:
    m, j = _old_file(pl, i)
    return int(m.file_crc32c[j]) if m is not None and m.file_crc32c is not None else None


def save_manifests(pl: GenPlan, checksum: bool, rank: int, size: int, barrier: Optional[Callable[[], object]]) -> None:
    """The manifest of each split (or this rank's part of it; rank 0 merges the parts after
    `barrier` when it is given, else load_manifest() merges them later)."""
    spec, ntrain, mine = pl.spec, pl.spec.num_files_train, pl.mine
    for split, first, n in (("train", 0, ntrain), ("valid", ntrain, spec.num_files_eval)):
        if n == 0:
            continue
        idx = mine[(mine >= first) & (mine < first + n)]
        m = Manifest(
            split=split,
            format=spec.format,
            paths=[pl.paths[i] for i in idx.tolist()],
            file_size=pl.sizes[idx].astype(np.uint64),
            num_samples_per_file=spec.num_samples_per_file,
            whole_file=pl.fmt.WHOLE_FILE,
            meta={
                "gen_key": spec.generation_key(),
                "source": "generate",
                "files": (idx - first).tolist() if size > 1 else None,
            },
        )
        if not pl.fmt.WHOLE_FILE:  # a part's flat table numbers files within the split
            m.table = ranges.build([pl.per_file[i] for i in idx.tolist()], files=idx - first)
        if checksum:
            m.file_crc32c = np.array([pl.crcs[i] for i in idx.tolist()], dtype=np.uint32)
            if m.table is not None:
                m.range_crc32c = np.concatenate(
                    [
                        pl.range_crcs[i]
                        if i in pl.range_crcs
                        else range_crcs(pl.paths[i], *ranges.as_arrays(pl.per_file[i])[1:])
                        for i in idx.tolist()
                    ]
                    or [np.zeros(0, np.uint32)]
                )
        try:
            save_manifest(spec, m, part=None if size == 1 else (rank, size))
        except OSError as e:
            # nothing was written and the folder is read-only: the complete dataset is left as it is
            if pl.todo or e.errno not in READ_ONLY:
                raise
    if size > 1 and barrier is not None:
        barrier()
        if rank == 0:
            for split in SPLITS:
                merged = merge_parts(spec, split) if spec.num_files(split) else None
                if merged is not None:
                    save_manifest(spec, merged)
                    for r in range(size):
                        try:
                            os.unlink(manifest_path(spec, split, part=(r, size)))
                        except OSError:
                            pass
        barrier()
