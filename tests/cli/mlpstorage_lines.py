"""The command lines MLPerf Storage's mlpstorage builds to run DLIO, and what it reads back.

Shapes from mlcommons/storage `mlpstorage/benchmarks/dlio.py` (generate_dlio_command: the binary, then
workload=NAME, ++hydra.run.dir, ++hydra.output_subdir=dlio_config, one ++workload.KEY=VALUE per param,
--config-dir last; under MPI `mpirun -n N -host H:N [--oversubscribe] [--allow-run-as-root]` before it)
and `mlpstorage/rules.py` / `mlpstorage_py/rules/models.py` (DLIOResultParser: what a results folder must
hold). Written from reading those files; no code of theirs is here.
"""

import json
import os
import shutil
import subprocess
import sys

import yaml
from conftest import REPO

HYDRA_OUTPUT_SUBDIR = "dlio_config"  # mlpstorage's config.HYDRA_OUTPUT_SUBDIR


def dlio_bin_dir(tmp_path):
    """A --dlio-bin-path folder whose `dlio_benchmark` runs this tree's entry point with this python
    (what `pip install dlio-fast` puts in the venv's bin)."""
    d = tmp_path / "dlio-bin"
    d.mkdir(exist_ok=True)
    exe = d / "dlio_benchmark"
    exe.write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
        '-m dlio.cli.dlio_benchmark "$@"\n'
    )
    exe.chmod(0o755)
    return d


def command(bin_dir, workload, run_dir, params, config_dir, mpi=None):
    """mlpstorage's DLIO command line as a list (its string split on spaces: no value has one)."""
    cmd = f"{os.path.join(bin_dir, 'dlio_benchmark')} workload={workload}"
    cmd += f" ++hydra.run.dir={run_dir}"
    cmd += f" ++hydra.output_subdir={HYDRA_OUTPUT_SUBDIR}"
    for key, value in params.items():
        cmd += f" ++workload.{key}={value}"
    cmd += f" --config-dir={config_dir}"
    if mpi is not None:
        cmd = f"{mpi} {cmd}"
    return cmd.split()


def mpi_prefix(launcher, n, root=False):
    """generate_mpi_prefix_cmd's line for one host: -host 127.0.0.1:N, and Open MPI's flags."""
    prefix = f"{launcher} -n {n} -host 127.0.0.1:{n}"
    if root:  # Open MPI's; mlpstorage adds them when asked (--oversubscribe --allow-run-as-root)
        prefix += " --oversubscribe --allow-run-as-root"
    return prefix


def run(cmd, cwd, timeout=300, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=e)


def open_mpi_mpirun():
    """(path of Open MPI's mpirun, None) when one runs a job here, else (None, why not)."""
    venv_bin = os.path.dirname(sys.executable)  # the mpich wheel's mpirun is there: not Open MPI's
    search = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    for name in ("mpirun.openmpi", "mpirun"):
        path = shutil.which(name, path=search)
        if not path:
            continue
        try:
            v = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "Open MPI" not in v.stdout + v.stderr:
            continue
        p = subprocess.run(
            [path, "-n", "1", "--oversubscribe", "--allow-run-as-root", "true"], capture_output=True, timeout=60
        )
        if p.returncode == 0:
            return path, None
        return None, f"Open MPI's {path} cannot start a job here: {p.stderr.decode()[-200:]}"
    return None, "no Open MPI mpirun (apt-get install openmpi-bin)"


def config_dir(tmp_path):
    """A DLIO config folder as mlpstorage ships one (configs/dlio: config.yaml, workload/*.yaml), made from
    dlio-fast's built-in DLIO workloads: unet3d_h100 (training run), unet3d_datagen (its generation, as
    mlpstorage's unet3d_datagen.yaml: generate_data only), llama3_8b (checkpoint-only)."""
    from dlio.config.workloads import workload_text

    d = tmp_path / "configs" / "dlio"
    (d / "workload").mkdir(parents=True)
    # mlpstorage's primary config names no workload: every command line gives workload=NAME
    (d / "config.yaml").write_text(
        "defaults:\n - _self_\n - workload:\nhydra:\n  run:\n    dir: ./results/${workload.model}/${now:%Y-%m-%d}\n"
    )
    unet = yaml.safe_load(workload_text("unet3d_h100"))
    (d / "workload" / "unet3d_h100.yaml").write_text(yaml.safe_dump(unet))
    gen = {k: v for k, v in unet.items() if k in ("model", "framework", "dataset")}
    gen["workflow"] = {"generate_data": True, "train": False, "checkpoint": False}
    (d / "workload" / "unet3d_datagen.yaml").write_text(yaml.safe_dump(gen))
    llama = yaml.safe_load(workload_text("llama_8b_zero3"))
    llama["model"]["name"] = "llama_8b"
    (d / "workload" / "llama3_8b.yaml").write_text(yaml.safe_dump(llama))
    return d


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_back(result_dir):
    """What mlpstorage's report reads from a DLIO results folder, the way it reads it: summary.json,
    dlio_config/*.yaml (yaml.load), the benchmark type and command from the workflow, the model from
    workload.model.name, the `++workload.` overrides split on '=' (the older report splits without a
    limit, so each must hold exactly one '='), the cluster from the summary's per-host lists."""
    summary = load_json(os.path.join(result_dir, "summary.json"))
    configs = {}
    hydra_dir = os.path.join(result_dir, HYDRA_OUTPUT_SUBDIR)
    for name in os.listdir(hydra_dir):
        if name.endswith(".yaml"):
            with open(os.path.join(hydra_dir, name)) as f:
                configs[name] = yaml.load(f, Loader=yaml.Loader)
    workload = configs.get("config.yaml", {}).get("workload", {})
    wf = workload.get("workflow", {})
    gen, train, ckpt = wf.get("generate_data", False), wf.get("train", False), wf.get("checkpoint", False)
    kind = "training" if gen or train else "checkpointing" if ckpt else None
    command = "run" if train or (ckpt and kind == "checkpointing") else "datagen" if gen else None
    overrides = {}
    for param in configs.get("overrides.yaml", []):
        p, v = param.split("=")
        if p.startswith("++workload."):
            overrides[p[len("++workload.") :]] = v
    memory = summary["host_memory_GB"]
    cpus = summary["host_cpu_count"]
    return {
        "summary": summary,
        "configs": configs,
        "type": kind,
        "command": command,
        "model": workload.get("model", {}).get("name"),
        "parameters": workload,
        "overrides": overrides,
        "num_processes": summary["num_accelerators"],
        "total_memory_bytes": sum(memory) * 1024**3,
        "total_cores": sum(cpus),
        "metrics": summary.get("metric"),
    }
