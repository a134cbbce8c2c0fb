"""`dlio-fast run` of a kvcache workload, end to end on real files: the reference's files and figures,
compat mode's system calls against the reference's (strace), direct mode, two MPI ranks, the
attestation catching a no-op fsync preloaded into the process, and `dlio-fast check`."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import TINY_KV_CONFIG, on_s3, set_args

from dlio import _core

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "kvcache")
GiB = 1 << 30

CONFIG = TINY_KV_CONFIG


def args(tmp_path, *more):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(CONFIG)
    return ["run", "--config", cfg, "--set", f"kvcache.cache_dir={tmp_path}/cache", "-o", tmp_path / "out", *more]


def load(tmp_path):
    with open(tmp_path / "out" / "dlio-fast.json") as f:
        doc = json.load(f)
    with open(tmp_path / "out" / "summary.json") as f:
        summary = json.load(f)
    return doc, summary


def test_dry_run_prints_the_plan(run_cli, tmp_path):
    code, out, err = run_cli("run", "-w", "kvcache_llama3_8b_opt1", "--dry-run")
    assert code == 0, err
    assert "llama3.1-8b (131,072 B/token), 200 users" in out and "16 concurrent allocations" in out
    assert "Min: 598 tokens" in out and "interactive: 25 users" in out  # the reference's users for seed 42


def test_bad_input_is_one_line(run_cli, tmp_path):
    code, out, err = run_cli(*args(tmp_path, "--set", "kvcache.cpu_bytes=lots"))
    assert code == 2 and err.count("\n") == 1 and "kvcache.cpu_bytes = 'lots'" in err


def test_compat_run_writes_the_references_files(run_cli, tmp_path):
    code, out, err = run_cli(*args(tmp_path))
    assert code == 0, err
    doc, summary = load(tmp_path)
    (rec,) = doc["records"]
    c, r = rec["result"]["counts"], rec["result"]
    assert c["requests"] > 0 and c["storage_read_bytes"] > 0
    elapsed = (r["stop_ns"] - r["start_ns"]) / 1e9
    (res_file,) = glob.glob(str(tmp_path / "out" / "trial_0" / "rank_0" / "kvcache_results_*.json"))
    with open(res_file) as f:
        ref = json.load(f)
    cs = ref["summary"]["cache_stats"]
    assert cs["tier_storage_read_bandwidth_gbps"] == pytest.approx(c["storage_read_bytes"] / GiB / elapsed)
    assert ref["summary"]["storage_throughput_tokens_per_sec"] == pytest.approx(c["tokens"] / (c["storage_ns"] / 1e9))
    opt = summary["options"]["kv"] if "kv" in summary["options"] else next(iter(summary["options"].values()))
    assert opt["aggregated_read_bandwidth_gbps"] == pytest.approx(cs["tier_storage_read_bandwidth_gbps"])
    assert summary["total_ranks"] == 1 and opt["trial_count"] == 1
    assert rec["attestation"]["ok"] and rec["attestation"]["fsyncs"] == c["storage_writes"]
    assert "Verdict (is this a storage result?):" in out and "Attestation" in out
    assert not glob.glob(str(tmp_path / "cache" / "rank_0" / "kv_*.npy"))  # emptied after the trial
    # the earlier-turn reads under the reference's names, per request in dlio-fast.json and on the console
    mt = ref["summary"]["multi_turn_stats"]
    assert (mt["cache_hits"], mt["cache_misses"]) == (c["mt_hits"], c["mt_misses"]) and ref["seed"] == 42
    x_mt = doc["aggregate"]["exact"]["multi_turn_stats"]
    assert x_mt["lookups_per_request"] == pytest.approx((c["mt_hits"] + c["mt_misses"]) / c["requests"])
    assert rec["exact"]["multi_turn_stats"]["cache_hits"] == mt["cache_hits"]
    assert f"{x_mt['lookups_per_request']:.2f} earlier-turn lookups per request" in out
    code, out, err = run_cli("check", tmp_path / "out")
    assert code == 0 and "PASS  attestation (trial 0, rank 0)" in out


def _tokens(text):
    """Each .npy file's system calls as tokens (see tests/data/kvcache/ref_syscalls.txt)."""
    fdp, out = {}, {}
    for line in text.splitlines():
        m = re.match(r"^(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
        if not m:
            continue
        call, a, ret = m.group(1), m.group(2), int(m.group(3))
        pm = re.search(r'"([^"]+\.npy)"', a)
        if call == "openat" and pm and ret >= 0:
            fdp[ret] = pm.group(1)
            out.setdefault(pm.group(1), []).append("openat:" + ("W" if "O_WRONLY" in a else "R"))
            continue
        if call == "unlink" and pm:
            out.setdefault(pm.group(1), []).append("unlink")
            continue
        fd = re.match(r"(\d+)", a)
        if not fd or int(fd.group(1)) not in fdp:
            continue
        path = fdp[int(fd.group(1))]
        if call in ("read", "write"):
            n = int(a.rsplit(",", 1)[1])
            out[path].append(f"{call}:{n}" + (f"={ret}" if ret != n else ""))
        elif call == "fallocate":
            out[path].append("fallocate:" + a.split(",", 1)[1].replace(" ", ""))
        elif call in ("fsync", "fadvise64"):
            out[path].append(call + (":DONTNEED" if "DONTNEED" in a else ""))
        elif call == "close":
            del fdp[int(fd.group(1))]
    return out


def _pattern(line):
    """A line of ref_syscalls.txt as a regex: N the payload's size (the same N throughout)."""
    out, named = [], False
    for tok in line.split():
        head, sep, num = tok.rpartition(":") if "," not in tok else tok.rpartition(",")
        if num == "N-4096":
            out.append(re.escape(head + sep) + r"\d+")
        elif num == "N":
            out.append(re.escape(head + sep) + (r"(?P=n)" if named else r"(?P<n>\d+)"))
            named = True
        else:
            out.append(re.escape(tok))
    return re.compile(" ".join(out))


def _operations(toks):
    """A file's calls split into operations: a write (openat:W ...), a read (openat:R fadvise64 ...), unlink."""
    ops = []
    for i, t in enumerate(toks):
        starts = t in ("openat:W", "unlink") or (t == "openat:R" and toks[i + 1 : i + 2] == ["fadvise64:DONTNEED"])
        if starts or not ops:
            ops.append([])
        ops[-1].append(t)
    return [" ".join(o) for o in ops]


def test_compat_syscalls_are_the_references(tmp_path):
    if not shutil.which("strace"):
        pytest.skip("strace not installed")
    ref = dict(line.split(": ", 1) for line in open(os.path.join(DATA, "ref_syscalls.txt")) if line[0] != "#")
    log = tmp_path / "st"
    cmd = [
        "strace",
        "-ff",
        "-o",
        str(log),
        "-e",
        "trace=openat,read,write,fsync,fadvise64,fallocate,unlink,close",
        sys.executable,
        "-m",
        "dlio",
        *map(str, args(tmp_path, "--set", "kvcache.storage_capacity=12MiB")),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode and "ptrace" in p.stderr:
        pytest.skip(f"strace cannot trace here: {p.stderr.strip()[:200]}")
    assert p.returncode == 0, p.stderr[-2000:]
    write, read = _pattern(ref["write"]), _pattern(ref["read"])
    seen = {"write": 0, "read": 0, "unlink": 0}
    for f in glob.glob(str(log) + ".*"):  # one file per thread: a request's calls are its worker's
        for path, toks in _tokens(open(f).read()).items():
            for op in _operations(toks):
                kind = (
                    "unlink"
                    if op == "unlink"
                    else "write"
                    if write.fullmatch(op)
                    else "read"
                    if read.fullmatch(op)
                    else None
                )
                assert kind, f"{path}: {op}"
                seen[kind] += 1
    assert all(seen.values()), seen  # 12 MiB of storage: the least recently used entries are unlinked


def test_direct_mode(run_cli, tmp_path):
    os.makedirs(tmp_path / "cache", exist_ok=True)
    why = _core.kv_store_check("direct", str(tmp_path / "cache"), 8 << 20, 1 << 20, 2)
    if why:
        pytest.skip(why)
    code, out, err = run_cli(
        *args(
            tmp_path,
            *set_args("kvcache.io_mode=direct", "kvcache.direct_chunk=1MiB", "kvcache.direct_qd=2"),
        )
    )
    assert code == 0, err
    doc, _ = load(tmp_path)
    (rec,) = doc["records"]
    assert rec["result"]["store"]["fadvises"] == 0 and rec["result"]["store"]["fsyncs"] > 0
    assert rec["exact"]["storage_read_bytes"] > 0 and rec["attestation"]["fsync_reached_kernel"] is not False


def test_two_mpi_ranks_each_their_folder(tmp_path):
    mpiexec = shutil.which("mpiexec")
    if not mpiexec:
        pytest.skip("mpiexec not found (pip install mpich mpi4py)")
    p = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-m", "dlio", *map(str, args(tmp_path))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    doc, summary = load(tmp_path)
    assert sorted(r["rank"] for r in doc["records"]) == [0, 1]
    assert os.path.isdir(tmp_path / "cache" / "rank_0") and os.path.isdir(tmp_path / "cache" / "rank_1")
    per_rank = []
    for rank in (0, 1):
        (f,) = glob.glob(str(tmp_path / "out" / "trial_0" / f"rank_{rank}" / "kvcache_results_*.json"))
        with open(f) as fh:
            per_rank.append(json.load(fh)["summary"]["cache_stats"])
    opt = next(iter(summary["options"].values()))
    assert summary["total_ranks"] == 2 and opt["rank_count"] == 2
    assert opt["aggregated_read_bandwidth_gbps"] == pytest.approx(
        sum(c["tier_storage_read_bandwidth_gbps"] for c in per_rank)
    )
    assert opt["aggregated_device_read_p95_ms"] == max(c["storage_read_device_p95_ms"] for c in per_rank)
    seeds = []
    for rank in (0, 1):  # the reference's wrapper seeds client N with seed + N
        (f,) = glob.glob(str(tmp_path / "out" / "trial_0" / f"rank_{rank}" / "kvcache_results_*.json"))
        with open(f) as fh:
            seeds.append(json.load(fh)["seed"])
    assert seeds == [42, 43]


def test_attestation_catches_a_no_op_fsync(tmp_path, dlio_cmd):
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler to build the shim")
    src = tmp_path / "nofsync.c"
    src.write_text("int fsync(int fd) { (void)fd; return 0; }\nint fdatasync(int fd) { (void)fd; return 0; }\n")
    lib = tmp_path / "libnofsync.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    code, out, err = dlio_cmd(*args(tmp_path), env={"LD_PRELOAD": str(lib)})
    assert code == 0, err  # the run itself goes on: its figures are what the shim made of them
    doc, _ = load(tmp_path)
    a = doc["records"][0]["attestation"]
    assert a["fsync_reached_kernel"] is False and str(lib) in a["preloaded"]
    assert {"symbol": "fsync", "library": str(lib)} in a["interposed"]
    assert "fsync reached the kernel: NO" in out
    code, out, err = dlio_cmd("check", tmp_path / "out")
    assert code == 1 and "FAIL  attestation" in out and "libnofsync.so" in out


def test_null_mode_is_the_decisions_in_virtual_time(run_cli, tmp_path):
    """io_mode null: 30 s of users in well under that, no file, the verdict says so, the operations as the
    reference's --io-trace-log CSV."""
    from dlio.kvcache import oplog

    log = tmp_path / "ops.csv"
    code, out, err = run_cli(
        *args(
            tmp_path,
            *set_args("kvcache.io_mode=null", "kvcache.duration=30", f"kvcache.io_trace_log={log}"),
        )
    )
    assert code == 0, err
    doc, _ = load(tmp_path)
    (rec,) = doc["records"]
    assert rec["result"]["counts"]["requests"] > 100 and rec["window"]["wall_s"] < 30
    assert {v["verdict"] for v in doc["verdicts"]} == {"inconclusive"}
    assert not os.listdir(tmp_path / "cache" / "rank_0")
    ops, names = oplog.read_csv(str(log))
    c = rec["result"]["counts"]
    assert len(ops) == c["read_ops"] + c["write_ops"] and ops["t"].max() - ops["t"].min() < 30
    code, out, err = run_cli("check", tmp_path / "out")
    assert code == 0, out


def test_direct_mode_on_an_object_store_is_refused_not_ignored(run_cli, tmp_path):
    """The KV tier runs on S3 (tests/cli/test_kvcache_s3.py), but O_DIRECT has nothing to bypass there:
    kvcache.io_mode direct is refused, one line naming the key and what to do, before any request and
    with no output folder made."""
    code, out, err = run_cli(
        *args(
            tmp_path,
            *set_args("kvcache.io_mode=direct", **on_s3("b-kv")),
        )
    )
    line = err.strip()
    assert code == 2 and "\n" not in line, err
    assert "kvcache.io_mode = direct" in line and "object store" in line and "compat" in line, line
    assert not (tmp_path / "out").exists()


def test_a_small_conversation_window_forgets_and_stops_users(run_cli, tmp_path):
    """kvcache.max_conversations 1 with two users: each new conversation forgets the other user's, who
    then stops when continuing it (the reference's add_turn raises in that user's thread)."""
    code, out, err = run_cli(
        *args(tmp_path, *set_args("kvcache.io_mode=null", "kvcache.duration=30", "kvcache.max_conversations=1"))
    )
    assert code == 0, err
    doc, _ = load(tmp_path)
    mt = doc["aggregate"]["exact"]["multi_turn_stats"]
    assert mt["conversations_evicted"] > 0 and mt["users_stopped"] >= 1 and mt["requests_unsent"] > 0
    assert "users stopped" in out and "conversations forgotten" in out
    assert doc["settings"]["max_conversations"] == 1


def test_trial_gap_idles_around_each_trial(run_cli, tmp_path):
    import time

    t0 = time.monotonic()
    code, out, err = run_cli(
        *args(tmp_path, *set_args("kvcache.io_mode=null", "kvcache.trials=2", "kvcache.trial_gap=0.5"))
    )
    assert code == 0, err
    assert time.monotonic() - t0 >= 4 * 0.5  # before and after each of the two trials
    assert "idle 0.5 s before and after each trial" in out
    doc, _ = load(tmp_path)
    assert doc["settings"]["trial_gap_s"] == 0.5 and len(doc["records"]) == 2
