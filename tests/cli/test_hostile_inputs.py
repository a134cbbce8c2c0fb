"""Every file a family or command reads from its user goes through one bounded reader (dlio.base.inputs):
a FIFO given as a trace is refused at once (no hang), a symlink to /dev/zero or a 1 GiB sparse file is no
out-of-memory kill, a deeply nested JSON no RecursionError, and NaN, 1e308 or negative numbers are no
traceback and no silently wrong run. Each through the real command, in a subprocess under a timeout:
one line naming the file and the key or field, the command's exit status for bad input, no traceback."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from conftest import TINY_KV_CONFIG, TINY_MODEL_LOAD, one_line, set_args

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
VDB_CAPTURE = os.path.join(DATA, "vdb", "diskann_n5000_d1536_r32_l64_w4.json")
DLIO_FOLDER = os.path.join(DATA, "dlio-output", "current-eval-epoch-ckpt")
TIMEOUT = 90  # a hang (a FIFO waited on) fails the test instead of blocking the suite


def cli(*args, module="dlio"):
    p = subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def hostile(path, kind, good=None):
    """Make `path` the hostile input `kind`: a FIFO, a symlink to /dev/zero, a 1 GiB sparse file, or a
    JSON document nested 100,000 deep."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "sparse-1g":
        with open(path, "wb") as f:
            f.truncate(1 << 30)
    elif kind == "deep":
        with open(path, "w") as f:
            f.write("[" * 100_000 + "]" * 100_000)
    else:
        raise AssertionError(kind)
    return path


FILE_KINDS = ["fifo", "dev-zero", "sparse-1g"]
# what the one line says of each
SAYS = {
    "fifo": "is a FIFO",
    "dev-zero": "is a character device",
    "sparse-1g": "",  # a cap or a line too long: the kind's own words, checked per case
    "deep": "nested too deeply",
}


# ------------------------------------------------------------------------------------ KV-cache traces


def kv_run(tmp_path, trace, *more):
    cfg = tmp_path / "kv.yaml"
    cfg.write_text(TINY_KV_CONFIG)
    return cli(
        "run",
        "--config",
        cfg,
        *set_args(f"kvcache.cache_dir={tmp_path / 'cache'}", f"kvcache.trace={trace}", *more),
        "-o",
        tmp_path / "out",
    )


@pytest.mark.parametrize("name", ["trace.csv", "trace.jsonl", "trace.json"])
@pytest.mark.parametrize("kind", [*FILE_KINDS, "deep"])
def test_kv_trace_that_is_no_file_or_too_big_is_one_line(tmp_path, name, kind):
    if kind == "deep" and name != "trace.json":
        pytest.skip("a nested document is a ShareGPT (JSON) trace's case")
    trace = hostile(tmp_path / name, kind)
    code, out, err = kv_run(tmp_path, trace)
    assert code == 2, err
    line = one_line(err)
    assert f"kvcache.trace = {trace}" in line and SAYS[kind] in line
    if kind == "sparse-1g":  # NULs and no newline: one line longer than the reader's 1 MiB
        assert "longer than 1 MiB" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "name, body, says",
    [
        (
            "neg.jsonl",
            '{"timestamp": 0, "input_length": 8, "output_length": -5, "hash_ids": [1, 2]}\n',
            "line 1: output_length: -5 is out of range [0, 1048576]",
        ),
        (
            "nan.jsonl",
            '{"timestamp": NaN, "input_length": 8, "output_length": 5, "hash_ids": [1, 2]}\n',
            "line 1: not a valid Mooncake request",
        ),
        (
            "big.jsonl",
            '{"timestamp": 0, "input_length": 8, "output_length": 5, "hash_ids": [1e308]}\n',
            "line 1: hash_ids: 1000000000000000010979",
        ),
        (
            "float.jsonl",
            '{"timestamp": 0, "input_length": 8, "output_length": 2.5, "hash_ids": [1]}\n',
            "line 1: output_length: 2.5 is not an integer",
        ),
        (
            "neg.csv",
            "Timestamp,Operation,Object_Size_Bytes,Tier,Key,Phase\n1.0,Write,-4096,Tier-2,k1,Prefill\n",
            "line 2: Object_Size_Bytes = -4096 is not a whole number",
        ),
        (
            "inf.csv",
            "Timestamp,Operation,Object_Size_Bytes,Tier,Key,Phase\ninf,Write,4096,Tier-2,k1,Prefill\n",
            "line 2: Timestamp = inf is not a finite number",
        ),
        (
            "huge.csv",
            "Timestamp,Operation,Object_Size_Bytes,Tier,Key,Phase\n1.0,Write,1e308,Tier-2,k1,Prefill\n",
            "line 2: Object_Size_Bytes = 1e308 is not a whole number in [0, 68719476736]",
        ),
        ("empty.jsonl", "\n\n  \n", "no requests with blocks"),
    ],
)
def test_kv_trace_numbers_are_checked(tmp_path, name, body, says):
    trace = tmp_path / name
    trace.write_text(body)
    code, out, err = kv_run(tmp_path, trace)
    assert code == 2, err
    line = one_line(err)
    assert f"kvcache.trace = {trace}" in line and says in line, line
    assert not (tmp_path / "out").exists()


def test_kv_trace_gzip_bomb_stops_at_the_cap(tmp_path):
    """600 MiB of blank lines in a 600 KiB gzip: read up to the named cap (512 MiB), then refused; the old
    reader read it all and ran an empty trace with exit 0."""
    trace = tmp_path / "bomb.jsonl.gz"
    block = (b" " * 1023 + b"\n") * 1024  # 1 MiB
    with gzip.open(trace, "wb", compresslevel=1) as f:
        for _ in range(600):
            f.write(block)
    assert trace.stat().st_size < 8 << 20
    code, out, err = kv_run(tmp_path, trace)
    assert code == 2, err
    line = one_line(err)
    assert f"kvcache.trace = {trace}" in line and "more than the 512 MiB a KV-cache trace may have" in line


# ------------------------------------------------------------------------------------ vector-search traces


def vdb_dry_run(tmp_path, trace):
    return cli(
        "run",
        "-w",
        "vdb_diskann_1m",
        "--dry-run",
        *set_args(f"vdb.trace={trace}", "vdb.vectors=5000", f"vdb.index_folder={tmp_path / 'idx'}"),
    )


@pytest.mark.parametrize("kind", [*FILE_KINDS, "deep"])
def test_vdb_trace_that_is_no_file_or_too_big_is_one_line(tmp_path, kind):
    trace = hostile(tmp_path / "t.json", kind)
    code, out, err = vdb_dry_run(tmp_path, trace)
    assert code == 2, err
    line = one_line(err)
    assert f"vdb.trace = {trace}" in line and SAYS[kind] in line
    if kind == "sparse-1g":
        assert "1,073,741,824 bytes is more than the 256 MiB a vector-search trace may have" in line
    assert not (tmp_path / "idx").exists()


def _edited_capture(tmp_path, edit):
    with open(VDB_CAPTURE) as f:
        doc = json.load(f)
    edit(doc)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    return path


def _set(doc, *keys_value):
    *keys, value = keys_value
    d = doc
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


@pytest.mark.parametrize(
    "keys_value, says",
    [
        (("read_bytes", float("nan")), "NaN is not a number JSON allows"),
        (("read_bytes", -8192), "read_bytes: -8192 is out of range"),
        (("medoid", 1e308), "medoid: 1000000000000000010979"),
        (("medoid", 5000), "medoid: 5000 is out of range [0, 4999]"),
        (("params", "vectors", 1e308), "params.vectors: 1000000000000000010979"),
        (("params", "vectors", float("inf")), "Infinity is not a number JSON allows"),
        (("searches", 0, 0, 0, -3), "searches (a node id): -3 is out of range [0, 4999]"),
        (("searches", 0, 0, 0, 2.5), "searches (a node id): 2.5 is not an integer"),
        (("searches", 0, 0, 0, "7"), "searches (a node id): '7' is not an integer"),
    ],
)
def test_vdb_trace_numbers_are_checked(tmp_path, keys_value, says):
    trace = _edited_capture(tmp_path, lambda d: _set(d, *keys_value))
    code, out, err = vdb_dry_run(tmp_path, trace)
    assert code == 2, err
    line = one_line(err)
    assert f"vdb.trace = {trace}" in line and says in line, line


# ------------------------------------------------------------------------------------ the model's index


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_model_index_that_is_no_file_is_refused_not_read(tmp_path, kind):
    """A FIFO, /dev/zero or a 1 GiB file at model.safetensors.index.json in the model's folder: one line
    saying what to do, the file left as it was (the old code hung, read /dev/zero until killed, or read the
    1 GiB into memory and wrote the model over the folder)."""
    folder = tmp_path / "model"
    folder.mkdir()
    index = hostile(folder / "model.safetensors.index.json", kind)
    code, out, err = cli(
        "run",
        "-w",
        "default",
        *set_args("workflow.model_load=true", *TINY_MODEL_LOAD, f"checkpoint.checkpoint_folder={folder}"),
        "-o",
        tmp_path / "out",
    )
    assert code == 2, err
    line = one_line(err)
    assert str(index) in line and "model index" in line and "another checkpoint.checkpoint_folder" in line
    assert SAYS[kind] in line and (kind != "sparse-1g" or "more than the 16 MiB" in line)
    assert sorted(os.listdir(folder)) == ["model.safetensors.index.json"]  # no shard written beside it
    if kind == "sparse-1g":
        assert index.stat().st_size == 1 << 30


# ------------------------------------------------------------------------------------ DLIO's postprocessor


def _dlio_folder(tmp_path):
    import shutil

    folder = tmp_path / "dlio"
    shutil.copytree(DLIO_FOLDER, folder)
    return folder


def _rank_file_edit(folder, value):
    path = folder / "0_output.json"
    doc = json.loads(path.read_text())
    epoch = next(k for k in doc if k.isdigit())
    phase = next(iter(doc[epoch]["load"]))
    doc[epoch]["load"][phase][0] = value
    path.write_text(json.dumps(doc))
    return f"{epoch}.load.{phase}"


@pytest.mark.parametrize("kind", [*FILE_KINDS, "deep", "nan", "text", "negative"])
def test_postprocessor_rank_file(tmp_path, kind):
    folder = _dlio_folder(tmp_path)
    rank_file = folder / "0_output.json"
    field = None
    if kind in ("nan", "text", "negative"):
        field = _rank_file_edit(folder, {"nan": float("nan"), "text": "abc", "negative": -1.5}[kind])
    else:
        rank_file.unlink()
        hostile(rank_file, kind)
    code, out, err = cli("-of", folder, "-hf", ".hydra", module="dlio.cli.dlio_postprocessor")
    assert code == 1, err
    line = one_line(err)
    assert line.startswith(f"dlio_postprocessor: error: {rank_file}: ")
    says = {
        **SAYS,
        "sparse-1g": "1,073,741,824 bytes is more than the 256 MiB a DLIO result file may have",
        "nan": "NaN is not a number JSON allows",
        "text": f"{field}: 'abc' is not a number",
        "negative": f"{field}: -1.5 is not finite or out of range",
    }[kind]
    assert says in line, line
    assert not list(folder.glob("DLIO_*_report.txt"))


# ------------------------------------------------------------------------------------ check / report


@pytest.mark.parametrize("command", ["check", "report"])
def test_check_and_report_name_a_fifo_result_file(tmp_path, command):
    """A FIFO at a run folder's dlio-fast.json is said to be one (the old `check` said there was none)."""
    folder = tmp_path / "run"
    folder.mkdir()
    hostile(folder / "dlio-fast.json", "fifo")
    code, out, err = cli(command, folder)
    assert code == 2, err
    line = one_line(err)
    assert f"{folder / 'dlio-fast.json'}: is a FIFO" in line
