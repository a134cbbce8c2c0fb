"""A run that was stopped says so in every output of `dlio-fast report`, as a user meets it: a KV-cache run, a
vector-search run, a training run and an io grid are started for real, stopped with SIGINT (Ctrl-C) mid-run,
and their reports (console, --markdown, --html with its plots' captions, --csv, --json, a --compare beside a
complete run) are read for the words "incomplete" and the reason the run recorded (its own dlio-fast.json or
io --json file)."""

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import set_args, wait_for_text

KV = """\
workflow: {train: false, kvcache: true}
kvcache:
  model: tiny-1b
  users: 2
  duration: 60
  trials: 1
  templates: {chat: {context: [200, 400], generation: [20, 40], think: [0.05, 0.15]}}
"""


def _popen(args, out_file):
    out = open(out_file, "w")
    return subprocess.Popen(
        [sys.executable, "-m", "dlio", *args], stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _interrupt(p, after_s):
    """SIGINT (Ctrl-C) after_s seconds from now; waits for the process to end with 130."""
    time.sleep(after_s)
    assert p.poll() is None, "the run ended before it was stopped"
    os.kill(p.pid, signal.SIGINT)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        pytest.fail("the run did not stop within 60 s of SIGINT")
    assert p.returncode == 130


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{name: path} of a stopped KV-cache run, a stopped vector-search run, a stopped and a complete training
    run, a stopped io grid."""
    t = tmp_path_factory.mktemp("stopped")
    (t / "kv.yaml").write_text(KV)
    kv = _popen(
        ["run", "--config", str(t / "kv.yaml"), *set_args(f"kvcache.cache_dir={t}/cache"), "-o", str(t / "kv")],
        t / "kv.out",
    )
    data = t / "data"
    train = _popen(
        [
            "run",
            "--workload",
            "default",
            *set_args(f"dataset.data_folder={data}", "train.epochs=1000", "train.computation_time=0.02"),
            "-o",
            str(t / "train_stopped"),
        ],
        t / "train.out",
    )
    wait_for_text(t / "kv.out", "Running dlio-fast", kv, timeout=120)
    _interrupt(kv, 3)
    vdb = _popen(
        [
            "run",
            "-w",
            "vdb_diskann_1m",
            *set_args("vdb.vectors=4000", "vdb.runs=1", "vdb.duration=60", f"vdb.index_folder={t}/idx"),
            "-o",
            str(t / "vdb"),
        ],
        t / "vdb.out",
    )
    wait_for_text(t / "vdb.out", "build:", vdb, timeout=120)  # built: searching for 60 s
    _interrupt(vdb, 2)
    deadline = time.monotonic() + 120
    while not (data / ".dlio-fast").exists() and time.monotonic() < deadline:  # the dataset is made: training
        time.sleep(0.1)
    _interrupt(train, 3)
    done = _popen(
        [
            "run",
            "--workload",
            "default",
            *set_args(f"dataset.data_folder={data}", "train.epochs=1", "train.computation_time=0.001"),
            "-o",
            str(t / "train_done"),
        ],
        t / "done.out",
    )
    (t / "iodir").mkdir()
    grid = _popen(
        ["io", str(t / "iodir"), "--file-size", "8m", "--runtime", "30s", "--json", str(t / "grid.json")], t / "io.out"
    )
    wait_for_text(t / "io.out", "MiB/s", grid, timeout=120)  # the header: the first point is running
    _interrupt(grid, 2)
    assert done.wait(120) == 0, (t / "done.out").read_text()[-2000:]
    return {
        "kv": t / "kv",
        "vdb": t / "vdb",
        "train_stopped": t / "train_stopped",
        "train_done": t / "train_done",
        "io": t / "grid.json",
        "tmp": t,
    }


def _reason(path):
    """The reason the run itself recorded for stopping (its dlio-fast.json, or the io --json file)."""
    doc = json.loads((path / "dlio-fast.json" if path.is_dir() else path).read_text())
    assert doc["complete"] is False
    return doc["reason"]


def report(*args):
    r = subprocess.run([sys.executable, "-m", "dlio", "report", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _formats(path):
    """{format: text} of one source's report: the console table and each file format on stdout."""
    return {
        "console": report(path),
        "markdown": report(path, "--markdown", "-"),
        "csv": report(path, "--csv", "-"),
        "json": report(path, "--json", "-"),
    }


def _check_every_format(path, label):
    why = _reason(path)
    assert "SIGINT" in why  # what the run recorded: the stop
    out = _formats(path)
    assert f"note: {label} is incomplete ({why})" in out["console"]
    assert f"**note: {label} is incomplete ({why})" in out["markdown"]
    rows = list(csv.reader(io.StringIO(out["csv"])))
    flat = [r for r in rows if r]
    assert any(r[:1] == ["incomplete_reason"] and why in r for r in flat) or [label, "false", why] in flat, out["csv"]
    rep = json.loads(out["json"])
    entries = [r for sec in [rep.get("runs"), *rep.get("families", [])] if sec for r in sec["runs"]]
    entries += rep["io"]["sources"] if "io" in rep else []
    assert [(e["complete"], e["reason"]) for e in entries] == [(False, why)]
    return why, out


def test_a_stopped_kv_cache_run_is_marked_with_its_reason_in_every_format(runs):
    summary = json.loads((runs["kv"] / "summary.json").read_text())  # what the user saw: partial, with the reason
    assert summary["partial_failure"] is True and summary["complete"] is False
    why, out = _check_every_format(runs["kv"], "kv")
    assert why == summary["reason"]
    # beside the figures: the table's first row says which run did not finish, and why
    assert re.search(rf"^run complete\s+no: {re.escape(why)}$", out["console"], re.M), out["console"]
    assert f"| run complete |  | no: {why} |" in out["markdown"]
    html = report(runs["kv"], "--html", "-")
    assert f"<li>kv (incomplete: {why})</li>" in html
    assert f'<td class="incomplete">no: {why}</td>' in html


def test_a_stopped_training_run_is_marked_in_every_format_and_its_plots(runs):
    why, out = _check_every_format(runs["train_stopped"], "train_stopped")
    assert re.search(rf"^run complete\s+no: {re.escape(why)}$", out["console"], re.M), out["console"]
    html = report(runs["train_stopped"], "--html", "-")
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html)
    assert captions and all(c.endswith(f"(incomplete: {why})") for c in captions), captions


def test_a_comparison_marks_the_stopped_run_and_not_the_complete_one(runs):
    why = _reason(runs["train_stopped"])
    md = report(runs["train_done"], runs["train_stopped"], "--markdown", "-")
    assert f"| run complete |  | yes | no: {why} |  |" in md
    assert "note: train_done is incomplete" not in md
    html = report(runs["train_done"], runs["train_stopped"], "--html", "-")
    assert "<li>train_done</li>" in html and f"<li>train_stopped (incomplete: {why})</li>" in html
    comparison = [c for c in re.findall(r"<figcaption>(.*?)</figcaption>", html) if c.startswith("Comparison")]
    assert comparison and all(c.endswith(f"(train_stopped incomplete: {why})") for c in comparison), comparison
    rows = [r for r in csv.reader(io.StringIO(report(runs["train_done"], runs["train_stopped"], "--csv", "-"))) if r]
    assert ["complete", "", "true", "false"] in rows and ["incomplete_reason", "", "", why] in rows


def test_a_stopped_vector_search_run_is_marked_in_every_format(runs):
    # its dlio-fast.json records the reason now (it said only "complete": false)
    why, out = _check_every_format(runs["vdb"], "vdb")
    assert f"| run complete |  | no: {why} |" in out["markdown"]


def test_a_stopped_io_grid_is_marked_in_every_format(runs):
    _check_every_format(runs["io"], "grid")


def test_a_complete_run_has_no_mark(runs):
    out = report(runs["train_done"], "--markdown", "-")
    assert "incomplete" not in out and "run complete" not in out
