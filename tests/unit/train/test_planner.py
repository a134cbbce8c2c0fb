"""dlio.train.planner: config -> per-rank, per-epoch plans. Every figure is recomputed here independently.

Step counts follow DLIO's test cases (docs/dlio-facts.md §8): steps/rank/epoch = floor(files*spf/(bs*ranks)),
equal on every rank (the per-step barrier would deadlock otherwise).
"""

import time

import numpy as np
import pytest

from dlio import _core
from dlio.base.errors import DatasetError
from dlio.config import parse_time
from dlio.dataset import ranges
from dlio.train import planner
from dlio.train.planner import Layout, Settings, epoch_plan, sample_order

OPEN, CLOSE = _core.OPF_OPEN, _core.OPF_CLOSE
ZERO = parse_time(0)

# (files, batch, ranks): DLIO's tests (docs/dlio-facts.md §8) incl. the uneven ones and (9|10, 2|3, 2)
STEP_CASES = [
    (16, 4, 2),
    (17, 4, 2),
    (13, 4, 3),
    (24, 4, 3),
    (25, 4, 3),
    (145, 16, 3),
    (9, 2, 2),
    (9, 3, 2),
    (10, 2, 2),
    (10, 3, 2),
]


def whole(nfiles, spf=1, size=4096, sizes=None):
    fs = np.asarray(sizes if sizes is not None else [size] * nfiles, dtype=np.uint64)
    return Layout(nfiles=nfiles, spf=spf, file_size=fs, whole_file=True)


def ranged(nfiles, spf, ranges_per_sample=1, base=1000, seq=False):
    """A hand-made layout: sample j of file f has `ranges_per_sample` ranges; range k has length
    base + 10*f + 3*j + k, laid out back to back from offset 64 (a header), file after file."""
    rf, rs, ro, rl, fsz = [], [], [], [], []
    for f in range(nfiles):
        off = 64
        for j in range(spf):
            for k in range(ranges_per_sample):
                ln = base + 10 * f + 3 * j + k
                rf.append(f), rs.append(j), ro.append(off), rl.append(ln)
                off += ln
        fsz.append(off + 16)
    table = ranges.Table(
        file=np.asarray(rf, np.uint32),
        sample=np.asarray(rs, np.uint32),
        offset=np.asarray(ro, np.uint64),
        size=np.asarray(rl, np.uint64),
    )
    return Layout(
        nfiles=nfiles, spf=spf, file_size=np.asarray(fsz, np.uint64), whole_file=False, table=table, sequential=seq
    )


def expected_ranges(layout):
    """{(file, sample): [(offset, length), ...]} straight from the layout arrays."""
    out = {}
    for f, s, o, ln in zip(*layout.table.flat(layout.nfiles)):
        out.setdefault((int(f), int(s)), []).append((int(o), int(ln)))
    return out


def check_partition(plan):
    """first_op/nops of the steps tile the ops array exactly, in order."""
    st = plan.steps
    if len(st) == 0:
        return
    first = st["first_op"].astype(np.int64)
    nops = st["nops"].astype(np.int64)
    assert first[0] == 0
    assert np.array_equal(first[1:], first[:-1] + nops[:-1])
    assert first[-1] + nops[-1] == len(plan.ops)


def split_samples(ops):
    """Ops -> list of per-sample op slices (a sample starts at an OPEN op)."""
    opens = np.flatnonzero(ops["flags"] & OPEN)
    bounds = list(opens) + [len(ops)]
    return [ops[bounds[i] : bounds[i + 1]] for i in range(len(opens))]


# ------------------------------------------------------------------ step counts, sharding


@pytest.mark.parametrize("files,bs,ranks", STEP_CASES)
@pytest.mark.parametrize("shuffle", ["off", "seed"])
def test_steps_equal_dlio_formula_on_every_rank(files, bs, ranks, shuffle):
    want = files // (bs * ranks)
    assert want == (files * 1) // (bs * ranks)
    layout = whole(files)
    st = Settings(batch=bs, sample_shuffle=shuffle, file_shuffle=shuffle)
    seen = []
    for r in range(ranks):
        p = epoch_plan(layout, st, ZERO, r, ranks, 1)
        assert p.nsteps == want
        assert len(p.samples) == want * bs
        assert np.all(p.steps["nsamples"] == bs)
        check_partition(p)
        seen.append(p.samples)
    allv = np.concatenate(seen)
    assert len(np.unique(allv)) == len(allv)  # no sample read twice in an epoch
    assert allv.min() >= 0 and allv.max() < files


@pytest.mark.parametrize("files,bs,ranks", STEP_CASES)
def test_steps_tfrecord_sequential_equal_on_every_rank(files, bs, ranks):
    layout = ranged(files, 1, seq=True)
    want = files // (bs * ranks)
    counts = [epoch_plan(layout, Settings(batch=bs), ZERO, r, ranks, 1).nsteps for r in range(ranks)]
    assert counts == [want] * ranks


@pytest.mark.parametrize("nfiles,spf,ranks,bs", [(1, 5, 2, 1), (1, 7, 3, 2), (2, 5, 3, 1)])
def test_tfrecord_fewer_files_than_ranks_same_steps(nfiles, spf, ranks, bs):
    """Fewer files than ranks: records are sharded; every rank must still take the same steps."""
    layout = ranged(nfiles, spf, seq=True)
    plans = [epoch_plan(layout, Settings(batch=bs), ZERO, r, ranks, 1) for r in range(ranks)]
    want = nfiles * spf // (ranks * bs)
    assert [p.nsteps for p in plans] == [want] * ranks
    allv = np.concatenate([p.samples for p in plans])
    assert len(np.unique(allv)) == len(allv)


@pytest.mark.parametrize("spf", [1, 3])
def test_steps_with_samples_per_file(spf):
    files, bs, ranks = 17, 4, 2
    want = files * spf // (bs * ranks)
    for r in range(ranks):
        assert epoch_plan(whole(files, spf), Settings(batch=bs), ZERO, r, ranks, 1).nsteps == want


@pytest.mark.parametrize("cap", [2, 3])
def test_total_training_steps_caps(cap):
    layout = whole(64)
    for r in range(2):
        p = epoch_plan(layout, Settings(batch=4, max_steps=cap), ZERO, r, 2, 1)
        assert p.nsteps == cap and len(p.samples) == cap * 4
        check_partition(p)
    # a cap above the natural count changes nothing
    assert epoch_plan(layout, Settings(batch=4, max_steps=100), ZERO, 0, 2, 1).nsteps == 8
    assert epoch_plan(ranged(64, 1, seq=True), Settings(batch=4, max_steps=cap), ZERO, 1, 2, 1).nsteps == cap


@pytest.mark.parametrize("fs,ss", [("off", "off"), ("seed", "off"), ("off", "seed"), ("seed", "seed")])
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_union_over_ranks_covers_every_sample_once(fs, ss, ranks):
    files, spf, bs = 32, 3, 4  # 96 samples: divisible by bs*ranks for 1, 2, 4
    layout = whole(files, spf)
    for epoch in (1, 2):
        got = np.concatenate(
            [
                epoch_plan(
                    layout, Settings(batch=bs, file_shuffle=fs, sample_shuffle=ss), ZERO, r, ranks, epoch
                ).samples
                for r in range(ranks)
            ]
        )
        assert np.array_equal(np.sort(got), np.arange(files * spf))


@pytest.mark.parametrize("kind", ["whole", "ranged", "sequential", "no_io"])
@pytest.mark.parametrize("bs,ranks", [(4, 1), (2, 2)])
def test_fewer_samples_than_a_batch_per_rank_gives_empty_plan(kind, bs, ranks):
    """3 samples, batch x ranks > 3: zero steps on every rank, empty arrays (no crash)."""
    layout = {
        "whole": whole(3),
        "ranged": ranged(3, 1),
        "sequential": ranged(3, 1, seq=True),
        "no_io": Layout(nfiles=3, spf=1, file_size=np.ones(3, np.uint64), whole_file=False, no_io=True),
    }[kind]
    for r in range(ranks):
        p = epoch_plan(layout, Settings(batch=bs), parse_time(0.001), r, ranks, 1)
        assert p.nsteps == 0 and len(p.ops) == 0 and len(p.samples) == 0 and p.nominal_bytes == 0


def test_synthetic_plan_has_steps_without_reads():
    layout = Layout(nfiles=8, spf=2, file_size=np.ones(8, np.uint64), whole_file=False, no_io=True)
    p = epoch_plan(layout, Settings(batch=4), parse_time(0.001), 0, 1, 1)
    assert p.nsteps == 4 and len(p.ops) == 0 and np.all(p.steps["nops"] == 0)
    assert np.all(p.steps["nsamples"] == 4) and np.all(p.steps["compute_ns"] == 1_000_000)


# ------------------------------------------------------------------ shuffles


def test_sample_order_off_is_identity():
    assert np.array_equal(sample_order(10, 3, "off", "off", 123, 1, True), np.arange(30))


def test_file_shuffle_permutes_files_keeps_samples_together():
    seq = sample_order(20, 3, "seed", "off", 7, 1, True)
    assert np.array_equal(np.sort(seq), np.arange(60))
    files = seq.reshape(20, 3) // 3
    assert np.all(files == files[:, :1])  # the 3 samples of a file stay consecutive
    assert np.array_equal(seq.reshape(20, 3) % 3, np.tile(np.arange(3), (20, 1)))
    assert not np.array_equal(files[:, 0], np.arange(20))


@pytest.mark.parametrize("fs,ss", [("seed", "off"), ("off", "seed"), ("seed", "seed")])
def test_shuffle_seed_semantics(fs, ss):
    n, spf = 50, 2
    a1 = sample_order(n, spf, fs, ss, 123, 1, True)
    assert np.array_equal(np.sort(a1), np.arange(n * spf))  # a permutation
    assert not np.array_equal(a1, np.arange(n * spf))
    assert np.array_equal(a1, sample_order(n, spf, fs, ss, 123, 1, True))  # reproducible
    assert not np.array_equal(a1, sample_order(n, spf, fs, ss, 124, 1, True))  # seed matters
    a2 = sample_order(n, spf, fs, ss, 123, 2, True)
    assert not np.array_equal(a1, a2)  # seed_change_epoch
    b1 = sample_order(n, spf, fs, ss, 123, 1, False)
    b2 = sample_order(n, spf, fs, ss, 123, 2, False)
    assert np.array_equal(b1, b2)  # no change per epoch
    assert np.array_equal(np.sort(b2), np.arange(n * spf))


def test_random_shuffle_uses_shared_random_seed():
    a = sample_order(40, 1, "random", "random", 123, 1, True, random_seed=99)
    assert np.array_equal(a, sample_order(40, 1, "random", "random", 123, 1, True, random_seed=99))
    assert not np.array_equal(a, sample_order(40, 1, "random", "random", 123, 1, True, random_seed=100))
    assert np.array_equal(np.sort(a), np.arange(40))


def test_epoch_plans_reproducible_and_change_per_epoch():
    layout = whole(40)
    st = Settings(batch=4, sample_shuffle="seed", seed=5)
    p1 = epoch_plan(layout, st, ZERO, 1, 2, 1)
    assert np.array_equal(p1.samples, epoch_plan(layout, st, ZERO, 1, 2, 1).samples)
    assert np.array_equal(p1.ops, epoch_plan(layout, st, ZERO, 1, 2, 1).ops)
    assert not np.array_equal(p1.samples, epoch_plan(layout, st, ZERO, 1, 2, 2).samples)
    st2 = Settings(batch=4, sample_shuffle="seed", seed=5, seed_change_epoch=False)
    assert np.array_equal(
        epoch_plan(layout, st2, ZERO, 1, 2, 1).samples, epoch_plan(layout, st2, ZERO, 1, 2, 3).samples
    )


def test_compat_dlio_order_ascending_contiguous_blocks():
    files, bs, ranks = 17, 4, 2
    st = Settings(batch=bs, file_shuffle="seed", sample_shuffle="seed", compat_dlio_order=True)
    per_rank = files // ranks
    for epoch in (1, 2):
        for r in range(ranks):
            s = epoch_plan(whole(files), st, ZERO, r, ranks, epoch).samples
            steps = files // (bs * ranks)
            assert np.array_equal(s, np.arange(r * per_rank, r * per_rank + steps * bs))


def test_tfrecord_round_robin_files_in_order():
    layout = ranged(6, 4, seq=True)
    p = epoch_plan(layout, Settings(batch=2), ZERO, 1, 2, 1)
    # rank 1 of 2 gets files 1, 3, 5, records in file order
    want = np.concatenate([np.arange(4) + 4 * f for f in (1, 3, 5)])
    assert np.array_equal(p.samples, want)


# ------------------------------------------------------------------ ops


@pytest.mark.parametrize("ss", ["off", "seed"])
def test_whole_file_ops(ss):
    sizes = [1000 + 17 * i for i in range(12)]
    layout = whole(12, spf=2, sizes=sizes)
    p = epoch_plan(layout, Settings(batch=3, sample_shuffle=ss), ZERO, 0, 1, 1)
    assert len(p.ops) == len(p.samples) == 24
    assert np.array_equal(p.ops["file"], p.samples // 2)
    assert np.all(p.ops["offset"] == 0)
    assert np.array_equal(p.ops["length"], np.asarray(sizes, np.uint64)[p.samples // 2])
    assert np.all(p.ops["flags"] == OPEN | CLOSE)
    assert np.all(p.ops["op"] == _core.OP_READ)
    assert p.nominal_bytes == sum(sizes) * 2
    check_partition(p)
    assert np.all(p.steps["nops"] == 3)


@pytest.mark.parametrize("nranges", [1, 3])  # indexed_binary: 1 range, hdf5 with 3 datasets: 3
def test_ranged_ops_come_from_layout(nranges):
    layout = ranged(10, 4, ranges_per_sample=nranges)
    exp = expected_ranges(layout)
    for r in range(2):
        p = epoch_plan(layout, Settings(batch=2, sample_shuffle="seed"), ZERO, r, 2, 1)
        per = split_samples(p.ops)
        assert len(per) == len(p.samples)
        for sid, ops in zip(p.samples, per):
            f, j = int(sid) // 4, int(sid) % 4
            assert np.all(ops["file"] == f)
            assert [(int(o), int(l)) for o, l in zip(ops["offset"], ops["length"])] == exp[(f, j)]
            assert ops["flags"][0] & OPEN and ops["flags"][-1] & CLOSE
            assert not np.any(ops["flags"][1:] & OPEN) and not np.any(ops["flags"][:-1] & CLOSE)
        check_partition(p)
        assert p.nominal_bytes == sum(l for sid in p.samples for _, l in exp[(int(sid) // 4, int(sid) % 4)])
        # each step's ops are exactly its samples' ops
        for k, step in enumerate(p.steps):
            sids = p.samples[k * 2 : (k + 1) * 2]
            assert step["nops"] == 2 * nranges
            sl = p.ops[int(step["first_op"]) : int(step["first_op"]) + int(step["nops"])]
            assert int(sl["length"].sum()) == sum(l for s in sids for _, l in exp[(int(s) // 4, int(s) % 4)])


def test_missing_range_is_an_error():
    t = ranged(3, 2).table
    keep = ~((t.file == 1) & (t.sample == 1))
    bad = Layout(
        nfiles=3,
        spf=2,
        file_size=ranged(3, 2).file_size,
        whole_file=False,
        table=ranges.Table(file=t.file[keep], sample=t.sample[keep], offset=t.offset[keep], size=t.size[keep]),
    )
    with pytest.raises(DatasetError, match="sample 1 of file 1"):
        epoch_plan(bad, Settings(batch=1), ZERO, 0, 1, 1)


@pytest.mark.parametrize("limit", [1000, 4096, 1 << 20])
def test_large_reads_split_at_max_transfer(limit):
    sizes = [1, 999, 1000, 1001, 4095, 4096, 4097, 2 * 4096 + 3, 3 << 20, 12345]
    layout = whole(len(sizes), sizes=sizes)
    p = epoch_plan(layout, Settings(batch=2, max_transfer=limit), ZERO, 0, 1, 1)
    per = split_samples(p.ops)
    assert len(per) == len(sizes)
    for f, ops in enumerate(per):
        size = sizes[f]
        n = max(1, -(-size // limit))
        assert len(ops) == n
        assert np.all(ops["file"] == f)
        assert int(ops["length"].sum()) == size  # bytes preserved
        assert np.all(ops["length"] <= limit)
        assert np.array_equal(ops["offset"], np.arange(n, dtype=np.uint64) * limit)  # contiguous
        assert ops["flags"][0] & OPEN and ops["flags"][-1] & CLOSE
        assert np.sum((ops["flags"] & OPEN) != 0) == 1 and np.sum((ops["flags"] & CLOSE) != 0) == 1
    assert p.nominal_bytes == sum(sizes)
    check_partition(p)


def test_default_max_transfer_split():
    size = 10 * (1 << 20) + 5
    p = epoch_plan(whole(2, sizes=[size, size]), Settings(batch=1), ZERO, 0, 1, 1)
    assert len(p.ops) == 2 * 3
    assert np.all(p.ops["length"] <= planner.MAX_TRANSFER)
    assert int(p.ops["length"].sum()) == 2 * size
    assert list(p.steps["nops"]) == [3, 3]


def test_ranged_split_keeps_flags():
    layout = ranged(2, 2, ranges_per_sample=2, base=2500)
    p = epoch_plan(layout, Settings(batch=1, max_transfer=1000), ZERO, 0, 1, 1)
    exp = expected_ranges(layout)
    for sid, ops in zip(p.samples, split_samples(p.ops)):
        rng = exp[(int(sid) // 2, int(sid) % 2)]
        assert len(ops) == sum(-(-l // 1000) for _, l in rng)
        assert int(ops["length"].sum()) == sum(l for _, l in rng)
        assert ops["flags"][-1] & CLOSE
    check_partition(p)


def test_tfrecord_stream_ops_coalesce_per_batch():
    spf, bs, transfer = 6, 4, 1500
    layout = ranged(3, spf, seq=True, base=1000)
    exp = expected_ranges(layout)
    p = epoch_plan(layout, Settings(batch=bs, transfer_size=transfer), ZERO, 0, 1, 1)
    assert p.nsteps == 3 * spf // bs
    assert np.array_equal(p.samples, np.arange(3 * spf)[: p.nsteps * bs])
    # independent model: within a batch, consecutive records of one file form one stream
    runs_per_batch = []
    for k in range(p.nsteps):
        sids = p.samples[k * bs : (k + 1) * bs]
        runs = []
        for s in sids:
            f, j = int(s) // spf, int(s) % spf
            o, l = exp[(f, j)][0]
            if runs and runs[-1][0] == f and runs[-1][1] + runs[-1][2] == o:
                runs[-1][2] += l
            else:
                runs.append([f, o, l])
        runs_per_batch.append(runs)
    ops_per_batch = [sum(-(-l // transfer) for _, _, l in runs) for runs in runs_per_batch]
    assert list(p.steps["nops"]) == ops_per_batch
    check_partition(p)
    for k, runs in enumerate(runs_per_batch):
        st = p.steps[k]
        sl = p.ops[int(st["first_op"]) : int(st["first_op"]) + int(st["nops"])]
        streams = split_samples(sl)
        assert len(streams) == len(runs)
        for (f, o, l), ops in zip(runs, streams):
            assert np.all(ops["file"] == f)
            assert int(ops["offset"][0]) == o and int(ops["length"].sum()) == l
            assert np.all(ops["length"] <= transfer)
            assert np.array_equal(ops["offset"][1:], ops["offset"][:-1] + ops["length"][:-1])
            assert ops["flags"][0] & OPEN and ops["flags"][-1] & CLOSE
    # batch 1 spans files 0 and 1: two streams
    assert len(runs_per_batch[1]) == 2
    assert p.nominal_bytes == sum(l for (f, j), rr in exp.items() for _, l in rr if f * spf + j < p.nsteps * bs)


# ------------------------------------------------------------------ compute times


def test_compute_scalar_exact():
    p = epoch_plan(whole(40), Settings(batch=2), parse_time(0.0123), 0, 1, 1)
    assert np.all(p.steps["compute_ns"] == 12_300_000)


def test_compute_normal_mean_and_reproducible():
    spec = parse_time({"mean": 0.01, "stdev": 0.002})
    layout = whole(20000)
    p = epoch_plan(layout, Settings(batch=1), spec, 0, 1, 1)
    secs = p.steps["compute_ns"].astype(np.float64) / 1e9
    # 20000 draws: standard error of the mean is 0.002/sqrt(20000) = 1.4e-5
    assert abs(secs.mean() - 0.01) < 1e-4
    assert abs(secs.std() - 0.002) < 1e-4
    again = epoch_plan(layout, Settings(batch=1), spec, 0, 1, 1)
    assert np.array_equal(p.steps["compute_ns"], again.steps["compute_ns"])
    other_rank = epoch_plan(layout, Settings(batch=1), spec, 1, 2, 1)
    assert not np.array_equal(p.steps["compute_ns"][:100], other_rank.steps["compute_ns"][:100])


def test_compute_uniform_bounds():
    spec = parse_time({"type": "uniform", "min": 0.001, "max": 0.003})
    ns = epoch_plan(whole(5000), Settings(batch=1), spec, 0, 1, 1).steps["compute_ns"]
    assert ns.min() >= 1_000_000 and ns.max() <= 3_000_000
    assert abs(ns.mean() / 1e9 - 0.002) < 5e-5


# ------------------------------------------------------------------ scale


def test_imagenet_epoch_plans_at_scale():
    nfiles, bs, ranks = 1_281_167, 400, 8
    rng = np.random.default_rng(1)
    layout = whole(nfiles, sizes=rng.integers(60_000, 200_000, nfiles).astype(np.uint64))
    st = Settings(batch=bs, sample_shuffle="seed", file_shuffle="seed")
    t0 = time.perf_counter()
    plans = [epoch_plan(layout, st, parse_time({"mean": 0.224, "stdev": 0.01}), r, ranks, 1) for r in range(ranks)]
    dt = time.perf_counter() - t0
    print(f"\nImageNet epoch plan, {ranks} ranks: {dt:.3f} s total, {dt / ranks * 1e3:.1f} ms per rank")
    steps = nfiles // (bs * ranks)
    per_rank = nfiles // ranks
    for p in plans:
        assert p.nsteps == steps == 400
        assert len(p.samples) == steps * bs
        assert len(p.ops) == steps * bs
        # O(samples / rank): ops 24 B, samples 8 B, steps 24 B per record
        size = p.ops.nbytes + p.samples.nbytes + p.steps.nbytes
        assert size <= 40 * per_rank
    allv = np.concatenate([p.samples for p in plans])
    assert len(np.unique(allv)) == len(allv)


def uniform_pair(nfiles, spf, first, stride, length, seq=False):
    """The same regular ranges twice: as a uniform table and as flat arrays."""
    firsts = np.asarray(first, np.uint64)
    uni = ranges.Table(first=firsts, stride=stride, length=length, count=spf)
    f, smp, o, ln = uni.flat(nfiles)
    sizes = firsts + np.uint64(spf * stride)
    mk = lambda t: Layout(nfiles=nfiles, spf=spf, file_size=sizes, whole_file=False, table=t, sequential=seq)  # noqa: E731
    return mk(uni), mk(ranges.Table(file=f, sample=smp, offset=o, size=ln))


@pytest.mark.parametrize("seq", [False, True])
@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("shuffle", ["off", "seed"])
def test_uniform_table_plans_exactly_as_the_flat_one(seq, ranks, shuffle):
    """Arithmetic on a uniform table (O(files)) gives the plan the flat arrays give, op for op."""
    uni, flat = uniform_pair(7, 50, [0, 100, 7, 4096, 12, 0, 999], stride=2516, length=2516, seq=seq)
    st = Settings(
        batch=8, file_shuffle=shuffle, sample_shuffle=shuffle, max_steps=9, transfer_size=10000, max_transfer=3000
    )
    for r in range(ranks):
        a = epoch_plan(uni, st, parse_time(0.001), r, ranks, 2)
        b = epoch_plan(flat, st, parse_time(0.001), r, ranks, 2)
        assert a.nsteps == b.nsteps > 0
        assert np.array_equal(a.ops, b.ops) and np.array_equal(a.steps, b.steps)
        assert np.array_equal(a.samples, b.samples) and a.nominal_bytes == b.nominal_bytes


def test_uniform_table_missing_record_is_an_error():
    uni, _ = uniform_pair(2, 4, [0, 0], stride=10, length=10)
    short = Layout(nfiles=2, spf=5, file_size=uni.file_size, whole_file=False, table=uni.table)
    with pytest.raises(DatasetError, match="sample 4 of file"):
        epoch_plan(short, Settings(batch=10), ZERO, 0, 1, 1)


def test_record_stream_wraps_and_shards_like_listing_every_record():
    files = np.array([4, 0, 2])
    listed = (files[:, None] * 5 + np.arange(5)[None, :]).ravel()
    assert planner.record_stream(files, 5, 40).tolist() == np.resize(listed, 40).tolist()
    assert planner.record_stream(files, 5, 7, first=1, every=3).tolist() == np.resize(listed[1::3], 7).tolist()
    assert planner.record_stream(files[:0], 5, 7).size == 0 and planner.record_stream(files, 5, 0).size == 0


def test_compact_recognises_regular_files_only():
    n = 6
    s, o, ln = np.arange(n), 64 + np.arange(n) * 30, np.full(n, 30)
    assert ranges.compact(s, o, ln) == ranges.Uniform(64, 30, 30, n)
    assert ranges.compact(s, 64 + np.arange(n) * 40, np.full(n, 30)) == ranges.Uniform(64, 40, 30, n)  # gaps
    for bad in (
        (s, o, np.r_[ln[:-1], 31]),  # one record longer
        (s, np.r_[o[:-1], o[-1] + 1], ln),  # stride broken
        (np.r_[s[:-1], s[-2]], o, ln),  # two ranges for one sample (hdf5 chunks)
        (s, 64 + np.arange(n) * 20, ln),
    ):  # overlapping
        assert not isinstance(ranges.compact(*bad), ranges.Uniform)
    u = ranges.compact(s, o, ln)
    assert [a.tolist() for a in u.arrays()] == [s.tolist(), o.tolist(), ln.tolist()]
    t = ranges.build([u, ranges.Uniform(0, 30, 30, n)])
    assert t.uniform and t.first.tolist() == [64, 0]
    mixed = ranges.build([u, (s, o, np.r_[ln[:-1], 31])], files=[5, 9])
    assert not mixed.uniform and set(mixed.file.tolist()) == {5, 9}
    assert [a.tolist() for a in mixed.of_file(9)] == [s.tolist(), o.tolist(), np.r_[ln[:-1], 31].tolist()]


@pytest.mark.parametrize("n", [1, 2, 3, 17, 64, 1000, 4097, 100_003])
def test_keyed_permutation_is_a_permutation_computed_pointwise(n):
    keys = np.random.default_rng(n).integers(0, 2**63, size=planner.FEISTEL_ROUNDS, dtype=np.uint64)
    full = planner.keyed_permutation(np.arange(n), n, keys)
    assert np.array_equal(np.sort(full), np.arange(n))  # a bijection of [0, n)
    pick = np.random.default_rng(1).integers(0, n, size=min(n, 500))
    assert np.array_equal(planner.keyed_permutation(pick, n, keys), full[pick])  # any positions alone
    if n >= 1000:  # it shuffles: few fixed points, and neighbours land far apart
        assert (full == np.arange(n)).mean() < 0.01
        assert np.median(np.abs(np.diff(full))) > n / 10


def test_a_rank_block_of_a_huge_shuffled_epoch_costs_only_the_block():
    """Megatron's 277 M samples in one file, sample shuffle on: a rank's 16 x 1000 samples come
    without the epoch being listed (a list would take 1.1 GB), and each sample is in range."""
    order = planner.epoch_order(1, 277_203_535, "seed", "seed", 123, 1, True)
    first, steps = planner.shard(len(order), 3, 8, 16, 1000)
    got = order.at(np.arange(first, first + steps * 16))
    assert got.size == 16_000 and len(np.unique(got)) == 16_000
    assert got.min() >= 0 and got.max() < 277_203_535


def test_bad_files_are_left_out_before_shuffling():
    bad = np.zeros(10, bool)
    bad[[2, 7]] = True
    seq = sample_order(10, 3, "seed", "seed", 5, 1, True, bad=bad)
    assert sorted(seq.tolist()) == [f * 3 + k for f in range(10) if not bad[f] for k in range(3)]


def test_compact_checks_every_chunk(monkeypatch, tmp_path):
    """Files are compared chunk by chunk (memory-mapped index files of 277 M entries): a break in
    any chunk, the last one included, makes the file irregular."""
    monkeypatch.setattr(ranges, "CHECK_CHUNK", 4)
    n = 11
    s, o, ln = np.arange(n), np.arange(n) * 8, np.full(n, 8)
    assert isinstance(ranges.compact(s, o, ln), ranges.Uniform)
    for k in (1, 5, 10):
        o2 = o.copy()
        o2[k] += 1
        assert not isinstance(ranges.compact(s, o2, ln), ranges.Uniform), k
    path = tmp_path / "off.idx"
    o.astype("<u8").tofile(path)
    mapped = np.memmap(path, dtype="<u8", mode="r")
    assert ranges.compact(s, mapped, ln) == ranges.Uniform(0, 8, 8, n)
