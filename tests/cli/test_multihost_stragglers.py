"""Stragglers named, across two simulated hosts (hA, hB) x 1 rank under Open MPI, each host in its own control group
(tests/multihost.py host_groups): hB with a quarter of a CPU (cpu quota 25 ms per 100 ms) is named as the
straggler, with its figures and its share of the AU loss; two hosts alike are said to agree.

The emulated accelerator spins 5 ms per step on the monotonic clock: a throttled host's spin runs over its set time
whenever the quota runs out before the step's deadline (up to 75 ms of every 100 ms), so hB arrives late at the
per-step barrier and hA waits there for it. Each run: ~24 steps, a few seconds."""

import json
import subprocess

import numpy as np
import pytest
from conftest import REPO, set_args
from multihost import dlio_argv, run_env, run_on_limited_hosts

QUARTER = 0.25


def train_on_hosts(tmp_path, limits, compute_mode):
    out = tmp_path / "out"
    argv = dlio_argv(
        "run",
        "--workload",
        "default",
        *set_args(
            f"dataset.data_folder={tmp_path / 'data'}",
            "dataset.num_files_train=48",
            "reader.batch_size=1",
            "train.epochs=1",
            "train.computation_time=0.005",
            f"dlio_fast.compute_mode={compute_mode}",
            "workflow.evaluation=false",
        ),
        "-o",
        out,
    )
    p = run_on_limited_hosts(argv, limits)
    assert p.returncode == 0, p.stderr[-3000:]
    with open(out / "dlio-fast.json") as f:
        return json.load(f), p.stdout, out


def arrivals(doc, host):
    """Per step, when the host reached the step barrier (its slowest rank's wait + compute), from the ranks' records."""
    ranks = [r for r in doc["ranks"] if r["hostname"] == host]
    proc = [np.concatenate([ep["train"]["proc"] for ep in r["epochs"] if ep.get("train")]) for r in ranks]
    return np.max(proc, axis=0)


def own_time_per_step(doc, host):
    return float(arrivals(doc, host).mean())


def test_a_host_with_a_quarter_of_the_cpu_is_named_the_straggler(tmp_path):
    doc, so, out = train_on_hosts(tmp_path, {"hA": {}, "hB": {"cpus": QUARTER}}, "spin")
    s = doc["metrics"]["stragglers"]
    assert [n["host"] for n in s["named"]] == ["hB"], s
    n = s["named"][0]
    rows = {r["host"]: r for r in s["per_host"]}
    # the evidence: each host's own time per step as its ranks recorded it, hB's CPU as its control group sets it
    a, b = own_time_per_step(doc, "hA"), own_time_per_step(doc, "hB")
    assert rows["hA"]["own_s"] == pytest.approx(a, rel=1e-9) and rows["hB"]["own_s"] == pytest.approx(b, rel=1e-9)
    assert n["slower_percentage"] == pytest.approx(100 * (b / a - 1), rel=1e-9) and n["slower_percentage"] >= 25
    assert rows["hB"]["cpus"] == QUARTER and rows["hA"]["cpus"] >= 1
    assert n["cause"] == "compute"  # its spin ran over: the host's CPU, not its reads
    assert rows["hB"]["compute_s"] > rows["hB"]["compute_set_s"] == pytest.approx(0.005)
    # what it cost: the AU points it explains are part of the run's loss
    au = doc["metrics"]["au_mean_percentage"]
    assert n["au_loss_points"] == pytest.approx(100 - au)
    assert 0 < n["au_points_explained"] <= n["au_loss_points"]
    wait = float((np.maximum(arrivals(doc, "hA"), arrivals(doc, "hB")) - arrivals(doc, "hA")).mean())
    step = np.mean([ep["train"]["duration_s"] / ep["train"]["steps"] for r in doc["ranks"] for ep in r["epochs"]])
    assert n["wait_for_it_s"] == pytest.approx(wait, rel=1e-9)
    assert n["au_without_percentage"] == pytest.approx(min(100.0, au * step / (step - wait)), rel=1e-9)
    assert n["au_points_explained"] == pytest.approx(n["au_without_percentage"] - au, rel=1e-9)
    # the console names it, with the figures
    assert f"straggler: host hB (ranks 1) is {n['slower_percentage']:.0f} % slower than the other hosts" in so, so
    assert f"it explains {n['au_points_explained']:.1f} of the {n['au_loss_points']:.1f} AU points lost" in so
    assert "its ranks could use 0.25 CPUs" in so and "hosts agree" not in so
    # and so does the report of the run folder
    p = subprocess.run(dlio_argv("report", out), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert s["summary"][0] in p.stdout.splitlines() and s["rule"] in p.stdout
    # every format carries the per-host figures and the straggler (its own row of the run's table)
    per_host = {h["host"]: h for h in doc["metrics"]["per_host"]}

    def host_text(h):
        eps = per_host[h]["epochs"]
        au = sum(e["au_percentage"] for e in eps) / len(eps)
        return f"{h}: {au:.2f} %, {sum(e['bytes_per_second'] for e in eps) / len(eps) / 2**20:.1f} MiB/s"

    want = {
        "per_host": f"{host_text('hA')}; {host_text('hB')}",
        "straggler": f"hB, {n['slower_percentage']:.0f} % slower (compute)",
    }
    args = ["--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md", "--csv", tmp_path / "r.csv"]
    args += ["--html", tmp_path / "r.html"]
    p = subprocess.run(
        dlio_argv("report", out, *args), env=run_env(), cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    figures = json.loads((tmp_path / "r.json").read_text())["runs"]["runs"][0]["figures"]
    assert {k: figures[k] for k in want} == want
    for name in ("r.md", "r.csv", "r.html"):
        text = (tmp_path / name).read_text()
        assert all(v in text for v in want.values()), (name, want)
    assert want["per_host"] in p.stdout and want["straggler"] in p.stdout


def test_hosts_alike_agree(tmp_path):
    doc, so, out = train_on_hosts(tmp_path, {"hA": {}, "hB": {}}, "hybrid")
    s = doc["metrics"]["stragglers"]
    assert s["named"] == [], s
    a, b = own_time_per_step(doc, "hA"), own_time_per_step(doc, "hB")
    assert max(a, b) / min(a, b) < 1.25
    assert [line for line in so.splitlines() if line.startswith("hosts agree: no straggler")] == s["summary"], so
    assert "straggler: host" not in so
