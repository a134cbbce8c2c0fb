"""Which files of a trace are the training dataset, their sizes and format, and the dataset reads.

The dataset is the largest group (by bytes read) of files sharing an extension, after leaving out
what a Python job reads to start (interpreter, libraries, .py/.so, /proc, /sys, /dev, /etc) and
files the job also writes (outputs, checkpoints) unless the evidence says the job made its own
dataset: a file written and then read again in a later pass (opened for reading twice or more
after its last write) or read by another thread or process than the one that wrote it, and not
named like a checkpoint (dataset_written)."""

import os
import re
import sys
from typing import Dict, Optional, Tuple

import numpy as np

from dlio.profile.events import OP_OPEN, OP_READ, OP_WRITE, Trace

_CODE_EXT = (
    ".py",
    ".pyc",
    ".so",
    ".pth",
    ".pyd",
    ".json",
    ".txt",
    ".cfg",
    ".toml",
    ".yaml",
    ".yml",
    ".pem",
    ".mo",
    ".zip",
    ".egg",
    ".typed",
    ".pyi",
    ".bin.tmp",
    ".conf",
)
_SYS_PREFIX = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/lib", "/run/", "/var/lib/", "/tmp/.X")
_EXT_FORMAT = {
    ".npz": "npz",
    ".npy": "npy",
    ".h5": "hdf5",
    ".hdf5": "hdf5",
    ".hdf": "hdf5",
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".png": "png",
    ".tfrecord": "tfrecord",
    ".csv": "csv",
    ".bin": "indexed_binary",
}
_MAGIC = (
    (b"\x93NUMPY", "npy"),
    (b"PK\x03\x04", "npz"),
    (b"\x89HDF\r\n\x1a\n", "hdf5"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
)


def _ext(p: str) -> str:
    base = os.path.basename(p).lower()
    return os.path.splitext(base)[1]


def is_noise(paths: np.ndarray) -> np.ndarray:
    """True for files a Python job touches whatever it trains on."""
    prefixes = _SYS_PREFIX + tuple({sys.prefix + "/", sys.base_prefix + "/"})
    out = np.zeros(len(paths), bool)
    for i, p in enumerate(paths):  # one test per distinct file, not per event
        p = str(p)
        out[i] = (
            p.startswith("<")
            or p.startswith(prefixes)
            or p.endswith(_CODE_EXT)
            or "site-packages" in p
            or "/__pycache__/" in p
            or "/.pyenv/" in p
        )
    return out


_CHECKPOINT = re.compile(
    r"(ckpt|checkpoint|optim|model_states|zero_pp|global_step|\.pt$|\.pth$|\.safetensors$|\.distcp$|\.bin$)",
    re.IGNORECASE,
)


def dataset_written(tr: Trace, written: np.ndarray) -> Dict[str, np.ndarray]:
    """Of the files the job wrote, those whose reads say they are its dataset: opened for reading
    twice or more after the last write (read again in a later pass), or read by another reader
    (pid, tid) than every writer; checkpoint-like names never. Returns {'files', 'again', 'other'}
    (the last two: per trace file, which sign it shows)."""
    ev = tr.events
    n = len(tr.paths)
    if not len(written):
        return {"files": np.zeros(0, np.int64), "again": np.zeros(n, bool), "other": np.zeros(n, bool)}
    is_w = (ev["op"] == OP_WRITE) & (ev["size"] > 0)
    last_w = np.full(n, -1, np.int64)
    np.maximum.at(last_w, ev["file"][is_w], ev["t"][is_w])
    after = (ev["file"] >= 0) & (ev["t"] > last_w[np.maximum(ev["file"], 0)])
    opens = np.bincount(ev["file"][after & (ev["op"] == OP_OPEN)], minlength=n)
    rd = ev[after & (ev["op"] == OP_READ) & (ev["size"] > 0)]
    key = ev["pid"].astype(np.int64) * (1 << 32) + ev["tid"]
    wpairs = np.unique(np.stack([ev["file"][is_w], key[is_w]]), axis=1)
    rkey = rd["pid"].astype(np.int64) * (1 << 32) + rd["tid"]
    rpairs = np.unique(np.stack([rd["file"], rkey]), axis=1)
    # a (file, reader) pair that is no (file, writer) pair: read by someone who did not write it
    wset = set(map(tuple, wpairs.T.tolist()))
    other = np.zeros(n, bool)
    for f, k in rpairs.T.tolist():  # one per distinct (file, reader), not per event
        if (f, k) not in wset:
            other[f] = True
    again = opens >= 2
    ok = np.array([not _CHECKPOINT.search(str(tr.paths[f])) for f in written], bool)
    w = written[ok]
    keep = w[(again[w] | other[w]) & (np.bincount(rd["file"], minlength=n)[w] > 0)]
    return {"files": keep, "again": again, "other": other}


def dataset_files(tr: Trace) -> Dict:
    """{'files': file indices of the dataset (sorted by path), 'ext', 'evidence'}."""
    ev = tr.events
    noise = is_noise(tr.paths)
    rd = ev[(ev["op"] == OP_READ) & (ev["size"] > 0) & (ev["file"] >= 0)]
    written = np.unique(ev["file"][(ev["op"] == OP_WRITE) & (ev["size"] > 0)])
    made = dataset_written(tr, written[~noise[written]])
    nbytes = np.bincount(rd["file"], weights=rd["size"], minlength=len(tr.paths))
    cand = np.flatnonzero((nbytes > 0) & ~noise)
    cand = cand[~np.isin(cand, written) | np.isin(cand, made["files"])]
    if not len(cand):
        return {"files": cand, "ext": "", "evidence": "no file was read apart from code and system files"}
    exts = np.array([_ext(str(tr.paths[i])) for i in cand], dtype=object)
    uext, inv = np.unique(exts, return_inverse=True)
    per = np.bincount(inv, weights=nbytes[cand])
    best = int(np.argmax(per))
    files = cand[inv == best]
    files = files[np.argsort(tr.paths[files].astype(str))]
    share = per[best] / per.sum()
    why = (
        f"{len(files)} '{uext[best] or '(no extension)'}' files carry {share:.0%} of the "
        f"{per.sum() / 2**20:.1f} MiB read from data files"
    )
    own = files[np.isin(files, made["files"])]
    if len(own):
        why += (
            f"; the job wrote {len(own)} of them before it read them (its own dataset, kept because "
            f"{int(made['again'][own].sum())} were read again after their last write and "
            f"{int(made['other'][own].sum())} by other threads or processes than their writer)"
        )
    return {"files": files, "ext": str(uext[best]), "evidence": why}


def file_sizes(tr: Trace, files: np.ndarray) -> Tuple[np.ndarray, str]:
    """Sizes from the files themselves when they exist here, else the furthest byte read."""
    rd = tr.events[(tr.events["op"] == OP_READ) & (tr.events["size"] > 0) & (tr.events["offset"] >= 0)]
    end = np.zeros(len(tr.paths), np.int64)
    np.maximum.at(end, rd["file"], rd["offset"] + rd["size"])
    sizes = end[files].copy()
    seen = 0
    for k, i in enumerate(files):
        try:
            sizes[k] = os.stat(str(tr.paths[i])).st_size
            seen += 1
        except OSError:
            pass
    how = (
        "stat() of the files"
        if seen == len(files)
        else f"stat() of {seen} files, the furthest byte read for {len(files) - seen}"
    )
    return sizes, how


def guess_format(tr: Trace, files: np.ndarray, ext: str) -> Tuple[Optional[str], str]:
    """The format from the extension, checked against the first bytes of a file when it exists."""
    by_ext = _EXT_FORMAT.get(ext)
    magic = None
    for i in files[:1]:
        try:
            with open(str(tr.paths[i]), "rb") as f:
                head = f.read(16)
            magic = next((fmt for m, fmt in _MAGIC if head.startswith(m)), None)
        except OSError:
            pass
    if magic and by_ext and magic != by_ext:
        return magic, f"magic bytes say {magic}, the extension '{ext}' says {by_ext}: magic bytes win"
    fmt = magic or by_ext
    why = (f"extension '{ext}'" if by_ext else "") + (" and magic bytes" if magic else "")
    return fmt, why.strip() or "neither the extension nor the first bytes are known"


UNREAD_SHARE = 0.5  # beyond this share of the opened data files' bytes never seen read, say so


def unread(tr: Trace) -> Optional[Dict]:
    """The bytes of the data files the job opened (not code or system files, not files it wrote)
    that no recorded read or mapping took, when they are most of those files' bytes: the job read
    them in a way the trace does not show (a descriptor it did not follow, io_uring, another
    process), or it reads only part of each file. None when most bytes were seen or the files are
    not here to measure. Returns {'files', 'total', 'seen'} (bytes)."""
    from dlio.profile.events import OP_MMAP
    from dlio.profile.visits import union_segments

    ev = tr.events
    noise = is_noise(tr.paths)
    written = np.unique(ev["file"][(ev["op"] == OP_WRITE) & (ev["size"] > 0)])
    opened = np.unique(ev["file"][(ev["op"] == OP_OPEN) & (ev["file"] >= 0)])
    opened = opened[~noise[opened] & ~np.isin(opened, written)]
    total = np.zeros(len(tr.paths), np.int64)
    for i in opened:  # one stat per distinct file
        try:
            st = os.stat(str(tr.paths[i]))
        except OSError:
            continue
        if st.st_mode & 0o170000 == 0o100000:  # regular files only
            total[i] = st.st_size
    if total.sum() == 0:
        return None
    took = ev[np.isin(ev["op"], (OP_READ, OP_MMAP)) & (ev["size"] > 0) & (ev["file"] >= 0)]
    took = took[total[took["file"]] > 0]
    off = np.maximum(took["offset"], 0)
    g, s, e = union_segments(took["file"].astype(np.int64), off, np.minimum(off + took["size"], total[took["file"]]))
    seen = int(np.maximum(e - s, 0).sum())
    if seen >= (1 - UNREAD_SHARE) * total.sum():
        return None
    return {"files": int((total > 0).sum()), "total": int(total.sum()), "seen": seen}
