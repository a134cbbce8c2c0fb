"""dlio-fast's own figures of a run, next to DLIO's: exact() (one window per block, bytes really read,
merged latency histograms), metrics_of() (a document's own or computed), dlio-fast.json (dlio_fast_doc)
and the console's final table (exact_table, beside DLIO's figures from dlio.report.dlio.files).

Pure functions of the Result, as DLIO's renderers are (dlio.report.dlio.files has DLIO's files).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, cast

import numpy as np

from dlio.base.units import fmt_figure, fmt_ns
from dlio.report import checkpoint as ckpt_figures
from dlio.report import hosts, interference, metrics, stragglers
from dlio.report.dlio.files import summary
from dlio.report.result import RUN_SCHEMA, BlockFigures, RunResult
from dlio.report.run_figures import checkpoint_records, dialect, train_figures
from dlio.system import stats

# A mean compute overrun above this share of the set compute is worth a note on the console.
OVERRUN_NOTE = 0.01


def exact(result: RunResult) -> Dict[str, Any]:
    """dlio-fast's own figures: one window per block, bytes really read, merged latency histograms."""
    au, thr, eau, esps, ebps = train_figures(result)
    lat = stats.merge([stats.from_json(ep["lat"]) for r in result["ranks"] for ep in r["epochs"]])
    slat = stats.merge([stats.from_json(ep["sample_lat"]) for r in result["ranks"] for ep in r["epochs"]])
    blocks = [_exact_of(ep.get("train")) for r in result["ranks"] for ep in r["epochs"] if ep.get("train")]
    waits_mean = [b["io_wait_mean_s"] for b in blocks]
    waits_p99 = [b["io_wait_p99_s"] for b in blocks]
    overrun_mean = [b.get("compute_overrun_mean_s", 0.0) for b in blocks]
    overrun_max = [b.get("compute_overrun_max_s", 0.0) for b in blocks]
    set_mean = [b.get("compute_set_mean_s", b["compute_mean_s"]) for b in blocks]
    # cpu_s of an epoch includes its evaluation (dlio.train.loop), so its samples count too
    bse = result["settings"].get("batch_size_eval", 0)
    samples = sum(
        ep["samples"] + (ev["steps"] * bse if (ev := ep.get("eval")) else 0)
        for r in result["ranks"]
        for ep in r["epochs"]
    )
    cpu = sum(ep["cpu_s"] for r in result["ranks"] for ep in r["epochs"])
    per_rank: List[Dict[str, Any]] = []
    for r in result["ranks"]:
        eps = [ep for ep in r["epochs"] if ep.get("train")]
        per_rank.append(
            {
                "rank": r["rank"],
                "hostname": r["hostname"],
                "au_percentage": [_exact_of(ep.get("train"))["au_percentage"] for ep in eps],
                "samples_per_second": [_exact_of(ep.get("train"))["samples_per_second"] for ep in eps],
                "bytes_per_second": [_exact_of(ep.get("train"))["bytes_per_second"] for ep in eps],
                "epoch_seconds": [ep["duration_s"] for ep in eps],
                "bytes": sum(ep["bytes"] for ep in eps),
            }
        )
    figures = {
        "au_percentage": eau,
        "au_mean_percentage": metrics.mean_std(eau)[0],
        "samples_per_second": esps,
        "samples_per_second_mean": metrics.mean_std(esps)[0],
        "bytes_per_second": ebps,
        "MiB_per_second_mean": metrics.mean_std(ebps)[0] / 2**20,
        "read_latency_ns": stats.summary(lat, (50.0, 90.0, 99.0, 99.9)),
        "sample_latency_ns": stats.summary(slat, (50.0, 90.0, 99.0, 99.9)),
        "io_wait_per_step_s": {
            "mean": float(np.mean(waits_mean)) if waits_mean else 0.0,
            "p99": float(np.max(waits_p99)) if waits_p99 else 0.0,
        },
        "cpu_us_per_sample": cpu / samples * 1e6 if samples else None,
        # measured compute beyond the set time (a preempted spin): not counted in au_percentage
        "compute_overrun_s": {
            "mean": float(np.mean(overrun_mean)) if blocks else 0.0,
            "max": float(np.max(overrun_max)) if blocks else 0.0,
            "set_mean": float(np.mean(set_mean)) if blocks else 0.0,
        },
        "bytes_read": sum(ep["bytes"] for r in result["ranks"] for ep in r["epochs"]),
        "slowest_rank_epoch_seconds": [
            max(pr["epoch_seconds"][i] for pr in per_rank)
            for i in range(min((len(p["epoch_seconds"]) for p in per_rank), default=0))
        ],
        "per_rank": per_rank,
        "read_latency_hist": stats.to_json(lat),
        "dlio_compat": {
            "dialect": dialect(result),
            "throughput_formula": metrics.THROUGHPUT_FORMULA.get(
                dialect(result), metrics.THROUGHPUT_FORMULA["current"]
            ),
            "train_au_percentage": au,
            "train_throughput_samples_per_second": thr,
        },
        # what the dataset takes on disk per host (summary.json's data_size_per_host_GB is DLIO's
        # samples x record length instead)
        "dataset_bytes_on_disk_per_host": result["dataset"]["bytes_on_disk"] / max(1, len(set(result["hostnames"]))),
    }
    if len(set(result["hostnames"])) > 1:  # which host fell behind: each host's figures beside the totals
        figures["per_host"] = hosts.per_host(result)
        held_back = stragglers.stragglers(result, figures["au_mean_percentage"])  # which host the others waited for
        if held_back is not None:
            figures["stragglers"] = held_back
    return figures


def _exact_of(block: Optional[BlockFigures]) -> Dict[str, Any]:
    """A trained block's exact figures. A block without them is a document this version cannot read:
    TypeError, which dlio.report.source turns into a line naming the file."""
    x = block.get("exact") if block else None
    if x is None:
        raise TypeError("a training block without its exact figures")
    return x


def metrics_of(doc: Mapping[str, Any]) -> Dict[str, Any]:
    """dlio-fast's figures of a run document: the ones it holds (dlio-fast.json, a DLIO folder read as a
    run), else computed from its Result."""
    m = doc.get("metrics")
    return m if isinstance(m, dict) else exact(cast(RunResult, doc))  # a run document holds its Result


def dlio_fast_doc(result: RunResult) -> Dict[str, Any]:
    doc: Dict[str, Any] = {k: v for k, v in result.items() if k != "ranks"}
    doc["schema"] = RUN_SCHEMA
    doc["metrics"] = exact(result)
    ck = checkpoint_records(result)
    if ck:
        doc["checkpoints"] = {"records": ck, **ckpt_figures.summary_fields(ck, result["comm_size"])}
        if interference.summary(ck) is not None:  # checkpoint.async_save: what the saves cost training
            doc["checkpoints"]["async"] = interference.summary(ck)
    doc["ranks"] = result["ranks"]
    return doc


def exact_table(result: RunResult, x: Optional[Dict[str, Any]] = None) -> List[str]:
    """dlio-fast's final table: exact figures next to DLIO's. x: exact(result), when made already."""
    x = exact(result) if x is None else x
    s = summary(result)["metric"]
    lat, slat = x["read_latency_ns"], x["sample_latency_ns"]
    cpu = fmt_ns(x["cpu_us_per_sample"] * 1e3) if x["cpu_us_per_sample"] is not None else "-"
    rows = [
        ("AU (exact | DLIO formula)", f"{x['au_mean_percentage']:.2f} %", f"{s['train_au_mean_percentage']:.2f} %"),
        (
            "samples/s (all ranks)",
            fmt_figure(x["samples_per_second_mean"]),
            fmt_figure(s["train_throughput_mean_samples_per_second"]),
        ),
        (
            "read MiB/s (bytes read)",
            fmt_figure(x["MiB_per_second_mean"]),
            f"{fmt_figure(s['train_io_mean_MB_per_second'])} (nominal)",
        ),
        ("read latency p50 / p99 / p99.9", " / ".join(fmt_ns(lat[p]) for p in ("p50", "p99", "p99.9")), "-"),
        ("sample latency p50 / p99", " / ".join(fmt_ns(slat[p]) for p in ("p50", "p99")), "-"),
        (
            "I/O wait per step mean / p99",
            " / ".join(fmt_ns(x["io_wait_per_step_s"][k] * 1e9) for k in ("mean", "p99")),
            "-",
        ),
        # the readers and the harness; the emulated compute's spin is the accelerator's, not the benchmark's
        ("benchmark CPU per sample", cpu, "-"),
    ]
    over = x["compute_overrun_s"]
    if over["max"] > 0:
        rows.append(
            (
                "compute overrun mean / max",
                f"{fmt_ns(over['mean'] * 1e9)} / {fmt_ns(over['max'] * 1e9)}",
                "counted as compute",
            )
        )
    w = max(len(r[0]) for r in rows)
    out = [f"{'':<{w}}  {'dlio-fast (exact)':>24}  {'DLIO formula':>20}"]
    out += [f"{a:<{w}}  {b:>24}  {c:>20}" for a, b, c in rows]
    out += hosts.host_lines(x.get("per_host") or [])
    out += (x.get("stragglers") or {}).get("summary", [])
    if over["set_mean"] > 0 and over["mean"] > OVERRUN_NOTE * over["set_mean"]:
        out.append(
            f"note: the emulated compute ran over its set time by {fmt_ns(over['mean'] * 1e9)} per step on "
            f"average ({100 * over['mean'] / over['set_mean']:.1f} % of {fmt_ns(over['set_mean'] * 1e9)}), "
            f"at most {fmt_ns(over['max'] * 1e9)}: this host's CPU was busy; dlio-fast's AU counts the set "
            "time, DLIO's counts the overrun as compute"
        )
    return out
