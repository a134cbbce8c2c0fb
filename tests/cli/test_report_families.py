"""`dlio-fast report` of the workload families' runs (model load, KV cache, vector search): real tiny runs
in, each family's table out in every format, figures checked against what the test computes itself
from the runs' records, ratios between two runs, the verdicts beside their counters, and what is
refused (check of a model load, a document this version cannot read)."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, one_line
from test_kvcache import CONFIG as KV_CONFIG
from test_model_load import TINY as TINY_MODEL

GiB = float(1 << 30)

VDB = ("vdb.vectors=4000", "vdb.processes=2", "vdb.batch=3", "vdb.runs=2", "vdb.queries=40", "vdb.search_list=48")


def _dlio(*args):
    out = subprocess.run(
        [sys.executable, "-m", "dlio", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]


def _sets(pairs):
    return [x for s in pairs for x in ("--set", s)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two model loads (mmap, read), a KV-cache run and a vector-search run: {name: folder}."""
    d = tmp_path_factory.mktemp("families")
    model = _sets(TINY_MODEL + (f"checkpoint.checkpoint_folder={d / 'model'}",))
    _dlio("run", "-w", "load_llama3_8b", "--output", d / "ml_mmap", *model)
    _dlio("run", "-w", "load_llama3_8b", "--output", d / "ml_read", *model, "--set", "model_load.read_mode=read")
    (d / "kv.yaml").write_text(KV_CONFIG)
    _dlio("run", "--config", d / "kv.yaml", "--set", f"kvcache.cache_dir={d / 'cache'}", "-o", d / "kv")
    engine = "io_uring" if "io_uring" in _engines() else "posix"
    vdb = _sets(VDB + (f"vdb.index_folder={d / 'idx'}", f"dlio_fast.engine={engine}"))
    _dlio("run", "-w", "vdb_diskann_1m", *vdb, "-o", d / "vdb")
    return {n: d / n for n in ("ml_mmap", "ml_read", "kv", "vdb")}


def _engines():
    from dlio import _core

    return _core.engines()


def doc_of(folder):
    with open(os.path.join(folder, "dlio-fast.json")) as f:
        return json.load(f)


def report_json(run_cli, *folders):
    code, out, err = run_cli("report", *folders, "--json", "-")
    assert code == 0, err
    return json.loads(out)


def section(rep, title):
    return next(s for s in rep["families"] if s["title"] == title)


def test_model_load_figures_are_the_records_own(run_cli, runs):
    """Time to ready and GiB/s recomputed from the ranks' records: per load the slowest rank's time and
    every rank's bytes over it; the report's figures are their means over the timed loads."""
    rep = report_json(run_cli, runs["ml_mmap"])
    f = section(rep, "model load")["runs"][0]["figures"]
    doc = doc_of(runs["ml_mmap"])
    loads = {}
    for r in doc["ranks"]:
        if r["kind"] == "timed":
            loads.setdefault(r["pass"], []).append(r)
    slowest = [max(x["time_to_ready_s"] for x in rs) for rs in loads.values()]
    gibs = [sum(x["bytes"] for x in rs) / GiB / t for rs, t in zip(loads.values(), slowest)]
    assert f["loads"] == len(loads) == 2
    assert f["ready_mean_s"] == pytest.approx(sum(slowest) / len(slowest), rel=1e-9)
    assert f["ready_max_s"] == pytest.approx(max(slowest), rel=1e-9)
    assert f["GiB_s_mean"] == pytest.approx(sum(gibs) / len(gibs), rel=1e-9)
    shard_bytes = sum(os.path.getsize(os.path.join(doc["model"]["root"], s["name"])) for s in doc["model"]["shards"])
    assert f["model_GiB"] == pytest.approx(doc["model"]["bytes"] / 2**30) and shard_bytes >= doc["model"]["bytes"]
    assert f["faults_per_load"] > 0  # mmap faults its pages in
    # whichever the counters said (a shared device or a busy host: inconclusive), the figure is a verdict
    assert f["verdict"].startswith(("storage-bound", "client-bound", "partly cached", "cache", "inconclusive"))


def test_two_model_loads_side_by_side(run_cli, runs):
    """Ratios to the first run, the differing setting marked, in the text table too."""
    rep = report_json(run_cli, runs["ml_mmap"], runs["ml_read"])
    sec = section(rep, "model load")
    a, b = sec["runs"]
    assert sec["differ"] == ["read_mode"]
    assert b["ratios"]["GiB_s_mean"] == pytest.approx(b["figures"]["GiB_s_mean"] / a["figures"]["GiB_s_mean"])
    assert b["figures"]["faults_per_load"] < a["figures"]["faults_per_load"]  # read() faults no file page
    code, out, _ = run_cli("report", runs["ml_mmap"], runs["ml_read"])
    assert code == 0
    assert "model load runs: ml_mmap, ml_read (ratios to ml_mmap)" in out
    assert any(line.startswith("* read mode") for line in out.splitlines())
    assert "time to ready (slowest rank), mean" in out


def test_verdicts_carry_their_counters(run_cli, runs):
    """Every load's verdict row holds the bytes its ranks read and the device moved (their counters)."""
    rep = report_json(run_cli, runs["ml_mmap"], runs["kv"], runs["vdb"])
    doc = doc_of(runs["ml_mmap"])
    rows = {(v["source"], v["phase"]): v for v in rep["verdicts"]}
    for r in doc["ranks"]:
        v = rows[("ml_mmap", f"load {r['pass']}")]
        assert v["app_bytes"] == r["counters"]["app_bytes"] == r["bytes"]
        assert v["verdict"] == next(x["verdict"] for x in doc["verdicts"] if x["phase"] == f"load {r['pass']}")
    kv = doc_of(runs["kv"])
    reads = rows[("kv", "trial 0 reads")]
    assert reads["app_bytes"] == sum(r["exact"]["storage_read_bytes"] for r in kv["records"])
    vdb = doc_of(runs["vdb"])
    for r in vdb["runs"]:
        assert rows[("vdb", f"run {r['run']}")]["verdict"] == r["verdict"]["verdict"]


def test_kvcache_and_vdb_figures(run_cli, runs):
    """The KV cache's figures are its aggregate's; vector search's QPS and latency vdbbench's over all its
    runs' batches (the queries over the runs' time; the batches' time over the queries)."""
    rep = report_json(run_cli, runs["kv"], runs["vdb"])
    kv, doc = section(rep, "KV cache")["runs"][0]["figures"], doc_of(runs["kv"])
    x, a = doc["aggregate"]["exact"], doc["aggregate"]["reference"]
    assert kv["storage_read_gibps"] == x["storage_read_gibps"] > 0
    assert kv["aggregated_read_bandwidth_gbps"] == a["aggregated_read_bandwidth_gbps"]
    assert kv["requests"] == sum(r["exact"]["requests"] for r in doc["records"])
    vdb, vd = section(rep, "vector search")["runs"][0]["figures"], doc_of(runs["vdb"])
    queries = sum(r["queries"] for r in vd["runs"])
    assert vdb["throughput_qps"] == pytest.approx(queries / sum(r["seconds"] for r in vd["runs"]), rel=1e-9)
    batch_ns = sum(r["batch_time_hist"]["sum"] for r in vd["runs"])
    assert vdb["mean_latency_ms"] == pytest.approx(batch_ns / queries / 1e6, rel=1e-9)
    assert vdb["runs"] == len(vd["runs"]) == 2
    # read rate in MiB/s, as every other family's: each run's bytes (reads x mean size) over its time, averaged
    rates = [r["iops"] * r["read_bytes_mean"] / 2**20 for r in vd["runs"]]
    assert vdb["read_MiB_s"] == pytest.approx(sum(rates) / len(rates), rel=1e-6)
    # every setting that changes the figures is shown, as the run resolved it (not the config's 0)
    st = section(rep, "vector search")["runs"][0]["settings"]
    assert st["search_list"] == "48" and st["beam_width"] == str(vd["plan"]["beam_width"])  # as shown
    assert st["search_threads"] == str(vd["plan"]["search_threads"]) != "0" and st["cache_ratio"] not in ("", "-")


def test_every_format_carries_the_figures_and_the_verdict(run_cli, runs, tmp_path):
    """CSV (parsed), Markdown and HTML: each family's table, its verdict row, and the verdicts."""
    folders = (runs["ml_mmap"], runs["kv"], runs["vdb"])
    code, out, err = run_cli("report", *folders, "--csv", "-")
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    titles = [r[0] for r in rows if r and r[0].startswith("# ")]
    assert titles == ["# Model load runs", "# KV cache runs", "# Vector search runs"]
    verdict_rows = [r for r in rows if r and r[0] == "verdict"]
    assert len(verdict_rows) == 3 and all(r[2] != "-" for r in verdict_rows)
    assert any(r[:2] == ["ml_mmap", "load 1"] for r in rows)
    code, out, _ = run_cli("report", *folders, "--markdown", "-")
    assert code == 0 and "### Model load runs" in out and "### KV cache runs" in out and "### Verdicts" in out
    page = tmp_path / "r.html"
    code, _, err = run_cli("report", *folders, "--html", page)
    assert code == 0, err
    text = page.read_text()
    assert "<h2>Model load runs</h2>" in text and "<h2>Vector search runs</h2>" in text
    assert "verdict (is this a storage result?)" in text


def test_what_is_refused(run_cli, runs, tmp_path):
    """check of a model load: one line saying what to use; a family document this version cannot read:
    one line naming the file."""
    code, out, err = run_cli("check", runs["ml_mmap"])
    assert code == 2 and "a model load run" in one_line(err) and "dlio-fast report" in err
    bad = tmp_path / "bad"
    bad.mkdir()
    doc = doc_of(runs["ml_mmap"])
    del doc["model"]
    (bad / "dlio-fast.json").write_text(json.dumps(doc))
    code, out, err = run_cli("report", bad)
    assert code == 2 and "dlio-fast.json" in one_line(err) and "model load" in err and "Traceback" not in err
