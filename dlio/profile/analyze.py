"""Infer a DLIO workload from a trace: dataset, access pattern, training structure, checkpoints.
Every value is an Inferred(value, confidence 0..1, evidence)."""

from dataclasses import dataclass
from typing import Any, Dict

import numpy as np

from dlio.profile import signals
from dlio.profile.dataset import dataset_files, file_sizes, guess_format
from dlio.profile.parsers import OP_READ, OP_WRITE, Trace
from dlio.profile.records import record_length


@dataclass
class Inferred:
    value: Any
    confidence: float
    evidence: str


def _mode(x: np.ndarray):
    v, c = np.unique(x, return_counts=True)
    return v[np.argmax(c)], c.max() / max(len(x), 1)


def dataset_reads(tr: Trace, files: np.ndarray) -> np.ndarray:
    ev = tr.events
    return ev[(ev["op"] == OP_READ) & (ev["size"] > 0) & np.isin(ev["file"], files)]


def access(rd: np.ndarray, files: np.ndarray, sizes: np.ndarray) -> Dict[str, Inferred]:
    """Whole-file or ranges, and sequential or random within a file."""
    lut = np.zeros(int(files.max()) + 1, np.int64)
    lut[files] = np.arange(len(files))  # files are in path order, not index order
    pos = lut[rd["file"]]
    o = np.lexsort((rd["t"], rd["tid"], rd["pid"], rd["file"]))
    r = rd[o]
    same = (r["file"][1:] == r["file"][:-1]) & (r["tid"][1:] == r["tid"][:-1]) & (r["pid"][1:] == r["pid"][:-1])
    seq = (r["offset"][1:] == r["offset"][:-1] + r["size"][:-1]) | (r["offset"][1:] == 0)
    seq_frac = float(seq[same].mean()) if same.any() else 1.0
    per_file = np.bincount(pos, weights=rd["size"], minlength=len(files))
    passes = per_file / np.maximum(sizes, 1)
    # bytes covered at least once per file (union of ranges), against the file size
    big = rd["size"].sum() / max(sizes.sum(), 1)
    cover = np.zeros(len(files))
    for k in np.unique(pos):  # per file, vectorised over its reads
        x = rd[pos == k]
        oo = np.argsort(x["offset"])
        s, e = x["offset"][oo], (x["offset"] + x["size"])[oo]
        run_end = np.maximum.accumulate(e)
        new = np.concatenate(([True], s[1:] > run_end[:-1]))
        seg = np.cumsum(new) - 1
        seg_end = np.zeros(seg[-1] + 1, np.int64)
        np.maximum.at(seg_end, seg, e)
        cover[k] = (seg_end - s[new]).sum() / max(sizes[k], 1)
    largest = np.zeros(len(files))
    np.maximum.at(largest, pos, rd["size"])
    big_read = float(np.median(largest / np.maximum(sizes, 1)))
    whole = bool(np.median(cover) >= 0.9 and (seq_frac >= 0.5 or big_read >= 0.5))
    tsz, share = _mode(rd["size"])
    return {
        "pattern": Inferred(
            "whole-file" if whole else "ranges",
            0.9 if (whole or big_read < 0.1) else 0.6,
            f"median coverage {np.median(cover):.0%} of each file, {seq_frac:.0%} of reads "
            f"follow the previous one in the file, the largest read is {big_read:.0%} of a file, "
            f"{big:.2f} dataset passes",
        ),
        "sequential": Inferred(
            seq_frac >= 0.8,
            min(1.0, abs(seq_frac - 0.5) * 2),
            f"{seq_frac:.0%} of reads within a file start where the previous ended",
        ),
        "transfer": Inferred(
            int(tsz),
            float(share),
            f"{share:.0%} of reads are {int(tsz)} bytes; "
            f"median {int(np.median(rd['size']))}, max {int(rd['size'].max())}",
        ),
        "passes": Inferred(passes, 1.0, "bytes read per file / file size"),
    }


def _structure(
    rd: np.ndarray, whole: bool, passes: np.ndarray, sizes: np.ndarray, root_pid: int
) -> Dict[str, Inferred]:
    """Epochs, batch (samples per burst), compute per step (gaps between burst starts), readers."""
    out = {}
    if whole:
        ep = np.round(passes).astype(int)
        e, share = _mode(ep)
        out["epochs"] = Inferred(int(e), float(share), f"{share:.0%} of files are read {int(e)} times over")
    else:
        e = max(1, int(round(rd["size"].sum() / max(sizes.sum(), 1))))
        out["epochs"] = Inferred(e, 0.3, "range reads: bytes read / dataset size (low confidence)")
    b = signals.batches(rd, whole)
    what = "files" if whole else "reads"
    if b["b"] > 1:
        out["batch_size"] = Inferred(
            int(b["b"]),
            round(b["eta"], 2),
            f"every {b['b']}th of a reader's {what} follows a longer pause: the split at "
            f"those positions explains {b['eta']:.0%} of the spread of {b['gaps']} "
            f"log gaps between a reader's {what}",
        )
    else:
        out["batch_size"] = Inferred(
            1,
            0.3,
            f"no period in the pauses between a reader's {what} "
            f"(best split explains {b['eta']:.0%}): one sample per step",
        )
    share = out["batch_size"].confidence
    gaps = signals.steady_period(signals.start_gaps(b))
    if b["b"] == 1 and b["eta"] < signals.MIN_ETA:
        out["computation_time"] = Inferred(
            0.0,
            0.2,
            "the readers never pause for the trainer: reading and decoding "
            "set the pace, and the compute time is hidden behind them",
        )
    elif len(gaps) >= 3:
        c = float(np.median(gaps)) / 1e9
        q1, q3 = np.percentile(gaps, [25, 75])
        sd = (q3 - q1) / 1.349  # robust: the odd late step does not make a spread
        cv = float(sd / max(np.median(gaps), 1e-12))
        p = np.percentile(gaps, [10, 50, 90]) / 1e6
        out["computation_time"] = Inferred(
            c,
            max(0.0, 1 - cv),
            f"median time between the starts of batch reads, "
            f"{len(gaps)} steady steps: p10/p50/p90 {p[0]:.2f}/{p[1]:.2f}/{p[2]:.2f} ms",
        )
        out["computation_time_stdev"] = Inferred(
            float(sd) / 1e9, 0.5, f"interquartile spread of those gaps / 1.349, cv {cv:.2f}"
        )
    else:
        out["computation_time"] = Inferred(0.0, 0.2, "too few bursts to see a step period")
    key = rd["pid"] * (1 << 32) + rd["tid"]
    uk, inv = np.unique(key, return_inverse=True)
    first = np.full(len(uk), np.iinfo(np.int64).max)
    last = np.zeros(len(uk), np.int64)
    np.minimum.at(first, inv, rd["t"])
    np.maximum.at(last, inv, rd["t"] + rd["dur"])
    # The job's own main thread is the trainer; a worker process's main thread (a DataLoader
    # worker) is a reader.
    main = ((uk >> 32) == (uk & 0xFFFFFFFF)) & ((uk >> 32) == root_pid)
    n = signals.max_overlap(first[~main], last[~main])
    out["read_threads"] = Inferred(
        int(n),
        0.9,
        f"{len(uk)} readers (threads or processes) read the dataset over "
        f"the run, at most {n} of them (not the job's main thread) at once",
    )
    out["steps"] = Inferred(int(len(b["start"])), float(share), "batch reads in the whole trace")
    return out


def _checkpoints(tr: Trace, files: np.ndarray) -> Inferred:
    ev = tr.events
    w = ev[(ev["op"] == OP_WRITE) & (ev["size"] > 0) & ~np.isin(ev["file"], files)]
    if not len(w):
        return Inferred([], 1.0, "no writes")
    per = np.bincount(w["file"], weights=w["size"], minlength=len(tr.paths))
    big = np.flatnonzero(per >= 1 << 20)
    if not len(big):
        return Inferred([], 0.8, f"{len(np.unique(w['file']))} files written, none of 1 MiB or more")
    b = signals.pause_bursts(w[np.isin(w["file"], big)])
    return Inferred(
        [{"start_s": float(s) / 1e9, "bytes": int(v)} for s, v in zip(b["start"], b["bytes"])],
        0.7,
        f"{len(big)} files of >= 1 MiB written in {len(b['start'])} bursts",
    )


def infer(tr: Trace) -> Dict[str, Inferred]:
    """All inferred values of one trace."""
    ds = dataset_files(tr)
    files = ds["files"]
    out = {"files": Inferred(len(files), 1.0 if len(files) else 0.0, ds["evidence"])}
    if not len(files):
        return out
    sizes, how = file_sizes(tr, files)
    fmt, why = guess_format(tr, files, ds["ext"])
    out["paths"] = Inferred(tr.paths[files].astype(str), 1.0, "the dataset files, sorted")
    out["sizes"] = Inferred(sizes, 1.0, how)
    out["format"] = Inferred(fmt, 0.9 if fmt else 0.0, why)
    rd = dataset_reads(tr, files)
    out.update(access(rd, files, sizes))
    whole = out["pattern"].value == "whole-file"
    root = int(tr.events["pid"][0]) if len(tr.events) else -1  # the first process to do I/O
    out.update(_structure(rd, whole, out["passes"].value, sizes, root))
    if whole:
        rec, sd, conf, why = record_length(fmt or "", sizes)
        out["record_length"] = Inferred(rec, conf, why)
        out["record_length_stdev"] = Inferred(sd, conf, "spread of the file sizes")
        out["samples_per_file"] = Inferred(1, 0.8, "every read burst reads whole files")
    else:
        t = out["transfer"].value
        out["record_length"] = Inferred(float(t), out["transfer"].confidence, "the commonest transfer size")
        out["record_length_stdev"] = Inferred(0.0, 0.5, "one record size")
        out["samples_per_file"] = Inferred(int(sizes.max() // max(t, 1)), 0.6, "file size / record size")
    corr = signals.order_correlation(rd, tr.paths)
    out["file_shuffle"] = Inferred(
        corr < 0.9, min(1.0, abs(corr - 0.45) * 2), f"rank correlation {corr:.2f} of first-read order with name order"
    )
    sub = np.unique([p.rsplit("/", 1)[0] for p in out["paths"].value])
    out["subfolders"] = Inferred(len(sub) if len(sub) > 1 else 0, 1.0, f"{len(sub)} folder(s) hold the files")
    out["checkpoints"] = _checkpoints(tr, files)
    return out
