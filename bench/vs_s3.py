#!/usr/bin/env python3
"""S3 GET throughput of `dlio-fast io s3://...` next to the client library's own best batch GET and
boto3 with threads: same objects, same number of requests, same requests in flight, same server.

The server is a throwaway Ceph RADOS Gateway on free loopback ports (tools/ceph-s3.sh, memstore) unless
--endpoint (with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set) names another. dlio-fast creates the
test objects (--keep) and everyone reads those keys:
  dlio-fast     `dlio-fast io s3://B/P --rw read --bs SIZE --qd INFLIGHT --threads 1 --size N*SIZE`: its MB/s
                (bytes of the requests over first start .. last end, from s3dlio's op-log)
  s3dlio        get_many_stats(uris, max_in_flight) and get_many(uris, max_in_flight), in this process,
                each its own column (wall clock around the call)
  boto3         INFLIGHT threads, each get_object(...)['Body'].read() on its share of the uris
Runs alternate in order, --repeats times. The bar is the other tool with the highest median; the
verdict is the median over repeats of dlio-fast / that tool in the same repeat (the per-repeat max of
three noisy tools would raise the bar by the noise alone).
Goal: >= 0.95. On a 2-core machine the gateway (about 1 CPU-s per GiB served) sets the ceiling.
Usage: python bench/vs_s3.py [--repeats 3] [--cases 16m:8:64,128k:32:512] [--endpoint URL]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))

from dlio.units import parse_size  # noqa: E402

BUCKET = "vs-s3"


def dlio_fast(size, inflight, n):
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "o.json")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "dlio",
                "-q",
                "io",
                f"s3://{BUCKET}/p",
                "--rw",
                "read",
                "--bs",
                str(size),
                "--qd",
                str(inflight),
                "--threads",
                "1",
                "--size",
                str(size * n),
                "--keep",
                "--json",
                js,
            ],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        rec = json.load(open(js))["points"][0]
    assert rec["bytes"] == size * n, rec
    return rec["bw_bytes_s"]


def keys_of(size, inflight, n):
    from dlio.objstore import points

    p = points.S3Point("read", size, inflight, 1, size)
    ks = points.object_keys("p/", p)[0]
    return [ks[i % len(ks)] for i in range(n)]


def s3dlio_stats(size, inflight, n):
    import s3dlio

    uris = [f"s3://{BUCKET}/{k}" for k in keys_of(size, inflight, n)]
    t = time.perf_counter()
    c, b = s3dlio.get_many_stats(uris, max_in_flight=inflight)
    dt = time.perf_counter() - t
    assert c == n and b == size * n
    return b / dt


def s3dlio_many(size, inflight, n):
    import s3dlio

    uris = [f"s3://{BUCKET}/{k}" for k in keys_of(size, inflight, n)]
    t = time.perf_counter()
    got = s3dlio.get_many(uris, max_in_flight=inflight)
    dt = time.perf_counter() - t
    assert sum(len(v) for _, v in got) == size * n
    return size * n / dt


_BOTO = {}


def boto3_threads(size, inflight, n):
    import boto3

    if "c" not in _BOTO:
        from botocore.config import Config

        _BOTO["c"] = boto3.client("s3", config=Config(max_pool_connections=max(10, inflight)))
    c = _BOTO["c"]
    keys = keys_of(size, inflight, n)

    def part(i):
        return sum(len(c.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys[i::inflight])

    with ThreadPoolExecutor(inflight) as ex:
        t = time.perf_counter()
        b = sum(ex.map(part, range(inflight)))
        dt = time.perf_counter() - t
    assert b == size * n
    return b / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="16m:8:64,128k:32:512", help="SIZE:INFLIGHT:REQUESTS[,...]")
    ap.add_argument("--endpoint", help="an existing S3 endpoint (default: start a local Ceph RGW)")
    args = ap.parse_args()
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
        tools = [
            ("dlio-fast", dlio_fast),
            ("s3dlio get_many_stats", s3dlio_stats),
            ("s3dlio get_many", s3dlio_many),
            ("boto3 threads", boto3_threads),
        ]
        print(
            f"{'object':>8} {'in flight':>9} {'requests':>8} "
            + " ".join(f"{n:>22}" for n, _ in tools)
            + f" {'ratio':>6}  best other  (MB/s medians of {args.repeats} alternating repeats; ratio: median of "
            "dlio-fast / the best other tool in the same repeat)"
        )
        verdicts = []
        for case in args.cases.split(","):
            s, q, n = case.split(":")
            size, inflight, n = parse_size(s), int(q), int(n)
            dlio_fast(size, inflight, min(n, 4 * inflight))  # creates the objects; a warm-up too
            res = {name: [] for name, _ in tools}
            for r in range(args.repeats):
                order = tools if r % 2 == 0 else tools[::-1]
                for name, f in order:
                    res[name].append(f(size, inflight, n))
            # The bar is the best other *tool* (highest median), compared repeat by repeat: the max of
            # several tools' noisy figures in each repeat would be biased upwards by the noise alone.
            best = max((nm for nm, _ in tools[1:]), key=lambda nm: statistics.median(res[nm]))
            med = statistics.median(d / o for d, o in zip(res["dlio-fast"], res[best]))
            verdicts.append(med)
            print(
                f"{s:>8} {inflight:>9} {n:>8} "
                + " ".join(f"{statistics.median(res[nm]) / 1e6:>22.1f}" for nm, _ in tools)
                + f" {med:>6.2f}  {best}"
            )
        print(
            f"verdict: {'PASS' if min(verdicts) >= 0.95 else 'FAIL'} (goal: dlio-fast >= 0.95x the best other "
            f"on every case; worst median ratio {min(verdicts):.2f})"
        )
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
