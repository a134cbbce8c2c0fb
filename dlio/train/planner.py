"""Config -> per-rank, per-epoch plan: which bytes are read, in what order, in which step.

Numpy only, O(samples), no Python loop per sample. The result crosses into C as two flat arrays:
`ops` (one record per read: file, offset, length, open/close flags) and `steps` (one record per
batch: its ops, its sample count, its compute time).

What a sample costs is decided by the format (dlio/dataset/formats): the whole file for npz / npy / jpeg /
png / csv (what numpy / Pillow / pandas read per sample), the sample's slice(s) for hdf5 and
indexed_binary, the framed records for tfrecord, read in `transfer_size` chunks as TensorFlow's
buffered reader does. A sample's file is opened before its first read and closed after its last
(PyTorch-style on-demand readers); very large reads are split into MAX_TRANSFER pieces so that
memory stays bounded by threads x queue depth x MAX_TRANSFER, not by the sample size.

Order and sharding. The index loaders (pytorch, dali) are modelled on DistributedSampler with
drop_last: one global sequence of samples (files in order, or shuffled when file_shuffle is on;
then samples shuffled globally when sample_shuffle is on, with the same seed on every rank), each
rank takes a contiguous block of floor(total / ranks) samples, and steps = block // batch, the same
on every rank (so uneven datasets never deadlock). The sample shuffle is a keyed permutation that
is computed at the positions of a rank's block only (SampleOrder), so planning costs what the rank
reads, not the dataset's sample count. Files left out (--skip-bad-files) go before shuffling.
Where DLIO differs on purpose (docs/dlio-facts.md §9): DLIO's index loaders ignore both shuffle settings
and read ascending every epoch; set
`dlio_fast.compat_dlio_order: true` to get that order. tfrecord is sharded by file round-robin and
read sequentially (a shuffle buffer reorders records in memory, not on disk), as tf.data does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, List, NoReturn, Optional, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import DatasetError
from dlio.config.timespec import TimeSpec
from dlio.dataset import ranges

MAX_TRANSFER = 4 << 20  # split larger reads (bounded memory; the kernel splits them anyway)
TF_BUFFER = 256 << 10  # TFRecordDataset's default read buffer


@dataclasses.dataclass
class EpochPlan:
    ops: np.ndarray  # _core.OP_DTYPE
    steps: np.ndarray  # _core.STEP_DTYPE
    samples: np.ndarray  # global sample ids read by this rank, in order (file*spf + index)
    nominal_bytes: int  # bytes of the ranges the plan reads

    @property
    def nsteps(self) -> int:
        return len(self.steps)


@dataclasses.dataclass(frozen=True)
class Layout:
    """What the planner needs to know about one split of a dataset on disk."""

    nfiles: int
    spf: int
    file_size: np.ndarray  # uint64 per file
    whole_file: bool  # a sample is its whole file
    table: Optional[ranges.Table] = None  # byte ranges per (file, sample) when not whole_file
    sequential: bool = False  # tfrecord: records streamed in file order
    no_io: bool = False  # synthetic
    bad: Optional[np.ndarray] = None  # files to leave out (--skip-bad-files), bool per file
    grouped: bool = False  # parquet: table rows are groups, read once per reader and epoch (grouped_ops)


def seed_for(seed: int, epoch: int, change_epoch: bool) -> int:
    return int(seed) + (int(epoch) if change_epoch else 0)


class SampleOrder:
    """The global sequence of sample ids (file * spf + index) of an epoch, the same on every rank,
    computed only at the positions asked for (`at`), so that a rank plans its own block in
    O(block): Megatron's 277 M samples are never listed to read 16,000 of them.

    The sequence: the files in order (or permuted: file_shuffle), each giving its spf samples in
    a row; with sample_shuffle, position p holds the element at keyed_permutation(p) of that.
    """

    def __init__(self, files: Any, spf: int, keys: Optional[np.ndarray] = None) -> None:
        self.files = np.asarray(files)  # int32 when it fits: ImageNet's 1.28 M files in 5 MB
        self.spf = int(spf)
        self.total = len(self.files) * self.spf
        self.keys = keys  # Feistel round keys, None: no sample shuffle

    def __len__(self) -> int:
        return self.total

    def at(self, pos: Any) -> np.ndarray:
        q = np.asarray(pos, np.int64)
        if self.keys is not None:
            q = keyed_permutation(q, self.total, self.keys)
        return self.files[q // self.spf].astype(np.int64) * self.spf + q % self.spf


FEISTEL_ROUNDS = 6


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-mixed 64-bit hash (uint64 arithmetic wraps, as intended)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def keyed_permutation(x: Any, n: int, keys: Iterable[Any]) -> np.ndarray:
    """x -> its image under a pseudo-random permutation of [0, n) chosen by keys, element-wise:
    a balanced Feistel network on the smallest 2^(2h) >= n, walked until the value lands below n
    (cycle walking keeps it a bijection of [0, n); the domain is < 4n, so few walks are needed)."""
    x = np.asarray(x, np.int64)
    h = max(1, -(-max(1, (n - 1).bit_length()) // 2))
    half, mask = np.uint64(h), np.uint64((1 << h) - 1)

    def rounds(v: np.ndarray) -> np.ndarray:
        left, right = v >> half, v & mask
        for k in keys:
            left, right = right, left ^ (_mix(right ^ k) & mask)
        return (left << half) | right

    out = rounds(x.astype(np.uint64))
    out_of_range = np.flatnonzero(out >= np.uint64(n))
    while out_of_range.size:
        out[out_of_range] = rounds(out[out_of_range])
        out_of_range = out_of_range[out[out_of_range] >= np.uint64(n)]
    return out.astype(np.int64)


def epoch_order(
    nfiles: int,
    spf: int,
    file_shuffle: str,
    sample_shuffle: str,
    seed: int,
    epoch: int,
    seed_change_epoch: bool,
    random_seed: Any = None,
    compat: bool = False,
    bad: Optional[np.ndarray] = None,
    path_folders: int = 0,
) -> SampleOrder:
    """The SampleOrder of an epoch. *_shuffle: 'off' | 'seed' | 'random'; 'random' uses
    random_seed, which the caller must make the same on every rank (rank 0 draws it and
    broadcasts). bad (bool per file): files left out before shuffling. path_folders > 1: the
    files listed by full path (dlio_fast.file_order: path), one of that many round-robin
    subfolders after another, instead of DLIO's listing by file name (index order)."""
    files = np.arange(nfiles, dtype=np.int32 if nfiles < 2**31 else np.int64)
    if bad is not None:
        files = files[~bad]
    if compat:
        return SampleOrder(files, spf)
    if path_folders > 1:  # file i is in subfolder i % S: sorted paths walk the folders in turn
        files = files[np.argsort(files % path_folders, kind="stable")]
    s = seed_for(seed, epoch, seed_change_epoch)
    if file_shuffle != "off":
        rng = np.random.default_rng(s if file_shuffle == "seed" else (random_seed, epoch, 1))
        rng.shuffle(files)
    keys = None
    if sample_shuffle != "off":
        rng = np.random.default_rng((s, 2) if sample_shuffle == "seed" else (random_seed, epoch, 2))
        keys = rng.integers(0, 2**63, size=FEISTEL_ROUNDS, dtype=np.uint64)
    return SampleOrder(files, spf, keys)


def sample_order(*args: Any, **kwargs: Any) -> np.ndarray:
    """The whole sequence of epoch_order(...) as an array (O(samples): for checks and small sets)."""
    order = epoch_order(*args, **kwargs)
    return order.at(np.arange(len(order), dtype=np.int64))


def shard(total: int, rank: int, size: int, batch: int, max_steps: Optional[int] = -1) -> Tuple[int, int]:
    """This rank's block of the global sequence: (first position, steps). A contiguous block of
    floor(total / size) positions, cut to whole batches."""
    per_rank = total // size
    steps = per_rank // batch
    if max_steps is not None and max_steps > 0:
        steps = min(steps, max_steps)
    return rank * per_rank, steps


def shard_files_round_robin(nfiles: int, rank: int, size: int) -> np.ndarray:
    """tf.data's shard(size, rank) over the file list (only when files >= ranks)."""
    return np.arange(rank, nfiles, size, dtype=np.int64) if nfiles >= size else np.arange(nfiles)


def record_stream(files: Any, spf: int, need: int, first: int = 0, every: int = 1) -> np.ndarray:
    """The first `need` records (ids file * spf + index) of the stream that reads `files` in order,
    spf records each, keeping records first, first + every, ...; it wraps around when shorter.
    O(need): BERT's 156 M records are never listed to read 48,000 of them."""
    total = max(0, -(-(len(files) * spf - first) // every))
    if need == 0 or total == 0:
        return np.zeros(0, np.int64)
    pos = first + (np.arange(need, dtype=np.int64) % total) * every
    return np.asarray(files, np.int64)[pos // spf] * spf + pos % spf


def _split_large(
    file: np.ndarray, offset: np.ndarray, length: np.ndarray, flags: np.ndarray, limit: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split ranges longer than limit into pieces; OPEN stays on the first, CLOSE on the last."""
    pieces = np.maximum(1, (length + limit - 1) // limit).astype(np.int64)
    if pieces.max(initial=1) == 1:
        return file, offset, length, flags
    idx = np.repeat(np.arange(len(length)), pieces)
    first = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    k = np.arange(len(idx)) - np.repeat(first, pieces)  # piece number within its range
    off = offset[idx] + k.astype(np.uint64) * np.uint64(limit)
    end = offset[idx] + length[idx]
    ln = np.minimum(np.uint64(limit), end - off)
    is_first = k == 0
    is_last = k == pieces[idx] - 1
    fl = np.where(is_first, flags[idx] & _core.OPF_OPEN, 0) | np.where(is_last, flags[idx] & _core.OPF_CLOSE, 0)
    return file[idx], off, ln, fl.astype(np.uint8)


def sample_ops(samples: np.ndarray, layout: Any, max_transfer: int = MAX_TRANSFER) -> Tuple[np.ndarray, np.ndarray]:
    """Ops for the samples in order and the number of ops per sample."""
    n = len(samples)
    files = (samples // layout.spf).astype(np.int64)
    if layout.no_io:
        return np.zeros(0, dtype=_core.OP_DTYPE), np.zeros(n, dtype=np.int64)
    if layout.whole_file:
        file = files
        offset = np.zeros(n, dtype=np.uint64)
        length = layout.file_size[files].astype(np.uint64)
        flags = np.full(n, _core.OPF_OPEN | _core.OPF_CLOSE, dtype=np.uint8)
        owner = np.arange(n)
    elif layout.table.uniform:  # one range per sample, by arithmetic
        file, offset, length = _uniform_ranges(samples, layout)
        flags = np.full(n, _core.OPF_OPEN | _core.OPF_CLOSE, dtype=np.uint8)
    else:
        t = layout.table
        key = t.file.astype(np.int64) * layout.spf + t.sample.astype(np.int64)
        first = np.searchsorted(key, samples, side="left")
        last = np.searchsorted(key, samples, side="right")
        count = last - first
        if (count == 0).any():
            _no_ranges(samples[count == 0][0], layout.spf)
        owner = np.repeat(np.arange(n), count)
        starts = np.repeat(first, count)
        k = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)  # range number in its sample
        ridx = starts + k
        file = t.file[ridx].astype(np.int64)
        offset = t.offset[ridx].astype(np.uint64)
        length = t.size[ridx].astype(np.uint64)
        is_first = k == 0
        is_last = k == np.repeat(count, count) - 1
        flags = (np.where(is_first, _core.OPF_OPEN, 0) | np.where(is_last, _core.OPF_CLOSE, 0)).astype(np.uint8)
    file, offset, length, flags = _split_large(file, offset, length, flags, max_transfer)
    ops = np.zeros(len(file), dtype=_core.OP_DTYPE)
    ops["file"] = file
    ops["offset"] = offset
    ops["length"] = length
    ops["flags"] = flags
    return ops, _ops_per_group(flags, n)


def grouped_ops(
    samples: np.ndarray, layout: Any, batch: int, readers: int, max_transfer: int = MAX_TRANSFER
) -> Tuple[np.ndarray, np.ndarray]:
    """Ops of the samples of a grouped layout (parquet) and the ops of each sample, which may be none.

    The table's rows are groups of ranges keyed (file, first sample of the group), and the file's
    footer keyed (file, spf). Reader r (PyTorch's worker of batch k: r = k mod readers) reads a group
    the first time one of its samples needs it in the epoch, and the footer before a file's first
    group, as DLIO's parquet reader caches both per worker; the later samples of the group read nothing.
    O(samples log groups), numpy only."""
    n, spf, t = len(samples), layout.spf, layout.table
    if n == 0:
        return np.zeros(0, dtype=_core.OP_DTYPE), np.zeros(0, dtype=np.int64)
    key = t.file.astype(np.int64) * (spf + 1) + t.sample.astype(np.int64)
    gkey, gfirst, gcount = np.unique(key, return_index=True, return_counts=True)  # the table is sorted by key
    files = samples // spf
    group = np.searchsorted(gkey, files * (spf + 1) + samples % spf, side="right") - 1
    lost = (group < 0) | (gkey[np.maximum(group, 0)] // (spf + 1) != files)  # no group of its file holds it
    if lost.any():
        _no_ranges(samples[lost][0], spf)
    footer = np.minimum(np.searchsorted(gkey, files * (spf + 1) + spf), len(gkey) - 1)
    has_footer = gkey[footer] == files * (spf + 1) + spf
    reader = (np.arange(n, dtype=np.int64) // max(1, batch)) % max(1, readers)
    first_group = _first_seen(reader * len(gkey) + group)
    first_file = _first_seen(reader * (int(files.max()) + 1) + files) & has_footer
    n_footer = np.where(first_file, gcount[footer], 0)
    count = n_footer + np.where(first_group, gcount[group], 0)
    owner = np.repeat(np.arange(n), count)
    k = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)  # range number in its sample
    nf = n_footer[owner]
    ridx = np.where(k < nf, gfirst[footer][owner] + k, gfirst[group][owner] + k - nf)
    flags = (np.where(k == 0, _core.OPF_OPEN, 0) | np.where(k == count[owner] - 1, _core.OPF_CLOSE, 0)).astype(np.uint8)
    file, offset, length = (
        t.file[ridx].astype(np.int64),
        t.offset[ridx].astype(np.uint64),
        t.size[ridx].astype(np.uint64),
    )
    limit = np.uint64(max_transfer)
    pieces = np.maximum(1, (length + limit - np.uint64(1)) // limit).astype(np.int64)  # _split_large's
    file, offset, length, flags = _split_large(file, offset, length, flags, max_transfer)
    ops = np.zeros(len(file), dtype=_core.OP_DTYPE)
    ops["file"], ops["offset"], ops["length"], ops["flags"] = file, offset, length, flags
    return ops, np.bincount(owner, weights=pieces, minlength=n).astype(np.int64)


def _first_seen(keys: np.ndarray) -> np.ndarray:
    """True where a key occurs for the first time in the array."""
    first = np.zeros(len(keys), dtype=bool)
    first[np.unique(keys, return_index=True)[1]] = True
    return first


def _no_ranges(sample: int, spf: int) -> NoReturn:
    raise DatasetError(f"no byte ranges known for sample {sample % spf} of file {sample // spf}")


def _uniform_ranges(samples: np.ndarray, layout: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(file, offset, length) of samples in a uniform table: O(samples), no index."""
    t = layout.table
    file = (samples // layout.spf).astype(np.int64)
    within = (samples % layout.spf).astype(np.uint64)
    if len(samples) and int(within.max()) >= t.count:
        _no_ranges(samples[within >= t.count][0], layout.spf)
    offset = t.first[file] + within * np.uint64(t.stride)
    return file, offset, np.full(len(samples), t.length, np.uint64)


def _ops_per_group(flags: np.ndarray, ngroups: int) -> np.ndarray:
    """Ops per sample (or per file run): each group starts with an OPEN op."""
    opens = np.flatnonzero(flags & _core.OPF_OPEN)
    if len(opens) != ngroups:
        raise AssertionError(f"{len(opens)} opens for {ngroups} groups")
    return np.diff(np.append(opens, len(flags))).astype(np.int64)


def stream_ops(
    samples: np.ndarray, layout: Any, batch: int, transfer: int = TF_BUFFER
) -> Tuple[np.ndarray, np.ndarray]:
    """tfrecord: per batch, each run of consecutive records of one file is read as one stream
    (open, sequential reads of `transfer` bytes, close), as TFRecordDataset's buffered reader does.
    Returns ops and the ops per batch."""
    n = len(samples)
    if n == 0:
        return np.zeros(0, dtype=_core.OP_DTYPE), np.zeros(0, dtype=np.int64)
    t = layout.table
    if t.uniform:
        file, start, length = _uniform_ranges(samples, layout)
    else:
        key = t.file.astype(np.int64) * layout.spf + t.sample.astype(np.int64)
        ridx = np.searchsorted(key, samples)
        if (ridx >= len(key)).any() or (key[np.minimum(ridx, len(key) - 1)] != samples).any():
            raise DatasetError("tfrecord index does not cover every record")
        file = t.file[ridx].astype(np.int64)
        start = t.offset[ridx].astype(np.uint64)
        length = t.size[ridx].astype(np.uint64)
    end = start + length
    pos = np.arange(n)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (file[1:] != file[:-1]) | (pos[1:] % batch == 0) | (start[1:] != end[:-1])
    run_id = np.cumsum(new_run) - 1
    firsts = np.flatnonzero(new_run)
    lasts = np.append(firsts[1:], n) - 1
    rf, ro = file[firsts], start[firsts]
    rl = end[lasts] - ro
    flags = np.full(len(firsts), _core.OPF_OPEN | _core.OPF_CLOSE, dtype=np.uint8)
    f2, o2, l2, fl2 = _split_large(rf, ro, rl, flags, transfer)
    ops = np.zeros(len(f2), dtype=_core.OP_DTYPE)
    ops["file"], ops["offset"], ops["length"], ops["flags"] = f2, o2, l2, fl2
    per_run = _ops_per_group(fl2, len(firsts))
    run_batch = firsts // batch
    per_batch = np.bincount(run_batch, weights=per_run, minlength=n // batch).astype(np.int64)
    del run_id
    return ops, per_batch


@dataclasses.dataclass(frozen=True)
class Settings:
    """The planner's view of a config for one split (train or eval)."""

    batch: int
    file_shuffle: str = "off"
    sample_shuffle: str = "off"
    seed: int = 123
    seed_change_epoch: bool = True
    max_steps: int = -1  # total_training_steps (per epoch, as DLIO), -1 = all
    compat_dlio_order: bool = False
    path_folders: int = 0  # dlio_fast.file_order: path over this many subfolders (epoch_order)
    transfer_size: int = TF_BUFFER
    max_transfer: int = MAX_TRANSFER
    readers: int = 1  # reader threads (PyTorch workers): batch k is read by reader k mod readers


def _epoch_order(layout: Layout, settings: Settings, epoch: int, random_seed: Optional[int]) -> SampleOrder:
    """The global sample order of one epoch of a non-sequential split."""
    s = settings
    return epoch_order(
        layout.nfiles,
        layout.spf,
        s.file_shuffle,
        s.sample_shuffle,
        s.seed,
        epoch,
        s.seed_change_epoch,
        random_seed,
        s.compat_dlio_order,
        layout.bad,
        s.path_folders,
    )


def epoch_plans(
    layout: Layout,
    settings: Settings,
    time_spec: TimeSpec,
    size: int,
    epoch: int,
    random_seed: Optional[int] = None,
    ranks: Optional[Iterable[int]] = None,
) -> List[EpochPlan]:
    """Plans of several ranks (all by default) for one epoch, the global order set up once."""
    order = None if layout.sequential else _epoch_order(layout, settings, epoch, random_seed)
    return [
        epoch_plan(layout, settings, time_spec, r, size, epoch, random_seed, order=order)
        for r in (range(size) if ranks is None else ranks)
    ]


def epoch_plan(
    layout: Layout,
    settings: Settings,
    time_spec: TimeSpec,
    rank: int,
    size: int,
    epoch: int,
    random_seed: Optional[int] = None,
    order: Optional[SampleOrder] = None,
) -> EpochPlan:
    """The plan of one rank for one epoch of one split.

    time_spec.draw(rng, n) gives the per-step compute seconds; the draws are seeded by (seed,
    epoch, rank) so a run is reproducible and ranks differ as real accelerators do.
    """
    s = settings
    if layout.sequential:
        files = shard_files_round_robin(layout.nfiles, rank, size)
        if layout.bad is not None:
            files = files[~layout.bad[files]]
        if s.file_shuffle != "off" and not s.compat_dlio_order:
            rng = np.random.default_rng(seed_for(s.seed, epoch, s.seed_change_epoch))
            files = rng.permutation(files)
        # Every rank takes DLIO's floor(records / (batch * ranks)) steps (the per-step barrier needs
        # the same count everywhere); a rank with fewer records wraps around its own files, as
        # tf.data's .repeat() does.
        good = layout.nfiles - (int(layout.bad.sum()) if layout.bad is not None else 0)
        steps = good * layout.spf // (s.batch * size)
        if s.max_steps > 0:
            steps = min(steps, s.max_steps)
        # fewer files than ranks: the records are sharded instead
        first, every = (rank, size) if layout.nfiles < size else (0, 1)
        samples = record_stream(files, layout.spf, steps * s.batch, first, every)
        if steps and not len(samples):
            raise DatasetError(f"rank {rank} has no tfrecord files to read (all of its files are bad)")
        ops, per_batch = stream_ops(samples, layout, s.batch, s.transfer_size)
    else:
        if order is None:
            order = _epoch_order(layout, s, epoch, random_seed)
        first, steps = shard(len(order), rank, size, s.batch, s.max_steps)
        samples = order.at(np.arange(first, first + steps * s.batch, dtype=np.int64))
        if layout.grouped:
            ops, per_sample = grouped_ops(samples, layout, s.batch, s.readers, s.max_transfer)
        else:
            ops, per_sample = sample_ops(samples, layout, s.max_transfer)
        per_batch = per_sample.reshape(steps, s.batch).sum(axis=1) if steps else np.zeros(0, np.int64)
    plan_steps = np.zeros(steps, dtype=_core.STEP_DTYPE)
    if steps:
        plan_steps["nops"] = per_batch
        plan_steps["first_op"] = np.concatenate([[0], np.cumsum(per_batch)[:-1]])
        plan_steps["nsamples"] = s.batch
        rng = np.random.default_rng((s.seed, epoch, rank, 7))
        secs = np.asarray(time_spec.draw(rng, steps), dtype=np.float64)
        plan_steps["compute_ns"] = np.rint(np.maximum(secs, 0.0) * 1e9).astype(np.uint64)
    return EpochPlan(
        ops=ops, steps=plan_steps, samples=samples, nominal_bytes=int(ops["length"].sum()) if len(ops) else 0
    )
