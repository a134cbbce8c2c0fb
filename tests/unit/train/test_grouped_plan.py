"""The planner's grouped layouts (parquet): each reader reads a file's footer and a group's ranges the
first time one of its samples needs them in the epoch; other samples read nothing. Checked against a
direct walk of the samples (what DLIO's per-worker caches do)."""

import numpy as np
import pytest

from dlio import _core
from dlio.dataset import ranges
from dlio.train import planner

SPF = 10


def _layout():
    """2 files of 10 samples: groups at rows 0, 4, 8 (two ranges each), the footer keyed 10."""
    per = []
    for f in range(2):
        base = 1000 * f
        keys = [0, 0, 4, 4, 8, 8, SPF]
        offs = [base + x for x in (0, 50, 100, 150, 200, 250, 900)]
        lens = [10, 20, 11, 21, 12, 22, 99]
        per.append((np.array(keys), np.array(offs), np.array(lens)))
    table = ranges.build(per)
    return planner.Layout(
        nfiles=2, spf=SPF, file_size=np.full(2, 1000, np.uint64), whole_file=False, table=table, grouped=True
    )


def _walk(samples, batch, readers, layout):
    """(per-sample op lists) by walking the samples in Python."""
    t = layout.table
    seen, out = set(), []
    for pos, s in enumerate(samples.tolist()):
        f, row, r = s // SPF, s % SPF, (pos // batch) % readers
        g = max(k for k in (0, 4, 8) if k <= row)
        ops = []
        for key in ([SPF] if (r, f) not in seen else []) + ([g] if (r, f, g) not in seen else []):
            sel = (t.file == f) & (t.sample == key)
            ops += list(zip(t.offset[sel].tolist(), t.size[sel].tolist()))
        seen |= {(r, f), (r, f, g)}
        out.append(ops)
    return out


@pytest.mark.parametrize("readers", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 3, 5])
def test_groups_are_read_once_per_reader(readers, batch):
    layout = _layout()
    samples = np.random.default_rng(readers * 10 + batch).permutation(2 * SPF).astype(np.int64)
    ops, per = planner.grouped_ops(samples, layout, batch, readers)
    want = _walk(samples, batch, readers, layout)
    assert per.tolist() == [len(w) for w in want]
    got = list(zip(ops["offset"].tolist(), ops["length"].tolist()))
    assert got == [op for w in want for op in w]
    starts = np.concatenate([[0], np.cumsum(per)[:-1]])
    for k, n in zip(starts.tolist(), per.tolist()):
        if n:  # a sample's ops are opened first and closed last
            assert ops["flags"][k] & _core.OPF_OPEN and ops["flags"][k + n - 1] & _core.OPF_CLOSE
    assert (ops["file"] == np.repeat(samples // SPF, per)).all()


def test_large_ranges_are_split_and_counted():
    layout = _layout()
    ops, per = planner.grouped_ops(np.array([0], np.int64), layout, 1, 1, max_transfer=8)
    # the footer (99 bytes) and group 0's two ranges (10, 20) in pieces of at most 8 bytes
    assert per.tolist() == [13 + 2 + 3] and ops["length"].sum() == 99 + 10 + 20
