"""`report` shows each run's settings and marks those that differ; io points are matched on
O_DIRECT / buffered / cached too; `check` groups repeats by settings; both read a DLIO output folder
(summary.json, {rank}_output.json, .hydra/config.yaml, as dlio-facts.md section 7 describes them)."""

import copy
import csv
import json
import os

import numpy as np
import pytest
import yaml
from test_report_cmd import make_result, write_run

from dlio.mlperf import checks_v2
from dlio.report import source


def write_dlio_folder(
    folder,
    au=(98.0, 97.0),
    sps=(5.1, 5.0),
    loads=((0.5, 0.01, 0.02, 0.03), (0.4, 0.02, 0.01, 0.05)),
    batch=4,
    read_threads=4,
    computation_time=1.36,
    nfiles=168,
    hosts=1,
):
    """A DLIO 2.0 output folder: two ranks, one block per epoch (per-step load / proc / compute lists)."""
    os.makedirs(folder / ".hydra")
    summary = {
        "start": "2023-04-04T16:33:42.959919",
        "end": "2023-04-04T16:35:55.155745",
        "num_accelerators": 2,
        "num_hosts": hosts,
        "hostname": "dlio-node",
        "epochs": len(au),
        "num_files_train": nfiles,
        "num_files_eval": 0,
        "num_samples_per_file": 1,
        "host_cpu_count": [32],
        "host_processor_name": "x",
        "host_cpuinfo": {},
        "host_meminfo": {},
        "host_memory_GB": [64.0],
        "data_size_per_host_GB": [400.0],
        "potential_caching": [0],
        "metric": {
            "train_au_percentage": list(au),
            "train_au_mean_percentage": float(np.mean(au)),
            "train_au_stdev_percentage": float(np.std(au)),
            "train_au_meet_expectation": "success",
            "train_throughput_samples_per_second": list(sps),
            "train_throughput_mean_samples_per_second": float(np.mean(sps)),
            "train_throughput_stdev_samples_per_second": float(np.std(sps)),
            "train_io_mean_MB_per_second": 1139.73,
            "train_io_stdev_MB_per_second": 11.92,
        },
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    for rank in range(2):
        doc = {"host_memory_GB": 64.0, "host_cpu_count": 32, "hostname": "dlio-node"}
        for e in range(1, len(au) + 1):
            ld = list(loads[e - 1])
            doc[str(e)] = {
                "load": {"block1": ld},
                "proc": {"block1": [x + computation_time for x in ld]},
                "compute": {"block1": [computation_time] * len(ld)},
                "throughput": {"block1": sps[e - 1]},
                "au": {"block1": au[e - 1]},
                "end": "2023-04-04T16:35:55",
            }
        (folder / f"{rank}_output.json").write_text(json.dumps(doc))
    cfg = {
        "workload": {
            "model": {"name": "unet3d"},
            "framework": "pytorch",
            "workflow": {"generate_data": False, "train": True},
            "dataset": {
                "data_folder": "data/unet3d/",
                "format": "npz",
                "num_files_train": nfiles,
                "record_length_bytes": 146600628,
            },
            "reader": {"data_loader": "pytorch", "batch_size": batch, "read_threads": read_threads},
            "train": {"epochs": len(au), "computation_time": computation_time},
            "metric": {"au": 0.90},
        }
    }
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return folder


def test_report_marks_the_settings_that_differ(tmp_path, run_cli):
    a = make_result(steps=20)
    b = copy.deepcopy(a)
    b["settings"].update(engine="io_uring", qd=4, cache="drop")
    pa, pb = write_run(tmp_path / "runA", a), write_run(tmp_path / "runC", b)
    code, out, err = run_cli("report", pa, pb, "--json", tmp_path / "r.json", "--csv", tmp_path / "r.csv")
    assert code == 0, err
    lines = out.splitlines()
    eng = next(line for line in lines if "engine" in line and "setting" in line)
    assert eng.startswith("* engine") and "posix" in eng and "io_uring" in eng
    assert next(line for line in lines if "queue depth" in line).startswith("* queue depth")
    assert next(line for line in lines if "cache mode" in line).startswith("* cache mode")
    batch = next(line for line in lines if "batch size" in line and "setting" in line)
    assert batch.startswith("  batch size")  # the same in both: not marked
    assert "* the runs differ" in out
    rep = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert rep["differ"] == ["engine", "qd", "cache"]
    assert rep["runs"][1]["settings"]["engine"] == "io_uring" and rep["runs"][0]["settings"]["qd"] == "1"
    rows = {r["figure"]: r for r in csv.DictReader((tmp_path / "r.csv").open()) if r["figure"].startswith("setting:")}
    assert rows["setting:engine"]["unit"] == "differs" and rows["setting:batch"]["unit"] == ""


def _point(direct, cache, bw):
    return {
        "rw": "read",
        "bs": 1 << 20,
        "engine": "posix",
        "qd": 1,
        "qd_used": 1,
        "threads": 1,
        "direct": direct,
        "cache": cache,
        "bw_MiB_s": bw,
        "iops": bw,
        "lat_ns": {
            "count": 10,
            "min": 1000,
            "mean": 2e6,
            "stdev": 1.0,
            "max": 9e6,
            "p50": 2e6,
            "p90": 3e6,
            "p99": 4.29e6,
            "p99.9": 5e6,
        },
    }


def test_io_points_matched_on_direct_and_cache(tmp_path, run_cli):
    doc = {"schema": "dlio-fast.io/1", "paths": ["/mnt/a"], "environment": {"created": "2025-01-02T00:00:00"}}
    f1, f2 = tmp_path / "io.json", tmp_path / "io_direct.json"
    f1.write_text(json.dumps({**doc, "points": [_point(False, "kept", 8000.0)]}))
    f2.write_text(json.dumps({**doc, "points": [_point(True, "bypassed (O_DIRECT)", 450.0)]}))
    code, out, err = run_cli("report", f1, f2, "--json", tmp_path / "r.json")
    assert code == 0, err
    pts = json.loads((tmp_path / "r.json").read_text())["io"]["points"]
    assert len(pts) == 2  # a cached point is not an O_DIRECT one
    assert {p["mode"] for p in pts} == {"cached", "direct"}
    assert all(sum(v is not None for v in p["values"]) == 1 for p in pts)
    assert "read 1MiB posix qd1 t1 cached" in out and "read 1MiB posix qd1 t1 direct" in out
    assert "4.29ms" in out  # latency scaled, its unit in the cell


def test_check_groups_repeats_by_settings(tmp_path, run_cli):
    a = make_result(steps=501, wait_ms=1.0, compute_ms=9.0)
    b = copy.deepcopy(a)
    c = copy.deepcopy(a)
    c["settings"].update(engine="io_uring", qd=4)
    paths = [write_run(tmp_path / n, r) for n, r in (("runA", a), ("runB", b), ("runC", c))]
    res = checks_v2.run_checks([source.load(str(p)).doc for p in paths], labels=["runA", "runB", "runC"])
    repeat = [r for r in res if "runs within" in r[0]]
    assert len(repeat) == 1 and repeat[0][0].startswith("unet3d: 2 runs within 5 %") and repeat[0][1] is True
    assert "runA" in repeat[0][2] and "runB" in repeat[0][2] and "runC" not in repeat[0][2]
    note = [r for r in res if r[1] is None]
    assert len(note) == 1
    assert "runC differs from runA in engine posix vs io_uring; queue depth 1 vs 4" in note[0][2]
    code, out, err = run_cli("check", *paths)
    assert "NOTE  unet3d: runs with other settings are not repeats" in out
    assert "checks: 16 of 16 passed" in out  # 3 runs x 5 checks + 1 repeat check; the note is not one


def test_report_reads_a_dlio_folder(tmp_path, run_cli):
    dlio_run = write_dlio_folder(tmp_path / "dlio_run")
    fast = make_result(workload="unet3d", steps=4, batch=4)
    fast_run = write_run(tmp_path / "dlio_fast_run", fast)
    code, out, err = run_cli("report", dlio_run, fast_run, "--json", tmp_path / "r.json")
    assert code == 0, err
    rep = json.loads((tmp_path / "r.json").read_text())["runs"]
    d, f = rep["runs"]
    assert d["settings"]["tool"] == "DLIO" and f["settings"]["tool"] == "dlio-fast"
    assert d["settings"]["engine"] == "pytorch reader" and d["settings"]["read_threads"] == "4"
    assert d["settings"]["compute"] == "1.36 s" and d["settings"]["ranks"] == "2" and d["settings"]["batch"] == "4"
    assert "tool" in rep["differ"] and "engine" in rep["differ"]
    assert d["figures"]["au_dlio_pct"] == pytest.approx(97.5)
    assert d["figures"]["samples_per_s_dlio"] == pytest.approx(5.05)
    assert d["figures"]["read_MiB_s_dlio"] == pytest.approx(1139.73)
    assert d["figures"]["au_exact_pct"] is None  # DLIO records no step timestamps
    assert d["figures"]["epochs"] == 2
    # I/O wait per step from the ranks' load lists: mean and p99 of all 16 steps
    loads = np.array([0.5, 0.01, 0.02, 0.03, 0.4, 0.02, 0.01, 0.05] * 2)
    assert d["figures"]["io_wait_mean_ms"] == pytest.approx(loads.mean() * 1e3)
    assert d["figures"]["io_wait_p99_ms"] == pytest.approx(np.percentile(loads, 99) * 1e3)
    assert "* tool" in out and "DLIO" in out


def test_check_reads_a_dlio_folder(tmp_path, run_cli):
    dlio_run = write_dlio_folder(tmp_path / "dlio_run")
    res = dict((n, (ok, t)) for n, ok, t in checks_v2.run_checks([source.load(str(dlio_run)).doc]))
    assert res["run complete"][0] is True
    assert res[">= 500 steps per epoch"] == (False, res[">= 500 steps per epoch"][1])
    assert "4 steps per epoch" in res[">= 500 steps per epoch"][1]
    assert res["AU (DLIO formula) >= 90 %"][0] is True and "97.50 %" in res["AU (DLIO formula) >= 90 %"][1]
    assert "AU (exact) >= 90 %" not in res  # DLIO has no exact AU
    ok, text = res["dataset >= 5x host RAM"]  # 400 GiB vs 5 x 64 GiB
    assert ok is True and "400.0 GiB" in text
    code, out, err = run_cli("check", dlio_run)
    assert code == 1 and "FAIL  >= 500 steps per epoch" in out


def test_two_dlio_repeats(tmp_path):
    a = write_dlio_folder(tmp_path / "a", sps=(5.1, 5.0))
    b = write_dlio_folder(tmp_path / "b", sps=(4.0, 4.0))
    res = checks_v2.run_checks([source.load(str(p)).doc for p in (a, b)], labels=["a", "b"])
    rep = res[-1]
    assert rep[0] == "unet3d: 2 runs within 5 % (samples/s)" and rep[1] is False
    assert "a 5.0, b 4.0" in rep[2]  # DLIO's samples/s means (5.05 printed with one decimal)


def test_a_folder_that_is_neither(tmp_path, run_cli):
    (tmp_path / "x").mkdir()
    code, out, err = run_cli("report", tmp_path / "x")
    assert code == 2 and "nor a DLIO output folder" in err


def test_plots_and_html_with_a_dlio_folder(tmp_path, run_cli):
    dlio_run = write_dlio_folder(tmp_path / "dlio_run")
    fast_run = write_run(tmp_path / "dlio_fast_run", make_result(workload="unet3d", steps=4, batch=4))
    page = tmp_path / "r.html"
    code, out, err = run_cli("report", dlio_run, fast_run, "--html", page)
    assert code == 0, err
    text = page.read_text()
    assert str(tmp_path) not in text  # no absolute path of this machine
    assert 'class="differ"' in text
