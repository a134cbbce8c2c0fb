"""Many ranks on one index (dlio.vdb.ranks): the run's figures over every rank's batches and queries, from
known per-rank latencies; the hosts' and ranks' rows that add up to them; the ranks' disjoint shares of
the query stream."""

import numpy as np
import pytest

from dlio import _core
from dlio.vdb import metrics, model, ranks

BATCH = 3  # queries per batch: vdbbench gives each its batch's time / 3


def counters(own):
    return {
        "app_bytes": own,
        "own_bytes": own,
        "device_bytes": own,
        "wall_s": 2.0,
        "cpu_user_s": 0.1,
        "cpu_sys_s": 0.1,
        "reader_cpu_s": 0.2,
        "reader_threads": 2,
        "cores": 2,
        "host_cpus": 2,
        "host_busy_share": 0.2,
        "target": {"device": "vda"},
        "direction": "read",
    }


def record(rank, host, batch_ns, completion_ns, seconds):
    """A rank's record as a rank makes it (ranks.rank_record) from a C result of these batch times."""
    queries = len(batch_ns) * BATCH
    reads = queries * 40
    res = {
        "t_start": 10**9,
        "t_end": 10**9 + int(seconds * 1e9),
        "queries": queries,
        "batches": len(batch_ns),
        "searches": queries,
        "hops": queries * 10,
        "reads": reads,
        "bytes": reads * 8192,
        "pq_reads": 0,
        "cache_hits": 0,
        "io_wait_ns": 900,
        "search_ns": 1000,
        "search_cpu_ns": 10**6,
        "cpu_hop_ns": 0,
        "query_lat": _core.hist_from_array(completion_ns),
        "batch_lat": _core.hist_from_array(batch_ns),
        "hop_lat": _core.hist_from_array([1]),
        "read_lat": _core.hist_from_array(np.full(10, 200_000)),
    }
    return dict(ranks.rank_record(res, counters(reads * 8192), rank), host=host)


def samples():
    """Three ranks of very different latencies: 2,000 batches of ~5 ms, 500 of ~40 ms, 1,000 of ~10 ms (ns)."""
    rng = np.random.default_rng(7)
    return [
        (rng.lognormal(np.log(scale), 0.3, n).astype(np.uint64), secs)
        for scale, n, secs in ((5e6, 2000, 2.0), (40e6, 500, 2.1), (10e6, 1000, 2.05))
    ]


def test_the_runs_figures_are_over_every_ranks_batches():
    given = samples()
    recs = [record(r, "h", b, b // 2, secs) for r, (b, secs) in enumerate(given)]
    fig = ranks.run_figures(recs)
    # vdbbench's per-query latencies of all ranks, concatenated: each query its batch's time / 3
    per_query = np.concatenate([np.repeat(b / BATCH, BATCH) for b, _ in given]) / 1e6  # ms
    assert fig["mean_latency_ms"] == pytest.approx(per_query.mean(), rel=1e-12)
    assert fig["p99_latency_ms"] == pytest.approx(np.percentile(per_query, 99), rel=0.01)  # a bucket: <1 %
    assert fig["p95_latency_ms"] == pytest.approx(np.percentile(per_query, 95), rel=0.01)
    # averaging the ranks' own p99s would be far off: the merge is of the samples, not of the percentiles
    own = [np.percentile(b / BATCH / 1e6, 99) for b, _ in given]
    assert abs(np.mean(own) - np.percentile(per_query, 99)) > 0.2 * np.percentile(per_query, 99)
    completion = np.concatenate([b // 2 for b, _ in given]) / 1e6
    assert fig["query_completion_p99_ms"] == pytest.approx(np.percentile(completion, 99), rel=0.01)
    assert fig["query_completion_mean_ms"] == pytest.approx(completion.mean(), rel=1e-9)
    queries = sum(len(b) * BATCH for b, _ in given)
    assert fig["queries"] == fig["total_queries"] == queries and fig["seconds"] == pytest.approx(2.1)
    assert fig["throughput_qps"] == pytest.approx(queries / 2.1, rel=1e-12)  # all queries over the slowest's wall
    assert fig["batch_count"] == sum(len(b) for b, _ in given)
    # one host: its ranks' counters combined make the run's verdict; a row per rank that adds up
    assert fig["verdict"]["verdict"] and fig["counters"]["own_bytes"] == fig["bytes"]
    assert [r["queries"] for r in fig["per_rank"]] == [len(b) * BATCH for b, _ in given]
    assert sum(r["bytes"] for r in fig["per_rank"]) == fig["bytes"] == queries * 40 * 8192


def test_per_host_rows_and_verdicts():
    given = samples()
    recs = [record(r, h, b, b // 2, secs) for r, ((b, secs), h) in enumerate(zip(given, ("hA", "hA", "hB")))]
    fig = ranks.run_figures(recs)
    ha, hb = fig["per_host"]
    assert (ha["host"], ha["ranks"], hb["host"], hb["ranks"]) == ("hA", [0, 1], "hB", [2])
    assert ha["queries"] == (2000 + 500) * BATCH and hb["queries"] == 1000 * BATCH
    assert ha["queries"] + hb["queries"] == fig["queries"] and ha["bytes"] + hb["bytes"] == fig["bytes"]
    assert ha["seconds"] == pytest.approx(2.1) and hb["throughput_qps"] == pytest.approx(3000 / 2.05)
    a_only = np.concatenate([np.repeat(b / BATCH, BATCH) for b, _ in given[:2]]) / 1e6
    assert ha["mean_latency_ms"] == pytest.approx(a_only.mean(), rel=1e-12)
    # a verdict per host, none for the run (the hosts' devices are not one); disk_io adds the hosts' own reads
    assert "verdict" not in fig and ha["verdict"]["verdict"] and hb["verdict"]["verdict"]
    assert [p for p, _, _ in ranks.run_verdicts(dict(fig, run=1))] == ["run 1 [hA]", "run 1 [hB]"]
    assert fig["disk_io"]["total_bytes_read"] == fig["bytes"]


def test_one_rank_is_the_single_process_run():
    (b, secs), *_ = samples()
    rec = record(0, "h", b, b // 2, secs)
    fig = ranks.run_figures([rec])
    res = ranks.merge([rec])
    assert "per_rank" not in fig and "per_host" not in fig
    assert {k: fig[k] for k in metrics.RULE_FIELDS} == {
        k: metrics.run_metrics(res, rec["counters"])[k] for k in metrics.RULE_FIELDS
    }


def test_the_ranks_shares_of_the_query_stream_are_disjoint_and_cover_it():
    pool = model.plan(101, 48, 8, 4000, 64, 0.1, 0.5, 3)
    for size in (1, 2, 4, 7):
        shares = [ranks.share(pool, r, size) for r in range(size)]
        assert all(s.searches >= pool.searches // size for s in shares)
        for s in shares:  # each a pool of its own, as the C run takes one
            assert s.hop_first[0] == 0 and s.read_first[0] == 0 and len(s.nodes) == s.read_first[-1]
        # in rank order they are the pool again, search for search
        assert sum(s.searches for s in shares) == pool.searches
        assert np.array_equal(np.concatenate([s.hops() for s in shares]), pool.hops())
        assert np.array_equal(np.concatenate([s.reads() for s in shares]), pool.reads())
        assert np.array_equal(np.concatenate([s.nodes for s in shares]), pool.nodes)


def test_a_query_budget_is_dealt_to_the_ranks():
    for total, size in ((40, 4), (10, 3), (5, 5), (0, 4)):
        got = [ranks.queries_of(total, r, size) for r in range(size)]
        assert sum(got) == total and max(got) - min(got) <= 1
