#!/usr/bin/env python3
"""S3 GET throughput of `dlio-fast io s3://...` next to the client library's own best batch GET and
boto3 with threads: same objects, same number of requests, same requests in flight, same server.

The server is a throwaway Ceph RADOS Gateway on free loopback ports (tools/ceph-s3.sh, memstore) unless
--endpoint (with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set) names another. dlio-fast creates the
test objects (--keep; it reads them back once, untimed: the first GET after a PUT runs at about half
speed on Ceph RGW), and everyone reads those keys:
  dlio-fast        `dlio-fast io s3://B/P --rw read --bs SIZE --qd INFLIGHT --threads 1 --size N*SIZE`, run
                   in-process by the bench's child: the wall clock and CPU (getrusage) of its S3 worker
                   process around the loop that issues the N GETs (the worker's own answer), not the
                   op-log's first start .. last end (issue 42: that window left out the GET loop's
                   start and the last batch's return, which the others' wall clock holds, and its CPU
                   was the worker's scaled down to that window)
  s3dlio stats     get_many_stats(uris, max_in_flight), wall clock around the call
  s3dlio many      get_many(uris, max_in_flight) (the bytes handed to Python), wall clock
  s3dlio stats, heap kept   get_many_stats under the allocator settings dlio-fast gives its workers
                   (dlio.storage.s3.heap.MALLOC_REUSE): dlio-fast's harness next to the bare call
  boto3 threads    INFLIGHT threads, each get_object(...)['Body'].read() on its share of the uris
Every tool runs in a fresh process of its own (a live client in a long-lived bench process changed
the next tool's figures by up to 40 %), and each one's own warm-up is outside its timing: the other
tools read the same N objects once before the timed pass, dlio-fast opens its connections and
prefaults its worker's heap. Runs alternate in order, --repeats times (5 by default; --quick:
16m:8:32,128k:32:512). The bar is the other tool with the highest median; the verdict is the median
over repeats of dlio-fast / that tool in the same repeat (the per-repeat max of several noisy tools
would raise the bar by the noise alone), printed with the pairs' spread. Equal windows: every figure
is the bytes of the same N GETs over the wall clock around the code that issues them, in a process
that did its warm-up before.
Goal: >= 0.95. On a 2-core machine the gateway (about 1 CPU-s per GiB served) sets the ceiling, so the
client's CPU per byte decides who is faster: `--cpu` prints each tool's CPU-s per GiB as well.
Usage: python bench/vs_s3.py [--repeats 5] [--quick] [--cases 16m:8:64,128k:32:2048] [--endpoint URL] [--cpu]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))

from dlio.base.units import parse_size  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
from paired import Paired, add_repeat_args, warn_few  # noqa: E402

BUCKET = "vs-s3"


def keys_of(size, inflight, n):
    from dlio.storage.s3 import bench as points

    p = points.S3Point("read", size, inflight, 1, size)
    ks = points.object_keys("p/", p)[0]
    return [ks[i % len(ks)] for i in range(n)]


def make_objects(size, inflight, n):
    """`dlio-fast io` creates the test objects (and reads them back once, untimed)."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "dlio", "-q", "io", f"s3://{BUCKET}/p", "--rw", "read", "--bs", str(size)]
        cmd += ["--qd", str(inflight), "--threads", "1", "--size", str(size * n), "--keep"]
        subprocess.run(cmd + ["--json", os.path.join(d, "o.json")], check=True, capture_output=True, cwd=ROOT)


def dlio_fast_child(size, inflight, n):
    """In a fresh process: one `dlio-fast io` point, its S3 worker's answer kept (the wall clock and CPU
    around its GET loop). Prints {"bw": bytes/s, "cpu": CPU-s} over that wall clock, as the others."""
    from dlio.cli.main import main
    from dlio.storage.s3 import bench as s3bench

    answers = []
    record = s3bench.point_record

    def keep(point, rows, answer):
        answers.append(answer)
        return record(point, rows, answer)

    s3bench.point_record = keep  # bench-side: the record leaves out the worker's wall clock
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "o.json")
        args = ["-q", "io", f"s3://{BUCKET}/p", "--rw", "read", "--bs", str(size), "--qd", str(inflight)]
        main(args + ["--threads", "1", "--size", str(size * n), "--keep", "--json", js])
        with open(js) as f:
            rec = json.load(f)["points"][0]
    assert rec["bytes"] == size * n and len(answers) == 1 and not answers[0]["errors"], (rec, answers)
    print(json.dumps({"bw": rec["bytes"] / (answers[0]["wall_ns"] / 1e9), "cpu": answers[0]["cpu_s"]}))


# --- the other tools, each run by `--child TOOL` in a process of its own -------------------------


def s3dlio_stats(uris, inflight):
    import s3dlio

    c, b = s3dlio.get_many_stats(uris, max_in_flight=inflight)
    assert c == len(uris)
    return b


def s3dlio_many(uris, inflight):
    import s3dlio

    return sum(len(v) for _, v in s3dlio.get_many(uris, max_in_flight=inflight))


def boto3_threads(uris, inflight):
    import boto3
    from botocore.config import Config

    c = boto3.client("s3", config=Config(max_pool_connections=max(10, inflight)))
    keys = [u.split("/", 3)[3] for u in uris]

    def part(i):
        return sum(len(c.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys[i::inflight])

    with ThreadPoolExecutor(inflight) as ex:
        return sum(ex.map(part, range(inflight)))


CHILD_TOOLS = {"stats": s3dlio_stats, "many": s3dlio_many, "boto3": boto3_threads}


def child(tool, size, inflight, n):
    if tool == "dlio-fast":
        return dlio_fast_child(size, inflight, n)
    """In a fresh process: one untimed pass (connections, server caches, the client's heap), then the
    timed pass. Prints {"bw": bytes/s, "cpu": CPU-s of the timed pass}."""
    f = CHILD_TOOLS[tool]
    uris = [f"s3://{BUCKET}/{k}" for k in keys_of(size, inflight, n)]
    f(uris, inflight)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    b = f(uris, inflight)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    assert b == size * n, (b, size * n)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(json.dumps({"bw": b / dt, "cpu": cpu}))


def in_child(tool, env_extra=None):
    def run(size, inflight, n):
        env = dict(os.environ, **(env_extra or {}))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", tool, str(size), str(inflight), str(n)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
        r = json.loads(out.strip().splitlines()[-1])
        return r["bw"], r["cpu"]

    return run


def tools():
    from dlio.storage.s3.heap import MALLOC_REUSE

    return [
        ("dlio-fast", in_child("dlio-fast")),
        ("s3dlio stats", in_child("stats")),
        ("s3dlio many", in_child("many")),
        ("s3dlio stats, heap kept", in_child("stats", MALLOC_REUSE)),
        ("boto3 threads", in_child("boto3")),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_repeat_args(ap)
    ap.add_argument("--cases", default=None, help="SIZE:INFLIGHT:REQUESTS[,...] (default 16m:8:64,128k:32:2048)")
    ap.add_argument("--endpoint", help="an existing S3 endpoint (default: start a local Ceph RGW)")
    ap.add_argument("--cpu", action="store_true", help="also print each tool's CPU-s per GiB (median)")
    ap.add_argument("--child", nargs=4, metavar=("TOOL", "SIZE", "INFLIGHT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        tool, *nums = args.child
        return child(tool, *map(int, nums))
    args.cases = args.cases or ("16m:8:32,128k:32:512" if args.quick else "16m:8:64,128k:32:2048")
    warn_few(args.repeats)
    server = None
    if args.endpoint:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint
    else:
        import ceph_s3

        why = ceph_s3.missing()
        if why:
            sys.exit(f"vs_s3: {why}")
        server = ceph_s3.CephS3(mem_gb=3).start()
        os.environ.update(server.aws_env())
    try:
        import boto3

        try:
            boto3.client("s3").create_bucket(Bucket=BUCKET)
        except Exception as e:
            if "BucketAlreadyOwnedByYou" not in str(e):
                raise
        ts = tools()
        print(
            f"{'object':>8} {'in flight':>9} {'requests':>8} "
            + " ".join(f"{n:>23}" for n, _ in ts)
            + f" {'ratio':>6}  best other  (MB/s medians of {args.repeats} alternating repeats; ratio: median of "
            "dlio-fast / the best other tool in the same repeat)"
        )
        verdicts = []
        for case in args.cases.split(","):
            s, q, n = case.split(":")
            size, inflight, n = parse_size(s), int(q), int(n)
            make_objects(size, inflight, min(n, 4 * inflight))
            res = {name: [] for name, _ in ts}
            cpu = {name: [] for name, _ in ts}
            for r in range(args.repeats):
                for name, f in ts if r % 2 == 0 else ts[::-1]:
                    bw, c = f(size, inflight, n)
                    res[name].append(bw)
                    cpu[name].append(c / (size * n / 2**30))
            # The bar is the best other *tool* (highest median), compared repeat by repeat: the max of
            # several tools' noisy figures in each repeat would be biased upwards by the noise alone.
            best = max((nm for nm, _ in ts[1:]), key=lambda nm: statistics.median(res[nm]))
            pr = Paired.of(res["dlio-fast"], res[best])
            med = pr.median
            verdicts.append(med)
            print(
                f"{s:>8} {inflight:>9} {n:>8} "
                + " ".join(f"{statistics.median(res[nm]) / 1e6:>23.1f}" for nm, _ in ts)
                + f" {med:>6.2f}  {best}; pairs {pr.spread()}"
            )
            if args.cpu:
                print(f"{'CPU-s per GiB':>27} " + " ".join(f"{statistics.median(cpu[nm]):>23.2f}" for nm, _ in ts))
        print(
            f"verdict: {'PASS' if min(verdicts) >= 0.95 else 'FAIL'} (goal: dlio-fast >= 0.95x the best other "
            f"on every case; worst median ratio {min(verdicts):.2f})"
        )
        return 0 if min(verdicts) >= 0.95 else 1
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
