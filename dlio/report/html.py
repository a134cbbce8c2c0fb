"""A self-contained HTML5 page: the report's tables, the checks, and the plots embedded as
base64 PNG data URIs (no external file, script or style sheet)."""

from __future__ import annotations

import base64
import html
import os
import time
from typing import Any, Collection, Iterable, List, Optional, Sequence, Tuple

from dlio.report import incomplete, tables
from dlio.report.document import Report

STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f3f7; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.pass { color: #1a7f37; font-weight: bold; } td.fail { color: #c62828; font-weight: bold; }
td.note { color: #8a6d00; font-weight: bold; } tr.differ td { background: #fff4d6; font-weight: bold; }
td.cache { background: #fde2e1; color: #a31515; font-weight: bold; }
td.verdict-storage { color: #1a7f37; } td.verdict-other { color: #8a6d00; }
p.cache-note, p.incomplete { color: #a31515; font-weight: bold; }
td.incomplete { background: #fde2e1; color: #a31515; font-weight: bold; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
p.meta { color: #555; font-size: 0.9em; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _verdict_class(c: Any) -> Optional[str]:
    """A cell holding a verdict gets its colour; a page-cache result stands out (its figures are the
    page cache's, not the storage's)."""
    text = str(c)
    if tables.is_cache(text):
        return "cache"
    if text.startswith("storage-bound"):
        return "verdict-storage"
    if text.startswith(("client-bound", "inconclusive")):
        return "verdict-other"
    return None


def _table(
    header: Sequence[Any], rows: Iterable[Sequence[Any]], left: int, verdict_cols: Collection[int] = ()
) -> List[str]:
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>", "<tbody>"]
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = [] if i < left else ["num"]
            vc = _verdict_class(c) if i in verdict_cols or (r and str(r[0]).startswith("verdict")) else None
            if vc:
                cls = [vc]
            if r and r[0] == tables.COMPLETE_ROW and str(c).startswith("no"):  # a run that did not finish
                cls = ["incomplete"]
            attr = f' class="{" ".join(cls)}"' if cls else ""
            cells.append(f"<td{attr}>{_e(c)}</td>")
        differ = str(r[0]).startswith("* ")  # a setting that is not the same in every run
        out.append(('<tr class="differ">' if differ else "<tr>") + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return out


def _verdicts(rep: Report) -> List[str]:
    """The verdict of every epoch and point with its counters and reason (dlio.report.verdict)."""
    h, rows = tables.verdict_rows(rep)
    if not rows:
        return []
    out = ["<h2>Verdicts (is this a storage result?)</h2>"]
    cached = sum(str(v.get("verdict")) == "cache" for v in rep["verdicts"])
    if cached:
        out.append(
            f'<p class="cache-note">{cached} of {len(rows)} phases read from the page cache (or memory): '
            "their figures are the page cache's, not the storage's.</p>"
        )
    reasons = [v.get("reason") or "" for v in rep["verdicts"]]
    out += _table(h + ["reason"], [r + [why] for r, why in zip(rows, reasons)], left=3, verdict_cols={2})
    out.append(f'<p class="meta">thresholds: {_e(tables.THRESHOLDS)}</p>')
    return out


def _incomplete_mark(reason: Optional[str]) -> str:
    """' (incomplete: interrupted by SIGINT)' after an incomplete result's name, escaped; '' for a complete one."""
    return "" if reason is None else f" ({_e(incomplete.mark(reason))})"


def _captioned(caption: str, rep: Report) -> str:
    """A plot's caption, marked when it shows an incomplete result: a run's or io file's own plots (captioned
    '<label>: ...', or with no label when the report has one source), and a comparison of runs among which
    one is incomplete."""
    shown = [(r["label"], r["reason"]) for _, sec in tables.sections(rep) for r in sec["runs"]]
    shown += [(s["label"], s["reason"]) for s in (rep["io"]["sources"] if "io" in rep else [])]
    stopped = [(label, why) for label, why in shown if why is not None]
    if caption.lower().startswith("comparison"):
        parts = [f"{label} {incomplete.mark(why)}" for label, why in stopped]
        return f"{caption} ({'; '.join(parts)})" if parts else caption
    for label, why in stopped:
        if caption.startswith(f"{label}: "):
            return f"{caption} ({incomplete.mark(why)})"
    if len(shown) == 1 and stopped:
        return f"{caption} ({incomplete.mark(stopped[0][1])})"
    return caption


def png_data_uri(png_bytes: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes).decode("ascii")


def render(
    rep: Report,
    images: Sequence[Tuple[str, bytes]] = (),
    checks: Optional[Sequence[Tuple[str, Optional[bool], str]]] = None,
    title: str = "dlio-fast report",
) -> str:
    """The page as a string. rep: compare.build(); images: [(caption, png bytes)];
    checks: [(name, passed, figure_text)] or None."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">generated {_e(time.strftime("%Y-%m-%d %H:%M:%S %z"))}</p>',
    ]
    for title, sec in tables.sections(rep):
        runs = sec["runs"]
        out.append(f"<h2>{_e(tables.heading(title))}</h2>")
        out.append(
            "<ul>"
            + "".join(  # labels only: the page embeds no path of the machine that made it
                f"<li>{_e(r['label'])}{_incomplete_mark(r['reason'])}</li>" for r in runs
            )
            + "</ul>"
        )
        out += [f'<p class="incomplete">{_e(n)}</p>' for n in tables.incomplete_notes(sec)]
        if len(runs) > 1:
            out.append(f"<p>Ratios are to {_e(runs[0]['label'])}.</p>")
        h, rows = tables.figure_rows(sec)
        out += _table(h, rows, left=2)
    if "io" in rep:
        srcs = rep["io"]["sources"]
        out.append("<h2>I/O points</h2>")
        out.append(
            "<ul>"
            + "".join(
                f"<li>{_e(s['label'])} ({_e(s['kind'])}): {_e(s['where'])}{_incomplete_mark(s['reason'])}</li>"
                for s in srcs
            )
            + "</ul>"
        )
        out += [f'<p class="incomplete">{_e(n)}</p>' for n in tables.io_incomplete_notes(rep)]
        h, rows = tables.point_rows(rep)
        out += _table(h, rows, left=1, verdict_cols={i for i, x in enumerate(h) if str(x).startswith("verdict")})
    out += _verdicts(rep)
    if checks:
        out.append("<h2>MLPerf Storage checks</h2>")
        out.append("<table><thead><tr><th>result</th><th>check</th><th>figure</th></tr></thead><tbody>")
        for name, ok, text in checks:
            out.append(
                f'<tr><td class="{tables.check_verdict(ok).lower()}">{tables.check_verdict(ok)}</td>'
                f"<td>{_e(name)}</td><td>{_e(text)}</td></tr>"
            )
        out.append("</tbody></table>")
    if images:
        out.append("<h2>Plots</h2>")
        # the comparison first, then each run's own plots
        for caption, data in sorted(images, key=lambda im: not im[0].lower().startswith("comparison")):
            caption = _captioned(caption, rep)
            out.append(
                f'<figure><img src="{png_data_uri(data)}" alt="{_e(caption)}">'
                f"<figcaption>{_e(caption)}</figcaption></figure>"
            )
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


TMP_PREFIX = "dlio-fast-report-"  # the temporary plots folder of `report --html` without --plots-dir
CAPTIONS = {
    "compare_latency_cdf": "Comparison: read latency CDF of the runs",
    "compare_throughput": "Comparison: samples/s and MiB/s per epoch of the runs",
    "timeline": "per step: I/O wait (accelerator starved) and compute",
    "latency_cdf": "read and sample latency CDF",
    "throughput": "samples/s and MiB/s per epoch",
    "checkpoint": "checkpoint saves and loads",
    "interference": "training's read MiB/s and AU over time, asynchronous checkpoint writes shaded",
    "vs_bs": "io points against the transfer size",
    "vs_qd": "io points against the queue depth",
}


def caption_of(path: str) -> str:
    """What a plot shows, from its file name: 'Comparison: ...', or '<run>: ...' (the run is the file
    name's prefix with --plots-dir, else the folder it is in). No path."""
    name = os.path.splitext(os.path.basename(path))[0]
    run = os.path.basename(os.path.dirname(os.path.abspath(path)))
    for key, text in CAPTIONS.items():
        if name == key:
            if key.startswith("compare_") or run.startswith(TMP_PREFIX):
                return text
            return f"{run}: {text}"
        if name.endswith("_" + key):
            return f"{name[: -len(key) - 1]}: {text}"
    return f"{run}: {name}"


def images_from(paths: Iterable[str]) -> List[Tuple[str, bytes]]:
    """[(caption, bytes)] of PNG files, captioned by what they show."""
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.append((caption_of(p), f.read()))
    return out
