#!/usr/bin/env python3
"""What the KV relay adds to each request the C engine times on S3: the same plan, the same engine, the
same helper process, once with the helper replying without a request (`null`: the relay's round trip,
stamping, the asyncio loop) and once issuing it to the gateway. Printed per kind (read, write): the
engine's latency P50 / P99 / mean for both, and the relay's share of the S3 figure.

The server is a throwaway Ceph RADOS Gateway on free loopback ports (tools/ceph_s3.py, memstore) unless
--endpoint (with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set) names one. The plan: tiny-1b entries
(1-6 MiB), --users users for --duration s, as tests/cli/test_kvcache.py runs it. Runs alternate
--repeats times. Goal: the relay's mean under 5 % of the S3 mean (it is then noise against S3 latency).
Usage: python bench/kvcache_relay.py [--repeats 3] [--users 4] [--duration 3] [--endpoint URL]
"""

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

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
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--endpoint")
    a = ap.parse_args()
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
        for _ in range(a.repeats):
            for mode in ("null", "s3"):
                r = one(s, p, backend, root, mode == "null")
                rows[(mode, "read")].append(figures(r["hists"]["storage_read"]))
                rows[(mode, "write")].append(figures(r["hists"]["storage_write"]))
        print(f"endpoint {endpoint}; tiny-1b, {a.users} users, {s.workers} workers, {a.duration:g} s x {a.repeats}")
        print(f"{'kind':6} {'relay':>6} {'P50 ms':>9} {'P99 ms':>9} {'mean ms':>9} {'requests':>9}")
        for kind in ("read", "write"):
            for mode in ("null", "s3"):
                xs = rows[(mode, kind)]
                med = [sorted(x[i] for x in xs)[len(xs) // 2] for i in range(3)]
                n = sum(x[3] for x in xs)
                print(f"{kind:6} {mode:>6} {med[0]:9.3f} {med[1]:9.3f} {med[2]:9.3f} {n:9d}")
            null_mean = sorted(x[2] for x in rows[("null", kind)])[a.repeats // 2]
            s3_mean = sorted(x[2] for x in rows[("s3", kind)])[a.repeats // 2]
            share = null_mean / s3_mean if s3_mean else float("nan")
            verdict = "PASS" if share < 0.05 else "FAIL"
            print(f"  {kind}: the relay's mean is {share:.1%} of the S3 mean ({verdict}: < 5 %)")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
