"""DLIO 2.0.0's checkpoint.type under `mpiexec -n 2`: rank_zero (its default) has rank 0 alone write the
checkpoint, all_ranks every rank, as DLIO 2.0.0's base_checkpointing does; current DLIO ignores the key."""

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO

CONFIG = """\
model: tiny
framework: pytorch
workflow:
  generate_data: true
  train: true
  checkpoint: true
dataset:
  data_folder: {data}
  format: npy
  num_files_train: 4
  record_length: 4096
reader:
  batch_size: 1
  read_threads: 0
train:
  epochs: 1
  computation_time: 0
checkpoint:
  checkpoint_folder: {ck}
  model_size: 65536
{type}
"""


@pytest.mark.skipif(
    not (shutil.which("mpiexec") and importlib.util.find_spec("mpi4py")),
    reason="needs mpiexec and mpi4py (pip install mpich mpi4py)",
)
@pytest.mark.parametrize(
    "kind, files", [("", ["model_states-0.pt"]), ("all_ranks", ["model_states-0.pt", "model_states-1.pt"])]
)
def test_2_0_0_checkpoint_type_decides_which_ranks_write(tmp_path, kind, files):
    ck = tmp_path / "ck"
    cfg = tmp_path / "w.yaml"
    cfg.write_text(CONFIG.format(data=tmp_path / "d", ck=ck, type=f"  type: {kind}" if kind else ""))
    p = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, "-m", "dlio", "run", "--config", str(cfg), "-o", str(tmp_path / "o")]
        + ["--set", "dlio_fast.mlperf_rules=off"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    (step,) = os.listdir(ck)
    assert sorted(os.listdir(ck / step)) == files
    for f in files:  # torch.save's container around the model's one 64 KiB tensor
        with zipfile.ZipFile(ck / step / f) as z:
            assert [i.file_size for i in z.infolist() if "/data/" in i.filename] == [65536]
