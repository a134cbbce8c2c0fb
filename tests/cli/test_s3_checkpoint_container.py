"""Checkpoint objects on S3 are torch.save's zip container, byte for byte the .pt file a filesystem
save writes (dlio.checkpoint.torchzip): downloaded, zipfile and a pickle reader open them (and torch,
when a DLIO install with torch is there)."""

import json
import os
import struct
import subprocess
import sys

import pytest
from conftest import on_s3, s3_boto, set_args

pytest.importorskip("s3dlio", reason="pip install 'dlio-fast[s3]' (s3dlio needs Python >= 3.11)")

import test_s3  # noqa: E402  (its settings helper)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "unit", "checkpoint"))
from dlio_installs import dlio_python  # noqa: E402
from test_torchzip import check_storages, read_pt, shape_of  # noqa: E402

# one int8 model tensor (a 100 KB object, one PUT) and DLIO's optimizer groups as a,b pairs plus
# 'combined': a 69 MB object, a 5-part multipart upload whose records begin inside parts 0, 1 and 2
SETS = (
    "workflow.train=false",
    "workflow.generate_data=false",
    "workflow.checkpoint=true",
    "checkpoint.num_checkpoints_write=1",
    "checkpoint.num_checkpoints_read=0",
    "checkpoint.randomize_tensor=false",
    "model.model_size=100000",
    "model.optimization_groups=[14000000,9000000]",
)


def _save(run_cli, out, *extra, **keys):
    code, _, err = run_cli("-q", "run", "-w", "unet3d", "--output", out, *set_args(*SETS, *extra, **keys))
    assert code == 0, err


def test_s3_checkpoint_objects_are_the_pt_files(run_cli, s3env, bucket, tmp_path):
    files = tmp_path / "ck"
    _save(run_cli, tmp_path / "of", f"checkpoint.checkpoint_folder={files}")
    _save(run_cli, tmp_path / "os", **on_s3(bucket), **{"checkpoint.checkpoint_folder": f"s3://{bucket}/pt"})
    (step,) = os.listdir(files)
    names = sorted(os.listdir(files / step))
    assert names == ["model_states-0.pt", "zero_pp_rank_0_mp_rank_0_optim_states.pt"]
    s3 = s3_boto(s3env)
    for name in names:
        got = tmp_path / name
        s3.download_file(bucket, f"pt/{step}/{name}", str(got))
        want = (files / step / name).read_bytes()
        assert got.read_bytes() == want, f"{name}: the object is not the file's bytes"
        state, infos = read_pt(got)
        check_storages(state, infos)
        if name.startswith("model"):
            assert shape_of(state) == {"a": ("int8", 100000)}
        else:
            assert shape_of(state) == {
                "0": {"a": ("int8", 14000000), "b": ("int8", 14000000)},
                "1": {"a": ("int8", 9000000), "b": ("int8", 9000000)},
                "combined": ("int8", 23000000),
            }
        # the tensors are ones (randomize_tensor: false), the literal bytes only where zip records are
        data = got.read_bytes()
        for key, info in infos.items():
            if "/data/" in key:
                nlen, elen = struct.unpack_from("<HH", data, info.header_offset + 26)
                start = info.header_offset + 30 + nlen + elen
                assert data[start : start + info.file_size].count(1) == info.file_size, key
        if dlio_python("2.0.0"):  # torch itself, from a DLIO install's python
            load = "import sys, torch; s = torch.load(sys.argv[1], weights_only=True); print(sorted(s))"
            p = subprocess.run([dlio_python("2.0.0"), "-c", load, str(got)], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-2000:]
            assert json.loads(p.stdout.replace("'", '"')) == sorted(shape_of(state))


def test_multipart_parts_hold_the_files_bytes(run_cli, s3env, bucket, tmp_path):
    # a .pt of several parts, the container's literals in some: the object is the file, byte for byte
    from dlio.checkpoint.layout import plan_checkpoint
    from dlio.checkpoint.transfers import ones_pattern
    from dlio.config import load_config
    from dlio.storage.s3 import client
    from dlio.storage.s3.backend import containers

    files = tmp_path / "ck"
    _save(run_cli, tmp_path / "of", f"checkpoint.checkpoint_folder={files}")
    cfg = load_config(workload="unet3d", sets=list(SETS), env={})
    (big,) = [f for f in plan_checkpoint(cfg, 0, 1).files if f.nbytes > 64 << 20]
    overlays, of = containers([big.torch_file.segments], 1)
    task = {
        "task": "ckpt",
        "kind": "save",
        "items": [[f"s3://{bucket}/win/{big.name}", big.nbytes]],
        "fills": [ones_pattern(big.dtype)],
        "overlays": overlays,
        "overlay_of": of,
        "threads": 1,
        "part_inflight": 4,
    }
    assert client.run_task(test_s3._settings(), task)["bytes"] == big.nbytes
    got = tmp_path / "got"
    s3_boto(s3env).download_file(bucket, f"win/{big.name}", str(got))
    (step,) = os.listdir(files)
    assert got.read_bytes() == (files / step / big.name).read_bytes()


def test_random_objects_share_no_block(s3env, bucket, tmp_path):
    """Random checkpoint content: no 4 KiB block of any part of any object equals another (a
    deduplicating store cannot keep one part for many), small objects and multipart ones alike."""
    from dlio.storage.s3 import client

    sizes = [(80 << 20) + 4096, 96 << 20, 5 << 20, 5 << 20]  # two multipart objects, two small of one size
    items = [[f"s3://{bucket}/uniq/{i}", n] for i, n in enumerate(sizes)]
    task = {"task": "ckpt", "kind": "save", "items": items, "threads": 2, "part_inflight": 2}
    assert client.run_task(test_s3._settings(), task)["bytes"] == sum(sizes)
    seen = set()
    for i, n in enumerate(sizes):
        data = s3_boto(s3env).get_object(Bucket=bucket, Key=f"uniq/{i}")["Body"].read()
        assert len(data) == n
        blocks = {data[o : o + 4096] for o in range(0, n - n % 4096, 4096)}
        assert len(blocks) == n // 4096 and not (blocks & seen), i
        seen |= blocks
