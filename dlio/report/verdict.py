"""Is this a storage result? The verdict of a phase (an epoch of `run`, an io point, a ceiling probe)
from its counters (dlio.system.counters): storage-bound, client-bound, cache or inconclusive, with the reason
and the setting to change, said in the words of the command that measured it (Context).

The rules, in the order they are tried (the thresholds are printed next to each verdict):

  1. no bytes moved: inconclusive;
  2. cache: the files are on a memory-backed filesystem (tmpfs, ramfs: every byte is RAM's), or the
     device (or NFS) bytes are below CACHE_RATIO x the application's: the rest came from the page cache
     (for NFS: the client's cache);
  3-5 (the client), skipped when the emulated accelerator set the pace: it computed >= ACCEL_PACED of
     the steps' time (compute / (compute + I/O wait)), so the reads kept up whatever the CPUs did, and
     within OVERRUN_MAX of its set time. When it ran longer than that, the CPU it spins on was taken
     and the AU is the CPU's, not the storage's: inconclusive when other processes took it, else
     client-bound (emulated accelerator);
  3. client-bound, reader threads: their CPU time over the phase is >= READER_BUSY x the cores they
     could use (min(threads, usable cores)): CPU per sample x samples/s left no headroom;
  4. client-bound, process: the whole process (and the benchmark's worker processes) used >=
     PROCESS_BUSY x its usable cores (the readers, the harness, the emulated compute's spin);
  5. the host's CPUs were >= HOST_BUSY busy: the client had no headroom. client-bound when the client
     (the readers and the harness, not the spin) used most of the CPU the run did not leave to others,
     else inconclusive (other processes may have set the pace: a CPU they hold delays the readers'
     wake-ups; their share is stated): they took as much as the client, or OTHERS_CPU_SHARE of the busy
     host (a run of many threads beside fewer busy processes gets the larger part of the cores, yet the
     others' part is what it would have had on an idle client);
  6. inconclusive: nothing to count the storage's bytes with (overlay, the null engine), or other
     processes moved more than FOREIGN_SHARE of this run's own bytes on the same device, reads and
     writes both counted whatever the phase's direction (the storage was shared: its times are not this
     run's alone); when rule 5 already made it inconclusive, its reason says this too;
  7. inconclusive: device bytes between CACHE_RATIO and MATCH_RATIO of the application's (partly
     cached);
  8. storage-bound: the device (or network) bytes match the application's (>= MATCH_RATIO; readahead
     may add more) and the client had headroom, or the accelerator set the pace. Over NFS the server may
     still have served them from its own cache: the client cannot see that, and the verdict says so.

The CPU of a phase is split three ways wherever it is shown: the readers (their thread CPU, from the C
core), the harness (the rest of the benchmark: Python, the trainer's wake-ups, S3 worker processes), and
the emulated accelerator (the compute spin: it stands for a GPU, it is not the client's CPU).

The device counters are the whole device's: another process reading or writing the same disk during
the phase adds to them. So a read phase is judged by this process's own block reads (/proc/self/io, readahead
included; rules 2, 7, 8), and the device's bytes beyond them are other processes' (rule 6); without
task I/O accounting, by the device's count, and a shared disk can then turn `cache` into
`inconclusive` or `storage-bound`, never the reverse. Under MPI the ranks of one host share its
device: their application bytes, own bytes and CPU are added before the rules run (combine()).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dlio.base.units import fmt_bytes
from dlio.config import Config
from dlio.report.phase_cpu import (
    accelerator_share,
    compute_overrun,
    cpu_split,
    cpu_text,
    reader_cores,
    reader_share,
)

VERDICTS = ("storage-bound", "client-bound", "cache", "inconclusive")
CACHE_RATIO = 0.5
MATCH_RATIO = 0.8
READER_BUSY = 0.8
PROCESS_BUSY = 0.9
HOST_BUSY = 0.9
ACCEL_PACED = 0.9  # the emulated accelerator computed at least this share of the steps' time
OVERRUN_MAX = 0.1  # above: the emulated compute ran that much over its set time (its CPU was taken)
EXTRA_RATIO = 1.5  # above: the device moved more than the application read (said, not judged)
# above: other processes' bytes on the device, as a share of this run's own. A neighbour that moved a quarter
# as much as the run had the device for about a fifth of the phase: more than the spread of a storage figure.
# (At 0.5, a 50 ms checkpoint load beside two O_DIRECT writers, 20 MiB of theirs to its 46 MiB, passed as its own.)
FOREIGN_SHARE = 0.25
FOREIGN_MIN = 8 << 20  # and at least this many bytes
OTHERS_CPU_SHARE = 0.25  # other processes took this share of a busy host's CPU: the run's pace was theirs too

THRESHOLDS = (
    f"cache < {CACHE_RATIO:g}x app bytes <= partly cached < {MATCH_RATIO:g}x <= storage; "
    f"client-bound: readers >= {READER_BUSY:.0%} of their cores, process >= {PROCESS_BUSY:.0%}, "
    f"host >= {HOST_BUSY:.0%} busy, unless the accelerator computed >= {ACCEL_PACED:.0%} of the steps "
    f"within {OVERRUN_MAX:.0%} of its set time; other processes' if they took >= {OTHERS_CPU_SHARE:.0%} of a busy "
    f"host or as much as the client; shared: other processes moved > {FOREIGN_SHARE:g}x the run's "
    f"own bytes on its device"
)


@dataclass(frozen=True)
class Context:
    """The command that measured a phase and what it had in effect: a verdict suggests only settings
    that command takes, in its words, and never one already in effect."""

    command: str = "run"  # run | checkpoint (checkpoint-only ops of a run) | io | ceiling
    direct: bool = False  # O_DIRECT in effect
    cache: str = ""  # the page-cache step in effect: drop | drop-all | keep ("" not known)
    engine: str = ""
    compute_mode: str = ""  # run: spin | hybrid


RUN = Context()

# The settings a verdict may suggest, per command. None: the command has no such setting (ceiling
# chooses O_DIRECT and the drop itself).
WORDS: Dict[str, Dict[str, Optional[str]]] = {
    "run": {
        "direct": "--engine odirect (O_DIRECT)",
        "drop": "--cache drop",
        "larger": "a dataset larger than RAM (dataset.num_files_train)",
        "storage": "a dataset.data_folder on the storage to measure",
        "threads": "reader.read_threads",
        "deeper": "--engine io_uring with a deeper --qd",
        "bigger": "fewer, larger samples (dataset.record_length_bytes)",
        "hybrid": "dlio_fast.compute_mode=hybrid (the spin then sleeps most of each step)",
    },
    "io": {
        "direct": "--direct",
        "drop": "--cache drop",
        "larger": "--file-size larger than RAM",
        "storage": "a PATH on the storage to measure",
        "threads": "--threads",
        "deeper": "--engine io_uring with a deeper --qd",
        "bigger": "a larger --bs",
        "hybrid": None,
    },
    "checkpoint": {  # a checkpoint-only save or load, in the run's words
        "direct": "--engine odirect (O_DIRECT)",
        "drop": None,  # a load drops its files' pages already (DLIO does)
        "larger": "checkpoint.fsync=true (a save then waits for the device)",
        "storage": "a checkpoint.checkpoint_folder on the storage to measure",
        "threads": None,
        "deeper": "--engine io_uring with a deeper --qd",
        "bigger": None,
        "hybrid": None,
    },
    "ceiling": {
        "direct": None,
        "drop": None,
        "larger": "--file-size larger than RAM",
        "storage": "a PATH on the storage to measure",
        "threads": "--max-threads",
        "deeper": "--max-qd",
        "bigger": None,
        "hybrid": None,
    },
}


def _v(
    verdict: str,
    reason: str,
    summary: str,
    part: Optional[str] = None,
    setting: Optional[str] = None,
    ratio: Optional[float] = None,
) -> Dict[str, Any]:
    return {
        "verdict": verdict,
        "reason": reason,
        "summary": summary,  # the reason without the phase's own figures: what grouped lines print
        "part": part,
        "setting": setting,
        "storage_ratio": ratio,
        "thresholds": THRESHOLDS,
    }


def _join(items: Sequence[Optional[str]]) -> Optional[str]:
    given = [x for x in items if x]
    if not given:
        return None
    return given[0] if len(given) == 1 else ", ".join(given[:-1]) + ", or " + given[-1]


def classify(c: Dict[str, Any], ctx: Context = RUN) -> Dict[str, Any]:
    """The verdict of one phase's counters (dlio.system.counters.Phase.end, or combine())."""
    words = WORDS.get(ctx.command, WORDS["run"])
    app = int(c.get("app_bytes") or 0)
    if app <= 0:
        return _v("inconclusive", "no bytes were read or written", "no bytes were read or written")
    tgt = c.get("target") or {}
    write = c.get("direction") == "write"
    memory = tgt.get("memory_fs")
    if memory:
        what = "every write went to RAM" if write else "every read came from RAM"
        return _v(
            "cache",
            f"the files are on {memory} at {tgt.get('mount') or '?'}, a memory-backed filesystem: {what}, "
            "not from storage",
            f"{memory}: a memory-backed filesystem, not storage",
            part=f"memory filesystem ({memory})",
            setting=words["storage"],
            ratio=0.0,
        )
    seen = c.get("device_bytes") if c.get("device_bytes") is not None else c.get("network_bytes")
    where = "device" if c.get("device_bytes") is not None else "network"
    what = f"{where} {tgt.get('device') or tgt.get('mount') or ''}".rstrip()
    place = what
    own, foreign = _own_share(c, seen)
    if own is not None and not write:
        # the reads this process had the block layer make (readahead included): the page cache served
        # the rest, whatever other processes read from the same device meanwhile. (A write's own bytes are
        # the pages it dirtied, written back or not: the device's count says what reached it.)
        seen, what = own, f"this process's reads on {what}"
    ratio = None if seen is None else seen / app
    if ratio is not None and ratio < CACHE_RATIO:
        res = c.get("resident_before")
        pre = f"; {res:.0%} of the sampled pages were cached before the phase" if res is not None else ""
        if res is not None and res < CACHE_RATIO and not write:
            pre += ": the reads after a first pass over files that fit in RAM found the pages it left"
        how = "stayed in the page cache (not yet written back)" if write else "came from the page cache"
        return _v(
            "cache",
            f"{what} moved {fmt_bytes(seen)} of the application's {fmt_bytes(app)} "
            f"({ratio:.2f}x): {1 - ratio:.0%} {how}{pre}",
            f"the page cache {'kept the writes' if write else 'served the reads'} ({what})",
            setting=_cache_setting(ctx, words),
            ratio=ratio,
        )
    paced, over = accelerator_share(c), compute_overrun(c)
    kept_up = paced is not None and paced >= ACCEL_PACED  # the reads kept up with the emulated accelerator
    client: Optional[Dict[str, Any]]
    if kept_up and paced is not None and over is not None and over > OVERRUN_MAX:
        client = _slowed(c, ctx, words, paced, over)  # the storage kept up; the accelerator's CPU did not
    else:
        client = None if kept_up else _client(c, ctx, words)
    if client is not None:
        client["storage_ratio"] = ratio
        if foreign is not None and client["verdict"] == "inconclusive":  # both reasons, each with its figures
            client["reason"] += "; and " + _shared(foreign, place)
        return client
    if ratio is None:
        why = tgt.get("why") or "no device or network counters for the data folder"
        return _v("inconclusive", why, why)
    if foreign is not None:
        return _v(
            "inconclusive",
            _shared(foreign, place) + "; rerun with the device to itself",
            "other processes used the same device",
            part="other processes on the device",
            setting="the device to this run alone",
            ratio=ratio,
        )
    if ratio < MATCH_RATIO:
        return _v(
            "inconclusive",
            f"{what} moved {ratio:.2f}x the application's bytes: partly from the page cache",
            f"{what}: partly from the page cache",
            ratio=ratio,
        )
    note = (
        " (the NFS server may have served them from its own cache: not visible from the client)"
        if where == "network"
        else ""
    )
    if ratio > EXTRA_RATIO:
        note += (
            " (more than was read: readahead)"
            if own is not None
            else " (more than was read: readahead, or other processes using the same device)"
        )
    if paced is not None and paced >= ACCEL_PACED:
        why = f"the emulated accelerator computed {paced:.1%} of the steps' time: the reads kept up ({cpu_text(c)})"
        short = "the storage served the reads and kept up with the emulated accelerator"
    else:
        why = f"the client had headroom (readers {reader_share(c):.0%} of their cores, host {_pct(c)})"
        short = "the storage served the bytes and the client had headroom"
    return _v("storage-bound", f"{what} moved {ratio:.2f}x the application's bytes{note}; {why}", short, ratio=ratio)


def _shared(foreign: Dict[str, int], place: str) -> str:
    """What other processes moved on the device, against this run's own (_own_share's sharing)."""
    ways = ", ".join(f"{k} {fmt_bytes(foreign[k])}" for k in ("read", "write") if k in foreign)
    return (
        f"other processes moved {fmt_bytes(foreign['foreign'])} on {place} during the phase ({ways}), "
        f"{foreign['foreign'] / max(1, foreign['own']):.1f}x this run's own {fmt_bytes(foreign['own'])}: "
        "the storage was shared, its times are not this run's alone"
    )


def _own_share(c: Dict[str, Any], device: Optional[int]) -> Tuple[Optional[int], Optional[Dict[str, int]]]:
    """(this process's own block bytes in the phase's direction, the device's sharing when it matters) of a
    phase on a block device; (None, None) without task I/O accounting. Other processes' bytes are the
    device's beyond this process's own, both ways when the counters have both (a writer beside a read phase
    shares the device as much as a reader does); the host's dirty pages written back meanwhile are credited
    against the device's writes (dirtied before the phase). They matter when they are more than
    FOREIGN_SHARE of this run's own bytes (and FOREIGN_MIN: a journal commit is not a neighbour).
    The sharing: {foreign, read, write (other processes' each way), own (this run's, both ways)}."""
    own = c.get("own_bytes")
    if own is None or device is None or c.get("device_bytes") is None:
        return None, None
    d = "write" if c.get("direction") == "write" else "read"
    moved = {d: (int(device), int(own))}
    o = "read" if d == "write" else "write"
    if c.get(f"device_{o}_bytes") is not None and c.get(f"own_{o}_bytes") is not None:
        moved[o] = (int(c[f"device_{o}_bytes"]), int(c[f"own_{o}_bytes"]))
    credit = int(c.get("written_back_bytes") or 0)
    share = {k: max(0, dev - mine - (credit if k == "write" else 0)) for k, (dev, mine) in moved.items()}
    foreign = sum(share.values())
    mine = sum(m for _, m in moved.values())
    shared = foreign > FOREIGN_SHARE * max(mine, 1) and foreign > FOREIGN_MIN
    return int(own), {"foreign": foreign, "own": mine, **share} if shared else None


def _cache_setting(ctx: Context, words: Dict[str, Optional[str]]) -> Optional[str]:
    """What keeps the page cache out, less what is in effect already."""
    dropped = ctx.cache in ("drop", "drop-all")
    return _join(
        [
            None if ctx.direct else words["direct"],
            None if ctx.direct or dropped else words["drop"],
            words["larger"],
        ]
    )


def _pct(c: Dict[str, Any]) -> str:
    x = c.get("host_busy_share")
    return "-" if x is None else f"{x:.0%} busy"


def _slowed(
    c: Dict[str, Any], ctx: Context, words: Dict[str, Optional[str]], paced: float, over: float
) -> Dict[str, Any]:
    """The reads kept up, but the emulated compute ran over its set time: the CPU it spins on was taken,
    and the AU and samples/s say so, not the storage. Who took it decides the verdict."""
    s = cpu_split(c)
    host = c.get("host_busy_share")
    total = (host or 0.0) * int(c.get("host_cpus") or c.get("cores") or 1)
    others = max(0.0, total - s["total"])
    why = (
        f"the emulated compute ran {over:.0%} over its set time while the reads kept up (the accelerator "
        f"computed {paced:.1%} of the steps' time): the exact AU and samples/s are the CPU's, not the storage's; "
        f"host {_pct(c)} ({cpu_text(c)}, other processes {others:.2f})"
    )
    if host is not None and host >= HOST_BUSY and _others_took_it(others, s["client"], total):
        return _v(
            "inconclusive",
            f"{why}; other processes took the CPU: rerun on an idle client",
            "other processes slowed the emulated accelerator; the reads kept up",
            part="other processes on the host",
        )
    fix = _join(
        [
            words["hybrid"] if ctx.compute_mode != "hybrid" else None,
            "fewer ranks (accelerators) per host than its cores" if ctx.command == "run" else None,
        ]
    )
    return _v(
        "client-bound",
        why,
        "the emulated accelerator did not get the CPU it spins on; the reads kept up",
        part="emulated accelerator",
        setting=fix,
    )


def _client(c: Dict[str, Any], ctx: Context, words: Dict[str, Optional[str]]) -> Optional[Dict[str, Any]]:
    """Client-bound (rules 3-5), or None when the client had headroom."""
    cores = int(c.get("cores") or 1)
    threads = int(c.get("reader_threads") or 0)
    user, sys_ = float(c.get("cpu_user_s") or 0.0), float(c.get("cpu_sys_s") or 0.0)
    kernel = sys_ / (user + sys_) if user + sys_ > 0 else 0.0
    if kernel >= 0.5:
        side = f"{kernel:.0%} of the process's CPU in the kernel: " + (
            _join(
                [
                    "a deeper --qd" if ctx.engine == "io_uring" and ctx.command != "ceiling" else words["deeper"],
                    words["bigger"],
                    None if ctx.direct else words["direct"],
                ]
            )
            or "a faster client"
        )
    else:
        side = f"{1 - kernel:.0%} of the process's CPU in user space: " + (
            _join([words["bigger"], "more cores/hosts"]) or "more cores"
        )
    s = cpu_split(c)
    share = reader_share(c)
    if share >= READER_BUSY:
        if max(1, threads) < cores and words["threads"]:
            fix = f"raise {words['threads']} ({max(1, threads)} now, {cores} usable cores)"
        else:
            fix = f"the {cores} usable core(s) are full: {side}"
        return _v(
            "client-bound",
            f"the reader threads used {share * reader_cores(c):.2f} cores, {share:.0%} of the "
            f"{reader_cores(c)} they could use",
            "the reader threads were CPU-bound",
            part="reader threads",
            setting=fix,
        )
    if s["total"] >= PROCESS_BUSY * cores:
        spin = s["accelerator"] >= 0.5 and ctx.compute_mode != "hybrid" and words["hybrid"]
        return _v(
            "client-bound",
            f"the process used {s['total']:.2f} of its {cores} usable cores ({cpu_text(c)})",
            "the process's cores were full",
            part="process",
            setting=f"the cores are full: {side}" + (f"; {words['hybrid']}" if spin else ""),
        )
    host = c.get("host_busy_share")
    if host is not None and host >= HOST_BUSY:
        total = host * int(c.get("host_cpus") or cores)
        others = max(0.0, total - s["total"])
        why = (
            f"the host's CPUs were {host:.0%} busy ({total:.2f} cores: {cpu_text(c)}, other processes "
            f"{others:.2f}): no headroom"
        )
        if _others_took_it(others, s["client"], total):  # not a part of the client the run's settings control
            return _v(
                "inconclusive",
                f"{why}; the other processes may have set the pace: rerun on an idle client",
                "the host's CPUs were busy with other processes",
                part="other processes on the host",
            )
        return _v(
            "client-bound", why, "the host's CPUs were full, mostly with this run", part="this process", setting=side
        )
    return None


def _others_took_it(others: float, client: float, total: float) -> bool:
    """Rule 5: did other processes take enough of a busy host's CPU (cores) to have set the run's pace?"""
    return others >= min(client, OTHERS_CPU_SHARE * total)


def combine(phases: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One host's counters for a phase from its ranks' (device bytes are the host's: the largest
    delta; application bytes, samples, CPU, compute and I/O wait are added)."""
    if len(phases) == 1:
        return dict(phases[0])
    out = dict(phases[0])
    for k in (
        "app_bytes",
        "app_ops",
        "samples",
        "cpu_user_s",
        "cpu_sys_s",
        "reader_cpu_s",
        "reader_threads",
        "worker_cpu_s",
        "compute_s",
        "compute_set_s",
        "compute_cpu_s",
    ):
        out[k] = sum(p.get(k) or 0 for p in phases)
    waits = [p.get("io_wait_s") for p in phases]
    out["io_wait_s"] = None if any(w is None for w in waits) else sum(waits)
    for k in ("device_bytes", "device_ios", "network_bytes", "device_read_bytes", "device_write_bytes"):
        vals = [p[k] for p in phases if p.get(k) is not None]
        out[k] = max(vals) if vals else None
    out["written_back_bytes"] = max((p.get("written_back_bytes") or 0 for p in phases), default=0)
    for k in ("own_bytes", "own_read_bytes", "own_write_bytes"):
        owns = [p.get(k) for p in phases]  # each rank's own: added, when every rank has it
        out[k] = None if any(o is None for o in owns) else sum(owns)
    out["wall_s"] = max(p["wall_s"] for p in phases)
    out["cores"] = min(int(phases[0].get("host_cpus") or 1), sum(int(p.get("cores") or 1) for p in phases))
    return out


def run_context(cfg: Config, direct: bool) -> Context:
    """The Context of a `run` (direct: whether its reads were O_DIRECT, dlio.config.engines.engine_spec)."""
    d = cfg.dlio_fast
    return Context("run", bool(direct), str(d.cache or ""), str(d.engine or ""), str(d.compute_mode or ""))


def annotate_run(records: Sequence[Dict[str, Any]], ctx: Context = RUN) -> List[Dict[str, Any]]:
    """The verdict of each epoch and each checkpoint save or load (saved during training, or in
    checkpoint-only mode) of a run, per host:
    set as "verdict" in each rank's record of it and returned as [{phase, host, (epoch), verdict...}] for the
    result's "verdicts"."""
    groups: "OrderedDict[tuple, List[Dict[str, Any]]]" = OrderedDict()
    for r in records:
        for ep in r.get("epochs", []):
            if ep.get("counters"):
                groups.setdefault((f"epoch {ep['epoch']}", r.get("hostname", ""), ep["epoch"]), []).append(ep)
        saved = [ck for ep in r.get("epochs", []) for ck in ep.get("checkpoints") or []]  # between the steps
        for ck in saved + list(r.get("checkpoints") or []):  # + checkpoint-only mode's
            if ck.get("counters"):
                name = f"checkpoint {ck.get('block', ck.get('step'))} {ck.get('kind')}"
                groups.setdefault((name, r.get("hostname", ""), None), []).append(ck)
    out = []
    ckpt = dataclasses.replace(ctx, command="checkpoint")
    for (phase, hostname, epoch), parts in groups.items():
        v = classify(combine([p["counters"] for p in parts]), ctx if epoch is not None else ckpt)
        for p in parts:
            p["verdict"] = v
        out.append({"phase": phase, **({"epoch": epoch} if epoch is not None else {}), "host": hostname, **v})
    return out
