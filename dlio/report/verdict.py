"""Is this a storage result? The verdict of a phase (an epoch of `run`, an io point) from its
counters (dlio.counters): storage-bound, client-bound, cache or inconclusive, with the reason.

The rules, in the order they are tried (the thresholds are printed next to each verdict):

  1. no bytes moved: inconclusive;
  2. cache: the device (or NFS) bytes are below CACHE_RATIO x the application's: the rest came from
     the page cache (for NFS: the client's cache);
  3. client-bound, reader threads: their CPU time over the phase is >= READER_BUSY x the cores they
     could use (min(threads, usable cores)): CPU per sample x samples/s left no headroom;
  4. client-bound, process: the whole process used >= PROCESS_BUSY x its usable cores (the emulated
     compute spin, Python, the readers);
  5. the host's CPUs were >= HOST_BUSY busy: the client had no headroom. client-bound when this
     process used most of it, else inconclusive (other processes may have set the pace: a CPU they
     hold delays the readers' wake-ups; their share is stated);
  6. inconclusive: nothing to count the storage's bytes with (tmpfs, overlay, the null engine);
  7. inconclusive: device bytes between CACHE_RATIO and MATCH_RATIO of the application's (partly
     cached);
  8. storage-bound: the device (or network) bytes match the application's (>= MATCH_RATIO; readahead
     may add more) and the client had headroom. Over NFS the server may still have served them from
     its own cache: the client cannot see that, and the verdict says so.

The device counters are the whole device's: another process reading the same disk during the phase
adds to them, so a shared disk can turn `cache` into `inconclusive` or `storage-bound`, never the
reverse. Under MPI the ranks of one host share its device: their application bytes and CPU are
added before the rules run (combine()).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence

from dlio.units import fmt_bytes

CACHE_RATIO = 0.5
MATCH_RATIO = 0.8
READER_BUSY = 0.8
PROCESS_BUSY = 0.9
HOST_BUSY = 0.9
EXTRA_RATIO = 1.5  # above: the device moved more than the application read (said, not judged)

THRESHOLDS = (
    f"cache < {CACHE_RATIO:g}x app bytes <= partly cached < {MATCH_RATIO:g}x <= storage; "
    f"client-bound: readers >= {READER_BUSY:.0%} of their cores, process >= {PROCESS_BUSY:.0%}, "
    f"host >= {HOST_BUSY:.0%} busy"
)


def _v(
    verdict: str, reason: str, part: Optional[str] = None, setting: Optional[str] = None, ratio: Optional[float] = None
) -> Dict[str, Any]:
    return {
        "verdict": verdict,
        "reason": reason,
        "part": part,
        "setting": setting,
        "storage_ratio": ratio,
        "thresholds": THRESHOLDS,
    }


def classify(c: Dict[str, Any]) -> Dict[str, Any]:
    """The verdict of one phase's counters (dlio.counters.Phase.end, or combine())."""
    app = int(c.get("app_bytes") or 0)
    if app <= 0:
        return _v("inconclusive", "no bytes were read or written")
    seen = c.get("device_bytes") if c.get("device_bytes") is not None else c.get("network_bytes")
    where = "device" if c.get("device_bytes") is not None else "network"
    ratio = None if seen is None else seen / app
    tgt = c.get("target") or {}
    what = f"{where} {tgt.get('device') or tgt.get('mount') or ''}".rstrip()
    if ratio is not None and ratio < CACHE_RATIO:
        res = c.get("resident_before")
        pre = f"; {res:.0%} of the sampled pages were cached before the phase" if res is not None else ""
        how = (
            "stayed in the page cache (not yet written back)"
            if c.get("direction") == "write"
            else "came from the page cache"
        )
        return _v(
            "cache",
            f"{what} moved {fmt_bytes(seen)} of the application's {fmt_bytes(app)} "
            f"({ratio:.2f}x): {1 - ratio:.0%} {how}{pre}",
            setting="O_DIRECT (dlio_fast.engine=odirect), dlio_fast.cache=drop, or a dataset larger than RAM",
            ratio=ratio,
        )
    client = _client(c)
    if client is not None:
        client["storage_ratio"] = ratio
        return client
    if ratio is None:
        return _v("inconclusive", tgt.get("why") or "no device or network counters for the data folder")
    if ratio < MATCH_RATIO:
        return _v(
            "inconclusive",
            f"{what} moved {ratio:.2f}x the application's bytes: partly from the page cache",
            ratio=ratio,
        )
    note = (
        " (the NFS server may have served them from its own cache: not visible from the client)"
        if where == "network"
        else ""
    )
    if ratio > EXTRA_RATIO:
        note += " (more than was read: readahead, or other processes using the same device)"
    return _v(
        "storage-bound",
        f"{what} moved {ratio:.2f}x the application's bytes{note}; the client had "
        f"headroom (readers {_reader_share(c):.0%} of their cores, host {_pct(c.get('host_busy_share'))})",
        ratio=ratio,
    )


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.0%} busy"


def _reader_cores(c: Dict[str, Any]) -> int:
    return max(1, min(max(1, int(c.get("reader_threads") or 0)), int(c.get("cores") or 1)))


def _reader_share(c: Dict[str, Any]) -> float:
    return float(c.get("reader_cpu_s") or 0.0) / float(c["wall_s"]) / _reader_cores(c)


def _client(c: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Client-bound (rules 3-5), or None when the client had headroom."""
    wall, cores = float(c["wall_s"]), int(c.get("cores") or 1)
    threads = int(c.get("reader_threads") or 0)
    user, sys_ = float(c.get("cpu_user_s") or 0.0), float(c.get("cpu_sys_s") or 0.0)
    kernel = sys_ / (user + sys_) if user + sys_ > 0 else 0.0
    side = (
        f"{kernel:.0%} of the process's CPU in the kernel: dlio_fast.engine io_uring with a deeper "
        "dlio_fast.qd, larger reads, or O_DIRECT"
        if kernel >= 0.5
        else f"{1 - kernel:.0%} of the process's CPU in user space: fewer, larger samples, or more cores/hosts"
    )
    share = _reader_share(c)
    if share >= READER_BUSY:
        busy = float(c.get("reader_cpu_s") or 0.0) / wall
        if max(1, threads) < cores:
            fix = f"raise reader.read_threads ({max(1, threads)} now, {cores} usable cores)"
        else:
            fix = f"the {cores} usable core(s) are full: {side}"
        return _v(
            "client-bound",
            f"the reader threads used {busy:.2f} cores, {share:.0%} of the {_reader_cores(c)} they could use",
            part="reader threads",
            setting=fix,
        )
    proc = (user + sys_) / wall
    if proc >= PROCESS_BUSY * cores:
        return _v(
            "client-bound",
            f"the process used {proc:.2f} of its {cores} usable cores "
            f"(readers {float(c.get('reader_cpu_s') or 0.0) / wall:.2f})",
            part="process",
            setting=f"the cores are full: {side}; dlio_fast.compute_mode=hybrid spins less",
        )
    host = c.get("host_busy_share")
    if host is not None and host >= HOST_BUSY:
        total = host * int(c.get("host_cpus") or cores)
        others = max(0.0, total - proc)
        why = (
            f"the host's CPUs were {host:.0%} busy ({total:.2f} cores: this process {proc:.2f}, other "
            f"processes {others:.2f}): no headroom"
        )
        if others >= proc:  # not a part of the client the run's settings control
            return _v(
                "inconclusive",
                f"{why}; the other processes may have set the pace: rerun on an idle client",
                part="other processes on the host",
            )
        return _v("client-bound", why, part="this process", setting=side)
    return None


def combine(phases: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One host's counters for a phase from its ranks' (device bytes are the host's: the largest
    delta; application bytes, samples and CPU are added)."""
    if len(phases) == 1:
        return dict(phases[0])
    out = dict(phases[0])
    for k in ("app_bytes", "app_ops", "samples", "cpu_user_s", "cpu_sys_s", "reader_cpu_s", "reader_threads"):
        out[k] = sum(p.get(k) or 0 for p in phases)
    for k in ("device_bytes", "device_ios", "network_bytes"):
        vals = [p[k] for p in phases if p.get(k) is not None]
        out[k] = max(vals) if vals else None
    out["wall_s"] = max(p["wall_s"] for p in phases)
    out["cores"] = min(int(phases[0].get("host_cpus") or 1), sum(int(p.get("cores") or 1) for p in phases))
    return out


def annotate_run(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The verdict of each epoch of a run, per host: set as "verdict" in each rank's epoch record and
    returned as [{epoch, host, verdict...}] for the result's "verdicts"."""
    groups: "OrderedDict[tuple, List[Dict[str, Any]]]" = OrderedDict()
    for r in records:
        for ep in r.get("epochs", []):
            if ep.get("counters"):
                groups.setdefault((ep["epoch"], r.get("hostname", "")), []).append(ep)
    out = []
    for (epoch, hostname), eps in groups.items():
        v = classify(combine([ep["counters"] for ep in eps]))
        for ep in eps:
            ep["verdict"] = v
        out.append({"phase": f"epoch {epoch}", "epoch": epoch, "host": hostname, **v})
    return out


def line(phase: str, v: Dict[str, Any]) -> str:
    """'epoch 2: cache: device vda moved ...; change: ...'"""
    fix = f"; change: {v['setting']}" if v.get("setting") and v["verdict"] != "storage-bound" else ""
    part = f" ({v['part']})" if v.get("part") else ""
    return f"{phase}: {v['verdict']}{part}: {v['reason']}{fix}"


def run_lines(verdicts: Sequence[Dict[str, Any]]) -> List[str]:
    """The verdict lines printed at the end of a run (one per epoch and host) and the thresholds."""
    if not verdicts:
        return []
    hosts = len({v["host"] for v in verdicts})
    out = ["Verdict (is this a storage result?):"]
    out += ["  " + line(v["phase"] + (f" [{v['host']}]" if hosts > 1 else ""), v) for v in verdicts]
    out.append(f"  thresholds: {THRESHOLDS}")
    return out


def point_lines(points: Sequence[Dict[str, Any]]) -> List[str]:
    """The verdict lines of an io grid, one per point."""
    vs = [(p, p["verdict"]) for p in points if p.get("verdict")]
    if not vs:
        return []
    out = ["Verdict (is this a storage result?):"]
    for p, v in vs:
        out.append("  " + line(f"{p['rw']} {p['bs']} {p['engine']} qd{p['qd']} t{p['threads']}", v))
    out.append(f"  thresholds: {THRESHOLDS}")
    return out
