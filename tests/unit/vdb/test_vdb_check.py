"""`dlio-fast check` of a vector-search run: the rules' five runs and summary fields, a CLOSED index type,
no page-cache run, and a note that says it is an emulation without recall."""

from dlio.vdb import check, metrics


def doc(runs=5, kind="diskann", **run):
    rec = dict.fromkeys(metrics.RULE_FIELDS, 1.0) | {"verdict": {"verdict": "storage-bound"}} | run
    return {"complete": True, "layout": {"kind": kind}, "runs": [dict(rec, run=i + 1) for i in range(runs)]}


def rows(d):
    return {name: (ok, text) for name, ok, text in check.checks(d)}


def test_a_complete_diskann_run_of_five_passes():
    r = rows(doc())
    assert all(ok is not False for ok, _ in r.values()), r
    assert r["5 timed runs (rules 5.3)"] == (True, "5 run(s)")
    assert r["index type CLOSED allows"] == (True, "diskann (DISKANN)")
    assert r["what ran"][0] is None and "not Milvus" in r["what ran"][1] and "no recall" in r["what ran"][1]


def test_what_the_rules_want_fails_by_name():
    assert rows(doc(runs=2))["5 timed runs (rules 5.3)"] == (False, "2 run(s)")
    ok, text = rows(doc(p99_latency_ms=None))[
        "the summary's fields (throughput, mean / p95 / p99 / p99.9 latency, vdbbench's)"
    ]
    assert ok is False and "p99_latency_ms" in text
    r = rows(doc(verdict={"verdict": "cache", "reason": "the page cache served the reads"}))
    assert r["storage, not the page cache (run 1)"] == (False, "the page cache served the reads")
