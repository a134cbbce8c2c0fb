"""A figure travels with its verdict (issue 30): every output that carries a figure carries the verdict
of its phase or point, and a page-cache result is marked in each. Each output is parsed as what it is
(HTML with html.parser, CSV with csv, JSON with json) and the plots are drawn and read back through
matplotlib's objects."""

import csv
import html.parser
import io
import json
import os

import pytest
from test_report_cmd import make_result, write_run

from dlio.report import plots, verdict
from dlio.report.plotting import CACHE_LABEL

STORAGE = {"device": "vda", "kind": "block"}


def counters(dev_ratio):
    return {
        "wall_s": 1.0,
        "app_bytes": 10 << 20,
        "device_bytes": int(dev_ratio * (10 << 20)),
        "network_bytes": None,
        "target": STORAGE,
        "cpu_user_s": 0.1,
        "cpu_sys_s": 0.1,
        "reader_cpu_s": 0.1,
        "reader_threads": 1,
        "cores": 2,
        "host_cpus": 2,
        "host_busy_share": 0.2,
        "resident_before": 1.0 if dev_ratio < 0.5 else 0.0,
        "direction": "read",
    }


def run_with_a_cache_epoch():
    """Epoch 1 read from the device, epoch 2 from the page cache: their counters and verdicts as a run
    records them (dlio.report.verdict.annotate_run)."""
    r = make_result(workload="unet3d")
    for ep, ratio in zip(r["ranks"][0]["epochs"], (1.0, 0.01)):
        ep["counters"] = counters(ratio)
    r["verdicts"] = verdict.annotate_run(r["ranks"])
    assert [v["verdict"] for v in r["verdicts"]] == ["storage-bound", "cache"]
    return r


@pytest.fixture(scope="module")
def io_json(tmp_path_factory):
    """A real io grid whose points read a just-written file with --cache keep: page-cache results."""
    from dlio.cli.main import main

    d = tmp_path_factory.mktemp("io")
    (d / "t").mkdir()
    try:
        main(
            [
                "-q",
                "io",
                str(d / "t"),
                "--bs",
                "64k,1m",
                "--file-size",
                "8m",
                "--cache",
                "keep",
                "--runtime",
                "0.3s",
                "--json",
                str(d / "io.json"),
                "--csv",
                str(d / "io.csv"),
            ]
        )
    except SystemExit as e:
        assert not e.code
    return d


def test_io_json_and_csv_carry_each_points_verdict(io_json):
    with open(io_json / "io.json") as f:
        doc = json.load(f)
    assert [p["verdict"]["verdict"] for p in doc["points"]] == ["cache", "cache"]
    with open(io_json / "io.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["verdict"] for r in rows] == ["cache", "cache"]
    assert all("page cache" in r["verdict_reason"] for r in rows)


def test_ceiling_json_carries_each_probes_verdict(run_cli, tmp_path):
    code, so, se = run_cli(
        "ceiling", tmp_path, "--file-size", "4m", "--runtime", "0.05s", "--max-threads", "1", "--max-qd", "2",
        "--json", tmp_path / "c.json",
    )  # fmt: skip
    assert code == 0, se
    with open(tmp_path / "c.json") as f:
        doc = json.load(f)
    assert doc["probes"] and all(p["verdict"]["verdict"] in verdict.VERDICTS for p in doc["probes"])
    assert all(f"verdict {b['verdict']['verdict']}" in so for b in doc["best"].values())


class Cells(html.parser.HTMLParser):
    """(class, text) of every table cell, and the page's headings and paragraphs."""

    def __init__(self):
        super().__init__()
        self.cells, self.headings, self.paras, self._open, self._text = [], [], [], None, []

    def handle_starttag(self, tag, attrs):
        if tag in ("td", "h2", "p"):
            self._open, self._text = (tag, dict(attrs).get("class") or ""), []

    def handle_data(self, data):
        if self._open:
            self._text.append(data)

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            text = "".join(self._text)
            {"td": self.cells, "h2": self.headings, "p": self.paras}[tag].append((self._open[1], text))
            self._open = None


def test_every_report_format_carries_the_verdicts(run_cli, tmp_path, io_json):
    run = write_run(tmp_path / "runA", run_with_a_cache_epoch())
    io_doc = io_json / "io.json"
    out = {k: tmp_path / f"rep.{k}" for k in ("html", "md", "csv", "json")}
    code, so, se = run_cli(
        "report", run, io_doc, "--html", out["html"], "--markdown", out["md"], "--csv", out["csv"],
        "--json", out["json"], "--plots-dir", tmp_path / "plots",
    )  # fmt: skip
    assert code == 0, se

    rep = json.loads(out["json"].read_text())
    assert rep["runs"]["runs"][0]["figures"]["verdict"] == "storage-bound (epoch 1); cache (epoch 2)"
    assert [v["values"][0]["verdict"] for v in rep["io"]["points"]] == ["cache", "cache"]
    got = {(v["source"], v["phase"]): v["verdict"] for v in rep["verdicts"]}
    assert got[("runA", "epoch 1")] == "storage-bound" and got[("runA", "epoch 2")] == "cache"
    assert got[("io", "read 64KiB posix qd1 t1")] == got[("io", "read 1MiB posix qd1 t1")] == "cache"

    rows = list(csv.reader(io.StringIO(out["csv"].read_text())))
    assert ["verdict", ""] + ["storage-bound (epoch 1); cache (epoch 2)"] in [r[:3] for r in rows]
    head = next(r for r in rows if r and r[0] == "target")
    assert "verdict[io]" in head
    vhead = next(i for i, r in enumerate(rows) if r[:3] == ["source", "phase", "verdict"])
    vrows = [dict(zip(rows[vhead], r)) for r in rows[vhead + 1 :] if r]
    assert {(r["source"], r["phase"], r["verdict"]) for r in vrows} >= {("runA", "epoch 2", "cache")}

    md = out["md"].read_text()
    assert "### Verdicts (is this a storage result?)" in md
    assert "| **storage-bound (epoch 1); cache (epoch 2)** |" in md  # the run's verdict row, marked
    assert "| runA | epoch 2 | **cache** |" in md and "| io | read 1MiB posix qd1 t1 | **cache** |" in md

    page = Cells()
    page.feed(out["html"].read_text())
    assert ("", "Verdicts (is this a storage result?)") in page.headings
    marked = [t for cls, t in page.cells if cls == "cache"]
    assert "storage-bound (epoch 1); cache (epoch 2)" in marked and marked.count("cache") >= 3
    assert any(cls == "cache-note" and "3 of 4 phases read from the page cache" in t for cls, t in page.paras)
    assert ("verdict-storage", "storage-bound") in page.cells


def figures_of(make):
    """Draw with make(), keeping the figures open: (their texts, whether any artist is hatched)."""
    from dlio.report import plotting

    kept = []
    close = plotting.plt.close
    plotting.plt.close = lambda fig=None: kept.append(fig)
    try:
        paths = make()
    finally:
        plotting.plt.close = close
    texts, hatched = [], False
    for fig in kept:
        texts += [t.get_text() for t in fig.texts]
        for ax in fig.axes:
            texts.append(ax.get_title(loc="left") + ax.get_title())
            leg = ax.get_legend()
            texts += [t.get_text() for t in leg.get_texts()] if leg else []
            hatched |= any(a.get_hatch() for a in ax.patches + ax.collections if hasattr(a, "get_hatch"))
        for leg in fig.legends:
            texts += [t.get_text() for t in leg.get_texts()]
        close(fig)
    return paths, "\n".join(texts), hatched


def test_run_and_io_plots_mark_a_page_cache_result(tmp_path, io_json):
    paths, texts, hatched = figures_of(lambda: plots.make_all(run_with_a_cache_epoch(), str(tmp_path / "run")))
    assert {os.path.basename(p) for p in paths} >= {"timeline.png", "throughput.png", "latency_cdf.png"}
    assert all(os.path.getsize(p) > 0 for p in paths)
    assert "[1 of 2 epochs: page cache, not storage]" in texts and CACHE_LABEL in texts and hatched
    assert "epoch 2: I/O wait" in texts and f"[{CACHE_LABEL}]" in texts
    with open(io_json / "io.json") as f:
        doc = json.load(f)
    paths, texts, hatched = figures_of(lambda: plots.make_all(doc, str(tmp_path / "io"), prefix="io_"))
    assert paths and all(os.path.getsize(p) > 0 for p in paths)
    assert "[2 of 2 points: page cache, not storage]" in texts and CACHE_LABEL in texts and hatched
