"""dlio.storage.s3 without a server: settings, URIs, op-log parsing, the record arithmetic."""

import numpy as np
import pytest

from dlio import _core
from dlio.base.errors import DlioError
from dlio.storage.s3 import bench as points
from dlio.storage.s3 import oplog, settings
from dlio.system import stats

ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk"}


def test_resolve_precedence():
    s = settings.resolve(environ=ENV)
    assert (s.endpoint, s.access_key, s.secret_key, s.region) == ("http://127.0.0.1:9000", "ak", "sk", "us-east-1")
    s = settings.resolve(
        "http://h:1/", {"access_key_id": "k2", "region": "eu-west-1", "s3_max_attempts": 3}, environ=ENV
    )
    assert (s.endpoint, s.access_key, s.secret_key, s.region, s.max_attempts) == (
        "http://h:1",
        "k2",
        "sk",
        "eu-west-1",
        3,
    )
    env = s.child_env()
    assert env["AWS_MAX_ATTEMPTS"] == env["S3DLIO_MAX_RETRY_ATTEMPTS"] == "3"
    assert env["S3DLIO_ENABLE_RANGE_OPTIMIZATION"] == "0"


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"environ": {}}, "no S3 endpoint"),
        ({"environ": {"AWS_ENDPOINT_URL": "ftp://x"}}, "expected http://HOST:PORT"),
        ({"environ": {"AWS_ENDPOINT_URL": "http://x:1"}}, "no S3 credentials"),
        ({"environ": ENV, "storage_options": {"endpoint": "x"}}, "unknown key(s) endpoint"),
        ({"environ": ENV, "storage_options": {"s3_max_attempts": "many"}}, "s3_max_attempts 'many'"),
    ],
)
def test_resolve_errors(kw, msg):
    with pytest.raises(DlioError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        settings.resolve(**kw)


def test_parse_uri():
    assert settings.parse_uri("s3://bkt") == ("bkt", "")
    assert settings.parse_uri("s3://bkt/a/b/") == ("bkt", "a/b/")
    for bad in ("s3://B/x", "s3://ab", "/tmp/x", "s3:///x"):
        with pytest.raises(DlioError):
            settings.parse_uri(bad)


HEAD = "\t".join(oplog.COLUMNS)


def row(i, op, nbytes, err, start_us, fb_us, end_us):
    t = lambda us: f"2026-11-30T20:00:00.{us:06d}000Z"  # noqa: E731
    return "\t".join(
        map(
            str,
            (
                i,
                7,
                op,
                "k",
                1,
                nbytes,
                "http://e",
                f"p/o{i}",
                err,
                t(start_us),
                t(fb_us),
                t(end_us),
                (end_us - start_us) * 1000,
            ),
        )
    )


def test_oplog_parse_and_point_record():
    text = (
        "\n".join(
            [
                HEAD,
                row(0, "GET", 1000, "", 100, 150, 300),
                row(1, "GET", 1000, "", 200, 260, 500),
                row(2, "GET", 0, "boom", 400, 400, 900),
                row(3, "GET", 1000, "", 600, 700, 1100),
            ]
        )
        + "\n"
    )
    rows = oplog.parse(text.encode())
    assert list(rows["duration"]) == [200_000, 300_000, 500_000, 500_000]
    assert list(rows["first_byte"] - rows["start"]) == [50_000, 60_000, 0, 100_000]
    base = rows["start"][0] - 100_000  # 20:00:00.000000
    answer = {"errors": [], "measure_start": base + 150_000, "wall_ns": 10**6, "cpu_s": 0.001, "oplog_lost": 0}
    rec = points.point_record(points.S3Point("read", 1000, 2, 1, 1000), rows, answer)
    # the first request started before the measured interval; the third failed
    assert rec["ops"] == 2 and rec["bytes"] == 2000 and rec["errors"] == 1
    # interval: start of request 1 (200 us) to end of request 3 (1100 us)
    assert rec["runtime_s"] == pytest.approx(900e-6)
    assert rec["bw_bytes_s"] == pytest.approx(2000 / 900e-6)
    assert rec["iops"] == pytest.approx(2 / 900e-6)
    assert rec["lat_ns"]["min"] == 300_000 and rec["lat_ns"]["max"] == 500_000
    assert rec["lat_ns"]["mean"] == pytest.approx(400_000)
    assert rec["ttfb_ns"]["min"] == 60_000 and rec["ttfb_ns"]["max"] == 100_000
    assert rec["cpu_s"] == pytest.approx(0.001 * 0.9)


def test_oplog_empty():
    rows = oplog.parse((HEAD + "\n").encode())
    assert len(rows["duration"]) == 0
    with pytest.raises(ValueError, match="header"):
        oplog.parse(b"a\tb\n1\t2\n")


def test_hist_from_array_matches_the_c_histogram():
    rng = np.random.default_rng(3)
    v = rng.integers(1, 10**10, 5000, dtype=np.uint64)
    a, b = _core.hist_from_array(v), _core.hist_from_values([int(x) for x in v])
    assert np.array_equal(a["buckets"], b["buckets"])
    assert (a["count"], a["min"], a["max"]) == (5000, int(v.min()), int(v.max()))
    assert a["sum"] == pytest.approx(float(v.sum()))
    assert stats.percentile(a, 50) == b["c_percentiles"][50.0]
    assert _core.hist_from_array(np.zeros(0, dtype=np.uint64))["count"] == 0


def test_object_keys_and_counts():
    p = points.S3Point("read", 4096, 4, 2, 4096)
    keys = points.object_keys("pre/", p)
    assert len(keys) == 2 and sum(map(len, keys)) == points.get_object_count(4096, 2, 4) == 64
    assert points.get_object_count(64 << 20, 2, 8) == 32
    r = points.S3Point("randread", 4096, 4, 3, 1 << 20)
    assert points.objects_to_create("pre/", [r, p]) == [
        (4096, sorted(k for ks in keys for k in ks)),
        (1 << 20, [f"pre/.dlio-fast-io/range-{1 << 20}/o{t}" for t in range(3)]),
    ]
