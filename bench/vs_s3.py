#!/usr/bin/env python3
"""S3 GET throughput of `dlio-fast io s3://...` next to the client library's own best batch GET and
boto3 with threads: same objects, same number of requests, same requests in flight, same server.

The server is a throwaway Ceph RADOS Gateway on free loopback ports (tools/ceph-s3.sh, memstore) unless
--endpoint (with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set) names another. dlio-fast creates the
test objects (--keep; it reads them back once, untimed: the first GET after a PUT runs at about half
speed on Ceph RGW), and everyone reads those keys:
  dlio-fast        `dlio-fast io s3://B/P --rw read --bs SIZE --qd INFLIGHT --threads 1 --size N*SIZE`: its
                   MB/s (bytes of the requests over first start .. last end, from s3dlio's op-log)
  s3dlio stats     get_many_stats(uris, max_in_flight), wall clock around the call
  s3dlio many      get_many(uris, max_in_flight) (the bytes handed to Python), wall clock
  s3dlio stats, heap kept   get_many_stats under the allocator settings dlio-fast gives its workers
                   (dlio.storage.s3.heap.MALLOC_REUSE): dlio-fast's harness next to the bare call
  boto3 threads    INFLIGHT threads, each get_object(...)['Body'].read() on its share of the uris
Every tool runs in a fresh process of its own (a live client in a long-lived bench process changed
the next tool's figures by up to 40 %), and each one's own warm-up is outside its timing: the other
tools read the same N objects once before the timed pass, dlio-fast opens its connections and
prefaults its worker's heap. Runs alternate in order, --repeats times. The bar is the other tool with
the highest median; the verdict is the median over repeats of dlio-fast / that tool in the same
repeat (the per-repeat max of several noisy tools would raise the bar by the noise alone).
Goal: >= 0.95. On a 2-core machine the gateway (about 1 CPU-s per GiB served) sets the ceiling, so the
client's CPU per byte decides who is faster: `--cpu` prints each tool's CPU-s per GiB as well.
Usage: python bench/vs_s3.py [--repeats 5] [--cases 16m:8:64,128k:32:2048] [--endpoint URL]
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

BUCKET = "vs-s3"


def keys_of(size, inflight, n):
    from dlio.storage.s3 import bench as points

    p = points.S3Point("read", size, inflight, 1, size)
    ks = points.object_keys("p/", p)[0]
    return [ks[i % len(ks)] for i in range(n)]


def dlio_fast(size, inflight, n):
    """(bytes/s, CPU-s of the measured window) of one `dlio-fast io` point in its own processes."""
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "o.json")
        cmd = [sys.executable, "-m", "dlio", "-q", "io", f"s3://{BUCKET}/p", "--rw", "read", "--bs", str(size)]
        cmd += ["--qd", str(inflight), "--threads", "1", "--size", str(size * n), "--keep", "--json", js]
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        with open(js) as f:
            rec = json.load(f)["points"][0]
    assert rec["bytes"] == size * n, rec
    return rec["bw_bytes_s"], rec["cpu_s"]


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
        ("dlio-fast", dlio_fast),
        ("s3dlio stats", in_child("stats")),
        ("s3dlio many", in_child("many")),
        ("s3dlio stats, heap kept", in_child("stats", MALLOC_REUSE)),
        ("boto3 threads", in_child("boto3")),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cases", default="16m:8:64,128k:32:2048", help="SIZE:INFLIGHT:REQUESTS[,...]")
    ap.add_argument("--endpoint", help="an existing S3 endpoint (default: start a local Ceph RGW)")
    ap.add_argument("--cpu", action="store_true", help="also print each tool's CPU-s per GiB (median)")
    ap.add_argument("--child", nargs=4, metavar=("TOOL", "SIZE", "INFLIGHT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        tool, *nums = args.child
        return child(tool, *map(int, nums))
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
            dlio_fast(size, inflight, min(n, 4 * inflight))  # creates the objects
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
            med = statistics.median(d / o for d, o in zip(res["dlio-fast"], res[best]))
            verdicts.append(med)
            print(
                f"{s:>8} {inflight:>9} {n:>8} "
                + " ".join(f"{statistics.median(res[nm]) / 1e6:>23.1f}" for nm, _ in ts)
                + f" {med:>6.2f}  {best}"
            )
            if args.cpu:
                print(f"{'CPU-s per GiB':>27} " + " ".join(f"{statistics.median(cpu[nm]):>23.2f}" for nm, _ in ts))
        print(
            f"verdict: {'PASS' if min(verdicts) >= 0.95 else 'FAIL'} (goal: dlio-fast >= 0.95x the best other "
            f"on every case; worst median ratio {min(verdicts):.2f})"
        )
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
