"""Generation to S3 under `mpiexec -n 2`: each rank generates and uploads its own byte-balanced share
(the file generator's split), staged locally a batch at a time (DLIO_FAST_S3_STAGE_BYTES), multipart
for large objects; the objects are the file generator's bytes and the merged manifest goes up last."""

import importlib.util
import json
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

import test_s3_workloads as wl  # noqa: E402
from conftest import s3_boto, s3_keys  # noqa: E402

needs_mpi = pytest.mark.skipif(
    shutil.which("mpiexec") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpiexec and mpi4py (pip install mpich mpi4py)",
)

# each rank: generate_ranks itself, so that the test sees what every rank did
RANK = """
import json, sys
from dlio.system import mpi
from dlio.config import load_config
from dlio.dataset.spec import dataset_spec
from dlio.dataset import gen_stream
from dlio.storage import backend_for
cfg = load_config(config_file=sys.argv[1], env={})
backend = backend_for(cfg)
comm = mpi.world()
got = gen_stream.generate_ranks(backend, backend.dataset_root(cfg), dataset_spec(cfg), comm, 2, checksum=True,
                                multipart_min=int(sys.argv[2]))
with open(f"{sys.argv[3]}/rank{comm.rank}.json", "w") as f:  # (two ranks' stdout lines may interleave)
    json.dump({"rank": comm.rank, "objects": got[0], "bytes": got[1], "peak": got[2]}, f)
"""


@needs_mpi
def test_generation_spread_over_ranks_in_bounded_batches(run_cli, s3env, bucket, tmp_path):
    fmt = "indexed_binary"  # companions (.off.idx, .sz.idx) go up with their data file
    cfg = wl.config(
        tmp_path,
        fmt,
        bucket,
        folder="gen2",
        dataset__num_files_eval=2,
        dataset__num_samples_per_file=4,
        dataset__num_files_train=16,
        dataset__record_length_bytes=20000,
        dataset__record_length_bytes_stdev=15000,  # files of different sizes: bytes, not counts, split them
    )
    stage_limit, multipart_min = 200_000, 100_000
    wl.two_ranks(RANK, cfg, multipart_min, tmp_path, DLIO_FAST_S3_STAGE_BYTES=str(stage_limit))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]

    # the same config generated to a local folder: the objects are its files, byte for byte
    local = tmp_path / "local"
    files = wl.generated_locally(run_cli, cfg, local)
    objects = s3_keys(s3env, bucket, "gen2/")
    assert sorted(k[len("gen2/") :] for k in objects if "/.dlio-fast/" not in k) == files
    s3 = s3_boto(s3env)
    for rel in files:
        assert s3.get_object(Bucket=bucket, Key=f"gen2/{rel}")["Body"].read() == (local / rel).read_bytes(), rel
    # one merged manifest per split, no parts left
    assert sorted(k for k in objects if "/.dlio-fast/" in k) == [
        "gen2/.dlio-fast/manifest-train.npz",
        "gen2/.dlio-fast/manifest-valid.npz",
    ]
    # both ranks wrote: the split is by bytes (each rank's share within the largest file of half the total)
    sizes = {rel: os.path.getsize(local / rel) for rel in files}
    total = sum(sizes.values())
    assert sum(r["bytes"] for r in ranks) == total and sum(r["objects"] for r in ranks) == len(files)
    largest = max(sizes.values())
    for r in ranks:
        assert r["objects"] > 0 and abs(r["bytes"] - total / 2) <= 3 * largest, ranks
        # never more than two batches staged (the one uploading, the one generating): bounded disk use
        # (a batch is cut after the file that reaches the limit: it over-runs it by less than a file)
        assert 0 < r["peak"] <= 2 * (stage_limit + largest), r
    assert total > 4 * stage_limit, "the test needs several batches per rank"
    big = [rel for rel, n in sizes.items() if n >= multipart_min]
    assert big, "the test needs multipart objects"
    for rel in big:
        etag = s3.head_object(Bucket=bucket, Key=f"gen2/{rel}")["ETag"].strip('"')
        assert "-" in etag, f"{rel} ({sizes[rel]} bytes) was not a multipart upload"
    # the dataset is complete for a run: nothing generated again, and it trains
    code, out, err = run_cli("run", "--config", cfg, "--output", tmp_path / "o")
    assert code == 0, err
    assert "is complete and matches the config; nothing written" in out
    ep = wl.result(tmp_path / "o")["ranks"][0]["epochs"][0]
    assert ep["steps_done"] == 32 and np.isclose(ep["samples"], 64)


def test_verify_on_s3_checks_the_objects_against_their_manifest(run_cli, s3env, bucket, tmp_path):
    """verify of a dataset on S3 checks the objects (not a local folder of the same name): sizes, format
    and CRC32C, a batch at a time; a missing and a changed object are named by their s3:// URIs."""
    cfg = wl.config(tmp_path, "tfrecord", bucket, folder="ver", dataset__num_files_train=6, dataset__num_files_eval=0)
    code, _, err = run_cli("generate", "--config", cfg, "--checksum")
    assert code == 0, err
    code, out, err = run_cli("verify", "--config", cfg)
    assert code == 0 and "6 files checked (tfrecord in s3://" in out and "with content checksums): 0 bad" in out, (
        out + err
    )
    s3 = s3_boto(s3env)
    keys = sorted(k for k in s3_keys(s3env, bucket, "ver/") if k.endswith(".tfrecord"))
    s3.delete_object(Bucket=bucket, Key=keys[0])
    body = bytearray(s3.get_object(Bucket=bucket, Key=keys[1])["Body"].read())
    body[-5] ^= 0xFF  # same size, one byte changed
    s3.put_object(Bucket=bucket, Key=keys[1], Body=bytes(body))
    code, out, err = run_cli("verify", "--config", cfg)
    bad = [line for line in out.splitlines() if line.startswith("BAD")]
    assert code == 1, out + err
    assert f"BAD  s3://{bucket}/{keys[0]}: missing" in bad, bad
    assert any(line.startswith(f"BAD  s3://{bucket}/{keys[1]}:") for line in bad), bad
    assert not os.path.exists(tmp_path / "ver")  # nothing local of that name was consulted or made


def test_objects_of_the_wrong_size_are_not_taken_as_the_dataset(run_cli, s3env, bucket, tmp_path):
    """An object cut short (or replaced by another upload) was taken as present: the run read it as the
    planned one, and generate said the dataset was complete. Now the listing's sizes are checked against
    the manifest: the run names the object and both sizes, --skip-bad-files leaves it out (counted), and
    generate writes the dataset again."""
    cfg = wl.config(tmp_path, "npz", bucket, folder="sized", dataset__num_files_train=6, dataset__num_files_eval=0)
    code, _, err = run_cli("generate", "--config", cfg)
    assert code == 0, err
    s3 = s3_boto(s3env)
    keys = sorted(k for k in s3_keys(s3env, bucket, "sized/") if k.endswith(".npz"))
    want = s3_keys(s3env, bucket, "sized/")[keys[2]]
    body = s3.get_object(Bucket=bucket, Key=keys[2])["Body"].read()
    s3.put_object(Bucket=bucket, Key=keys[2], Body=body[: len(body) // 2])
    sets = ["--set", "workflow.generate_data=false"]

    code, _, err = run_cli("run", "--config", cfg, *sets, "-o", tmp_path / "refused")
    assert code != 0 and "Traceback" not in err, err
    assert f"s3://{bucket}/{keys[2]}: {len(body) // 2} bytes, but {want} were recorded" in err, err
    assert "--skip-bad-files" in err and not (tmp_path / "refused" / "dlio-fast.json").exists()

    code, _, err = run_cli("run", "--config", cfg, *sets, "--skip-bad-files", "-o", tmp_path / "skipped")
    assert code == 0, err
    doc = wl.result(tmp_path / "skipped")
    assert doc["ranks"][0]["bad_files"] == [f"s3://{bucket}/{keys[2]}"]

    code, out, err = run_cli("generate", "--config", cfg)
    assert code == 0 and "nothing written" not in out + err, out + err
    assert s3_keys(s3env, bucket, "sized/")[keys[2]] == want
