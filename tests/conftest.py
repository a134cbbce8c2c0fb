import glob
import os
import re
import subprocess
import sys
import time

import pytest

# The repository's root: tests run the package from the source tree in subprocesses.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The venv's bin folder first on PATH: `.venv/bin/pytest` runs without an activated venv, and the
# mpiexec that matches the venv's mpi4py (the MPICH wheel's) lives there.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")


@pytest.fixture
def no_shm_leftovers():
    """An aborted MPICH job leaves its shared-memory segments in /dev/shm: remove the new ones (the MPI
    tests' modules use it: pytestmark)."""
    before = set(glob.glob("/dev/shm/mpich_shm_*"))
    yield
    for p in set(glob.glob("/dev/shm/mpich_shm_*")) - before:
        try:
            os.unlink(p)
        except OSError:
            pass


@pytest.fixture
def run_cli(capsys):
    """Run the dlio-fast CLI in-process through main(): (exit status, stdout, stderr)."""
    from dlio.cli.main import main

    def run(*args):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture
def dlio_cmd():
    """Run dlio-fast in a subprocess: (exit status, stdout, stderr)."""

    def run(*args, env=None, timeout=300, cwd=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        p = subprocess.run(
            [sys.executable, "-m", "dlio", *map(str, args)],
            capture_output=True,
            text=True,
            env=e,
            timeout=timeout,
            cwd=cwd,
        )
        return p.returncode, p.stdout, p.stderr

    return run


def wait_for_text(path, text, proc, timeout=120):
    """Wait until the file `path` (a child's stdout) holds `text`, instead of sleeping a fixed time that a
    loaded machine outruns; fails if the process exits or the time is up first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return
        assert proc.poll() is None, f"the process exited ({proc.returncode}) before printing {text!r}"
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in {path} after {timeout} s")


def set_args(*pairs, **keys):
    """The command line's `--set KEY=VALUE` for each pair, then for each of keys (their names may hold dots
    when passed as **{...}): set_args("train.epochs=2", **on_s3(bucket))."""
    return [a for p in (*pairs, *(f"{k}={v}" for k, v in keys.items())) for a in ("--set", p)]


def on_s3(bucket):
    """The keys of a run whose storage is the S3 bucket `bucket` (the gateway from the environment)."""
    return {"storage.storage_type": "s3", "storage.storage_root": bucket}


def s3_workload(path, bucket, sections, **over):
    """A training workload on the S3 bucket `bucket` (the gateway from the environment), written as YAML to
    `path`: npz files of one sample read by PyTorch for one epoch, no evaluation or checkpoint, then `sections`' keys
    ({section: {key: value}}, a top-level key: value) and `over`'s (section__key=value) over those."""
    import yaml

    doc = {
        "framework": "pytorch",
        "workflow": {"generate_data": True, "train": True, "evaluation": False, "checkpoint": False},
        "dataset": {"format": "npz", "num_samples_per_file": 1, "record_length_bytes_stdev": 0},
        "storage": {"storage_type": "s3", "storage_root": bucket},
        "reader": {"data_loader": "pytorch"},
        "train": {"epochs": 1},
    }
    for sec, keys in sections.items():
        if isinstance(keys, dict):
            doc.setdefault(sec, {}).update(keys)
        else:
            doc[sec] = keys
    for k, v in over.items():
        sec, key = k.split("__")
        doc.setdefault(sec, {})[key] = v
    path.write_text(yaml.safe_dump(doc))
    return path


def s3_keys(server, bucket, prefix):
    """Every key under the prefix with its size, with boto3's paginator (independent of dlio-fast's client)."""
    out = {}
    for page in s3_boto(server).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


def one_line(text):
    """The error is one non-empty line with no traceback (warnings printed before it aside)."""
    assert "Traceback" not in text
    lines = [l for l in text.strip().splitlines() if l.strip() and not l.startswith("warning:")]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real Ceph RADOS Gateway (tools/ceph-s3.sh) on free loopback ports for the whole session."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ceph_s3", os.path.join(REPO, "tools", "ceph_s3.py"))
    ceph_s3 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ceph_s3)
    why = ceph_s3.missing()
    if why:
        pytest.skip(why)
    server = ceph_s3.CephS3(str(tmp_path_factory.mktemp("ceph"))).start()
    server.module = ceph_s3
    try:
        yield server
    finally:
        server.stop()


def s3_boto(server):
    """A boto3 client of the gateway `server` (tools/ceph_s3.py), to look at what a test wrote."""
    import boto3

    env = server.aws_env()
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_REGION"],
    )


@pytest.fixture
def s3env(s3_server, monkeypatch):
    """The session's gateway, its endpoint and keys in the environment (as a user's shell has them)."""
    for k, v in s3_server.aws_env().items():
        monkeypatch.setenv(k, v)
    return s3_server


@pytest.fixture
def bucket(s3env, request):
    """A bucket of this test's own, named after its module and name (made once; kept for the session)."""
    mod = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = re.sub(r"[^a-z0-9-]+", "-", f"{mod}-{request.node.name}".lower()).strip("-")[:63].rstrip("-")
    try:
        s3_boto(s3env).create_bucket(Bucket=name)
    except Exception as e:
        if "BucketAlreadyOwnedByYou" not in str(e):
            raise
    return name


@pytest.fixture
def measured_phase():
    """The test runs as a measured phase does (dlio.system.execute.stop_signals_deferred): a stop signal
    noted by an earlier test of the session is not this test's (the KV-cache engine's tests)."""
    from dlio.system.execute import stop_signals_deferred

    with stop_signals_deferred():
        yield


# The families' tiny runs, shared by their tests (one host and many): KV entries of tiny-1b at 64-256 tokens
# (1.5-6 MiB), two users, 1.5 s; a 4-layer transformer's model in 6 MB shards, loaded twice.
TINY_KV_CONFIG = """\
workflow: {train: false, kvcache: true}
kvcache:
  model: tiny-1b
  users: 2
  duration: 1.5
  max_concurrent_allocs: 2
  prefix_probe: 0
  templates: {chat: {context: [64, 256], generation: [16, 64], think: [0.05, 0.15]}}
"""
TINY_MODEL_LOAD = (
    "model_load.model=transformer",
    "model.num_layers=4",
    "model.transformer.hidden_size=512",
    "model.transformer.ffn_hidden_size=2048",
    "model.transformer.vocab_size=8000",
    "model.transformer.num_attention_heads=8",
    "model.transformer.num_kv_heads=2",
    "model_load.shard_size=6000000",
    "model_load.repeats=2",
)
