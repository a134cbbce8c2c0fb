"""`dlio-fast io s3://...` at S3's limits: a prefix whose keys would pass S3's 1024-byte limit is refused
before any request, with one line naming the prefix and the longest it may be (a real Ceph gateway: the
old behaviour was exit 1 with the gateway's InvalidObjectName after the test objects were attempted)."""

import pytest
from conftest import one_line, s3_boto

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

# What io adds under PREFIX/ for GETs of 1 MiB objects with a 4 MiB budget: 4 objects o0..o3 in its folder
ADDED = len(".dlio-fast-io/get-1048576/o3")


def test_a_prefix_too_long_for_s3_keys_is_refused_before_any_request(run_cli, s3env, bucket):
    prefix = "p" * (1024 - ADDED)  # with its "/" one byte over
    code, out, err = run_cli("-q", "io", f"s3://{bucket}/{prefix}", "--bs", "1m", "--size", "4m")
    assert code == 2, err
    line = one_line(err)
    assert line.startswith(f"dlio-fast: error: s3://{bucket}/pppp") and "..." in line, line
    assert f"the prefix is {len(prefix) + 1} bytes" in line and "at most 1024 bytes" in line, line
    assert f"use a shorter prefix (at most {1024 - ADDED} bytes)" in line, line
    assert s3_boto(s3env).list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # nothing was written


def test_the_longest_prefix_said_is_accepted(run_cli, s3env, bucket):
    prefix = "q" * (1024 - ADDED - 1)  # with its "/": the longest the line above allows
    code, out, err = run_cli("-q", "io", f"s3://{bucket}/{prefix}", "--bs", "1m", "--size", "4m", "--json", "-")
    assert code == 0, err
    assert '"bytes": 4194304' in out


def test_a_prefix_longer_than_any_key_is_refused(run_cli, s3env, bucket):
    code, out, err = run_cli("-q", "io", f"s3://{bucket}/{'k' * 1030}", "--bs", "1m")
    assert code == 2, err
    line = one_line(err)
    assert "the prefix is 1031 bytes, but S3 takes keys of at most 1024 bytes" in line, line
