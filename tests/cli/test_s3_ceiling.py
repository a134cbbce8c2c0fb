"""`dlio-fast ceiling s3://...` against the real Ceph RADOS Gateway (the s3_server fixture)."""

import json

import pytest
from conftest import one_line

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

import test_s3  # noqa: E402  (the io tests' fixtures, used here by name)

from dlio.fsbench.ceiling import GAIN  # noqa: E402

count = test_s3.count


def test_ceiling_searches_depth_then_threads_and_cleans_up(run_cli, bucket, tmp_path):
    js = tmp_path / "c.json"
    code, out, err = run_cli(
        "-q",
        "ceiling",
        f"s3://{bucket}/ceil",
        "--runtime",
        "200ms",
        "--object-size",
        "256k",
        "--max-threads",
        "2",
        "--max-qd",
        "4",
        "--json",
        js,
    )
    assert code == 0, err
    doc = json.loads(js.read_text())
    assert doc["schema"] == "dlio-fast.ceiling/1" and doc["complete"]
    assert set(doc["best"]) == {"get", "put", "get_4k"}
    wanted = {
        "get": ("read", 256 << 10, "bw_MiB_s"),
        "put": ("write", 256 << 10, "bw_MiB_s"),
        "get_4k": ("read", 4096, "iops"),
    }
    for name, (rw, size, metric) in wanted.items():
        tried = [p for p in doc["probes"] if p["rw"] == rw and p["bs"] == size]
        # the search starts at 1 x 1, never passes the bounds, and reports the best probe it ran
        assert (1, 1) in {(p["qd"], p["threads"]) for p in tried}
        assert all(p["qd"] <= 4 and p["threads"] <= 2 and p["errors"] == 0 and p["ops"] > 0 for p in tried)
        # the best is a probe it ran, and no probe beat it by the gain a doubling must bring (climb)
        assert doc["best"][name] in tried
        assert all(p[metric] < doc["best"][name][metric] * GAIN for p in tried)
        assert doc["best"][name]["bw_MiB_s"] == pytest.approx(
            doc["best"][name]["bytes"] / 2**20 / doc["best"][name]["runtime_s"]
        )
    assert "get_4k" in out and "req/s" in out
    assert count(bucket, "ceil/") == 0, "the test objects are removed afterwards"


def test_ceiling_s3_refuses_file_options(run_cli, bucket):
    code, out, err = run_cli("ceiling", f"s3://{bucket}/x", "--file-size", "1m")
    assert code == 2 and "--object-size" in one_line(err)
    code, out, err = run_cli("ceiling", f"s3://{bucket}/x", "--object-size", "128m")
    assert code == 2 and "between 4 KiB and 64 MiB" in one_line(err)


def test_ceiling_file_path_refuses_s3_options(run_cli, tmp_path):
    code, out, err = run_cli("ceiling", str(tmp_path), "--object-size", "1m")
    assert code == 2 and "s3:// paths only" in one_line(err)


def test_ceiling_s3_wrong_credentials(run_cli, bucket, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    code, out, err = run_cli("ceiling", f"s3://{bucket}/w", "--runtime", "100ms")
    assert code == 2 and "refused the credentials" in one_line(err)
