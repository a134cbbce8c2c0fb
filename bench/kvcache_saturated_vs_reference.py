#!/usr/bin/env python3
"""The KV-cache workload saturated: dlio-fast next to the reference's kv-cache.py when the request queue
backs up, where the reference's conversation window (ConversationManager, max_conversations) forgets
conversations before their later turns are served, and those turns then read no earlier turn.

Both run the same option (default Option 1) shrunk to --users users for --duration s with --model
(default tiny-1b) on the same folder (--dir), back to back in each of --repeats pairs (5 by default),
who goes first alternating from pair to pair (the reference in pairs 1, 3, 5, dlio-fast in 2, 4), page
cache dropped before each. A pair takes a little over twice --duration: the defaults (40 s, 5 pairs)
about 8 minutes, the README's passing command (60 s) about 11; --quick (20 s runs) about 4. The users
offer far more than a small host's storage serves, so the queue backs up as in every CLOSED run. The
window is shrunk with the run (--max-conversations, default 2 per user where the CLOSED runs have 5):
the reference reads it from a copy of its config.yaml (conversation.max_conversations), dlio-fast from
kvcache.max_conversations.

Printed per pair and as medians: storage read:write bytes (tier_storage_kv_bytes_read_gb /
tier_storage_kv_bytes_written_gb, from each tool's reference-format results file) and multi-turn lookups
per request ((multi_turn_stats cache_hits + cache_misses) / total_requests), each tool's and the ratio
dlio-fast / reference. Targets: read:write within 15 %, lookups per request within 20 %.
In runs this small each worker serves a handful of requests, so lookups per request depend on which
requests the workers happen to take early (while conversations are still remembered) and on how long
each tool takes per request (the reference's Python client is slower): expect a noisy ratio;
bench/kvcache_window_model.py checks the window's logic itself, request by request. Traced request by
request, the reference's earlier-turn lookups all fall in the first seconds, before the backlog outlasts the
window: lookups per request measure how many later turns a client serves then, i.e. its speed, and a pair
where dlio-fast moved > 1.2x the reference's bytes on the same folder says the reference's client, not the
storage, bounded it. Both tools drain alike after the duration (each worker waited for in turn, up to 2 s).

The reference is run from --reference (its kv_cache_benchmark folder, e.g. a checkout of mlcommons/storage
or russfellows/mlc-storage) with the Python of --ref-venv, made with numpy and pyyaml when missing (the
installer of bench/kvcache_vs_reference.py); it is never a dependency of dlio-fast.
Usage: python bench/kvcache_saturated_vs_reference.py --reference /path/to/kv_cache_benchmark
       [--dir /var/tmp/kvsat] [--users 12] [--duration 40] [--repeats 5] [--quick] [--max-conversations 24]
       [--read-mibps 200]
--read-mibps holds both tools' reads of the disk to one rate (cgroup v1 blkio throttle): the storage, not the
reference's slower client, then bounds both, as on the slower storage the benchmark is meant for. The passing
figures in bench/README.md: --users 4 --duration 60 --read-mibps 150 (with 12 users each run serves about 15
requests, 12 of them first turns, and lookups per request vary 4x between the reference's own runs).
"""

import argparse
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kvcache_vs_reference import OPTIONS, ref_python, settle, timed  # noqa: E402
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

RW_TOLERANCE, LOOKUP_TOLERANCE = 0.15, 0.20


def ref_config(a, d):
    """The reference's config.yaml with the window shrunk (its other values are its defaults)."""
    import yaml  # the bench's own Python has it (dlio-fast's dependency)

    with open(os.path.join(a.reference, "config.yaml")) as f:
        conf = yaml.safe_load(f)
    conf.setdefault("conversation", {})["max_conversations"] = a.max_conversations
    path = os.path.join(d, "ref-config.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(conf, f)
    return path


def whole_disk(folder):
    """'MAJ:MIN' of the block device (the whole disk, not a partition) holding folder, for a throttle."""
    st = os.stat(folder)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysfs = f"/sys/dev/block/{dev}"
    if not os.path.exists(sysfs):
        sys.exit(f"--read-mibps: {folder} is not on a block device ({dev}): give a --dir on a disk")
    if os.path.exists(os.path.join(sysfs, "partition")):  # a partition: its disk is the folder above it
        with open(os.path.join(os.path.realpath(sysfs), "..", "dev")) as f:
            dev = f.read().strip()
    return dev


def throttled(cmd, folder, mibps):
    """cmd in a blkio control group (cgroup v1) whose reads of folder's disk are held to mibps MiB/s, so
    that the storage, not either tool's client, bounds both (v1 throttles the reads a process issues; its
    buffered writes are written back unthrottled). None: cmd as it is."""
    if not mibps:
        return cmd
    group = "/sys/fs/cgroup/blkio/dlio-kvsat"
    if not os.path.exists(os.path.dirname(group)):
        sys.exit("--read-mibps needs cgroup v1's blkio controller at /sys/fs/cgroup/blkio (and root)")
    os.makedirs(group, exist_ok=True)
    with open(os.path.join(group, "blkio.throttle.read_bps_device"), "w") as f:
        f.write(f"{whole_disk(folder)} {int(mibps * 2**20)}")
    return ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *cmd]


def figures(doc):
    """(read:write bytes, multi-turn lookups per request, requests, storage GiB/s read + written) of a
    reference-format results file."""
    s = doc["summary"]
    cs, mt = s["cache_stats"], s["multi_turn_stats"]
    requests = s["total_requests"]
    rw = cs["tier_storage_kv_bytes_read_gb"] / max(cs["tier_storage_kv_bytes_written_gb"], 1e-12)
    gibps = cs["tier_storage_read_bandwidth_gbps"] + cs["tier_storage_write_bandwidth_gbps"]
    return rw, (mt["cache_hits"] + mt["cache_misses"]) / max(requests, 1), requests, gibps


def run_reference(a, py, d):
    model, cpu_gb, allocs, _ = OPTIONS[a.option]
    out = os.path.join(d, "ref.json")
    cache = os.path.join(d, "ref-cache")
    shutil.rmtree(cache, ignore_errors=True)
    cmd = [py, os.path.join(a.reference, "kv-cache.py"), "--config", ref_config(a, d)]
    cmd += ["--model", a.model or model, "--num-users", str(a.users), "--duration", str(a.duration)]
    cmd += ["--gpu-mem-gb", "0", "--cpu-mem-gb", str(cpu_gb), "--max-concurrent-allocs", str(allocs)]
    cmd += ["--generation-mode", "none", "--seed", "42", "--cache-dir", cache, "--output", out]
    timed(throttled(cmd, d, a.read_mibps), os.path.join(d, "ref.log"))
    shutil.rmtree(cache, ignore_errors=True)
    with open(out) as f:
        doc = json.load(f)
    if "summary" not in doc:
        sys.exit(f"the reference completed no request in {a.duration} s (see {d}/ref.log): raise --duration")
    return figures(doc)


def run_ours(a, d):
    out = os.path.join(d, "out")
    shutil.rmtree(out, ignore_errors=True)
    sets = {
        "users": a.users,
        "duration": a.duration,
        "trials": 1,
        "trial_gap": 0,
        "max_conversations": a.max_conversations,
        "cache_dir": os.path.join(d, "ours-cache"),
        "io_mode": "compat",
        **({"model": a.model} if a.model else {}),
    }
    cmd = [sys.executable, "-m", "dlio", "run", "-w", OPTIONS[a.option][3], "-o", out]
    for k, v in sets.items():
        cmd += ["--set", f"kvcache.{k}={v}"]
    timed(throttled(cmd, d, a.read_mibps), os.path.join(d, "ours.log"))
    (path,) = glob.glob(os.path.join(out, "trial_0", "rank_0", "kvcache_results_*.json"))
    with open(path) as f:
        return figures(json.load(f))


def line(name, rw, lk, n, gibps):
    return (
        f"  {name:10s} read:write {rw:6.2f}  multi-turn lookups/request {lk:6.3f}  ({n:,} requests, storage "
        f"{gibps:.2f} GiB/s read + written)"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reference", required=True, help="the reference's kv_cache_benchmark folder (kv-cache.py)")
    p.add_argument("--ref-venv", default="/tmp/kvref-venv", help="a venv for the reference (made when missing)")
    p.add_argument("--dir", default="/var/tmp/kvcache-saturated", help="a folder on the filesystem under test")
    p.add_argument("--option", default="opt1", choices=sorted(OPTIONS))
    p.add_argument("--users", type=int, default=12)
    p.add_argument("--model", default="tiny-1b", help="the model of both tools (tiny-1b: entries of 10-400 MiB)")
    p.add_argument("--duration", type=int, default=None, help="seconds per run (40; --quick: 20)")
    add_repeat_args(p)
    p.add_argument("--max-conversations", type=int, default=0, help="the window (default: 2 per user)")
    p.add_argument(
        "--read-mibps",
        type=float,
        default=0,
        help="hold both tools' reads of --dir's disk to this rate (a blkio throttle) so the storage bounds both",
    )
    a = p.parse_args()
    a.duration = a.duration or (20 if a.quick else 40)
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    a.max_conversations = a.max_conversations or 2 * a.users
    if not os.path.exists(os.path.join(a.reference, "kv-cache.py")):
        sys.exit(f"--reference {a.reference}: no kv-cache.py there")
    os.makedirs(a.dir, exist_ok=True)
    py = ref_python(a.ref_venv)
    warn_few(a.repeats)
    print(
        f"{a.option} saturated: {a.model}, {a.users} users, {a.duration} s, window of {a.max_conversations} "
        f"conversations, {a.repeats} pair(s) in {a.dir} (who goes first alternates)"
        + (f", reads held to {a.read_mibps:g} MiB/s" if a.read_mibps else ""),
        flush=True,
    )
    rw_ratio, lk_ratio = [], []
    for i in range(a.repeats):
        order = ("ref", "ours") if i % 2 == 0 else ("ours", "ref")  # who goes first alternates
        got = {}
        for tool in order:
            settle(1 << 30)
            got[tool] = run_reference(a, py, a.dir) if tool == "ref" else run_ours(a, a.dir)
        ref, ours = got["ref"], got["ours"]
        rw_ratio.append(ours[0] / ref[0] if ref[0] else float("inf"))
        lk_ratio.append(ours[1] / ref[1] if ref[1] else float("inf"))
        print(f"pair {i + 1} ({'reference' if order[0] == 'ref' else 'dlio-fast'} first):")
        print(line("reference", *ref))
        print(line("dlio-fast", *ours))
        print(f"  dlio-fast / reference: read:write {rw_ratio[-1]:.3f}, lookups/request {lk_ratio[-1]:.3f}", flush=True)
        if ours[3] > 1.2 * ref[3]:  # the same folder served one tool 20 % more: the other's client held it back
            x = ours[3] / ref[3]
            print(f"  the reference's client, not the storage, bounded its run (dlio-fast moved {x:.2f}x)")
    rwp, lkp = Paired(rw_ratio), Paired(lk_ratio)
    rw, lk = rwp.median, lkp.median
    ok_rw, ok_lk = abs(rw - 1) <= RW_TOLERANCE, abs(lk - 1) <= LOOKUP_TOLERANCE
    print(
        f"median dlio-fast / reference: read:write {rw:.3f} ({'PASS' if ok_rw else 'FAIL'}, within "
        f"{RW_TOLERANCE:.0%}); pairs {rwp.spread()}"
    )
    print(
        f"median dlio-fast / reference: lookups/request {lk:.3f} ({'PASS' if ok_lk else 'FAIL'}, within "
        f"{LOOKUP_TOLERANCE:.0%}); pairs {lkp.spread()}"
    )
    sys.exit(0 if ok_rw and ok_lk else 1)


if __name__ == "__main__":
    main()
