"""Table lines and CSV columns of io / ceiling points (dlio.report.result.IoPoint): the console's row of
a point (fsbench, objstore) and its flat CSV row, each with the point's verdict (dlio.report.verdict):
a figure is never printed without it."""

from typing import Any, Dict, Mapping

from dlio.base.units import fmt_figure, fmt_ns, fmt_size
from dlio.report.result import IoPoint
from dlio.report.verdict_lines import short

IO_COLUMNS = [
    "rw",
    "bs",
    "engine",
    "qd",
    "threads",
    "direct",
    "bw_MiB_s",
    "iops",
    "lat_min_ns",
    "lat_mean_ns",
    "lat_p50_ns",
    "lat_p90_ns",
    "lat_p99_ns",
    "lat_p99.9_ns",
    "lat_max_ns",
    "cpu_us_per_io",
    "ops",
    "bytes",
    "runtime_s",
    "cache",
    "verdict",
    "verdict_part",
    "verdict_reason",
]
# a mixed point's (randrw, readwrite) read and write sections, after IO_COLUMNS in a grid that has one
MIXED_COLUMNS = [
    "rwmixread",
    *(f"{d}_{k}" for d in ("read", "write") for k in ("bw_MiB_s", "iops", "ops", "bytes", "lat_mean_ns", "lat_p99_ns")),
]


def flat_point(r: Mapping[str, Any]) -> Dict[str, Any]:
    """A point (an IoPoint, or some of its fields) as one CSV row: its plain fields, and its latency
    summary as lat_<stat>_ns columns."""
    row = {k: v for k, v in r.items() if not isinstance(v, dict)}
    for k, v in r["lat_ns"].items():
        if k != "count" and k != "stdev":
            row[f"lat_{k}_ns"] = v
    v = r.get("verdict")
    if isinstance(v, dict):
        row.update(verdict=v.get("verdict"), verdict_part=v.get("part"), verdict_reason=v.get("reason"))
    for d in ("read", "write"):
        sec = r.get(d)
        if isinstance(sec, dict):  # a mixed point's direction
            row.update({f"{d}_{k}": sec[k] for k in ("bw_MiB_s", "iops", "ops", "bytes")})
            row[f"{d}_lat_mean_ns"], row[f"{d}_lat_p99_ns"] = sec["lat_ns"]["mean"], sec["lat_ns"]["p99"]
    return row


def mode(r: IoPoint) -> str:
    """direct (O_DIRECT), buffer (buffered, pages dropped before the point) or cached (page cache kept:
    the figure may be the page cache's, not the storage's)."""
    if r["direct"]:
        return "direct"
    return "cached" if str(r.get("cache", "")).startswith("kept") else "buffer"


def point_line(r: IoPoint) -> str:
    """A point's row under POINT_HEADER; a mixed point's read and write rows under it."""
    lat = r["lat_ns"]
    cpu = f"{r['cpu_us_per_io']:.2f}" if r["cpu_us_per_io"] is not None else "-"
    line = (
        f"{r['rw']:<9} {fmt_size(r['bs']):>7} {r['engine']:<8} {r.get('qd_used') or r['qd']:>4} {r['threads']:>3} "
        f"{mode(r):<6} {fmt_figure(r['bw_MiB_s']):>10} {r['iops']:>11,.0f} "
        f"{fmt_ns(lat['min']):>8} {fmt_ns(lat['mean']):>8} {fmt_ns(lat['p50']):>8} "
        f"{fmt_ns(lat['p99']):>8} {fmt_ns(lat['p99.9']):>8} {fmt_ns(lat['max']):>8} {cpu:>8}"
    )
    for d in ("read", "write"):
        sec = r.get(d)
        if isinstance(sec, dict):
            share = r["rwmixread"] if d == "read" else 100 - r["rwmixread"]
            sl = sec["lat_ns"]
            line += (
                f"\n{'  ' + d:<9} {str(share) + ' %':>7} {'':<8} {'':>4} {'':>3} {'':<6} {sec['bw_MiB_s']:>10.1f} "
                f"{sec['iops']:>11.0f} {fmt_ns(sl['min']):>8} {fmt_ns(sl['mean']):>8} {fmt_ns(sl['p50']):>8} "
                f"{fmt_ns(sl['p99']):>8} {fmt_ns(sl['p99.9']):>8} {fmt_ns(sl['max']):>8}"
            )
    return line


POINT_HEADER = (
    f"{'rw':<9} {'bs':>7} {'engine':<8} {'qd':>4} {'thr':>3} {'mode':<6} {'MiB/s':>10} "
    f"{'IOPS':>11} {'min':>8} {'mean':>8} {'p50':>8} {'p99':>8} {'p99.9':>8} {'max':>8} "
    f"{'cpu_us/io':>8}"
)
# The local io grid's and ceiling's table: each row ends with its point's verdict in a word
# (dlio.report.verdict_lines.short; the verdict lines under the table say why).
VERDICT_HEADER = POINT_HEADER + "  verdict"


def verdict_line(r: IoPoint) -> str:
    """A point's row under VERDICT_HEADER: its figures, then its verdict."""
    return f"{point_line(r)}  {short(r.get('verdict'))}"
