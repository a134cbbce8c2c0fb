"""`dlio-fast report` and `check`: known Result files in, exact figures and ratios out; plots, HTML."""

import csv
import html.parser
import json
import os
import struct

import numpy as np
import pytest
from conftest import REPO, one_line, set_args

from dlio import _core
from dlio.base.errors import DlioError
from dlio.cli import main as cli_mod
from dlio.cli.report import check as check_cmd
from dlio.cli.report import report as report_cmd
from dlio.mlperf import checks_v2
from dlio.report import compare, plots, run_files, source
from dlio.report.result import RUN_SCHEMA
from dlio.system import stats

# the lead registers these in dlio/cli.py; until then (and harmlessly after) the tests do
for _c in (report_cmd, check_cmd):
    if _c.name not in cli_mod.cli.commands:
        cli_mod.cli.add_command(_c)

MiB = 1 << 20
GiB = 1 << 30


# ---------------------------------------------------------------------------------------------
# Result fixtures with known numbers


def step_times(n, wait_ns, compute_ns, nbytes):
    """n steps, each: wait (t_ready - t_fetch) then compute, back to back."""
    period = wait_ns + compute_ns
    t_fetch = np.arange(n, dtype=np.int64) * period + 1_000_000_000
    return {
        "t_fetch": t_fetch,
        "t_ready": t_fetch + wait_ns,
        "t_end": t_fetch + period,
        "compute_ns": np.full(n, compute_ns, dtype=np.int64),
        "bytes": np.full(n, nbytes, dtype=np.int64),
    }


def make_result(
    workload="unet3d",
    steps=10,
    wait_ms=1.0,
    compute_ms=9.0,
    batch=4,
    epochs=2,
    step_bytes=MiB,
    lat_fast_ns=100_000,
    lat_slow_ns=1_000_000,
    ranks=1,
    bytes_on_disk=6 * GiB,
    memory_bytes=GiB,
    metric_au=0.9,
    cpu_s=0.004,
    folder="/data/x",
):
    """A Result as dlio.report.result.build_result makes it, built from exact step timestamps.

    Per epoch and rank: steps x (wait + compute); exclude_start_steps=1, so the exact figures are
    AU = compute / (wait + compute), samples/s = batch / (wait + compute) per rank, MiB/s =
    step_bytes / (wait + compute); reads: 90 at lat_fast_ns and 10 at lat_slow_ns per epoch."""
    wait_ns, comp_ns = int(wait_ms * 1e6), int(compute_ms * 1e6)
    lat = stats.to_json(_core.hist_from_values(np.array([lat_fast_ns] * 90 + [lat_slow_ns] * 10, dtype=np.uint64)))
    slat = stats.to_json(_core.hist_from_values(np.array([2 * lat_fast_ns] * 100, dtype=np.uint64)))
    recs = []
    for r in range(ranks):
        eps = []
        for e in range(1, epochs + 1):
            from dlio.report import metrics

            m = metrics.block_metrics(step_times(steps, wait_ns, comp_ns, step_bytes), batch, 1, 0)
            eps.append(
                {
                    "epoch": e,
                    "start": f"2025-03-0{e}T10:00:00",
                    "train_end": f"2025-03-0{e}T10:00:01",
                    "end": f"2025-03-0{e}T10:00:01",
                    "duration_s": m["duration_s"],
                    "train": m,
                    "lat": lat,
                    "sample_lat": slat,
                    "bytes": steps * step_bytes,
                    "ops": 100,
                    "samples": steps * batch,
                    "steps_planned": steps,
                    "steps_done": steps,
                    "plan_bytes": steps * step_bytes,
                    "cpu_s": cpu_s,
                    "complete": True,
                }
            )
        recs.append({"rank": r, "hostname": "node0", "epochs": eps})
    return {
        "schema": RUN_SCHEMA,
        "complete": True,
        "reason": None,
        "workload": workload,
        "config_file": None,
        "scale": 1.0,
        "model": workload,
        "start": "2025-03-01T10:00:00",
        "end": "2025-03-01T10:01:00",
        "comm_size": ranks,
        "hostnames": ["node0"] * ranks,
        "host": {
            "cpu_count": 8,
            "processor_name": "test cpu",
            "memory_bytes": memory_bytes,
            "memory_GB": memory_bytes / GiB,
        },
        "settings": {
            "engine": "posix",
            "direct": False,
            "qd": 1,
            "cache": "keep",
            "read_threads": 1,
            "prefetch_size": 2,
            "batch_size": batch,
            "batch_size_eval": 1,
            "compute_mode": "spin",
            "computation_time_mean_s": compute_ms / 1e3,
            "record_length_bytes": float(step_bytes // batch),
            "metric_au": metric_au,
            "exclude_start_steps": 1,
            "exclude_end_steps": 0,
        },
        "dataset": {
            "folder": folder,
            "format": "npz",
            "num_files_train": steps * batch,
            "num_files_eval": 0,
            "num_samples_per_file": 1,
            "bytes_on_disk": bytes_on_disk,
        },
        "environment": {"hostname": "node0", "created": "2025-03-01T10:01:00+0000"},
        "ranks": recs,
    }


def ckpt_record(kind, rank, epoch, start_s, dur_s, nbytes=GiB):
    """A checkpoint record as dlio.checkpoint.record makes it (one per rank and checkpoint)."""
    return {
        "kind": kind,
        "rank": rank,
        "epoch": epoch,
        "step": 10,
        "bytes": nbytes,
        "duration_s": dur_s,
        "wall_start_ns": int(start_s * 1e9),
        "wall_end_ns": int((start_s + dur_s) * 1e9),
        "GiB_per_second": nbytes / GiB / dur_s,
        "checkpoint_size_GB": 2.0,
        "dlio_throughput_GB_per_second": 2.0 / dur_s,
    }


# save 1: ranks 0 and 1 write 1 GiB each in [0, 1 s] and [0, 0.5 s] -> 2 GiB/s all ranks;
# save 2: both in [10, 10.5 s] -> 4 GiB/s; load 1: both in [20, 20.25 s] -> 8 GiB/s
CKPTS = [
    ckpt_record("save", 0, 1, 0.0, 1.0),
    ckpt_record("save", 1, 1, 0.0, 0.5),
    ckpt_record("save", 0, 2, 10.0, 0.5),
    ckpt_record("save", 1, 2, 10.0, 0.5),
    ckpt_record("load", 0, 2, 20.0, 0.25),
    ckpt_record("load", 1, 2, 20.0, 0.25),
]


def write_run(folder, result, checkpoints=None, dlio_ckpt=None):
    """run_files.write_all, plus the checkpoint records in dlio-fast.json and DLIO's checkpoint means
    (dlio_ckpt: {'save': GB/s, 'load': GB/s}) in summary.json."""
    run_files.write_all(result, str(folder))
    if dlio_ckpt:
        sp = os.path.join(folder, "summary.json")
        s = json.load(open(sp))
        for kind, v in dlio_ckpt.items():
            s["metric"][f"{kind}_checkpoint_io_mean_GB_per_second"] = v
        json.dump(s, open(sp, "w"))
    if checkpoints:
        dp = os.path.join(folder, "dlio-fast.json")
        d = json.load(open(dp))
        d["checkpoints"] = checkpoints
        json.dump(d, open(dp, "w"))
    return str(folder)


@pytest.fixture
def two_runs(tmp_path):
    """A: 1 ms wait + 9 ms compute per step -> AU 90 %, 400 samples/s, 100 MiB/s.
    B: 1 ms wait + 4 ms compute -> AU 80 %, 800 samples/s, 200 MiB/s; slower reads; checkpoints."""
    a = write_run(tmp_path / "runA", make_result())
    b = write_run(
        tmp_path / "runB",
        make_result(compute_ms=4.0, lat_fast_ns=200_000, cpu_s=0.008),
        checkpoints=CKPTS,
        dlio_ckpt={"save": 1.25, "load": 5.0},
    )
    return a, b


# ---------------------------------------------------------------------------------------------
# report: JSON, CSV, Markdown, terminal


def test_report_json_exact_figures_and_ratios(two_runs, tmp_path, run_cli):
    a, b = two_runs
    out = tmp_path / "r.json"
    code, stdout, err = run_cli("report", a, b, "--json", out)
    assert code == 0, err
    rep = json.loads(out.read_text())
    assert rep["schema"] == "dlio-fast.report/1"
    ra, rb = rep["runs"]["runs"]
    assert (ra["label"], rb["label"]) == ("runA", "runB")
    fa, fb = ra["figures"], rb["figures"]
    assert fa["workload"] == "unet3d" and fa["ranks"] == 1 and fa["epochs"] == 2
    assert fa["au_exact_pct"] == pytest.approx(90.0)
    assert fb["au_exact_pct"] == pytest.approx(80.0)
    assert fa["au_dlio_pct"] == pytest.approx(90.0)
    assert fa["samples_per_s"] == pytest.approx(400.0)
    assert fb["samples_per_s"] == pytest.approx(800.0)
    # DLIO's formula: (n - 2) * batch / T with T = 9 counted steps of 10 ms
    assert fa["samples_per_s_dlio"] == pytest.approx(8 * 4 / 0.09)
    assert fa["read_MiB_s"] == pytest.approx(100.0)
    assert fb["read_MiB_s"] == pytest.approx(200.0)
    assert fa["read_lat_p50_us"] == pytest.approx(100.0)
    assert fa["read_lat_p99_us"] == pytest.approx(1000.0)
    assert fa["read_lat_p99.9_us"] == pytest.approx(1000.0)
    assert fb["read_lat_p50_us"] == pytest.approx(200.0)
    assert fa["io_wait_mean_ms"] == pytest.approx(1.0)
    assert fa["io_wait_p99_ms"] == pytest.approx(1.0)
    assert fa["cpu_us_per_sample"] == pytest.approx(100.0)  # 2 x 4 ms CPU / 80 samples
    assert fb["cpu_us_per_sample"] == pytest.approx(200.0)
    assert fa["ckpt_save_GiB_s"] is None and fa["ckpt_save_GB_s"] is None
    assert fb["ckpt_save_GiB_s"] == pytest.approx(3.0)  # (2 + 4) / 2, all ranks
    assert fb["ckpt_load_GiB_s"] == pytest.approx(8.0)
    assert fb["ckpt_save_GB_s"] == pytest.approx(1.25)  # DLIO's, from summary.json
    assert fb["ckpt_load_GB_s"] == pytest.approx(5.0)
    # ratios to the first run
    assert ra["ratios"]["samples_per_s"] == pytest.approx(1.0)
    assert rb["ratios"]["samples_per_s"] == pytest.approx(2.0)
    assert rb["ratios"]["au_exact_pct"] == pytest.approx(80 / 90)
    assert rb["ratios"]["read_MiB_s"] == pytest.approx(2.0)
    assert rb["ratios"]["read_lat_p50_us"] == pytest.approx(2.0)
    assert rb["ratios"]["cpu_us_per_sample"] == pytest.approx(2.0)
    assert rb["ratios"]["ckpt_save_GiB_s"] is None  # the first run has none
    # the terminal table is printed too (the JSON went to a file)
    assert "samples/s (exact)" in stdout and "2.000x" in stdout


def test_report_json_to_stdout_is_only_json(two_runs, run_cli):
    code, stdout, err = run_cli("report", two_runs[0], "--json", "-")
    assert code == 0, err
    rep = json.loads(stdout)
    assert rep["runs"]["runs"][0]["figures"]["samples_per_s"] == pytest.approx(400.0)
    assert "ckpt_save_GiB_s" not in rep["runs"]["runs"][0]["figures"]  # no checkpoints, no row


def test_report_csv(two_runs, tmp_path, run_cli):
    a, b = two_runs
    out = tmp_path / "r.csv"
    code, _, err = run_cli("report", a, b, "--csv", out)
    assert code == 0, err
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["figure", "unit", "runA", "runB", "runB/runA"]
    by = {r[0]: r for r in rows[1:]}
    assert float(by["samples_per_s"][2]) == pytest.approx(400.0)
    assert float(by["samples_per_s"][3]) == pytest.approx(800.0)
    assert float(by["samples_per_s"][4]) == pytest.approx(2.0)
    assert by["samples_per_s"][1] == "1/s"
    assert float(by["read_MiB_s"][4]) == pytest.approx(2.0)
    assert float(by["au_exact_pct"][3]) == pytest.approx(80.0)
    assert float(by["read_lat_p99_us"][2]) == pytest.approx(1000.0)
    assert by["ckpt_save_GiB_s"][2] == "" and float(by["ckpt_save_GiB_s"][3]) == pytest.approx(3.0)
    assert by["ckpt_save_GiB_s"][1] == "GiB/s" and float(by["ckpt_load_GB_s"][3]) == pytest.approx(5.0)
    assert by["workload"][2:4] == ["unet3d", "unet3d"]


def test_report_markdown_is_a_table(two_runs, run_cli):
    a, b = two_runs
    code, stdout, err = run_cli("report", a, b, "--markdown", "-")
    assert code == 0, err
    table = [l for l in stdout.splitlines() if l.startswith("|")]
    assert len(table) >= 15
    ncols = table[0].count("|")
    assert ncols == 6  # 5 columns
    assert all(l.count("|") - l.count("\\|") == ncols for l in table)
    assert set(table[1].replace("|", "").replace(":", "").replace("-", "")) == set()
    cells = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[2:-1]] for l in table[2:]}
    assert cells["samples/s (exact)"] == ["1/s", "400.0", "800.0", "2.000x"]
    assert cells["AU (exact)"] == ["%", "90.00", "80.00", "0.889x"]


def test_report_io_points_matched(tmp_path, run_cli):
    def point(rw, bs, engine, qd, bw, p99):
        return {
            "rw": rw,
            "bs": bs,
            "engine": engine,
            "qd": qd,
            "qd_used": qd,
            "threads": 1,
            "direct": True,
            "bw_MiB_s": bw,
            "iops": bw * MiB / bs,
            "lat_ns": {
                "count": 10,
                "min": 1000,
                "mean": 2000.0,
                "stdev": 1.0,
                "max": p99 * 2,
                "p50": p99 // 2,
                "p90": p99,
                "p99": p99,
                "p99.9": p99 * 2,
            },
        }

    d1 = {
        "schema": "dlio-fast.io/1",
        "paths": ["/mnt/a"],
        "environment": {"created": "2025-01-02T00:00:00"},
        "points": [
            point("read", 4096, "posix", 1, 100.0, 50_000),
            point("read", 4096, "io_uring", 4, 300.0, 40_000),
            point("read", 1 << 20, "io_uring", 4, 2000.0, 900_000),
        ],
    }
    d2 = {
        "schema": "dlio-fast.io/1",
        "paths": ["/mnt/b"],
        "environment": {"created": "2025-01-03T00:00:00"},
        "points": [point("read", 4096, "io_uring", 4, 450.0, 20_000), point("read", 4096, "posix", 1, 50.0, 100_000)],
    }
    f1, f2 = tmp_path / "a.json", tmp_path / "b.json"
    f1.write_text(json.dumps(d1))
    f2.write_text(json.dumps(d2))
    out = tmp_path / "io.json"
    code, stdout, err = run_cli("report", f1, f2, "--json", out, "--csv", tmp_path / "io.csv")
    assert code == 0, err
    rep = json.loads(out.read_text())["io"]
    pts = {(p["engine"], p["bs"]): p for p in rep["points"]}
    assert len(pts) == 3
    v1, v2 = pts[("io_uring", 4096)]["values"]
    assert v1["bw_MiB_s"] == 300.0 and v2["bw_MiB_s"] == 450.0
    assert v2["ratios"]["bw_MiB_s"] == pytest.approx(1.5)
    assert v2["ratios"]["iops"] == pytest.approx(1.5)
    assert v2["ratios"]["lat_p99_us"] == pytest.approx(0.5)
    assert pts[("posix", 4096)]["values"][1]["ratios"]["bw_MiB_s"] == pytest.approx(0.5)
    assert pts[("io_uring", 1 << 20)]["values"][1] is None  # not measured in b.json
    assert v1["lat_p99_us"] == pytest.approx(40.0)
    rows = list(csv.DictReader((tmp_path / "io.csv").open()))
    r = next(r for r in rows if r["engine"] == "io_uring" and r["bs"] == "4096")
    assert float(r["bw_MiB_s_ratio[b]"]) == pytest.approx(1.5)
    assert float(r["iops[a]"]) == pytest.approx(300.0 * 256)
    assert "read 4KiB io_uring qd4 t1" in stdout


def test_report_ceiling_matches_targets(tmp_path):
    def best(bw, iops, eng, qd):
        return {
            "rw": "read",
            "bs": 1 << 20,
            "engine": eng,
            "qd": qd,
            "threads": 2,
            "bw_MiB_s": bw,
            "iops": iops,
            "lat_ns": {"count": 5, "p50": 1000, "p99": 2000, "p99.9": 3000},
        }

    for name, bw, qd in (("c1", 1000.0, 4), ("c2", 1500.0, 16)):
        (tmp_path / f"{name}.json").write_text(
            json.dumps(
                {
                    "schema": "dlio-fast.ceiling/1",
                    "path": "/mnt",
                    "best": {"seq_read": best(bw, bw, "io_uring", qd)},
                    "probes": [best(bw, bw, "io_uring", qd)],
                }
            )
        )
    srcs = source.load_all([tmp_path / "c1.json", tmp_path / "c2.json"])
    rep = compare.build(srcs)
    (p,) = rep["io"]["points"]
    assert p["target"] == "seq_read"
    assert p["values"][1]["ratios"]["bw_MiB_s"] == pytest.approx(1.5)  # matched by target, not qd


# ---------------------------------------------------------------------------------------------
# plots and HTML


def png_ok(path, min_w=400, min_h=300):
    from PIL import Image

    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(data) > 10_000, (path, len(data))
    w, h = struct.unpack(">II", data[16:24])
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.size == (w, h)
    assert min_w <= w <= 3000 and min_h <= h <= 3000, (path, w, h)
    return w, h


def test_report_plots_into_the_run_folder(two_runs, tmp_path, run_cli):
    a, _ = two_runs
    out = tmp_path / "a.html"
    code, _, err = run_cli("report", a, "--plots", "--html", out)
    assert code == 0, err
    for name in ("timeline.png", "latency_cdf.png", "throughput.png"):
        png_ok(os.path.join(a, name))
    assert not os.path.exists(os.path.join(a, "checkpoint.png"))  # run A has no checkpoints
    assert out.read_text().count('<img src="data:image/png;base64,') == 3
    assert err.count("plot: ") == 3


def test_make_all_on_a_result_dict(tmp_path):
    """What `run --plots` calls: a Result without the metrics section, many steps, 3 ranks."""
    res = make_result(steps=600, ranks=3, epochs=3)
    paths = plots.make_all(res, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["timeline.png", "latency_cdf.png", "throughput.png"]
    w, h = png_ok(paths[0])
    assert h > w * 0.8  # one panel per epoch


def test_io_plots(tmp_path):
    pts = []
    for eng in ("posix", "io_uring"):
        for bs in (4096, 65536, 1 << 20):
            for qd in (1, 4, 16):
                bw = bs / 4096 * 100 * (qd if eng == "io_uring" else 1) ** 0.5
                pts.append(
                    {
                        "rw": "randread",
                        "bs": bs,
                        "engine": eng,
                        "qd": qd,
                        "qd_used": qd if eng == "io_uring" else 1,
                        "threads": 1,
                        "direct": True,
                        "bw_MiB_s": bw,
                        "iops": bw * MiB / bs,
                        "lat_ns": {"count": 1, "p50": 1, "p99": 1, "p99.9": 1},
                    }
                )
    doc = {
        "schema": "dlio-fast.io/1",
        "paths": ["/mnt/nvme"],
        "environment": {"created": "2025-01-02T00:00:00"},
        "points": pts,
    }
    paths = plots.make_all(doc, str(tmp_path), prefix="x_")
    assert [os.path.basename(p) for p in paths] == ["x_vs_bs.png", "x_vs_qd.png"]
    for p in paths:
        png_ok(p)


class TagChecker(html.parser.HTMLParser):
    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.imgs, self.doctype = [], [], [], False

    def handle_decl(self, decl):
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs.append(dict(attrs))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with {self.stack[-3:]}")
        else:
            self.stack.pop()


def test_plots_dir_and_html_of_two_runs(two_runs, tmp_path, run_cli):
    import base64

    a, b = two_runs
    pd = tmp_path / "plots"
    out = tmp_path / "r.html"
    code, _, err = run_cli("report", a, b, "--plots-dir", pd, "--html", out)
    assert code == 0, err
    names = sorted(os.listdir(pd))
    assert names == sorted(
        [
            "runA_timeline.png",
            "runA_latency_cdf.png",
            "runA_throughput.png",
            "runB_timeline.png",
            "runB_latency_cdf.png",
            "runB_throughput.png",
            "runB_checkpoint.png",
            "compare_latency_cdf.png",
            "compare_throughput.png",
        ]
    )
    for n in names:
        png_ok(pd / n)
    assert not os.path.exists(os.path.join(a, "timeline.png"))  # --plots-dir, not the run folders
    text = out.read_text()
    p = TagChecker()
    p.feed(text)
    p.close()
    assert p.doctype and not p.errors and p.stack == [], (p.errors, p.stack)
    assert len(p.imgs) == 9
    for img in p.imgs:
        assert img["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(img["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        assert img.get("alt")
    assert "<table>" in text and "800.0" in text and "2.000x" in text
    assert "PASS" in text and "FAIL" in text  # the checks section
    assert 'src="http' not in text and "<script" not in text


# ---------------------------------------------------------------------------------------------
# check


def test_run_checks_figures():
    good = make_result(steps=501, wait_ms=0.5, compute_ms=9.5)
    res = checks_v2.run_checks([good])
    assert [(n, ok) for n, ok, _ in res] == [
        ("run complete", True),
        ("dataset >= 5x host RAM", True),
        (">= 500 steps per epoch", True),
        ("AU (exact) >= 90 %", True),
        ("AU (DLIO formula) >= 90 %", True),
    ]
    assert "6.0 GiB on disk" in res[1][2] and "5.0 GiB" in res[1][2]
    assert "501 steps" in res[2][2]
    assert "95.00 %" in res[3][2]
    # a 2-host run needs twice the data; ram_bytes overrides the recorded RAM
    two_hosts = make_result(steps=501, wait_ms=0.5, compute_ms=9.5, ranks=2)
    two_hosts["hostnames"] = ["node0", "node1"]
    assert not checks_v2.check_dataset(two_hosts)[1]
    assert checks_v2.check_dataset(two_hosts, ram_bytes=GiB // 2)[1]
    bad = make_result(steps=100, wait_ms=2.0, compute_ms=8.0, bytes_on_disk=GiB)
    res = dict((n, ok) for n, ok, _ in checks_v2.run_checks([bad]))
    assert res == {
        "run complete": True,
        "dataset >= 5x host RAM": False,
        ">= 500 steps per epoch": False,
        "AU (exact) >= 90 %": False,
        "AU (DLIO formula) >= 90 %": False,
    }
    # repeats (same settings, so the same compute): 400 vs 418 samples/s is within 5 %, 400 vs 430 is
    # not (step period = batch / rate: the I/O wait makes the difference)
    r1 = make_result(steps=501, wait_ms=1.0, compute_ms=9.0)
    r2 = make_result(steps=501, wait_ms=4 / 418 * 1e3 - 9.0, compute_ms=9.0)
    rep = checks_v2.run_checks([r1, r2], labels=["a", "b"])
    assert rep[-1][1] is True and "a 400.0, b 418.0: spread 4.50 %" in rep[-1][2]
    r3 = make_result(steps=501, wait_ms=4 / 430 * 1e3 - 9.0, compute_ms=9.0)
    rep = checks_v2.run_checks([r1, r3], labels=["a", "b"])
    assert rep[-1][0].startswith("unet3d: 2 runs within 5 %") and rep[-1][1] is False
    assert "7.50 %" in rep[-1][2]


def test_check_command_exit_status(tmp_path, run_cli):
    ok1 = write_run(tmp_path / "ok1", make_result(steps=501, wait_ms=0.5, compute_ms=9.5))
    ok2 = write_run(tmp_path / "ok2", make_result(steps=501, wait_ms=0.5, compute_ms=9.5))
    code, out, err = run_cli("check", ok1, ok2)
    assert code == 0, out + err
    lines = [l for l in out.splitlines() if l.startswith(("PASS", "FAIL"))]
    assert len(lines) == 11 and all(l.startswith("PASS") for l in lines)
    assert "spread 0.00 %" in out
    bad = write_run(tmp_path / "bad", make_result(steps=501, wait_ms=2.0, compute_ms=8.0))
    code, out, err = run_cli("check", bad)
    assert code == 1
    assert "FAIL  AU (exact) >= 90 %: AU 80.00 %" in out
    assert "PASS  >= 500 steps per epoch" in out
    # --ram: with 2 GiB per host the 6 GiB dataset is too small
    code, out, _ = run_cli("check", ok1, "--ram", "2g")
    assert code == 1 and "FAIL  dataset >= 5x host RAM" in out


# ---------------------------------------------------------------------------------------------
# errors


def test_errors_name_the_path(tmp_path, run_cli):
    missing = tmp_path / "nope"
    code, out, err = run_cli("report", missing)
    assert code == 2 and str(missing) in one_line(err)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run_cli("report", empty)
    assert code == 2 and str(empty) in one_line(err) and "dlio-fast.json" in err
    code, out, err = run_cli("check", empty)
    assert code == 2 and str(empty) in one_line(err)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dlio-fast.json").write_text("{not json")
    code, out, err = run_cli("report", broken)
    assert code == 2 and "broken" in one_line(err)
    other = tmp_path / "x.json"
    other.write_text('{"schema": "something/1"}')
    code, out, err = run_cli("report", other)
    assert code == 2 and str(other) in one_line(err)
    with pytest.raises(DlioError, match="nope"):
        source.load(missing)


# ---------------------------------------------------------------------------------------------
# a real run


def test_report_of_a_real_run(tmp_path, dlio_cmd, run_cli):
    env = {"PYTHONPATH": REPO}
    out = tmp_path / "run"
    code, so, se = dlio_cmd(
        "-q",
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'data'}",
            "dataset.num_files_train=32",
            "train.epochs=2",
            "train.computation_time=0.001",
            "workflow.evaluation=false",
        ),
        "-o",
        out,
        env=env,
        timeout=120,
    )
    assert code == 0, se
    doc = json.load(open(out / "dlio-fast.json"))
    code, stdout, err = run_cli("report", out, "--json", "-", "--html", tmp_path / "r.html")
    assert code == 0, err
    assert (tmp_path / "r.html").read_text().count("data:image/png;base64,") == 3
    assert not os.path.exists(out / "timeline.png")  # plots for --html alone go to a temp folder
    f = json.loads(stdout)["runs"]["runs"][0]["figures"]
    m = doc["metrics"]
    assert f["workload"] == "default" and f["epochs"] == 2 and f["ranks"] == 1
    assert f["au_exact_pct"] == pytest.approx(m["au_mean_percentage"])
    assert f["samples_per_s"] == pytest.approx(m["samples_per_second_mean"])
    assert f["read_MiB_s"] == pytest.approx(m["MiB_per_second_mean"])
    assert f["read_lat_p99_us"] == pytest.approx(m["read_latency_ns"]["p99"] / 1e3)
    assert 0 < f["au_exact_pct"] <= 100 and f["samples_per_s"] > 0
    # run --plots: the lead calls make_all with the Result itself (no metrics section)
    res = {k: v for k, v in doc.items() if k != "metrics"}
    paths = plots.make_all(res, str(tmp_path / "p"))
    assert [os.path.basename(p) for p in paths] == ["timeline.png", "latency_cdf.png", "throughput.png"]
    for p in paths:
        png_ok(p)
    code, so, _ = run_cli("check", out)
    assert code == 1 and "FAIL  >= 500 steps per epoch: 8 steps per epoch" in so


def test_csv_cells_a_spreadsheet_would_run_are_text(tmp_path, run_cli):
    """A run folder (a label in the CSV) or workload named like a formula is written as text: a
    colleague opening the report's CSV in a spreadsheet runs nothing."""
    bad = '=HYPERLINK("x","y")'
    a = write_run(tmp_path / bad, make_result())
    b = write_run(tmp_path / "@SUM(1)", make_result(compute_ms=4.0))
    out = tmp_path / "r.csv"
    code, _, err = run_cli("report", a, b, "--csv", out)
    assert code == 0, err
    cells = [c for row in csv.reader(out.open()) for c in row]
    assert "'" + bad in cells and "'@SUM(1)" in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "@") or (c[:1] == "-" and not _number(c))]


def _number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["ranks"][0]["epochs"][0].update(bytes="many"), "ranks[0].epochs[0].bytes"),
        (lambda d: d.update(comm_size=1.5), "comm_size"),
        (lambda d: d["ranks"][0].update(epochs={"x": 1}), "ranks[0].epochs"),
        (lambda d: d.pop("ranks"), "ranks"),
    ],
)
def test_a_result_file_with_a_wrong_field_names_the_file_and_the_field(two_runs, run_cli, edit, field):
    """Result files are input: checked against the Result types on load (report and check alike)."""
    path = os.path.join(two_runs[0], "dlio-fast.json")
    doc = json.load(open(path))
    edit(doc)
    json.dump(doc, open(path, "w"))
    for cmd in ("report", "check"):
        code, _, err = run_cli(cmd, two_runs[0])
        assert code == 2 and "dlio-fast.json: field " + field in one_line(err), (cmd, err)


@pytest.mark.parametrize("text", ['{"schema": "dlio-fast.run/1", "x": NaN}', "[" * 100000 + "]" * 100000])
def test_nan_or_deep_json_is_one_line(tmp_path, run_cli, text):
    (tmp_path / "r.json").write_text(text)
    code, _, err = run_cli("report", tmp_path / "r.json")
    line = one_line(err)
    assert code == 2 and "r.json: not a valid dlio-fast JSON document" in line, err
    assert "NaN is not a number JSON allows" in line or "nested too deeply" in line, line
