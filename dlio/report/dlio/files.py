"""One run's Result record -> DLIO's output files (summary.json, {rank}_output.json, the per-epoch
stats) and the console's [METRIC] lines.

Every renderer here is a pure function of the Result (a plain dict built by dlio.train and
gathered from all ranks on rank 0), so a result file can be re-rendered later and tests can feed
known Results in. Field names of summary.json / {rank}_output.json / {rank}_per_epoch_stats.json
are DLIO's (docs/dlio-facts.md §7); their figures follow DLIO's formulas (compat; the shared ones in
dlio.report.run_figures). dlio-fast.json holds the exact figures next to them (dlio.report.exact), and
dlio.report.run_files writes a run's folder.
"""

from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

from dlio.report import checkpoint as ckpt_figures
from dlio.report import metrics
from dlio.report.dlio.timeline import block_times, secs, trailing_empty_block, train_end, wall
from dlio.report.result import CheckpointRecord, RunResult
from dlio.report.run_figures import checkpoint_records, dialect, eval_figures, train_blocks, train_figures, trained


def ranks_per_host(result: RunResult) -> int:
    """DLIO's npernode: the most ranks on one host."""
    return max(Counter(result["hostnames"]).values()) if result.get("hostnames") else 1


def data_size_per_host_bytes(result: RunResult) -> float:
    """DLIO's data_size_per_host (statscounter.py, both versions): npernode * samples per file *
    train files // ranks * record length: the samples a host's ranks consume in one epoch."""
    d = result["dataset"]
    size = max(1, int(result["comm_size"]))
    return (ranks_per_host(result) * d["num_samples_per_file"] * d["num_files_train"] // size) * float(
        result["settings"]["record_length_bytes"]
    )


def per_host_gib(result: RunResult) -> float:
    return data_size_per_host_bytes(result) / 1024**3


def _per_host(result: RunResult, key: str, default: Any) -> List[Any]:
    """DLIO's per-host list of a host field (hosts in the order of their first rank): each host's own
    value as its ranks recorded it, rank 0's host's for records without it."""
    seen: Dict[str, Any] = {}
    for r in result["ranks"]:
        seen.setdefault(r["hostname"], r.get(key, default))
    for h in result["hostnames"]:
        seen.setdefault(h, default)
    return list(seen.values()) or [default]


def summary(result: RunResult) -> Dict[str, Any]:
    """DLIO's summary.json, keys in DLIO's order."""
    s = result["settings"]
    done = result.get("complete", True)
    au, thr, _, _, _ = train_figures(result)
    m = {}
    checkpoint_only = not trained(result) and bool(checkpoint_records(result))
    if not checkpoint_only:  # current DLIO writes train_* only when it trained (do_train)
        au_mean, au_std = metrics.mean_std(au)
        thr_mean, thr_std = metrics.mean_std(thr)
        mib = s["record_length_bytes"] / 1024**2
        m = {
            "train_au_percentage": au,
            "train_au_mean_percentage": au_mean,
            # An interrupted run met nothing: its AU covers the steps it ran, not the workload.
            "train_au_meet_expectation": "success" if done and au and au_mean >= 100.0 * s["metric_au"] else "fail",
            "train_au_stdev_percentage": au_std,
            "train_throughput_samples_per_second": thr,
            "train_throughput_mean_samples_per_second": thr_mean,
            "train_throughput_stdev_samples_per_second": thr_std,
            "train_io_mean_MB_per_second": thr_mean * mib,
            "train_io_stdev_MB_per_second": thr_std * mib,
        }
    eau, ethr = eval_figures(result)
    if eau:
        mib = s["record_length_bytes"] / 1024**2
        ea_m, ea_s = metrics.mean_std(eau)
        et_m, et_s = metrics.mean_std(ethr)
        m.update(
            {
                "eval_au_percentage": eau,
                "eval_au_mean_percentage": ea_m,
                "eval_au_meet_expectation": "success" if done and ea_m >= 100.0 * s["metric_au"] else "fail",
                "eval_au_stdev_percentage": ea_s,
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
    if ck and dialect(result) != "2.0.0":  # current DLIO's checkpoint fields (rank 0's durations); 2.0.0 has none
        m = {**{k: v for k, v in ckpt_figures.summary_fields(ck, result["comm_size"]).items() if k != "exact"}, **m}
    nhosts = len(set(result["hostnames"]))
    mem_gib = host.get("memory_GiB", host["memory_GB"])  # DLIO's field: GiB
    cpus, mems = _per_host(result, "host_cpu_count", host["cpu_count"]), _per_host(result, "host_memory_GiB", mem_gib)
    data_gib = per_host_gib(result)
    out = {
        "start": result["start"],
        "num_accelerators": result["comm_size"],
        "num_hosts": nhosts,
        "hostname": result["hostnames"][0],
        "metric": m,
        "num_files_train": d["num_files_train"],
        "num_files_eval": d["num_files_eval"],
        "num_samples_per_file": d["num_samples_per_file"],
        "host_cpu_count": cpus,
        "host_processor_name": host.get("platform_processor", host["processor_name"]),
        # DLIO: 1 where the host's memory is larger than what its ranks read in an epoch
        "potential_caching": [int(m > data_gib) for m in mems],
    }
    for key in ("cpuinfo", "meminfo"):  # DLIO leaves them out without /proc
        if key in host:
            out[f"host_{key}"] = host[key]
    out.update(
        {
            "host_memory_GB": mems,
            "data_size_per_host_GB": data_gib,
            "epochs": len(au),
            "end": result["end"],
        }
    )
    return out


def rank_output(result: RunResult, r: int, data_gib: Optional[float] = None) -> Dict[str, Any]:
    """DLIO's {rank}_output.json: per epoch the per-step load/proc/compute lists, AU, throughput. data_gib:
    per_host_gib(result), computed once by a caller writing every rank's file (it counts every rank's host)."""
    data_gib = per_host_gib(result) if data_gib is None else data_gib
    rank = result["ranks"][r]
    host = result["host"]
    out = {
        "host_memory_GB": host.get("memory_GiB", host["memory_GB"]),  # GiB
        "host_cpu_count": host["cpu_count"],
        "host_processor_name": host.get("platform_processor", host["processor_name"]),
        "potential_caching": int(data_gib <= host.get("memory_GiB", host["memory_GB"])),
    }
    for key in ("cpuinfo", "meminfo"):
        if key in host:
            out[f"host_{key}"] = host[key]
    current = dialect(result) != "2.0.0"
    batch = result["settings"]["batch_size"]
    for ep in rank["epochs"]:
        if not ep.get("train"):
            continue
        blocks = train_blocks(ep)
        rec: Dict[str, Any] = {
            key: {f"block{i}": list(b[key]) for i, b in enumerate(blocks, 1)} for key in ("load", "proc")
        }
        figs = [metrics.dlio_block_figures(b, batch, dialect(result)) for b in blocks]
        rec["throughput"] = {f"block{i}": f[1] for i, f in enumerate(figs, 1)}
        rec["au"] = {f"block{i}": f[0] for i, f in enumerate(figs, 1)}
        rec["compute"] = {f"block{i}": list(b["compute"]) for i, b in enumerate(blocks, 1)}
        if trailing_empty_block(result, ep):
            k = f"block{len(blocks) + 1}"
            for key in ("load", "proc", "compute"):
                rec[key][k] = []
            rec["throughput"][k] = 0.0  # current DLIO writes (0 - 2) * batch / T here, a negative figure
            rec["au"][k] = 0.0
        if "host_meminfo" in ep:
            rec["host_meminfo"] = ep["host_meminfo"]
        ev = ep.get("eval")
        if ev:
            for key in ("load", "proc", "compute"):
                rec[key]["eval"] = ev[key]
            rec["throughput"]["eval"] = ev["throughput"]
            rec["au"]["eval"] = ev["au"]
        if current and ep.get("end"):
            rec["end"] = ep["end"]
        out[str(ep["epoch"])] = rec
    phase = rank.get("checkpoint_phase")
    if current and rank.get("checkpoints") and phase:  # a checkpoint-only run: DLIO's one empty epoch
        out["1"] = {"start": phase["start"], "load": {}, "proc": {}, "throughput": {}, "au": {}, "compute": {}}
        out["1"]["end"] = phase["end"]
    out["hostname"] = rank["hostname"]
    return out


def _ckpt_entry(result: RunResult, c: CheckpointRecord) -> Tuple[str, Dict[str, Any]]:
    if dialect(result) == "2.0.0":
        return f"ckpt{c.get('block', 1)}", {
            "start": c["start"],
            "end": c["end"],
            "duration": secs(c["start"], c["end"]),
        }
    return f"{c.get('kind', 'save')}_ckpt{c.get('block', 1)}", ckpt_figures.per_epoch_entry(c)


def per_epoch_stats(result: RunResult, r: int) -> Dict[str, Any]:
    """DLIO's per-epoch stats of rank r (durations as strings with 2 decimals, as DLIO): start, the
    blocks with the checkpoints between them, end, duration, eval (result.py's docstring)."""
    rank = result["ranks"][r]
    current = dialect(result) != "2.0.0"
    out = {}
    for ep in rank["epochs"]:
        if not ep.get("train"):
            continue
        rec: Dict[str, Any] = {"start": ep["start"]}
        times = block_times(rank, ep)
        saves = sorted(ep.get("checkpoints") or [], key=lambda c: wall(c["start"]) if c.get("start") else 0)
        for i, (t0, t1, dur) in enumerate(times, 1):
            rec[f"block{i}"] = {"start": t0, "end": t1, "duration": dur}
            for c in saves:
                if c.get("block", 1) == i:
                    k, v = _ckpt_entry(result, c)
                    rec[k] = v
        if trailing_empty_block(result, ep):
            t = max(c["end"] for c in saves)
            rec[f"block{len(times) + 1}"] = {"start": t, "end": t, "duration": "0.00"}
        for c in saves:  # a checkpoint whose block is not one of the blocks recorded (an interrupted epoch)
            k, v = _ckpt_entry(result, c)
            rec.setdefault(k, v)
        t_end = train_end(ep)
        rec["end"] = ep["end"] if current and ep.get("end") else t_end
        rec["duration"] = secs(ep["start"], t_end)
        if ep.get("eval"):
            ev_end = ep["end"] or ep["eval_start"]
            rec["eval"] = {"start": ep["eval_start"], "end": ev_end, "duration": secs(ep["eval_start"], ev_end)}
        out[str(ep["epoch"])] = rec
    phase = rank.get("checkpoint_phase")
    if rank.get("checkpoints"):  # checkpoint-only: one epoch of saves then loads (current DLIO's _checkpoint)
        recs = rank["checkpoints"]
        rec = {"start": phase["start"] if phase else min((c["start"] for c in recs), key=wall)}
        for kind in ("save", "load"):
            for c in recs:
                if c.get("kind", "save") == kind:
                    k, v = _ckpt_entry(result, c)
                    rec[k] = v
        rec["end"] = phase["end"] if phase else max((c["end"] for c in recs), key=wall)
        out["1"] = rec
    return out


def _mean_sd(m: Dict[str, Any], prefix: str, suffix: str, dec: int) -> str:
    """DLIO's "mean (stdev)" of the summary fields {prefix}_mean{suffix} and {prefix}_stdev{suffix}."""
    return f"{m[f'{prefix}_mean{suffix}']:.{dec}f} ({m[f'{prefix}_stdev{suffix}']:.{dec}f})"


def metric_lines(result: RunResult) -> List[str]:
    """DLIO's [METRIC] block, for the console (dlio.log has DLIO's exact block: dlio.report.dlio.log)."""
    s = summary(result)
    m = s["metric"]
    lines = [
        "[METRIC] ==========================================================",
        f"[METRIC] Number of Simulated Accelerators: {s['num_accelerators']}",
    ]
    if "train_au_mean_percentage" in m:  # not in a checkpoint-only run
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


def per_epoch_file(result: RunResult, rank: int) -> Optional[str]:
    """The per-epoch stats file of a rank: 2.0.0 writes one, per_epoch_stats.json, from rank 0;
    current DLIO one per rank. None: this rank writes none."""
    if dialect(result) == "2.0.0":
        return "per_epoch_stats.json" if rank == 0 else None
    return f"{rank}_per_epoch_stats.json"
