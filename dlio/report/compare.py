"""Figures of loaded sources (dlio.report.source: run folders, io / ceiling JSON, workload families' runs)
side by side, with ratios to the first, and the verdict of every phase and point (dlio.report.verdict) beside them.

Runs are compared figure by figure (ratio = figure / the first run's); a run's `verdict` figure sums
up its epochs' verdicts. io and ceiling points are compared point by point: a point matches the first
source's point with the same rw, bs, engine, qd and threads (ceiling targets match by target name),
and each source's point carries its verdict. build()'s "verdicts" lists every recorded verdict with
its counters. Every renderer (dlio.report.tables, html) is a pure function of the dict that build()
returns, which is also what `report --json` writes: a figure never travels without its verdict.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, cast

from dlio.base.units import fmt_bytes
from dlio.report import interference
from dlio.report.checkpoint import checkpoint_figures, checkpoint_records_of, finite_number
from dlio.report.document import (
    IoComparison,
    Report,
    ReportTables,
    RunColumn,
    RunSection,
    VerdictRow,
)
from dlio.report.family import verdict_words
from dlio.report.incomplete import reason_of
from dlio.report.io_table import mode
from dlio.report.result import REPORT_SCHEMA, CheckpointRecord, IoPoint
from dlio.report.verdict_lines import point_name

if TYPE_CHECKING:
    from dlio.report.source import Source

# (key, label, unit, decimals): the run figures in table order. Checkpoint rows appear only when a
# run has them.
RUN_FIGURES = [
    ("workload", "workload", "", None),
    ("data_folder", "data folder", "", None),
    ("start", "start", "", None),
    ("verdict", "verdict (is this a storage result?)", "", None),
    ("ranks", "ranks", "", 0),
    ("hosts", "hosts", "", 0),
    ("epochs", "epochs", "", 0),
    ("au_exact_pct", "AU (exact)", "%", 2),
    ("au_dlio_pct", "AU (DLIO formula)", "%", 2),
    ("samples_per_s", "samples/s (exact)", "1/s", 1),
    ("samples_per_s_dlio", "samples/s (DLIO formula)", "1/s", 1),
    ("read_MiB_s", "read MiB/s (bytes read)", "MiB/s", 2),
    ("read_MiB_s_dlio", "read MiB/s (DLIO formula)", "MiB/s", 2),
    ("read_lat_p50_us", "read latency p50", "us", 2),
    ("read_lat_p99_us", "read latency p99", "us", 2),
    ("read_lat_p99.9_us", "read latency p99.9", "us", 2),
    ("io_wait_mean_ms", "I/O wait per step mean", "ms", 4),
    ("io_wait_p99_ms", "I/O wait per step p99", "ms", 4),
    ("cpu_us_per_sample", "benchmark CPU per sample", "us", 2),
    ("ckpt_save_GiB_s", "checkpoint save (all ranks, exact)", "GiB/s", 3),
    ("ckpt_save_GB_s", "checkpoint save (DLIO formula)", "GB/s", 3),
    ("ckpt_load_GiB_s", "checkpoint load (all ranks, exact)", "GiB/s", 3),
    ("ckpt_load_GB_s", "checkpoint load (DLIO formula)", "GB/s", 3),
    # checkpoint.async_save (dlio.report.interference)
    ("async_blocked_s", "async checkpoint: training blocked per save", "s", 4),
    ("async_durable_s", "async checkpoint: snapshot to durable", "s", 3),
    ("async_au_during_pct", "AU during checkpoint writes / outside", "%", 2),
    ("async_read_during_MiB_s", "read MiB/s during checkpoint writes / outside", "MiB/s", 2),
    # a run on several hosts (dlio.report.hosts, dlio.report.stragglers)
    ("per_host", "per host: AU (exact), read MiB/s", "", None),
    ("straggler", "straggler (own time per step)", "", None),
]
ASYNC_FIGURES = ("async_blocked_s", "async_durable_s", "async_au_during_pct", "async_read_during_MiB_s")
HOST_FIGURES = ("per_host", "straggler")
CAUSES = {"io_wait": "I/O wait", "compute": "compute"}  # a straggler's cause (report.stragglers), in words
OPTIONAL_FIGURES = (
    ("ckpt_save_GiB_s", "ckpt_save_GB_s", "ckpt_load_GiB_s", "ckpt_load_GB_s") + ASYNC_FIGURES + HOST_FIGURES
)
TEXT_FIGURES = ("workload", "data_folder", "start", "verdict", "async_au_during_pct", "async_read_during_MiB_s") + (
    HOST_FIGURES
)

# (key, label, unit, decimals) of an io / ceiling point; ratios for the first three.
POINT_FIGURES = [
    ("verdict", "verdict", "", None),
    ("bw_MiB_s", "MiB/s", "MiB/s", 1),
    ("iops", "IOPS", "1/s", 0),
    ("lat_p50_us", "lat p50", "us", 2),
    ("lat_p99_us", "lat p99", "us", 2),
    ("lat_p99.9_us", "lat p99.9", "us", 2),
]
RATIO_POINT_FIGURES = ("bw_MiB_s", "iops", "lat_p99_us")
# a point matches another on all of these: a buffered point is never compared with an O_DIRECT one
KEY_FIELDS = ("rw", "bs", "engine", "qd", "threads", "mode")

# (key, label): the settings of a run shown beside its figures; those that differ are marked.
RUN_SETTINGS = [
    ("tool", "tool"),
    ("engine", "engine"),
    ("qd", "queue depth"),
    ("read_threads", "read threads"),
    ("direct", "O_DIRECT"),
    ("cache", "cache mode"),
    ("ranks", "ranks"),
    ("batch", "batch size"),
    ("compute", "compute per step"),
    ("dataset", "dataset"),
    ("host", "host"),
]


# a point of an io or ceiling source: (its key across sources, its ceiling target name or None, the point)
KeyedPoint = Tuple[Tuple[Hashable, ...], Optional[str], IoPoint]


# ---------------------------------------------------------------------------------------------
# run figures


_num = finite_number


def run_figures(src: Source) -> Dict[str, Any]:
    """{key: value} for the RUN_FIGURES of one run (None where the run has no such figure)."""
    doc, summ = src.doc, src.summary or {}  # a run's Source always has a summary (source.load)
    x = doc["metrics"]
    m = summ.get("metric", {})
    lat = x.get("read_latency_ns") or {}
    wait = x.get("io_wait_per_step_s") or {}
    ranks = doc.get("comm_size") or len(doc.get("ranks", []))
    epochs = len(x.get("au_percentage") or [])
    trained = epochs > 0
    f = {
        "workload": doc.get("workload") or doc.get("model") or doc.get("config_file") or "-",
        "data_folder": (doc.get("dataset") or {}).get("folder") or "-",
        "start": doc.get("start") or "-",
        "verdict": run_verdict(doc),
        "ranks": ranks,
        "hosts": len(set(doc.get("hostnames") or [])) or 1,
        "epochs": epochs,
        "au_exact_pct": x.get("au_mean_percentage") if trained else None,
        "au_dlio_pct": m.get("train_au_mean_percentage") if trained else None,
        "samples_per_s": x.get("samples_per_second_mean") if trained else None,
        "samples_per_s_dlio": m.get("train_throughput_mean_samples_per_second") if trained else None,
        "read_MiB_s": x.get("MiB_per_second_mean") if trained else None,
        "read_MiB_s_dlio": m.get("train_io_mean_MB_per_second") if trained else None,  # DLIO's MB are MiB
        "read_lat_p50_us": lat["p50"] / 1e3 if lat.get("count") else None,
        "read_lat_p99_us": lat["p99"] / 1e3 if lat.get("count") else None,
        "read_lat_p99.9_us": lat["p99.9"] / 1e3 if lat.get("count") else None,
        "io_wait_mean_ms": wait["mean"] * 1e3 if trained and "mean" in wait else None,
        "io_wait_p99_ms": wait["p99"] * 1e3 if trained and "p99" in wait else None,
        "cpu_us_per_sample": x.get("cpu_us_per_sample"),
    }
    ck = checkpoint_figures(summ, doc) or {}
    for kind in ("save", "load"):
        f[f"ckpt_{kind}_GiB_s"] = ck.get(f"{kind}_GiB_s")
        f[f"ckpt_{kind}_GB_s"] = ck.get(f"{kind}_GB_s")
    f.update(async_figures(doc))
    f.update(host_figures(x))
    return f


def host_figures(metrics: Mapping[str, Any]) -> Dict[str, Optional[str]]:
    """A run on several hosts: each host's AU and read MiB/s (means over the epochs), and the straggler the
    others waited for (or that the hosts agree); None for a run on one host."""
    hosts = metrics.get("per_host") or []
    if len(hosts) < 2:
        return {"per_host": None, "straggler": None}

    def mean(h: Mapping[str, Any], key: str) -> float:
        eps = h.get("epochs") or []
        return sum(float(e[key]) for e in eps) / len(eps) if eps else 0.0

    per_host = "; ".join(
        f"{h['host']}: {mean(h, 'au_percentage'):.2f} %, {mean(h, 'bytes_per_second') / 2**20:.1f} MiB/s" for h in hosts
    )
    held = metrics.get("stragglers") or {}
    if not held:
        return {"per_host": per_host, "straggler": None}
    named = held.get("named") or []
    straggler = (
        "; ".join(f"{n['host']}, {n['slower_percentage']:.0f} % slower ({CAUSES[n['cause']]})" for n in named)
        if named
        else "none: the hosts agree"
    )
    return {"per_host": per_host, "straggler": straggler}


def run_verdict(doc: Mapping[str, Any]) -> str:
    """A run's verdicts in a few words: 'cache (epochs 1-5)', 'storage-bound (epoch 1); cache (epochs
    2-3)'; '-' for a run recorded without them (DLIO's folders, older runs)."""
    groups: Dict[str, List[Any]] = {}
    for v in doc.get("verdicts") or []:
        if isinstance(v, dict) and v.get("verdict"):
            groups.setdefault(str(v["verdict"]), []).append(v.get("epoch"))
    if not groups:
        return "-"
    return "; ".join(f"{word} ({epochs_text(eps)})" for word, eps in groups.items())


def epochs_text(epochs: Sequence[Any]) -> str:
    """[1, 2, 3, 5] -> 'epochs 1-3,5'; [2] -> 'epoch 2'."""
    nums = sorted({e for e in epochs if isinstance(e, int)})
    if not nums:
        return f"{len(epochs)} phases"
    runs: List[str] = []
    start: Optional[int] = nums[0]
    nexts: List[Optional[int]] = [*nums[1:], None]
    for a, b in zip(nums, nexts):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ("epoch " if len(nums) == 1 else "epochs ") + ",".join(runs)


def async_figures(doc: Mapping[str, Any]) -> Dict[str, Any]:
    """The asynchronous checkpoints' figures of a run (None where it has none). The AU and read rows
    hold 'during / outside' as text: the pair is the figure, a ratio of either alone says little."""
    s = interference.summary(cast(List[CheckpointRecord], checkpoint_records_of(doc))) or {}
    d: Any = s.get("during")  # a dict or None; the f-strings below read them only when both are there
    o: Any = s.get("outside")
    pair = d is not None and o is not None
    return {
        "async_blocked_s": s.get("blocked_s_mean"),
        "async_durable_s": s.get("snapshot_to_durable_s_mean"),
        "async_au_during_pct": f"{d['au_percentage']:.2f} / {o['au_percentage']:.2f}" if pair else None,
        "async_read_during_MiB_s": (
            f"{d['read_MiB_per_second']:.2f} / {o['read_MiB_per_second']:.2f}" if pair else None
        ),
    }


def run_settings(src: Source) -> Dict[str, str]:
    """{key: text} of RUN_SETTINGS for one run (dlio-fast's or DLIO's)."""
    return settings_of(src.doc)


def settings_of(doc: Mapping[str, Any]) -> Dict[str, str]:
    """{key: text} of RUN_SETTINGS for a run document (dlio-fast.json, or a DLIO folder's)."""
    st = doc.get("settings") or {}
    ds = doc.get("dataset") or {}
    host = doc.get("host") or {}
    text = setting_text
    comp = st.get("computation_time_mean_s")
    hosts = sorted(set(doc.get("hostnames") or []))
    mem = host.get("memory_bytes")
    nbytes = ds.get("bytes_on_disk")
    return {
        "tool": doc.get("tool") or "dlio-fast",
        "engine": text(st.get("engine")),
        "qd": text(st.get("qd")),
        "read_threads": text(st.get("read_threads")),
        "direct": text(st.get("direct")),
        "cache": text(st.get("cache")),
        "ranks": text(doc.get("comm_size") or len(doc.get("ranks", []))),
        "batch": text(st.get("batch_size")),
        "compute": "-" if comp is None else f"{float(comp):g} s",
        "dataset": (
            f"{ds.get('format') or '-'}, {ds.get('num_files_train', '-')} files, {fmt_bytes(nbytes) if nbytes else '-'}"
        ),
        "host": (", ".join(h for h in hosts if h) or "-") + (f" ({fmt_bytes(mem)} RAM)" if mem else ""),
    }


def differing(settings: Sequence[Mapping[str, str]]) -> List[str]:
    """Keys of RUN_SETTINGS whose text is not the same in every run."""
    return [k for k, _ in RUN_SETTINGS if len({s[k] for s in settings}) > 1]


def ratio(value: Any, ref: Any) -> Optional[float]:
    """value / ref, or None when either is missing or ref is 0."""
    if not _num(value) or not _num(ref) or ref == 0:
        return None
    return float(value) / float(ref)


def run_column(
    src: Source, settings: Dict[str, str], figures: Dict[str, Any], ratios: Dict[str, Optional[float]]
) -> RunColumn:
    """One run's column of a RunSection: where it came from, whether it finished, its values."""
    return {
        "label": src.label,
        "source": os.path.abspath(src.path),
        "complete": reason_of(src.doc) is None,
        "reason": reason_of(src.doc),
        "settings": settings,
        "figures": figures,
        "ratios": ratios,
    }


def compare_runs(sources: Sequence[Source]) -> RunSection:
    """{'figures': [{key, label, unit}], 'runs': [{label, source, complete, figures, ratios}]}."""
    figs = [run_figures(s) for s in sources]
    sets = [run_settings(s) for s in sources]
    defs = [d for d in RUN_FIGURES if d[0] not in OPTIONAL_FIGURES or any(f[d[0]] is not None for f in figs)]
    ref = figs[0]
    runs = [
        run_column(
            s,
            st,
            {k: f[k] for k, _, _, _ in defs},
            {
                k: ratio(f[k], ref[k])
                for k, _, _, _ in defs
                if k not in TEXT_FIGURES and k not in ("ranks", "hosts", "epochs")
            },
        )
        for s, f, st in zip(sources, figs, sets)
    ]
    return {
        "reference": sources[0].label,
        "settings": [{"key": k, "label": lab} for k, lab in RUN_SETTINGS],
        "differ": differing(sets),
        "figures": [{"key": k, "label": lab, "unit": u, "decimals": d} for k, lab, u, d in defs],
        "runs": runs,
    }


# ---------------------------------------------------------------------------------------------
# a workload family's runs (dlio.report.family)

FAMILY_VERDICT = ("verdict", "verdict (is this a storage result?)", "", None)
# every family's table opens with what ran and when (its reading gives both); the family's own figures follow
FAMILY_HEAD = [("workload", "workload", "", None), ("start", "start", "", None)]


def compare_family(sources: Sequence[Source]) -> RunSection:
    """The runs of one workload family side by side, in compare_runs' shape plus the family's title and
    schema: its settings (those that differ marked), the verdict, its figures with ratios to the first."""
    fam = sources[0].family_parts()[0]
    readings = [s.family_parts()[1] for s in sources]
    figs = [dict(r.figures, verdict=verdict_words(r.verdicts)) for r in readings]
    sets = [{k: setting_text(r.settings.get(k)) for k, _ in fam.settings} for r in readings]
    defs = [FAMILY_VERDICT, *FAMILY_HEAD, *fam.figures]
    runs = [
        run_column(
            s,
            st,
            {k: f.get(k) for k, _, _, _ in defs},
            {k: ratio(f.get(k), figs[0].get(k)) for k, _, _, dec in defs if dec is not None},
        )
        for s, f, st in zip(sources, figs, sets)
    ]
    return {
        "title": fam.title,
        "schema": fam.schema,
        "reference": sources[0].label,
        "settings": [{"key": k, "label": lab} for k, lab in fam.settings],
        "differ": [k for k, _ in fam.settings if len({st[k] for st in sets}) > 1],
        "figures": [{"key": k, "label": lab, "unit": u, "decimals": d} for k, lab, u, d in defs],
        "runs": runs,
    }


def setting_text(v: Any) -> str:
    """A setting as the tables show it: '-' for none, yes / no, else its text."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


# ---------------------------------------------------------------------------------------------
# io / ceiling points


def points(src: Source) -> List[KeyedPoint]:
    """[(key, name, point)] of an io or ceiling source. key identifies a point across sources."""
    out: List[KeyedPoint] = []
    if src.kind == "io":
        for p in src.doc["points"]:
            out.append((tuple(point_field(p, k) for k in KEY_FIELDS), None, p))
    else:
        for name, p in src.doc["best"].items():
            if isinstance(p, dict):
                out.append((("target", name), name, cast(IoPoint, p)))
    # a key seen twice in one file (the same point measured twice) gets an occurrence number
    seen: Dict[Any, int] = {}
    res: List[KeyedPoint] = []
    for key, name, p in out:
        n = seen.get(key, 0)
        seen[key] = n + 1
        res.append((key if n == 0 else key + (f"#{n + 1}",), name, p))
    return res


def point_field(p: IoPoint, key: str) -> Any:
    """A point's key field; 'mode' is direct / buffer (pages dropped) / cached (page cache kept)."""
    if key == "mode":
        if "direct" not in p:
            return None
        return mode(p)
    return p.get(key)


def point_figures(p: IoPoint) -> Dict[str, Any]:
    lat = p.get("lat_ns") or {}
    cnt = lat.get("count", 1)
    v = p.get("verdict")
    return {
        "verdict": v.get("verdict") if isinstance(v, dict) else None,
        "bw_MiB_s": p.get("bw_MiB_s"),
        "iops": p.get("iops"),
        "lat_p50_us": lat["p50"] / 1e3 if cnt and "p50" in lat else None,
        "lat_p99_us": lat["p99"] / 1e3 if cnt and "p99" in lat else None,
        "lat_p99.9_us": lat["p99.9"] / 1e3 if cnt and "p99.9" in lat else None,
    }


def compare_points(sources: Sequence[Source]) -> IoComparison:
    """{'sources': [...], 'points': [{key fields, target, per source: figures and ratios}]}.

    Rows follow the first source's order, then points the first source lacks."""
    order = []
    rows = {}
    for i, s in enumerate(sources):
        for key, name, p in points(s):
            if key not in rows:
                rows[key] = {
                    "target": name,
                    **{k: point_field(p, k) for k in KEY_FIELDS},
                    "qd_used": p.get("qd_used"),
                    "direct": p.get("direct"),
                    "values": [None] * len(sources),
                }
                order.append(key)
            rows[key]["values"][i] = point_figures(p)
    out = []
    for key in order:
        r = rows[key]
        ref = r["values"][0]
        for v in r["values"]:
            if v is not None:
                v["ratios"] = {k: (ratio(v[k], ref[k]) if ref else None) for k in RATIO_POINT_FIGURES}
        out.append(r)
    return {
        "reference": sources[0].label,
        "sources": [
            {
                "label": s.label,
                "source": os.path.abspath(s.path),
                "kind": s.kind,
                "where": storage_path(s),
                "complete": reason_of(s.doc) is None,
                "reason": reason_of(s.doc),
            }
            for s in sources
        ],
        "figures": [{"key": k, "label": lab, "unit": u} for k, lab, u, _ in POINT_FIGURES],
        "points": out,
    }


def storage_path(src: Source) -> str:
    """The storage a source measured: the data folder, or the io / ceiling path(s)."""
    d = src.doc
    if src.kind == "run":
        return (d.get("dataset") or {}).get("folder") or "-"
    if src.kind == "io":
        return ", ".join(d.get("paths") or []) or "-"
    return d.get("path") or "-"


# ---------------------------------------------------------------------------------------------
# the report document and its renderings


def build(sources: Sequence[Source]) -> Report:
    """The report as one JSON-ready dict: runs compared among themselves, io/ceiling files likewise."""
    runs = [s for s in sources if s.kind == "run"]
    pts = [s for s in sources if s.kind in ("io", "ceiling")]
    fams: Dict[str, List[Source]] = {}
    for s in sources:
        if s.kind == "family":
            fams.setdefault(s.family_parts()[0].schema, []).append(s)
    tables: ReportTables = {}
    if runs:
        tables["runs"] = compare_runs(runs)
    if pts:
        tables["io"] = compare_points(pts)
    if fams:
        tables["families"] = [compare_family(group) for group in fams.values()]
    return {"schema": REPORT_SCHEMA, **tables, "verdicts": verdicts(sources)}


def verdicts(sources: Sequence[Source]) -> List[VerdictRow]:
    """Every recorded verdict of the sources, with the counters it was made from: [{source, phase,
    verdict, part, reason, setting, app_bytes, device_bytes, storage_ratio, resident_before,
    reader_cores, host_busy_share}]; none for results recorded before the counters existed."""
    rows = []
    for s in sources:
        doc = s.doc if isinstance(s.doc, dict) else {}
        if s.kind == "run":
            ranks = doc.get("ranks") or []
            for r in ranks:
                for ep in (r.get("epochs") or []) if isinstance(r, dict) else []:
                    if isinstance(ep, dict) and isinstance(ep.get("verdict"), dict):
                        name = f"epoch {ep.get('epoch')}" + (f" rank {r.get('rank')}" if len(ranks) > 1 else "")
                        rows.append(_verdict_row(s.label, name, ep["verdict"], ep.get("counters")))
        elif s.kind == "family":
            rows += [_verdict_row(s.label, phase, v, c) for phase, v, c in s.family_parts()[1].verdicts]
        else:
            pts = doc.get("points") or doc.get("probes") or []
            for p in pts:
                if isinstance(p, dict) and isinstance(p.get("verdict"), dict):
                    rows.append(_verdict_row(s.label, point_name(p), p["verdict"], p.get("counters")))
    return rows


def _verdict_row(label: str, phase: str, v: Mapping[str, Any], c: Any) -> VerdictRow:
    c = c if isinstance(c, dict) else {}
    dev = c.get("device_bytes") if c.get("device_bytes") is not None else c.get("network_bytes")
    wall = c.get("wall_s") if _num(c.get("wall_s")) and c["wall_s"] > 0 else None
    return {
        "source": label,
        "phase": phase,
        "verdict": v.get("verdict"),
        "part": v.get("part"),
        "reason": v.get("reason"),
        "setting": v.get("setting"),
        "app_bytes": c.get("app_bytes"),
        "device_bytes": dev,
        "storage_ratio": v.get("storage_ratio"),
        "resident_before": c.get("resident_before"),
        "reader_cores": c["reader_cpu_s"] / wall if wall and _num(c.get("reader_cpu_s")) else None,
        "host_busy_share": c.get("host_busy_share"),
    }
