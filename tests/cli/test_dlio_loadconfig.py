"""DLIO's own LoadConfig on its shipped workload files (tests/data/dlio-workloads), next to dlio-fast's
loader: the keys dlio-fast warns "ignored (DLIO ignores it too)" about change nothing in DLIO, and the
keys both read get the same values.  Needs the DLIO installs (tests/dlio_installs.py); skipped without."""

import glob
import json
import os
import re
import subprocess

import pytest
import yaml
from dlio_installs import dlio_python, needs_dlio

from dlio.config import load_config

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "dlio-workloads")

# Loads each file given with DLIO's LoadConfig (what DLIO's main does with cfg['workload']) and prints
# {file: the ConfigArguments fields it set, as strings}.
DLIO_LOAD = """
import json, sys
from omegaconf import OmegaConf
from dlio_benchmark.utils.utility import DLIOMPI
DLIOMPI.get_instance().initialize()
from dlio_benchmark.utils.config import ConfigArguments, LoadConfig
out = {}
for path in sys.argv[1:]:
    ConfigArguments._ConfigArguments__instance = None  # a fresh singleton per file
    args = ConfigArguments.get_instance()
    LoadConfig(args, OmegaConf.load(path))
    out[path] = {k: str(v) for k, v in vars(args).items() if k != "logger"}
print(json.dumps(out))
"""

# DLIO's ConfigArguments field -> dlio-fast's key, for the fields both read from a workload file
SAME = {
    "num_files_train": "dataset.num_files_train",
    "num_files_eval": "dataset.num_files_eval",
    "num_samples_per_file": "dataset.num_samples_per_file",
    "batch_size": "reader.batch_size",
    "batch_size_eval": "reader.batch_size_eval",
    "read_threads": "reader.read_threads",
    "epochs": "train.epochs",
    "total_training_steps": "train.total_training_steps",
    "steps_between_checkpoints": "checkpoint.steps_between_checkpoints",
    "file_prefix": "dataset.file_prefix",
}


def dlio_args(version, paths):
    p = subprocess.run(
        [dlio_python(version), "-c", DLIO_LOAD, *paths], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def without(path, dotted_keys, tmp_path):
    """A copy of the YAML file without the given dotted keys."""
    with open(path) as f:
        tree = yaml.safe_load(f)
    for key in dotted_keys:
        *parents, leaf = key.split(".")
        node = tree
        for p in parents:
            node = node[p]
        del node[leaf]
    out = tmp_path / ("stripped-" + os.path.basename(path))
    out.write_text(yaml.safe_dump(tree))
    return str(out)


@pytest.mark.parametrize("version", [pytest.param(v, marks=needs_dlio(v)) for v in ("2.0.0", "current")])
def test_dlio_reads_its_files_as_we_do_and_ignores_what_we_say_it_ignores(version, tmp_path):
    files = sorted(glob.glob(os.path.join(ROOT, version, "*.yaml")))
    ours = {f: load_config(config_file=f, env={}) for f in files}
    ignored = {
        f: [m.group(1) for w in c.warnings if (m := re.search(r": (\S+) is not a DLIO key", w))]
        for f, c in ours.items()
    }
    stripped = {f: without(f, keys, tmp_path) for f, keys in ignored.items() if keys}
    if version == "2.0.0":
        assert stripped, "2.0.0's dlrm.yaml carries keys DLIO ignores"
    theirs = dlio_args(version, files + list(stripped.values()))
    for f, copy in stripped.items():  # the keys we call ignored change none of DLIO's settings
        assert theirs[f] == theirs[copy], (f, ignored[f])
    compared = 0
    for f, cfg in ours.items():
        for field, key in SAME.items():
            if field in theirs[f]:
                assert theirs[f][field] == str(cfg.get(key)), (f, field)
                compared += 1
        if "record_length" in theirs[f]:  # a float (resnet50's 114660.07) stays one in both
            assert float(theirs[f]["record_length"]) == cfg.dataset.record_length_bytes, f
    assert compared > len(files)
