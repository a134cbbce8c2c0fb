#!/usr/bin/env python3
"""What the KV relay adds to each request the C engine times on S3: the same plan, the same engine, the
same helper process, once with the helper replying without a request (`null`: the relay's round trip,
stamping, the asyncio loop) and once issuing it to the gateway. Printed per kind (read, write): the
engine's latency P50 / P99 / mean for both, and the relay's share of the S3 figure.

The server is a throwaway Ceph RADOS Gateway on free loopback ports (tools/ceph_s3.py, memstore) unless
--endpoint (with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set) names one. The plan: tiny-1b entries
(1-6 MiB), --users users for --duration s, as tests/cli/test_kvcache.py runs it. Each of --repeats
pairs (5 by default) runs the null relay and the S3 one back to back, who goes first alternating from
pair to pair, and gives one ratio per kind: the null run's mean over the S3 run's. Goal: the median of
these ratios under 5 % (the relay is then noise against S3 latency), printed with the pairs' spread.
The latency columns are medians over the runs. --quick: 1 s runs, the same pairs.
Usage: python bench/kvcache_relay.py [--repeats 5] [--quick] [--users 4] [--duration 3] [--endpoint URL]
"""

import argparse
import importlib.util
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from paired import Paired, add_repeat_args, warn_few  # noqa: E402

from dlio.config.load import load_config  # noqa: E402
from dlio.kvcache import engine, plan  # noqa: E402
from dlio.kvcache.settings import settings  # noqa: E402
from dlio.storage import backend_for  # noqa: E402
from dlio.system.stats import percentile  # noqa: E402

BUCKET = "kv-relay-bench"


def gateway(endpoint):
    if endpoint:
        return None, endpoint
    spec = importlib.util.spec_from_file_location("ceph_s3", os.path.join(os.path.dirname(HERE), "tools", "ceph_s3.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    why = m.missing()
    if why:
        sys.exit(f"no gateway: {why} (or give --endpoint)")
    server = m.CephS3().start()
    os.environ.update(server.aws_env())
    return server, server.endpoint


def one(s, p, backend, root, null):
    relay = backend.kv_relay(root, s.workers, engine.relay_slot(s, p), null=null)
    try:
        result, failure, _ = engine.run_trial(s, p, root, None, relay=relay)
    finally:
        relay.finish()
    if failure is not None:
        raise failure
    backend.remove_tree(root)
    return result


def figures(h):
    n = int(h["count"])
    return (percentile(h, 50) / 1e6, percentile(h, 99) / 1e6, h["sum"] / max(1, n) / 1e6, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_repeat_args(ap)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--duration", type=float, default=None, help="seconds per run (3; --quick: 1)")
    ap.add_argument("--endpoint")
    a = ap.parse_args()
    a.duration = a.duration or (1.0 if a.quick else 3.0)
    if a.repeats < 1:
        sys.exit("--repeats must be >= 1")
    warn_few(a.repeats)
    server, endpoint = gateway(a.endpoint)
    try:
        sets = [
            "workflow.kvcache=true",
            "storage.storage_type=s3",
            f"storage.storage_root={BUCKET}",
            "kvcache.model=tiny-1b",
            f"kvcache.users={a.users}",
            f"kvcache.duration={a.duration}",
            "kvcache.prefix_probe=0",
        ]
        cfg = load_config("kvcache_llama3_8b_opt1", sets=sets)
        s = settings(cfg)
        backend = backend_for(cfg)
        root = backend.folder_root(cfg, "kvcache.cache_dir")
        backend.check_access([root], create=True)
        p = plan.synthetic_plan(s, 0, 0)
        rows = {("null", "read"): [], ("null", "write"): [], ("s3", "read"): [], ("s3", "write"): []}
        for i in range(a.repeats):
            order = ("null", "s3") if i % 2 == 0 else ("s3", "null")  # who goes first alternates
            for mode in order:
                r = one(s, p, backend, root, mode == "null")
                rows[(mode, "read")].append(figures(r["hists"]["storage_read"]))
                rows[(mode, "write")].append(figures(r["hists"]["storage_write"]))
            print(
                f"  pair {i + 1} ({order[0]} first): mean ms null/s3 read "
                f"{rows[('null', 'read')][-1][2]:.3f}/{rows[('s3', 'read')][-1][2]:.3f}, write "
                f"{rows[('null', 'write')][-1][2]:.3f}/{rows[('s3', 'write')][-1][2]:.3f}",
                flush=True,
            )
        print(
            f"endpoint {endpoint}; tiny-1b, {a.users} users, {s.workers} workers, {a.duration:g} s runs, "
            f"{a.repeats} pairs; latencies: medians of the runs"
        )
        print(f"{'kind':6} {'relay':>6} {'P50 ms':>9} {'P99 ms':>9} {'mean ms':>9} {'requests':>9}")
        for kind in ("read", "write"):
            for mode in ("null", "s3"):
                xs = rows[(mode, kind)]
                med = [statistics.median(x[i] for x in xs) for i in range(3)]
                n = sum(x[3] for x in xs)
                print(f"{kind:6} {mode:>6} {med[0]:9.3f} {med[1]:9.3f} {med[2]:9.3f} {n:9d}")
            # the verdict: the median of the per-pair ratios null mean / S3 mean (inf where S3 served none)
            share = Paired(
                nx[2] / sx[2] if sx[2] else float("inf") for nx, sx in zip(rows[("null", kind)], rows[("s3", kind)])
            )
            verdict = "PASS" if share.median < 0.05 else "FAIL"
            print(
                f"  {kind}: the relay's mean is {share.median:.1%} of the S3 mean ({verdict}: < 5 %); "
                f"pairs {share.spread()}"
            )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
