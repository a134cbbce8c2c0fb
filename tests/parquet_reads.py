"""What DLIO's parquet reader reads in an epoch, from pyarrow's own metadata of the files (for tests
that check dlio-fast's measured bytes)."""

import bisect
import os
import struct

import pyarrow.parquet as pq


def expected_bytes(files, read, spf, batch, readers, read_mode, steps):
    """What DLIO's parquet reader reads in one epoch of samples 0.. in order: per worker (batch k's worker
    is k mod readers), a file's footer (pyarrow's first read: max(64 KiB, footer + 8) from the end) when
    it first opens it, and a row group's read column chunks (row_group) or every row group's
    (default) when it first needs them. Returns (footer bytes, column chunk bytes)."""
    chunks, bounds, footer = {}, {}, {}
    for i, f in enumerate(files):
        md = pq.read_metadata(f)
        size = os.path.getsize(f)
        with open(f, "rb") as fh:
            fh.seek(size - 8)
            meta_len = struct.unpack("<I", fh.read(4))[0]
        footer[i] = min(size, max(64 << 10, meta_len + 8))
        rows, first = [], 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            rows.append(first)
            first += rg.num_rows
            chunks[(i, g)] = sum(
                rg.column(j).total_compressed_size
                for j in range(rg.num_columns)
                if rg.column(j).path_in_schema.split(".")[0] in read
            )
        bounds[i] = rows
    seen, footers, total = set(), 0, 0
    for pos in range(steps * batch):
        f, row, worker = pos // spf, pos % spf, (pos // batch) % readers
        if (worker, f) not in seen:
            seen.add((worker, f))
            footers += footer[f]
            if read_mode == "default":
                total += sum(v for (fi, _), v in chunks.items() if fi == f)
        g = bisect.bisect_right(bounds[f], row) - 1
        if read_mode == "row_group" and (worker, f, g) not in seen:
            seen.add((worker, f, g))
            total += chunks[(f, g)]
    return footers, total
