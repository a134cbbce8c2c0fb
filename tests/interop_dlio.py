"""Running DLIO itself (2.0.0 or current) on a tiny workload: the YAML it needs and the subprocess.

Shared by tests/data/dlio-golden/make_golden.py (DLIO generates the golden files) and the tests that
let DLIO read what dlio-fast wrote. One place knows each version's spellings and framework per format.
"""

import json
import os
import subprocess
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "dlio_driver.py"
TOOLS = HERE / "dlio_bin"  # a tfrecord2idx for DLIO 2.0.0's tfrecord generator (DALI's script, absent here)
FORMATS = ("npz", "npy", "hdf5", "csv", "tfrecord", "jpeg", "png", "indexed_binary", "mmap_indexed_binary", "synthetic")
NUM_FILES_TRAIN = 2
NUM_FILES_EVAL = 1
SAMPLES_PER_FILE = 4  # the golden files
RECORD_LENGTH = 1024  # 32 x 32 uint8: small golden files
BATCH = 2
# Training runs: current DLIO trims num_files_train to a multiple of samples_per_file x batch x ranks
# (main.py, "Trimming number of training files"): 2 files of 2 samples in batches of 1 stay 2 files.
TRAIN_SAMPLES_PER_FILE = 2
TRAIN_BATCH = 1


def samples_per_file(fmt: str, spf: int = SAMPLES_PER_FILE) -> int:
    return 1 if fmt in ("jpeg", "png") else spf  # an image file holds one sample


def dataset_keys(data, fmt: str, dialect: str, spf: int, subfolders: int = 0) -> Dict[str, object]:
    """The dataset keys both directions of the interchange tests give dlio-fast."""
    return {
        "dataset.data_folder": data,
        "dataset.format": fmt,
        "dataset.num_files_train": NUM_FILES_TRAIN,
        "dataset.num_files_eval": NUM_FILES_EVAL,
        "dataset.num_subfolders_train": subfolders,
        "dataset.num_subfolders_eval": subfolders,
        "dataset.num_samples_per_file": spf,
        "dataset.record_length_bytes": RECORD_LENGTH,
        "dlio_fast.dialect": dialect,
    }


def workload(
    version: str,
    fmt: str,
    data_folder: Path,
    output_folder: Path,
    generate: bool,
    train: bool,
    spf: int = SAMPLES_PER_FILE,
    batch: int = BATCH,
    subfolders: int = 0,
) -> Dict:
    """A tiny DLIO workload in `version`'s spelling (2.0.0: record_length and model: NAME)."""
    tf = fmt == "tfrecord"
    dataset = {
        "data_folder": str(data_folder),
        "format": fmt,
        "num_files_train": NUM_FILES_TRAIN,
        "num_files_eval": NUM_FILES_EVAL,
        "num_samples_per_file": samples_per_file(fmt, spf),
        "num_subfolders_train": subfolders,
        "num_subfolders_eval": subfolders,
        ("record_length" if version == "2.0.0" else "record_length_bytes"): RECORD_LENGTH,
    }
    return {
        "model": "tiny" if version == "2.0.0" else {"name": "tiny"},
        "framework": "tensorflow" if tf else "pytorch",
        "workflow": {"generate_data": generate, "train": train, "evaluation": False, "checkpoint": False},
        "dataset": dataset,
        "reader": {
            "data_loader": "tensorflow" if tf else "pytorch",
            "batch_size": batch,
            "read_threads": 1,
            "file_shuffle": "off",
            "sample_shuffle": "off",
        },
        "train": {"epochs": 1, "computation_time": 0},
        "output": {"folder": str(output_folder)},
    }


def run_dlio(python: str, jobs: List[Dict], work: Path, timeout: float = 600) -> List[Dict]:
    """Run DLIO workloads (from workload(), output.folder set) in one process of `python` (its venv):
    one result {"ok", "error"} per job. Its bin folder goes first on PATH (tfrecord2idx)."""
    work.mkdir(parents=True, exist_ok=True)
    jobs_file, results_file = work / "jobs.json", work / "results.json"
    jobs_file.write_text(json.dumps(jobs))
    results_file.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(TOOLS), os.path.dirname(python), env.get("PATH", "")])
    env.update(DFTRACER_ENABLE="0", TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    p = subprocess.run(
        [python, str(DRIVER), str(jobs_file), str(results_file)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    results = json.loads(results_file.read_text()) if results_file.exists() else []
    if len(results) < len(jobs):  # the process died in a job: that job and the rest failed
        why = f"DLIO exited {p.returncode}: {(p.stderr or p.stdout)[-2000:]}"
        results += [{"ok": False, "error": why}] * (len(jobs) - len(results))
    return results


def summary(output_folder: Path) -> Dict:
    with open(output_folder / "summary.json") as f:
        return json.load(f)
