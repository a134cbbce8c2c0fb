"""dlio-fast's output folder against DLIO's own (tests/data/dlio-output, written by DLIO 2.0.0 and
current DLIO for the same configs): every file, every field, in the config's dialect; DLIO's folders
read by `dlio-fast report`; DLIO's postprocessor run on dlio-fast's folders where DLIO is installed."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from dlio_installs import dlio_python, needs_dlio

from dlio.report.dlio import folder as dlio_folder

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "data", "dlio-output")
CASES = sorted(os.listdir(GOLDEN)) if os.path.isdir(GOLDEN) else []
CASES = [c for c in CASES if os.path.isdir(os.path.join(GOLDEN, c))]

# Files only one side writes: DLIO's tracer log; dlio-fast's own document, resolved config and lock.
DLIO_ONLY = {"dft.log"}
OURS_ONLY = {"dlio-fast.json", "config.yaml", ".dlio-fast.lock"}


def _overrides(case, tmp_path):
    """DLIO's command line of a golden run, its data and checkpoint folders moved under tmp_path."""
    with open(os.path.join(GOLDEN, case, ".hydra", "overrides.yaml")) as f:
        ops = yaml.safe_load(f)
    workloads = [o for o in ops if o.startswith("workload=")]
    out = [o for o in ops if not o.startswith("workload=")] + workloads[-1:]  # Hydra: the last one wins
    subst = {"dataset.data_folder": tmp_path / "data", "checkpoint.checkpoint_folder": tmp_path / "ckpt"}
    for i, o in enumerate(out):
        for key, path in subst.items():
            if f"workload.{key}=" in o:
                out[i] = f"{o.split('=', 1)[0]}={path}"
    return out


@pytest.fixture(scope="module")
def our_folders(tmp_path_factory):
    """dlio-fast run with each golden run's command line, once per module: {case: folder}."""
    from dlio.cli.main import main

    out = {}
    for case in CASES:
        tmp = tmp_path_factory.mktemp(case)
        folder = tmp / "out"
        try:
            main(["-q", "run", "-o", str(folder), *_overrides(case, tmp)])
        except SystemExit as e:
            assert not e.code, f"{case}: dlio-fast run exited {e.code}"
        out[case] = str(folder)
    return out


def _shape(x):
    """Keys (in order) and value types; list lengths left out (DLIO 2.0.0 loses the first load time of
    each block after the first); the /proc dictionaries by their type only."""
    if isinstance(x, dict):
        return [(k, "dict" if k in ("host_cpuinfo", "host_meminfo") else _shape(v)) for k, v in x.items()]
    if isinstance(x, list):
        return "list"
    return "number" if isinstance(x, (int, float)) and not isinstance(x, bool) else type(x).__name__


def _files(folder):
    return {n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))}


@pytest.mark.parametrize("case", CASES)
def test_same_files_and_fields_as_dlio(case, our_folders):
    ref, ours = os.path.join(GOLDEN, case), our_folders[case]
    assert _files(ref) - DLIO_ONLY == _files(ours) - OURS_ONLY
    for name in sorted(n for n in _files(ref) if n.endswith(".json")):
        with open(os.path.join(ref, name)) as f:
            want = json.load(f)
        with open(os.path.join(ours, name)) as f:
            got = json.load(f)
        assert _shape(got) == _shape(want), name
    # Hydra writes hydra.yaml too (the recorded folders keep only the two files these tests compare)
    assert sorted(os.listdir(os.path.join(ours, ".hydra"))) == ["config.yaml", "hydra.yaml", "overrides.yaml"]


# Lines of DLIO's log that dlio-fast does not write, and why: per-step INFO lines (`dlio-fast run -v`
# prints them), DLIO's own set-up (profiler, its model-size arithmetic), the data-size line (its
# "GB" figure is in summary.json), and 2.0.0's "Maximum number of steps reached".
NOT_IN_OUR_LOG = re.compile(
    r"Rank \d+ step \d+|Profiling DLIO|Total amount of data each host|Model size|Total checkpoint size|"
    r"Total number of parameters|Optimizer state size|Saved (model|optimizer) checkpoint|Loaded (model|optimizer)"
    r" checkpoint|Maximum number of steps reached|Checkpointing write started$|Metric calculation will exclude"
)


def _templates(path):
    """The messages of a DLIO log with times, numbers and source locations taken out."""
    out = set()
    with open(path) as f:
        for line in f:
            line = re.sub(r" \[/[^\]]*\]$", "", line.rstrip("\n"))  # 2.0.0: the Python source location
            line = re.sub(r"^\[(INFO|OUTPUT)\] (\d{4}-\d\d-\d\dT[\d:.]+ )?", "", line)
            if not line or NOT_IN_OUR_LOG.search(line):
                continue
            line = re.sub(r"-?\d+(\.\d+)?", "N", line)
            line = re.sub(r"\(set value: .*\)$", "", line).rstrip()
            out.add(re.sub(r"expectation: (success|fail)", "expectation: X", line))
    return out


@pytest.mark.parametrize("case", CASES)
def test_dlio_log_has_dlios_lines(case, our_folders):
    want = _templates(os.path.join(GOLDEN, case, "dlio.log"))
    got = _templates(os.path.join(our_folders[case], "dlio.log"))
    missing = {w for w in want if not w.startswith("Saved outputs in")} - got
    assert not missing, missing
    assert any(g.startswith("Saved outputs in") for g in got)


def _flat(tree, prefix=""):
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


@pytest.mark.parametrize("case", CASES)
def test_hydra_config_and_overrides(case, our_folders, tmp_path):
    def load(folder, name):
        with open(os.path.join(folder, ".hydra", name)) as f:
            return yaml.safe_load(f)

    ref, ours = os.path.join(GOLDEN, case), our_folders[case]
    want, got = load(ref, "config.yaml"), load(ours, "config.yaml")
    assert list(got) == ["workload"]
    w, g = _flat(want["workload"]), _flat(got["workload"])
    # current DLIO's own workload files carry model.model_size, which current DLIO ignores;
    # dlio-fast honours it (as model_size_bytes, the key current DLIO reads)
    renamed = {"model.model_size": "model.model_size_bytes"}
    for key, value in w.items():
        if key.endswith(("data_folder", "checkpoint_folder")):
            continue
        key = renamed.get(key, key) if not case.startswith("2.0.0") else key
        # 2.0.0's `model: unet3d` is written as model.name: mlpstorage reads workload.model.name
        key = "model.name" if key == "model" else key
        assert key in g, key
        if isinstance(value, float):
            assert g[key] == pytest.approx(value), key
        elif key != "model.model_size_bytes":
            assert g[key] == value, key
    assert g["output.log_file"] == "dlio.log"
    ops = load(ours, "overrides.yaml")
    dlio_ops = _overrides(case, tmp_path)
    assert sorted(o for o in ops if "_folder=" not in o) == sorted(o for o in dlio_ops if "_folder=" not in o)


@pytest.mark.parametrize("case", CASES)
def test_report_reads_dlio_folders(case, run_cli, our_folders):
    doc, summary = dlio_folder.load_dlio_folder(os.path.join(GOLDEN, case))
    assert doc["tool"] == "DLIO"
    assert doc["metrics"]["au_percentage"] == summary["metric"].get("train_au_percentage", [])
    for folder in (os.path.join(GOLDEN, case), our_folders[case]):
        code, out, err = run_cli("report", folder)
        assert code == 0, err


def _ld_env():
    """DLIO's mpi4py needs a libmpi: the MPICH wheel of this venv has one."""
    env = dict(os.environ)
    lib = os.path.join(sys.prefix, "lib")
    if os.path.exists(os.path.join(lib, "libmpi.so")):
        env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


def _postprocess(version, folder):
    code = "import sys; from dlio_benchmark.postprocessor import main; sys.argv[0] = 'dlio_postprocessor'; main()"
    return subprocess.run(
        [dlio_python(version), "-c", code, "--output-folder", folder],
        capture_output=True,
        text=True,
        env=_ld_env(),
        timeout=300,
    )


CONFIG_200 = """\
model: unet3d
framework: pytorch
workflow: {generate_data: true, train: true, checkpoint: true}
dataset: {data_folder: DATA, format: npz, num_files_train: 8, num_samples_per_file: 1, record_length: 65536}
reader: {data_loader: pytorch, batch_size: 2, read_threads: 1}
train: {epochs: 2, computation_time: 0.01}
checkpoint: {checkpoint_folder: CKPT, steps_between_checkpoints: 2, model_size: 1048576}
"""


@needs_dlio("2.0.0")
def test_dlio_200_postprocessor_reads_our_folder(tmp_path, run_cli):
    """DLIO 2.0.0's dlio_postprocessor on a dlio-fast folder of a 2.0.0 config (given as a file: with
    ++workload.workflow.checkpoint=X on the command line it stops on its own folders too, its
    str2bool getting "X\\n" from overrides.yaml) exits 0, and its report shows our figures."""
    cfg = tmp_path / "w.yaml"
    cfg.write_text(CONFIG_200.replace("DATA", str(tmp_path / "data")).replace("CKPT", str(tmp_path / "ckpt")))
    out = tmp_path / "out"
    code, _, err = run_cli("-q", "run", "--config", cfg, "-o", out)
    assert code == 0, err
    p = _postprocess("2.0.0", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    # 2.0.0's postprocessor names the report after workload.model, a mapping in our config.yaml (what
    # mlpstorage reads): DLIO_{'name': 'unet3d'}_report.txt
    (report_file,) = out.glob("DLIO_*unet3d*_report.txt")
    report = report_file.read_text()
    pe = json.loads((out / "per_epoch_stats.json").read_text())
    o = json.loads((out / "0_output.json").read_text())
    assert "Num Ranks:                    1" in report
    # per epoch: its duration; per block: the postprocessor's sum(load) / ranks from our 0_output.json
    epochs = re.split(r"^Epoch \d+$", report, flags=re.M)[1:]
    assert len(epochs) == 2
    for e, text in zip(("1", "2"), epochs):
        assert re.search(rf"Duration \(s\):\s+{re.escape(pe[e]['duration'])}$", text, re.M)
        loads = re.findall(r"Avg loading time / rank \(s\):\s+(\S+)", text)
        assert loads == [f"{sum(o[e]['load'][b]):.2f}" for b in ("block1", "block2")]
        assert len(re.findall(r"^\s+Checkpoint \d+$", text, re.M)) == 2


@needs_dlio("current")
def test_current_postprocessor_fails_on_ours_as_on_current_dlios_own(our_folders, tmp_path):
    """Current DLIO's dlio_postprocessor reads dataset.record_length (2.0.0's spelling) and
    per_epoch_stats.json (2.0.0's file), neither of which current DLIO writes: it stops on current
    DLIO's own folders, and on dlio-fast's of a current config at the same place. dlio-fast writes
    what current DLIO writes rather than bend its files to this tool."""
    for i, folder in enumerate((os.path.join(GOLDEN, "current-train"), our_folders["current-train"])):
        tmp = str(tmp_path / f"run{i}")
        shutil.copytree(folder, tmp)
        cfg = os.path.join(tmp, ".hydra", "config.yaml")
        with open(cfg) as f:
            has_log_file = "log_file" in f.read()
        if not has_log_file:  # without it the postprocessor stops even earlier (LoadConfig on its namespace)
            with open(cfg, "a") as f:
                f.write("  output:\n    log_file: dlio.log\n")
        p = _postprocess("current", tmp)
        assert p.returncode != 0
        assert "KeyError: 'record_length'" in p.stderr, p.stderr[-2000:]


@pytest.mark.parametrize("case", [c for c in CASES if "ckpt-only" not in c])
def test_what_mlperf_storage_v1_report_reads(case, our_folders):
    """MLPerf Storage v1's report.py reads, per run: the `workload=MODEL_ACCEL` line of the Hydra
    overrides, and summary.json's AU verdict, accelerators, throughputs and dataset size."""
    folder = our_folders[case]
    with open(os.path.join(folder, ".hydra", "overrides.yaml")) as f:
        line = next(line for line in f if "workload=" in line)
    model, accel = line.split("workload=")[1].strip().split("_")[:2]
    assert (model, accel) == ("unet3d", "h100")
    with open(os.path.join(folder, "summary.json")) as f:
        s = json.load(f)
    assert s["metric"]["train_au_meet_expectation"] in ("success", "fail")
    for key in ("train_au_mean_percentage", "train_throughput_mean_samples_per_second", "train_io_mean_MB_per_second"):
        assert isinstance(s["metric"][key], float)
    assert (s["num_accelerators"], s["num_files_train"], s["num_samples_per_file"]) == (1, 8, 1)
