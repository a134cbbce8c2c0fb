"""dlio.log: DLIO's log of a run, rendered from its Result in the config's dialect.

The lines are DLIO's (main.py and statscounter.py of each version), with rank 0's times: the run
header, "Max steps per epoch", per epoch "Starting epoch", each block's start/end with its AU and
throughput, the checkpoints, "Ending epoch", the evaluation, and the [METRIC] block, the part people
and scripts grep. Current DLIO prefixes them "[OUTPUT] <time>", 2.0.0 "[INFO] <time>" (2.0.0 also
appends the Python source location, which has no meaning here and is left out). The per-step debug
lines of DLIO's INFO level are not written (`dlio-fast run -v` prints them).
"""

from __future__ import annotations

from typing import Callable, List

import numpy as np

from dlio.report import checkpoint as ckpt_figures
from dlio.report import metrics
from dlio.report.dlio.files import summary
from dlio.report.dlio.timeline import block_times, secs, trailing_empty_block, train_end, wall
from dlio.report.result import CheckpointRecord, EpochRecord, RankRecord, RunResult
from dlio.report.run_figures import checkpoint_records, dialect, train_blocks, trained

CACHE_WARNING = (
    "The amount of dataset is smaller than the host memory; data might be cached after the first epoch. "
    "Increase the size of dataset to eliminate the caching effect!!!"
)
RULE = "[METRIC] =========================================================="


def _mode(result: RunResult) -> str:
    """DLIO's "[Training & Evaluation & Checkpointing]" from what the run did (checkpointing: the
    run had a checkpoint plan, workflow.checkpoint; data generation is dlio-fast's own step)."""
    mode = []
    if trained(result):
        mode.append("Training")
    if any(ep.get("eval") for r in result["ranks"] for ep in r["epochs"]):
        mode.append("Evaluation")
    if result.get("checkpoint_plan") or checkpoint_records(result):
        mode.append("Checkpointing")
    return " & ".join(mode)


def _epoch_lines(result: RunResult, say: Callable[[str, str], None], ep: EpochRecord) -> None:
    legacy = dialect(result) == "2.0.0"
    rank = result["ranks"][0]
    comm = result["comm_size"]
    batch = result["settings"]["batch_size"]
    e = ep["epoch"]
    say(ep["start"], f"Starting epoch {e}: {ep.get('steps_planned', ep.get('steps_done', 0))} steps expected")
    blocks = train_blocks(ep)
    times = block_times(rank, ep)
    cks = sorted(ep.get("checkpoints") or [], key=lambda c: wall(c["start"]))
    for i, (b, (t0, t1, dur)) in enumerate(zip(blocks, times), 1):
        au, thr = metrics.dlio_block_figures(b, batch, dialect(result))
        say(t0, f"Starting block {i}")
        say(t1, f"Ending block {i} - {b['steps']} steps completed in {dur} s")
        say(t1, f"Epoch {e} - Block {i} [Training] Accelerator Utilization [AU] (%): {au:.4f}")
        say(t1, f"Epoch {e} - Block {i} [Training] Throughput (samples/second): {thr * comm:.4f}")
        if not legacy:
            comp = np.asarray(b["compute"], dtype=np.float64)
            set_value = {"mean": result["settings"].get("computation_time_mean_s")}
            say(
                t1,
                f"Epoch {e} - Block {i} [Training] Computation time per step (second): "
                f"{comp.mean():.4f}+/-{comp.std():.4f} (set value: {set_value})",
            )
        for c in cks:
            if c.get("block", 1) == i:
                # an epoch checkpoint's folder step is steps + 1; DLIO's line names the last step
                _checkpoint_lines(say, {**c, "step": min(c.get("step", 0), ep.get("steps_done", 0))}, legacy, e)
    if trailing_empty_block(result, ep):  # current DLIO's empty last block (dlio.report.dlio.files)
        i, t = len(blocks) + 1, max(c["end"] for c in cks)
        say(t, f"Starting block {i}")
        say(t, f"Ending block {i} - 0 steps completed in 0.00 s")
        say(t, f"Epoch {e} - Block {i} [Training] Accelerator Utilization [AU] (%): {0.0:.4f}")
        say(t, f"Epoch {e} - Block {i} [Training] Throughput (samples/second): {0.0:.4f}")
        say(t, f"Epoch {e} - Block {i} [Training] Computation time per step (second): nan+/-nan")
    say(
        train_end(ep),
        f"Ending epoch {e} - {ep.get('steps_done', 0)} steps completed in {secs(ep['start'], train_end(ep))} s",
    )
    ev = ep.get("eval")
    if ev:
        end = ep["end"] or ep["eval_start"]
        say(ep["eval_start"], f"Starting eval - {ev['steps']} steps expected")
        say(end, f"Ending eval - {ev['steps']} steps completed in {secs(ep['eval_start'], end)} s")
        say(end, f"Epoch {e} [Eval] Accelerator Utilization [AU] (%): {ev['au']:.4f}")
        say(end, f"Epoch {e} [Eval] Throughput (samples/second): {ev['throughput'] * comm:.4f}")


def _checkpoint_lines(say: Callable[[str, str], None], c: CheckpointRecord, legacy: bool, epoch: int) -> None:
    b = c.get("block", 1)
    if legacy:
        say(c["start"], f"Starting checkpoint {b} after total step {c.get('step', 0)} for epoch {epoch}")
        say(c["end"], f"Ending checkpoint {b} for epoch {epoch}")
        return
    verb, done = ("saving", "saving") if c.get("kind", "save") == "save" else ("loading", "loading")
    say(c["start"], f"Starting {verb} checkpoint {b} after total step {c.get('step', b)} for epoch {epoch}")
    say(
        c["end"],
        f"Finished {done} checkpoint {b} for epoch {epoch} in {c['duration_s']:.4f} s; "
        f"Throughput: {c['dlio_throughput_GB_per_second']:.4f} GB/s",
    )


def metric_block(result: RunResult) -> List[str]:
    """DLIO's [METRIC] block as its end_run formats it (current: train, checkpoint, eval lines)."""
    s = summary(result)
    m = s["metric"]
    legacy = dialect(result) == "2.0.0"
    out = [RULE, f"[METRIC] Number of Simulated Accelerators: {s['num_accelerators']} "]

    def msd(prefix: str, suffix: str, dec: int) -> str:
        return f"{m[f'{prefix}_mean{suffix}']:.{dec}f} ({m[f'{prefix}_stdev{suffix}']:.{dec}f})"

    if "train_au_mean_percentage" in m:
        out += [
            f"[METRIC] Training Accelerator Utilization [AU] (%): {msd('train_au', '_percentage', 4)}",
            f"[METRIC] Training Throughput (samples/second): {msd('train_throughput', '_samples_per_second', 4)}",
            f"[METRIC] Training I/O Throughput (MB/second): {msd('train_io', '_MB_per_second', 4)}",
            f"[METRIC] train_au_meet_expectation: {m['train_au_meet_expectation']}",
        ]
    ck = checkpoint_records(result)
    if ck and not legacy:
        f = ckpt_figures.summary_fields(ck, result["comm_size"])
        f.pop("exact", None)
        out += ["[METRIC] " + x for x in ckpt_figures.metric_lines(f)]
    if "eval_au_mean_percentage" in m:
        out += [
            f"[METRIC] Eval Accelerator Utilization [AU] (%): {msd('eval_au', '_percentage', 4)}",
            f"[METRIC] Eval Throughput (samples/second): {msd('eval_throughput', '_samples_per_second', 6)}",
            f"[METRIC] Eval Throughput (MB/second): {msd('eval_io', '_MB_per_second', 6)}",
            f"[METRIC] eval_au_meet_expectation: {m['eval_au_meet_expectation']}",
        ]
    out.append(RULE)
    return out


def render(result: RunResult, folder: str) -> str:
    """The text of dlio.log for a run whose files are written into `folder`."""
    legacy = dialect(result) == "2.0.0"
    tag = "[INFO]" if legacy else "[OUTPUT]"
    lines: List[str] = []

    def say(ts: str, msg: str) -> None:
        lines.append(f"{tag} {ts} {msg}")

    s = summary(result)
    d = result["dataset"]
    st = result["settings"]
    comm = result["comm_size"]
    say(result["start"], f"Running DLIO {'' if legacy else f'[{_mode(result)}] '}with {comm} process(es)")
    if trained(result):
        if s["potential_caching"] and s["potential_caching"][0]:
            lines.append(f"[WARNING] {CACHE_WARNING}")
        total = d["num_samples_per_file"] * d["num_files_train"] // st["batch_size"] // comm
        say(
            result["start"],
            f"Max steps per epoch: {total} = {d['num_samples_per_file']} * {d['num_files_train']} / "
            f"{st['batch_size']} / {comm} (samples per file * num files / batch size / comm size)",
        )
        if d.get("num_files_eval") and st.get("batch_size_eval"):
            total = d["num_samples_per_file"] * d["num_files_eval"] // st["batch_size_eval"] // comm
            say(
                result["start"],
                f"Steps per eval: {total} = {d['num_samples_per_file']} * {d['num_files_eval']} / "
                f"{st['batch_size_eval']} / {comm} (samples per file * num files / batch size eval / comm size)",
            )
    no_rank: RankRecord = {"rank": 0, "hostname": "", "epochs": []}
    rank0 = result["ranks"][0] if result["ranks"] else no_rank
    for ep in rank0["epochs"]:
        if ep.get("train"):
            _epoch_lines(result, say, ep)
    cks = rank0.get("checkpoints") or []
    if cks:
        saves = [c for c in cks if c.get("kind", "save") == "save"]
        loads = [c for c in cks if c.get("kind") == "load"]
        if saves:
            say(saves[0]["start"], "Checkpointing write started")
            for c in saves:
                _checkpoint_lines(say, c, legacy, 1)
            say(saves[-1]["end"], "Checkpointing write finished")
        if loads:
            say(loads[0]["start"], "Checkpointing read started")
            for c in loads:
                _checkpoint_lines(say, c, legacy, 1)
            say(loads[-1]["end"], "Checkpointing read finished")
    say(result["end"], f"Saved outputs in {folder}")
    lines.append(f"{tag} Averaged metric over all {'epochs' if legacy else 'steps/epochs'}")
    lines += metric_block(result)
    lines.append("")
    say(result["end"], "outputs saved in RANKID_output.json")
    return "\n".join(lines) + "\n"
