"""Infer a DLIO workload from a trace: dataset, access pattern, training structure, file order,
checkpoints. Every value is an Inferred(value, confidence 0..1, evidence)."""

from typing import Any, Dict, Tuple

import numpy as np

from dlio.profile import signals, steps
from dlio.profile.compute import compute, mean95, trainer_key
from dlio.profile.dataset import guess_format, unread
from dlio.profile.dataview import DataView, data_view
from dlio.profile.events import OP_WRITE, Trace
from dlio.profile.inferred import Inferred
from dlio.profile.order import file_order
from dlio.profile.records import record_length
from dlio.profile.timeline import Timeline

MIN_PREPROCESS_S = 1e-4  # a reader's own time per sample below this is the loader's noise


def _mode(x: np.ndarray) -> Tuple[Any, float]:
    v, c = np.unique(x, return_counts=True)
    return v[np.argmax(c)], c.max() / max(len(x), 1)


def access(dv: DataView) -> Dict[str, Inferred]:
    """Whole-file or ranges, sequential or random within a file, the commonest read call."""
    rd = dv.rd
    # the call size that carries the most bytes: np.load takes a .npy's header in a 4 KiB call and
    # its array in one more, as many calls of each, and the array is what the storage serves
    sizes, inv = np.unique(rd["size"], return_inverse=True)
    by_bytes = np.bincount(inv, weights=rd["size"])
    tsz = sizes[np.argmax(by_bytes)] if len(sizes) else 0
    share = float(by_bytes.max() / max(by_bytes.sum(), 1)) if len(sizes) else 0.0
    return {
        "pattern": Inferred(
            "whole-file" if dv.whole else "ranges",
            0.9 if (dv.whole or dv.big_read < 0.1) else 0.6,
            f"median coverage {dv.median_cover:.0%} of each file, {dv.seq_frac:.0%} of reads "
            f"follow the previous one in the file, the largest read is {dv.big_read:.0%} of a file, "
            f"{dv.logical_bytes / max(dv.sizes.sum(), 1):.2f} dataset passes counted by "
            + ("visits (a reader's reads of one file, re-read bytes once)" if dv.whole else "read calls"),
        ),
        "sequential": Inferred(
            dv.seq_frac >= 0.8,
            min(1.0, abs(dv.seq_frac - 0.5) * 2),
            f"{dv.seq_frac:.0%} of reads within a file start where the previous ended",
        ),
        "transfer": Inferred(
            int(tsz),
            float(share),
            f"{share:.0%} of the bytes read come in calls of {int(tsz)} bytes; "
            f"median call {int(np.median(rd['size']))}, max {int(rd['size'].max())}",
        ),
    }


def _epochs(dv: DataView) -> Inferred:
    if dv.whole:
        passes = dv.passes()
        e, share = _mode(np.maximum(np.round(passes).astype(int), 1))
        raw = np.bincount(dv.rd["file"], weights=dv.rd["size"], minlength=len(dv.cover))[dv.files]
        calls = float(np.median(raw / np.maximum(dv.cover[dv.files], 1)))
        why = f"{share:.0%} of files are visited {int(e)} times over (one visit: a reader's reads of one file"
        why += f" between opens; read calls alone would say {calls:.2f} passes)" if abs(calls - e) > 0.25 else ")"
        return Inferred(int(e), float(share), why)
    e = max(1, int(round(dv.rd["size"].sum() / max(dv.sizes.sum(), 1))))
    return Inferred(e, 0.3, "range reads: bytes read / dataset size (low confidence)")


def _readers(dv: DataView, tr: Trace) -> Tuple[np.ndarray, np.ndarray, int]:
    """(reader keys, which of them is a trainer, read threads at once). A process's main thread
    is a trainer unless the process was forked by a traced one (a DataLoader worker, whose main
    thread reads for the trainer); without that record (traces other than the interposer's) only
    the first process to do I/O counts as the job's own."""
    u = dv.units
    uk, inv = np.unique(u["key"], return_inverse=True)
    first = np.full(len(uk), np.iinfo(np.int64).max)
    last = np.zeros(len(uk), np.int64)
    np.minimum.at(first, inv, u["start"])
    np.maximum.at(last, inv, u["end"])
    pid = uk >> 32
    main = pid == (uk & 0xFFFFFFFF)
    if tr.forked is not None:
        main &= ~np.isin(pid, tr.forked)
    if tr.forked is None or main.sum() > 1:  # one trainer: the first process to do I/O
        main &= pid == (int(tr.events["pid"][0]) if len(tr.events) else -1)
    n = signals.max_overlap(first[~main], last[~main])
    return uk, main, n


def _shape(st: Dict, sync: bool) -> Inferred:
    if sync:
        return Inferred(
            "synchronous", 0.9, "the job's main thread reads every sample itself: no reader threads or processes"
        )
    if st["b"] < 2:
        return Inferred("unknown", 0.2, "no steps seen")
    if st["view"] == "merged" and st["reader_eta_at_b"] < steps.MIN_ETA:
        return Inferred(
            "sample-parallel",
            round(st["eta_merged"], 2),
            f"all readers together pause every {st['b']}th sample (explains {st['eta_merged']:.0%} of "
            f"{st['gaps']} gaps), no single reader does ({st['reader_eta_at_b']:.0%}): a batch is "
            f"spread over the readers (thread pool, queue, tf.data's parallel map); "
            f"{np.mean(st['readers']):.1f} readers per step on average",
        )
    return Inferred(
        "batch-per-worker",
        round(max(st["reader_eta_at_b"], st["eta"]), 2),
        f"each reader pauses every {st['b']}th sample it reads (explains {st['reader_eta_at_b']:.0%} "
        "of its gaps): a reader reads whole batches (PyTorch DataLoader workers)",
    )


def _structure(dv: DataView, tr: Trace) -> Dict[str, Inferred]:
    """Batch, steps, compute per step, the readers' own time per sample, readers, prefetch."""
    out = {}
    tl = Timeline(tr)
    st = steps.find_steps(dv.units, dv.epoch, tl)
    uk, main, n = _readers(dv, tr)
    sync = bool(len(uk) == 1 and main[0])
    out["loader"] = _shape(st, sync)
    what = "files" if dv.whole else "reads"
    if st["b"] > 1:
        view = "all readers together pause" if st["view"] == "merged" else "each reader pauses"
        out["batch_size"] = Inferred(
            int(st["b"]),
            round(st["eta"], 2),
            f"{view} every {st['b']}th of the {what}: the split at those positions explains "
            f"{st['eta']:.0%} of the spread of {st['gaps']} log gaps (per reader: b={st['b_reader']} "
            f"{st['eta_reader']:.0%}; merged: b={st['b_merged']} {st['eta_merged']:.0%})",
        )
    else:
        out["batch_size"] = Inferred(
            1,
            0.3,
            f"no period in the pauses between {what}, per reader or merged "
            f"(best split explains {max(st['eta_reader'], st['eta_merged']):.0%}): one sample per step",
        )
    # Means (the top 5 % left out), not medians: the replay must spend as long as the job over all
    # its samples and steps, and per-sample work is skewed (the odd page fault, collection, late wake).
    pre = mean95(st["sample_gaps"]) / 1e9
    out["preprocess_time"] = Inferred(
        pre if pre >= MIN_PREPROCESS_S else 0.0,
        0.6 if len(st["sample_gaps"]) >= 5 else 0.2,
        (
            f"mean time a reader spends on a sample besides its read calls (one sample's start to the "
            f"next's in a step, less the reads; the top 5 % left out), {len(st['sample_gaps'])} samples: "
            "opening, parsing, decoding"
            + (f" (under {MIN_PREPROCESS_S * 1e3:.1f} ms: left out)" if pre < MIN_PREPROCESS_S else "")
        )
        if len(st["sample_gaps"])
        else "no reader takes two samples of one step: its time per sample is not visible",
    )
    out.update(compute(st, sync, tl, int(uk[0]) if sync else trainer_key(tr, tl, uk)))
    threads = 0 if sync else int(n)
    out["read_threads"] = Inferred(
        threads,
        0.9,
        "the trainer is the only reader (DLIO's read_threads 0: reads in the main process)"
        if sync
        else f"{len(uk)} readers (threads or processes) read the dataset over the run, at most {n} of "
        "them (not the job's main thread) at once",
    )
    out["prefetch"] = _prefetch(st, threads)
    out["steps"] = Inferred(int(len(st["start"])), round(st["eta"], 2), "steps in the whole trace")
    rps = float(np.mean(st["readers"])) if len(st["readers"]) else 1.0
    out["readers_per_step"] = Inferred(
        round(rps, 2), 0.8, "mean number of readers that read the samples of one step (1: a reader reads whole batches)"
    )
    return out


def _prefetch(st: Dict, threads: int) -> Inferred:
    """reader.prefetch_size from the readers' depth ahead of the trainer when they first wait for
    it (steps.depth): a PyTorch DataLoader holds workers x prefetch_factor batches, a bounded queue
    its size plus a sample per blocked reader, a tf.data pipeline its map's look-ahead. dlio-fast's
    replay lets prefetch_size batches (rounded up to a multiple of the readers: train/loop.py
    batches_in_flight) wait beyond the one the trainer is about to take: its depth is
    prefetch_size + 1."""
    d = st["depth"]
    if threads == 0:
        return Inferred(0, 0.8, "no reader threads: nothing is read ahead of the trainer")
    if st["b"] < 2 or not len(d):
        return Inferred(2, 0.1, "not visible (no steps): DLIO's default")
    deep = float(np.max(d))  # a late reader (thread start-up) only makes a pass look shallower
    return Inferred(
        max(1, int(round(deep)) - 1),
        0.5,
        f"the readers hold up to {deep:.1f} batches ahead of the trainer when they first wait for it "
        f"(per pass: {', '.join(f'{x:.1f}' for x in d[:6])}); the replay holds prefetch_size + 1",
    )


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


def _pauses(dv: DataView) -> Inferred:
    """Idle time between passes over the dataset (not replayed: see compare.py, duration)."""
    first, last = dv.pass_spans()
    o = np.argsort(first)
    gaps = np.maximum(first[o][1:] - np.maximum.accumulate(last[o])[:-1], 0) / 1e9
    if not len(gaps):
        return Inferred(0.0, 1.0, "one pass")
    return Inferred(
        round(float(gaps.sum()), 3),
        0.9,
        f"seconds without dataset reads between the {len(first)} passes ({', '.join(f'{g:.2f}' for g in gaps[:8])}): "
        "a DataLoader starting its workers, evaluation, checkpoints; the replay does not reproduce them",
    )


ORDER_WORDS = {
    "path": "sorted paths (one folder after another)",
    "name": "sorted file names (DLIO's listing: subfolders interleave)",
    "once": "shuffled once: the same permutation every epoch",
    "epoch": "shuffled anew each epoch",
}


def infer(tr: Trace) -> Dict[str, Inferred]:
    """All inferred values of one trace."""
    dv = data_view(tr)
    files = dv.files
    out = {"files": Inferred(len(files), 1.0 if len(files) else 0.0, dv.evidence)}
    miss = unread(tr)
    if miss:
        out["unread"] = Inferred(
            round(1 - miss["seen"] / miss["total"], 3),
            1.0,
            f"WARNING: of the {miss['total'] / 2**20:.1f} MiB of the {miss['files']} data files the job opened, "
            f"only {miss['seen'] / 2**20:.1f} MiB were seen read: it read the rest in a way this trace does not "
            "show (a descriptor it did not follow, io_uring, another process) or reads only part of each file; "
            "the figures below count what was seen",
        )
    if not len(files):
        return out
    fmt, why = guess_format(tr, files, dv.ext)
    out["paths"] = Inferred(tr.paths[files].astype(str), 1.0, "the dataset files, sorted")
    out["sizes"] = Inferred(dv.sizes, 1.0, dv.sizes_how)
    out["format"] = Inferred(fmt, 0.9 if fmt else 0.0, why)
    out.update(access(dv))
    out["passes"] = Inferred(dv.passes(), 1.0, "bytes visited per file / one pass's bytes")
    out["epochs"] = _epochs(dv)
    out.update(_structure(dv, tr))
    out["pass_pauses"] = _pauses(dv)
    if dv.whole:
        rec, sd, conf, why = record_length(fmt or "", dv.sizes)
        out["record_length"] = Inferred(rec, conf, why)
        out["record_length_stdev"] = Inferred(sd, conf, "spread of the file sizes")
        out["samples_per_file"] = Inferred(1, 0.8, "every visit reads a whole file")
    else:
        t = out["transfer"].value
        out["record_length"] = Inferred(float(t), out["transfer"].confidence, "the commonest transfer size")
        out["record_length_stdev"] = Inferred(0.0, 0.5, "one record size")
        out["samples_per_file"] = Inferred(int(dv.sizes.max() // max(t, 1)), 0.6, "file size / record size")
    sub = np.unique([p.rsplit("/", 1)[0] for p in out["paths"].value])
    out["subfolders"] = Inferred(len(sub) if len(sub) > 1 else 0, 1.0, f"{len(sub)} folder(s) hold the files")
    if dv.whole:
        fo = file_order(dv.units, dv.epoch, tr.paths)
        out["file_order"] = Inferred(
            fo["kind"], round(fo["confidence"], 2), f"{ORDER_WORDS[fo['kind']]}: {fo['evidence']}"
        )
    else:
        corr = signals.order_correlation(dv.rd, tr.paths)
        kind = "path" if corr >= 0.9 else "epoch"
        out["file_order"] = Inferred(
            kind, 0.5, f"rank correlation {corr:.2f} of first-read order with the sorted paths"
        )
    out["checkpoints"] = _checkpoints(tr, files)
    return out
