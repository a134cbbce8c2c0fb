"""One run's Result record -> DLIO's output files, dlio-fast.json, the console.

Every renderer here is a pure function of the Result (a plain dict built by dlio.train and
gathered from all ranks on rank 0), so a result file can be re-rendered later and tests can feed
known Results in. Field names of summary.json / {rank}_output.json / {rank}_per_epoch_stats.json
are DLIO's (docs/dlio-facts.md §7); their figures follow DLIO's formulas (compat). dlio-fast.json holds
the exact figures next to them.
"""

import os

import numpy as np

from dlio import output, stats
from dlio.report import checkpoint as ckpt_figures
from dlio.report import metrics
from dlio.report.result import RUN_SCHEMA
from dlio.units import fmt_ns

# A mean compute overrun above this share of the set compute is worth a note on the console.
OVERRUN_NOTE = 0.01


def _epochs(result):
    """Epoch numbers present on every rank (an interrupted run may have fewer on some)."""
    per_rank = [[e["epoch"] for e in r["epochs"] if e.get("train")] for r in result["ranks"]]
    if not per_rank:
        return []
    common = set(per_rank[0]).intersection(*per_rank[1:]) if len(per_rank) > 1 else set(per_rank[0])
    return sorted(common)


def _epoch(rank, e):
    for rec in rank["epochs"]:
        if rec["epoch"] == e:
            return rec
    return None


def train_figures(result):
    """Per-epoch DLIO figures reduced over ranks: AU averaged, samples/s summed (docs/dlio-facts.md §3.3)."""
    au, thr, exact_au, exact_sps, exact_bps = [], [], [], [], []
    for e in _epochs(result):
        recs = [_epoch(r, e)["train"] for r in result["ranks"]]
        au.append(float(np.mean([b["au"] for b in recs])))
        thr.append(float(np.sum([b["throughput"] for b in recs])))
        exact_au.append(float(np.mean([b["exact"]["au_percentage"] for b in recs])))
        exact_sps.append(float(np.sum([b["exact"]["samples_per_second"] for b in recs])))
        # aggregate bandwidth: all ranks' bytes over the slowest rank's window
        nbytes = sum(b["exact"]["bytes"] for b in recs)
        window = max(b["exact"]["window_s"] for b in recs)
        exact_bps.append(nbytes / window if window > 0 else 0.0)
    return au, thr, exact_au, exact_sps, exact_bps


def eval_figures(result):
    au, thr = [], []
    for e in _epochs(result):
        recs = [_epoch(r, e).get("eval") for r in result["ranks"]]
        if any(x is None for x in recs):
            continue
        au.append(float(np.mean([b["au"] for b in recs])))
        thr.append(float(np.sum([b["throughput"] for b in recs])))
    return au, thr


def _per_host_bytes(result):
    """Dataset bytes per host (DLIO's data_size_per_host): what one host's page cache could hold."""
    return result["dataset"]["bytes_on_disk"] / max(1, len(set(result["hostnames"])))


def checkpoint_records(result):
    """Every checkpoint save/load record of the run, all ranks (training and checkpoint-only)."""
    recs = [c for r in result["ranks"] for ep in r["epochs"] for c in ep.get("checkpoints") or []]
    return recs + [c for r in result["ranks"] for c in r.get("checkpoints") or []]


def summary(result):
    """DLIO's summary.json."""
    s = result["settings"]
    done = result.get("complete", True)
    au, thr, _, _, _ = train_figures(result)
    au_mean, au_std = metrics.mean_std(au)
    thr_mean, thr_std = metrics.mean_std(thr)
    mib = s["record_length_bytes"] / 1024**2
    io_mb = [t * mib for t in thr]
    io_mean, io_std = metrics.mean_std(io_mb)
    m = {
        "train_au_percentage": au,
        "train_au_mean_percentage": au_mean,
        "train_au_stdev_percentage": au_std,
        # An interrupted run met nothing: its AU covers the steps it ran, not the workload.
        "train_au_meet_expectation": "success" if done and au and au_mean >= 100.0 * s["metric_au"] else "fail",
        "train_throughput_samples_per_second": thr,
        "train_throughput_mean_samples_per_second": thr_mean,
        "train_throughput_stdev_samples_per_second": thr_std,
        "train_io_mean_MB_per_second": io_mean,
        "train_io_stdev_MB_per_second": io_std,
    }
    eau, ethr = eval_figures(result)
    if eau:
        ea_m, ea_s = metrics.mean_std(eau)
        et_m, et_s = metrics.mean_std(ethr)
        m.update(
            {
                "eval_au_percentage": eau,
                "eval_au_mean_percentage": ea_m,
                "eval_au_stdev_percentage": ea_s,
                "eval_au_meet_expectation": "success" if done and ea_m >= 100.0 * s["metric_au"] else "fail",
                "eval_throughput_samples_per_second": ethr,
                "eval_throughput_mean_samples_per_second": et_m,
                "eval_throughput_stdev_samples_per_second": et_s,
                "eval_io_mean_MB_per_second": et_m * mib,
                "eval_io_stdev_MB_per_second": et_s * mib,
            }
        )
    host = result["host"]
    d = result["dataset"]
    ck = checkpoint_records(result)
    if ck:  # DLIO's checkpoint fields (rank 0's durations, as DLIO computes them)
        m.update({k: v for k, v in ckpt_figures.summary_fields(ck, result["comm_size"]).items() if k != "exact"})
    return {
        "start": result["start"],
        "end": result["end"],
        "num_accelerators": result["comm_size"],
        "num_hosts": len(set(result["hostnames"])),
        "hostname": result["hostnames"][0],
        "epochs": len(au),
        "num_files_train": d["num_files_train"],
        "num_files_eval": d["num_files_eval"],
        "num_samples_per_file": d["num_samples_per_file"],
        "host_cpu_count": [host["cpu_count"]],
        "host_processor_name": host["processor_name"],
        "host_cpuinfo": host.get("cpuinfo", {}),
        "host_meminfo": host.get("meminfo", {}),
        "host_memory_GB": [host.get("memory_GiB", host["memory_GB"])],  # DLIO's field: GiB
        "data_size_per_host_GB": _per_host_bytes(result) / 1024**3,
        "potential_caching": [int(_per_host_bytes(result) <= host["memory_bytes"])],
        "metric": m,
    }


def rank_output(result, r):
    """DLIO's {rank}_output.json: per epoch the per-step load/proc/compute lists, AU, throughput."""
    rank = result["ranks"][r]
    out = {
        "hostname": rank["hostname"],
        "host_cpu_count": result["host"]["cpu_count"],
        "host_processor_name": result["host"]["processor_name"],
        "host_memory_GB": result["host"].get("memory_GiB", result["host"]["memory_GB"]),  # GiB
        "host_cpuinfo": result["host"].get("cpuinfo", {}),
        "host_meminfo": result["host"].get("meminfo", {}),
        "potential_caching": int(_per_host_bytes(result) <= result["host"]["memory_bytes"]),
    }
    for ep in rank["epochs"]:
        t = ep.get("train")
        if not t:
            continue
        blocks = ep.get("blocks") or [t]  # step checkpoints split an epoch into blocks
        rec = {
            key: {f"block{i}": b[key] for i, b in enumerate(blocks, 1)}
            for key in ("load", "proc", "compute", "throughput", "au")
        }
        rec["end"] = ep["end"]
        ev = ep.get("eval")
        if ev:
            rec["load"]["eval"] = ev["load"]
            rec["proc"]["eval"] = ev["proc"]
            rec["compute"]["eval"] = ev["compute"]
            rec["throughput"]["eval"] = ev["throughput"]
            rec["au"]["eval"] = ev["au"]
        out[str(ep["epoch"])] = rec
    return out


def per_epoch_stats(result, r):
    """DLIO's {rank}_per_epoch_stats.json (durations as strings with 2 decimals, as DLIO)."""
    out = {}
    for ep in result["ranks"][r]["epochs"]:
        t = ep.get("train")
        if not t:
            continue
        rec = {"start": ep["start"], "end": ep["end"], "duration": f"{ep['duration_s']:.2f}"}
        for i, b in enumerate(ep.get("blocks") or [t], 1):
            rec[f"block{i}"] = {
                "start": ep["start"] if i == 1 else "",
                "end": ep["train_end"],
                "duration": f"{b['duration_s']:.2f}",
            }
        for c in ep.get("checkpoints") or []:
            rec[f"save_ckpt{c.get('block', 1)}"] = ckpt_figures.per_epoch_entry(c)
        if ep.get("eval"):
            rec["eval"] = {"start": ep["eval_start"], "end": ep["end"], "duration": f"{ep['eval']['duration_s']:.2f}"}
        out[str(ep["epoch"])] = rec
    return out


def exact(result):
    """dlio-fast's own figures: one window per block, bytes really read, merged latency histograms."""
    au, thr, eau, esps, ebps = train_figures(result)
    lat = stats.merge([stats.from_json(ep["lat"]) for r in result["ranks"] for ep in r["epochs"]])
    slat = stats.merge([stats.from_json(ep["sample_lat"]) for r in result["ranks"] for ep in r["epochs"]])
    blocks = [ep["train"] for r in result["ranks"] for ep in r["epochs"] if ep.get("train")]
    waits_mean = [b["exact"]["io_wait_mean_s"] for b in blocks]
    waits_p99 = [b["exact"]["io_wait_p99_s"] for b in blocks]
    overrun_mean = [b["exact"].get("compute_overrun_mean_s", 0.0) for b in blocks]
    overrun_max = [b["exact"].get("compute_overrun_max_s", 0.0) for b in blocks]
    set_mean = [b["exact"].get("compute_set_mean_s", b["exact"]["compute_mean_s"]) for b in blocks]
    # cpu_s of an epoch includes its evaluation (dlio.train.loop), so its samples count too
    bse = result["settings"].get("batch_size_eval", 0)
    samples = sum(
        ep["samples"] + (ep["eval"]["steps"] * bse if ep.get("eval") else 0)
        for r in result["ranks"]
        for ep in r["epochs"]
    )
    cpu = sum(ep["cpu_s"] for r in result["ranks"] for ep in r["epochs"])
    per_rank = []
    for r in result["ranks"]:
        eps = [ep for ep in r["epochs"] if ep.get("train")]
        per_rank.append(
            {
                "rank": r["rank"],
                "hostname": r["hostname"],
                "au_percentage": [ep["train"]["exact"]["au_percentage"] for ep in eps],
                "samples_per_second": [ep["train"]["exact"]["samples_per_second"] for ep in eps],
                "bytes_per_second": [ep["train"]["exact"]["bytes_per_second"] for ep in eps],
                "epoch_seconds": [ep["duration_s"] for ep in eps],
                "bytes": sum(ep["bytes"] for ep in eps),
            }
        )
    return {
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
        "dlio_compat": {"train_au_percentage": au, "train_throughput_samples_per_second": thr},
    }


def dlio_fast_doc(result):
    doc = {k: v for k, v in result.items() if k != "ranks"}
    doc["schema"] = RUN_SCHEMA
    doc["metrics"] = exact(result)
    ck = checkpoint_records(result)
    if ck:
        doc["checkpoints"] = {"records": ck, **ckpt_figures.summary_fields(ck, result["comm_size"])}
    doc["ranks"] = result["ranks"]
    return doc


def _mean_sd(m, prefix, suffix, dec):
    """DLIO's "mean (stdev)" of the summary fields {prefix}_mean{suffix} and {prefix}_stdev{suffix}."""
    return f"{m[f'{prefix}_mean{suffix}']:.{dec}f} ({m[f'{prefix}_stdev{suffix}']:.{dec}f})"


def metric_lines(result):
    """DLIO's [METRIC] block."""
    s = summary(result)
    m = s["metric"]
    lines = [
        "[METRIC] ==========================================================",
        f"[METRIC] Number of Simulated Accelerators: {s['num_accelerators']}",
    ]
    # A checkpoint-only run trained nothing: its AU of 0 and "fail" (still in summary.json, as
    # DLIO writes them) would only mislead on the console.
    if any(r["epochs"] for r in result["ranks"]):
        lines += [
            f"[METRIC] Training Accelerator Utilization [AU] (%): {_mean_sd(m, 'train_au', '_percentage', 4)}",
            "[METRIC] Training Throughput (samples/second): "
            f"{_mean_sd(m, 'train_throughput', '_samples_per_second', 4)}",
            f"[METRIC] Training I/O Throughput (MB/second): {_mean_sd(m, 'train_io', '_MB_per_second', 4)}",
            f"[METRIC] train_au_meet_expectation: {m['train_au_meet_expectation']}",
        ]
    if "eval_au_mean_percentage" in m:
        lines += [
            f"[METRIC] Eval Accelerator Utilization [AU] (%): {_mean_sd(m, 'eval_au', '_percentage', 4)}",
            f"[METRIC] Eval Throughput (samples/second): {_mean_sd(m, 'eval_throughput', '_samples_per_second', 6)}",
            f"[METRIC] Eval Throughput (MB/second): {_mean_sd(m, 'eval_io', '_MB_per_second', 6)}",
            f"[METRIC] eval_au_meet_expectation: {m['eval_au_meet_expectation']}",
        ]
    ck = checkpoint_records(result)
    if ck:
        lines += [
            "[METRIC] " + x for x in ckpt_figures.metric_lines(ckpt_figures.summary_fields(ck, result["comm_size"]))
        ]
    lines.append("[METRIC] ==========================================================")
    return lines


def exact_table(result):
    """dlio-fast's final table: exact figures next to DLIO's."""
    x = exact(result)
    s = summary(result)["metric"]
    lat, slat = x["read_latency_ns"], x["sample_latency_ns"]
    cpu = f"{x['cpu_us_per_sample']:.2f}" if x["cpu_us_per_sample"] is not None else "-"
    rows = [
        ("accelerator utilisation (AU)", f"{x['au_mean_percentage']:.2f} %", f"{s['train_au_mean_percentage']:.2f} %"),
        (
            "samples/s (all ranks)",
            f"{x['samples_per_second_mean']:.1f}",
            f"{s['train_throughput_mean_samples_per_second']:.1f}",
        ),
        (
            "read MiB/s (bytes read)",
            f"{x['MiB_per_second_mean']:.1f}",
            f"{s['train_io_mean_MB_per_second']:.1f} (nominal)",
        ),
        (
            "read latency p50 / p99 / p99.9",
            f"{lat['p50'] / 1e3:.1f} / {lat['p99'] / 1e3:.1f} / {lat['p99.9'] / 1e3:.1f} us",
            "-",
        ),
        ("sample latency p50 / p99", f"{slat['p50'] / 1e3:.1f} / {slat['p99'] / 1e3:.1f} us", "-"),
        (
            "I/O wait per step mean / p99",
            f"{x['io_wait_per_step_s']['mean'] * 1e3:.3f} / {x['io_wait_per_step_s']['p99'] * 1e3:.3f} ms",
            "-",
        ),
        ("benchmark CPU per sample", f"{cpu} us", "-"),
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
    if over["set_mean"] > 0 and over["mean"] > OVERRUN_NOTE * over["set_mean"]:
        out.append(
            f"note: the emulated compute ran over its set time by {fmt_ns(over['mean'] * 1e9)} per step on "
            f"average ({100 * over['mean'] / over['set_mean']:.1f} % of {fmt_ns(over['set_mean'] * 1e9)}), "
            f"at most {fmt_ns(over['max'] * 1e9)}: this host's CPU was busy; dlio-fast's AU counts the set "
            "time, DLIO's counts the overrun as compute"
        )
    return out


def write_rank_files(result, folder, rank):
    """One rank's own output files (its DLIO files and dlio-fast.rank{rank}.json), for a multi-rank run
    that failed or was interrupted: the ranks cannot gather, so each keeps what it measured."""
    os.makedirs(folder, exist_ok=True)
    output.write_json(os.path.join(folder, f"{rank}_output.json"), rank_output(result, 0))
    output.write_json(os.path.join(folder, f"{rank}_per_epoch_stats.json"), per_epoch_stats(result, 0))
    output.write_json(os.path.join(folder, f"dlio-fast.rank{rank}.json"), dlio_fast_doc(result))


def write_all(result, folder, resolved_config_yaml=None):
    """Write every output file of a run into folder (each atomically). Rank 0 calls this."""
    os.makedirs(folder, exist_ok=True)
    output.write_json(os.path.join(folder, "summary.json"), summary(result))
    for r in range(len(result["ranks"])):
        rank = result["ranks"][r]["rank"]
        output.write_json(os.path.join(folder, f"{rank}_output.json"), rank_output(result, r))
        output.write_json(os.path.join(folder, f"{rank}_per_epoch_stats.json"), per_epoch_stats(result, r))
    output.write_json(os.path.join(folder, "dlio-fast.json"), dlio_fast_doc(result))
    if resolved_config_yaml is not None:
        output.atomic_write_text(os.path.join(folder, "config.yaml"), resolved_config_yaml)
