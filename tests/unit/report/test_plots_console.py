"""Plot details: checkpoint series from a Result in memory, readable latency ticks, the tail view,
room above the lines; HTML captions and order."""

import struct

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dlio import _core
from dlio.report import checkpoint as ckpt_figures  # noqa: E402
from dlio.report import html, plots, plotting  # noqa: E402
from dlio.system import stats  # noqa: E402

GiB = 1 << 30


def _rec(kind, rank, epoch, start_s, dur_s):
    return {
        "kind": kind,
        "rank": rank,
        "epoch": epoch,
        "step": 10,
        "bytes": GiB,
        "duration_s": dur_s,
        "folder": f"/ck/global_epoch{epoch}_step10",
        "wall_start_ns": int(start_s * 1e9),
        "wall_end_ns": int((start_s + dur_s) * 1e9),
        "GiB_per_second": 1 / dur_s,
    }


def test_checkpoint_series_of_a_result_in_memory(tmp_path):
    """run --plots hands plots the Result: records in the ranks' epochs, no top-level 'checkpoints'."""
    ranks = [
        {
            "rank": r,
            "epochs": [{"epoch": e, "checkpoints": [_rec("save", r, e, 10.0 * e, 0.5 * (r + 1))]} for e in (1, 2, 3)],
            "checkpoints": [_rec("load", r, 9, 100.0, 0.25)],
        }
        for r in (0, 1)
    ]
    result = {"ranks": ranks, "workload": "w", "dataset": {"folder": "/data"}}
    series = ckpt_figures.checkpoint_series(result)
    # each save: 2 GiB in the slower rank's 1 s -> 2 GiB/s; the load: 2 GiB in 0.25 s -> 8 GiB/s
    assert series["save"] == [2.0, 2.0, 2.0] and series["load"] == [8.0]
    png = plots.checkpoint(result, str(tmp_path / "c.png"))
    assert png and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_time_ticks_and_percentile_labels():
    assert [plotting.short_time(x) for x in (0.5, 20, 1500, 2e6)] == ["500ns", "20us", "1.5ms", "2s"]
    assert [plotting._pct_label(x) for x in (1.0, 0.1, 0.01, 0.001)] == ["p0", "p90", "p99", "p99.9"]


def test_latency_panels_have_a_log_tail(tmp_path):
    h = stats.to_json(_core.hist_from_values(np.array([10_000] * 990 + [5_000_000] * 10, dtype=np.uint64)))
    path = plotting.latency_panels([(plotting.hist(h), "read", None, True)], "t", str(tmp_path / "l.png"))
    with open(path, "rb") as f:
        head = f.read(24)
    w, hgt = struct.unpack(">II", head[16:24])
    assert (w, hgt) == (12 * plotting.DPI, 5 * plotting.DPI)  # two panels: CDF and tail


def test_headroom_keeps_markers_inside():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [100.0, 120.0, 110.0], marker="o")
    plotting.headroom(ax)
    lo, hi = ax.get_ylim()
    assert lo == 0 and hi >= 120 * 1.2
    x0, x1 = ax.get_xlim()
    assert x0 < 1 and x1 > 3
    plt.close(fig)


def test_html_captions_and_order(tmp_path):
    paths = []
    for name in ("runA_timeline.png", "compare_latency_cdf.png"):
        p = tmp_path / name
        p.write_bytes(b"\x89PNG\r\n\x1a\n")
        paths.append(str(p))
    imgs = html.images_from(paths)
    assert [c for c, _ in imgs] == [
        "runA: per step: I/O wait (accelerator starved) and compute",
        "Comparison: read latency CDF of the runs",
    ]
    page = html.render({"schema": "x"}, imgs, None, "t")
    assert page.index("Comparison: read latency") < page.index("runA: per step")
    assert str(tmp_path) not in page
