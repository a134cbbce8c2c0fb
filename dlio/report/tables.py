"""The comparison report rendered: text tables, Markdown, CSV and JSON (dlio-fast report); and checks
((name, passed, figure) tuples, dlio.mlperf) as PASS / FAIL / NOTE lines."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from dlio.base.units import fmt_bytes, fmt_ns, fmt_size
from dlio.report import incomplete
from dlio.report.compare import KEY_FIELDS, POINT_FIGURES, RATIO_POINT_FIGURES, RUN_FIGURES
from dlio.report.document import Report, RunSection
from dlio.report.verdict import THRESHOLDS
from dlio.system.output import csv_value


def _fmt(v: Any, dec: Optional[int]) -> str:
    if v is None:
        return "-"
    if dec is None or isinstance(v, str):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "-"
    return f"{v:,.{dec}f}"  # one number format in a table: thousands separated everywhere


COMPLETE_ROW = "run complete"  # the first row of a table with an incomplete run: yes / no: the reason

NS_PER = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def _cell(v: Any, dec: Optional[int], unit: str) -> str:
    """A table cell; a latency (unit ns/us/ms/s) is auto-scaled with its own unit (4.29ms, 422ns)."""
    if unit in NS_PER and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return fmt_ns(v * NS_PER[unit])
    return _fmt(v, dec)


def _shown_unit(unit: str) -> str:
    return "time" if unit in NS_PER else unit


def _fmt_ratio(r: Optional[float]) -> str:
    return "-" if r is None else f"{r:.3f}x"


def _decimals() -> Dict[str, Optional[int]]:
    return {k: d for k, _, _, d in RUN_FIGURES + POINT_FIGURES}


def figure_rows(sec: RunSection) -> Tuple[List[str], List[List[Any]]]:
    """Header and rows (strings) of a section in compare_runs' shape (runs, or one family's runs): figure,
    unit, each run, each ratio to the first."""
    runs = sec["runs"]
    header = ["figure", "unit"] + [x["label"] for x in runs] + [f"{x['label']}/{runs[0]['label']}" for x in runs[1:]]
    rows: List[List[Any]] = []
    if any(not x["complete"] for x in runs):  # first, beside every figure: which run stopped, and why
        rows.append([COMPLETE_ROW, ""] + [incomplete.cell(x["reason"]) for x in runs] + [""] * (len(runs) - 1))
    differ = set(sec.get("differ", []))
    for st in sec.get("settings", []):  # what each run was set to; '*': not the same in every run
        k = st["key"]
        mark = "* " if k in differ else "  "
        rows.append([mark + st["label"], "setting"] + [x["settings"][k] for x in runs] + [""] * (len(runs) - 1))
    for f in sec["figures"]:
        k = f["key"]
        row = [f["label"], _shown_unit(f["unit"])] + [_cell(x["figures"][k], f["decimals"], f["unit"]) for x in runs]
        row += ["" if k not in x["ratios"] else _fmt_ratio(x["ratios"][k]) for x in runs[1:]]
        rows.append(row)
    return header, rows


def incomplete_notes(sec: RunSection) -> List[str]:
    """The note lines under a section's table, one per incomplete run."""
    return [incomplete.note(x["label"], x["reason"] or incomplete.NO_REASON) for x in sec["runs"] if not x["complete"]]


def io_incomplete_notes(rep: Report) -> List[str]:
    """The note lines under the io table, one per incomplete io or ceiling file."""
    srcs = rep["io"]["sources"] if "io" in rep else []
    return [incomplete.note(s["label"], s["reason"] or incomplete.NO_REASON) for s in srcs if not s["complete"]]


def sections(rep: Report) -> List[Tuple[str, RunSection]]:
    """(title, section) of every figure table in compare_runs' shape: the runs, then each family's."""
    out = [("runs", rep["runs"])] if "runs" in rep else []
    return out + [(f"{sec['title']} runs", sec) for sec in rep.get("families", [])]


def heading(title: str) -> str:
    """A section's title as a heading: 'runs' -> 'Runs', 'KV cache runs' stays."""
    return title[:1].upper() + title[1:]


def _point_name(p: Dict[str, Any]) -> str:
    qd = f"qd{p['qd']}"
    if p.get("qd_used") not in (None, p["qd"]):
        qd += f"(ran {p['qd_used']})"  # a sync engine runs at depth 1 whatever was asked
    name = f"{p['rw']} {_size(p['bs'])} {p['engine']} {qd} t{p['threads']}"
    if p.get("mode"):
        name += f" {p['mode']}"
    return f"{p['target']} ({name})" if p.get("target") else name


def _size(n: Any) -> str:
    return fmt_size(n) if isinstance(n, int) else str(n)


def point_rows(rep: Report) -> Tuple[List[str], List[List[str]]]:
    """Header and rows of the io comparison: one row per point, each source's figures, ratios."""
    r = rep["io"]
    srcs = r["sources"]
    dec = _decimals()
    multi = len(srcs) > 1
    header = ["point"]
    for s in srcs:
        for f in r["figures"]:
            header.append(f"{f['label']} [{s['label']}]" if multi else f["label"])
    for s in srcs[1:]:
        for k in RATIO_POINT_FIGURES:
            lab = next(f["label"] for f in r["figures"] if f["key"] == k)
            header.append(f"{lab} {s['label']}/{srcs[0]['label']}")
    rows: List[List[str]] = []
    for p in r["points"]:
        row = [_point_name(p)]
        for v in p["values"]:
            row += [_cell(v[f["key"]], dec[f["key"]], f["unit"]) if v else "-" for f in r["figures"]]
        for v in p["values"][1:]:
            row += [_fmt_ratio(v["ratios"][k]) if v else "-" for k in RATIO_POINT_FIGURES]
        rows.append(row)
    return header, rows


def _text_table(header: Sequence[Any], rows: Sequence[Sequence[Any]], left: int = 1) -> List[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def line(cells: Sequence[Any]) -> str:
        return "  ".join(
            str(c).ljust(w) if i < left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def table_lines(rep: Report) -> List[str]:
    """The terminal rendering."""
    out: List[str] = []
    for title, sec in sections(rep):
        if out:
            out.append("")
        runs = sec["runs"]
        out.append(
            f"{title}: {', '.join(x['label'] for x in runs)}"
            + (f" (ratios to {runs[0]['label']})" if len(runs) > 1 else "")
        )
        out += incomplete_notes(sec)
        h, rows = figure_rows(sec)
        out += _text_table(h, rows, left=2)
        if sec.get("differ"):
            out.append("* the runs differ in this setting: their figures are not a like-for-like comparison")
    if "io" in rep:
        if out:
            out.append("")
        srcs = rep["io"]["sources"]
        out.append(
            "io points: "
            + ", ".join(f"{s['label']} ({s['kind']}, {s['where']})" for s in srcs)
            + (f" (ratios to {srcs[0]['label']})" if len(srcs) > 1 else "")
        )
        out += io_incomplete_notes(rep)
        h, rows = point_rows(rep)
        out += _text_table(h, rows, left=1)
    return out


def _md_cell(c: Any) -> str:
    return str(c).replace("|", "\\|").replace("\n", " ")


def markdown_lines(rep: Report) -> List[str]:
    """GitHub-flavoured Markdown tables (one per kind of source)."""
    out: List[str] = []
    tables = [(heading(title), figure_rows(sec), 2, incomplete_notes(sec)) for title, sec in sections(rep)]
    if "io" in rep:
        tables.append(("io points", point_rows(rep), 1, io_incomplete_notes(rep)))
    for title, (h, rows), left, notes in tables:
        if out:
            out.append("")
        out.append(f"### {title}")
        out.append("")
        if notes:  # above the table, where a reader looks first
            out += [f"**{_md_cell(n)}**" for n in notes] + [""]
        cols = {i for i, x in enumerate(h) if str(x).startswith("verdict")}
        out += _md_table(h, [_md_marked(r, cols) for r in rows], left)
    h, rows = verdict_rows(rep)
    if rows:
        out += ["", "### Verdicts (is this a storage result?)", ""]
        out += _md_table(h, [_md_marked(r, {2}) for r in rows], 3)
        reasons = [f"- {v['source']} {v['phase']}: {v['reason']}" for v in rep["verdicts"] if v.get("reason")]
        out += ["", *reasons, "", f"thresholds: {THRESHOLDS}"]
    return out


def _md_marked(row: Sequence[Any], cols: Set[int]) -> List[Any]:
    """A page-cache verdict in bold (its figures are the page cache's, not the storage's): in the
    verdict columns, and across a run table's verdict row."""
    verdict_row = bool(row) and str(row[0]).startswith("verdict")
    return [f"**{c}**" if (i in cols or verdict_row) and is_cache(c) else c for i, c in enumerate(row)]


def is_cache(cell: Any) -> bool:
    """A verdict cell that says some figure came from the page cache (or memory)."""
    text = str(cell)
    return text.startswith("cache") or "; cache (" in text


def _md_table(h: Sequence[Any], rows: Iterable[Sequence[Any]], left: int) -> List[str]:
    out = ["| " + " | ".join(_md_cell(c) for c in h) + " |"]
    out.append("|" + "|".join(":---" if i < left else "---:" for i in range(len(h))) + "|")
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return out


def csv_text(rep: Report) -> str:
    """CSV with raw numbers (not formatted): the run table, each family's, the io table and the verdicts,
    a blank line between them (a '# title' line above each figure table when there are several)."""
    blocks: List[List[List[Any]]] = []
    titled = len(sections(rep)) > 1
    for title, sec in sections(rep):
        runs = sec["runs"]
        rows: List[List[Any]] = [[f"# {heading(title)}"]] if titled else []
        rows.append(
            ["figure", "unit"] + [x["label"] for x in runs] + [f"{x['label']}/{runs[0]['label']}" for x in runs[1:]]
        )
        if any(not x["complete"] for x in runs):
            rows.append(["complete", ""] + [x["complete"] for x in runs])
            rows.append(["incomplete_reason", ""] + [x["reason"] or "" for x in runs])
        differ = set(sec.get("differ", []))
        for st in sec.get("settings", []):
            k = st["key"]
            rows.append([f"setting:{k}", "differs" if k in differ else ""] + [x["settings"][k] for x in runs])
        for f in sec["figures"]:
            k = f["key"]
            rows.append(
                [k, f["unit"]] + [_raw(x["figures"][k]) for x in runs] + [_raw(x["ratios"].get(k)) for x in runs[1:]]
            )
        blocks.append(rows)
    if "io" in rep:
        r = rep["io"]
        srcs = r["sources"]
        head = ["target", *KEY_FIELDS]
        for s in srcs:
            head += [f"{f['key']}[{s['label']}]" for f in r["figures"]]
        for s in srcs[1:]:
            head += [f"{k}_ratio[{s['label']}]" for k in RATIO_POINT_FIGURES]
        rows = [list(head)]
        for p in r["points"]:
            row = [p.get("target") or ""] + [_raw(p[k]) for k in KEY_FIELDS]
            for v in p["values"]:
                row += [_raw(v[f["key"]]) if v else "" for f in r["figures"]]
            for v in p["values"][1:]:
                row += [_raw(v["ratios"][k]) if v else "" for k in RATIO_POINT_FIGURES]
            rows.append(row)
        blocks.append(rows)
        if any(not s["complete"] for s in srcs):
            blocks.append([["source", "complete", "incomplete_reason"]])
            blocks[-1] += [[s["label"], s["complete"], s["reason"] or ""] for s in srcs]
    if rep.get("verdicts"):
        keys = list(rep["verdicts"][0])
        blocks.append([keys] + [[_raw(v.get(k)) for k in keys] for v in rep["verdicts"]])
    buf = io.StringIO()
    w = _CellWriter(csv.writer(buf, lineterminator="\n"))
    for i, rows in enumerate(blocks):
        if i:
            w.writerow([])
        for row in rows:
            w.writerow(row)
    return buf.getvalue()


def _raw(v: Any) -> Any:
    """A CSV cell: true/false, floats rounded, formula-like text made text (dlio.system.output.csv_value)."""
    return csv_value(v)


class _CellWriter:
    """A csv writer whose every cell, labels and headers included, goes through csv_value."""

    def __init__(self, w: Any) -> None:  # a csv.writer (its type is private to the csv module)
        self.w = w

    def writerow(self, cells: Iterable[Any]) -> None:
        self.w.writerow([csv_value(c) for c in cells])


def json_text(rep: Report) -> str:
    return json.dumps(rep, indent=2, allow_nan=False) + "\n"


VERDICT_HEAD = [
    "source",
    "phase",
    "verdict",
    "app bytes",
    "device bytes",
    "dev/app",
    "cached before",
    "reader cores",
    "host busy",
]


def verdict_rows(rep: Report) -> Tuple[List[str], List[List[Any]]]:
    """Header and rows (strings) of the report's verdicts (compare.verdicts): each epoch's or point's
    verdict next to the counters it was made from."""
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    rows: List[List[Any]] = []
    for v in rep.get("verdicts") or []:
        app, dev, ratio = v.get("app_bytes"), v.get("device_bytes"), v.get("storage_ratio")
        word = str(v.get("verdict")) + (f" ({v['part']})" if v.get("part") else "")
        rows.append(
            [
                v.get("source"),
                v.get("phase"),
                word,
                fmt_bytes(app) if num(app) else "-",
                fmt_bytes(dev) if num(dev) else "-",
                f"{ratio:.2f}x" if num(ratio) and num(dev) else "-",
                f"{v['resident_before']:.0%}" if num(v.get("resident_before")) else "-",
                f"{v['reader_cores']:.2f}" if num(v.get("reader_cores")) else "-",
                f"{v['host_busy_share']:.0%}" if num(v.get("host_busy_share")) else "-",
            ]
        )
    return VERDICT_HEAD, rows


def verdict_lines(rep: Report) -> List[str]:
    """The verdicts as a text table under the figures, and the thresholds; nothing for results
    recorded before the counters existed."""
    head, rows = verdict_rows(rep)
    if not rows:
        return []
    return (
        ["", "verdicts (is this a storage result?):"] + _text_table(head, rows, left=3) + [f"thresholds: {THRESHOLDS}"]
    )


def check_verdict(ok: Optional[bool]) -> str:
    """PASS / FAIL, or NOTE for what is not a check (ok None)."""
    return "NOTE" if ok is None else ("PASS" if ok else "FAIL")


def check_lines(checks: Iterable[Tuple[str, Optional[bool], str]]) -> List[str]:
    """'PASS  name: figure' lines of (name, passed, figure) checks."""
    return [f"{check_verdict(ok)}  {name}: {text}" for name, ok, text in checks]
