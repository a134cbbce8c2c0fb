"""Which host held a training run back: its own time per step against the other hosts', with the evidence.

The ranks of a training meet at a barrier after every step (DLIO's all-reduce, dlio.train.loop), so every host's
step lasts as long as the slowest host's and per-host bytes/s or AU cannot tell them apart. What differs is each
host's own time per step, before the barrier: the wait for its batch (I/O wait) plus its compute; the rest of the
step it waits at the barrier for the others. A host's own time is, per step, its slowest rank's (that rank is when
the host arrives), averaged over the steps of the epochs every rank trained. A mean, not a median: a CPU quota
throttles in bursts (a host of 0.25 CPUs runs 25 ms, then waits 75 ms), a few long steps among many short ones.
The evidence, its I/O wait and compute, is that same rank's at each step, so the two add up to the host's own time:
the ranks of a host whose reads are throttled share its device's rate and take turns (one rank's read waits behind
the other's), so an average over the host's ranks would understate the I/O wait that held the host back.

The rule: a host is a straggler when its own time per step is at least STRAGGLER_SLOWER above the median of the
other hosts' and the difference is at least STRAGGLER_STEP_SHARE of the run's step. What it costs: per step, the
ranks would have met when the slowest of the other hosts' ranks arrived; the run's AU (the set compute over the
window) scaled by the steps' time with and without that wait is the AU the run would have had, and the points
between the two are the part of the AU loss (100 - AU) that the host explains.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from dlio.base.units import fmt_ns
from dlio.report import metrics
from dlio.report.result import RankRecord, RunResult
from dlio.report.run_figures import _epoch, _epochs, _train

STRAGGLER_SLOWER = 0.25  # own time per step this far above the other hosts' median...
STRAGGLER_STEP_SHARE = 0.05  # ...and by at least this share of the run's step time
RULE = (
    f"a host whose own time per step (I/O wait + compute, before the step barrier; its slowest rank's) is "
    f">= {STRAGGLER_SLOWER:.0%} above the other hosts' median, by >= {STRAGGLER_STEP_SHARE:.0%} of the step"
)


def _steps(rank: RankRecord, epochs: List[int], key: str) -> np.ndarray:
    """One rank's per-step figure (load, compute, proc: seconds) over the given epochs, in order."""
    return np.concatenate([np.asarray(_train(_epoch(rank, e)).get(key), dtype=np.float64) for e in epochs])


def _ms(s: float) -> str:
    return fmt_ns(s * 1e9)


def stragglers(result: RunResult, au_percentage: float) -> Optional[Dict[str, Any]]:
    """{rule, per_host: [{host, ranks, own_s, io_wait_s, compute_s, compute_set_s, barrier_wait_s, cpus}] (I/O
    wait and compute: the host's last rank's at each step, averaged as its own time),
    step_s, named: [{host, ranks, slower_percentage, own_s, others_own_s, cause, wait_for_it_s,
    au_without_percentage, au_points_explained, au_loss_points, loss_share}], summary}; None for a run on one
    host, without trained epochs or whose ranks' steps do not line up (an interrupted run). au_percentage: the
    run's exact AU."""
    ranks = result["ranks"]
    hosts = list(dict.fromkeys(r["hostname"] for r in ranks))
    epochs = _epochs(result)
    if len(hosts) < 2 or not epochs:
        return None
    if not all(
        _train(_epoch(r, e)).get(k) is not None for r in ranks for e in epochs for k in ("load", "compute", "proc")
    ):
        return None  # a result without per-step figures (read from elsewhere): nothing to compare
    proc = {r["rank"]: _steps(r, epochs, "proc") for r in ranks}
    if len({len(p) for p in proc.values()}) != 1 or not len(next(iter(proc.values()))):
        return None
    steps = sum(_train(_epoch(ranks[0], e))["steps"] for e in epochs)
    step_s = float(np.mean([sum(_train(_epoch(r, e))["duration_s"] for e in epochs) / steps for r in ranks]))
    of_host = {h: [r for r in ranks if r["hostname"] == h] for h in hosts}

    def arrival(members: List[int]) -> np.ndarray:  # per step, when the last of these ranks reached the barrier
        return np.max([proc[m] for m in members], axis=0)

    rows: List[Dict[str, Any]] = []
    for h in hosts:
        rs = of_host[h]
        exacts = [metrics.exact_of(_train(_epoch(r, e))) for r in rs for e in epochs]
        sets = [x["compute_set_mean_s"] for x in exacts if "compute_set_mean_s" in x]  # not in a merged epoch's
        cpus = [float(r["host_cpus_usable"]) for r in rs if r.get("host_cpus_usable")]
        own = float(arrival([r["rank"] for r in rs]).mean())
        last = np.argmax([proc[r["rank"]] for r in rs], axis=0)  # per step, the host's rank that arrived last
        load, compute = (np.asarray([_steps(r, epochs, k) for r in rs]) for k in ("load", "compute"))
        at_last = (last, np.arange(len(last)))  # that rank's figure at each step
        rows.append(
            {
                "host": h,
                "ranks": [r["rank"] for r in rs],
                "own_s": own,
                "io_wait_s": float(load[at_last].mean()),
                "compute_s": float(compute[at_last].mean()),
                "compute_set_s": float(np.mean(sets)) if len(sets) == len(exacts) else None,
                "barrier_wait_s": max(0.0, step_s - own),
                "cpus": min(cpus) if cpus else None,  # its ranks' usable CPUs (affinity, control group's quota)
            }
        )
    named: List[Dict[str, Any]] = []
    for row in rows:
        others = [o for o in rows if o is not row]
        base = float(np.median([o["own_s"] for o in others]))
        if base <= 0 or row["own_s"] < (1 + STRAGGLER_SLOWER) * base:
            continue
        if row["own_s"] - base < STRAGGLER_STEP_SHARE * step_s:
            continue
        rest = [r["rank"] for r in ranks if r["hostname"] != row["host"]]
        saved = float((arrival(list(proc)) - arrival(rest)).mean())  # the wait for this host, per step
        au_without = min(100.0, au_percentage * step_s / (step_s - saved)) if step_s > saved else 100.0
        loss = 100.0 - au_percentage
        io_more = row["io_wait_s"] - float(np.median([o["io_wait_s"] for o in others]))
        compute_more = row["compute_s"] - float(np.median([o["compute_s"] for o in others]))
        named.append(
            {
                "host": row["host"],
                "ranks": row["ranks"],
                "slower_percentage": 100.0 * (row["own_s"] / base - 1),
                "own_s": row["own_s"],
                "others_own_s": base,
                # what made its own time longer: its compute ran over (its CPU), or its batches came later (I/O)
                "cause": "compute" if compute_more >= io_more else "io_wait",
                "wait_for_it_s": saved,
                "au_without_percentage": au_without,
                "au_points_explained": au_without - au_percentage,
                "au_loss_points": loss,
                "loss_share": (au_without - au_percentage) / loss if loss > 0 else 0.0,
            }
        )
    out: Dict[str, Any] = {"rule": RULE, "step_s": step_s, "per_host": rows, "named": named}
    out["summary"] = summary_lines(out, au_percentage)
    return out


def _host_figures(row: Dict[str, Any]) -> str:
    setc = f" of {_ms(row['compute_set_s'])} set" if row.get("compute_set_s") is not None else ""
    cpus = f"; its ranks could use {row['cpus']:g} CPUs" if row.get("cpus") is not None else ""
    return f"{_ms(row['own_s'])} (I/O wait {_ms(row['io_wait_s'])}, compute {_ms(row['compute_s'])}{setc}{cpus})"


def summary_lines(s: Dict[str, Any], au_percentage: float) -> List[str]:
    """The console's and the report's lines: each straggler with its evidence, or that the hosts agree."""
    rows = {r["host"]: r for r in s["per_host"]}
    if not s["named"]:
        own = ", ".join(f"{r['host']} {_ms(r['own_s'])}" for r in s["per_host"])
        return [
            f"hosts agree: no straggler (own time per step before the step barrier: {own}; "
            f"a straggler is {STRAGGLER_SLOWER:.0%} slower than the others)"
        ]
    out = []
    for n in s["named"]:
        row = rows[n["host"]]
        others = [r for r in s["per_host"] if r["host"] != n["host"]]
        why = "its reads were late" if n["cause"] == "io_wait" else "its compute ran over its set time (the host's CPU)"
        out.append(
            f"straggler: host {n['host']} (ranks {','.join(map(str, n['ranks']))}) is {n['slower_percentage']:.0f} % "
            f"slower than the other hosts: {why}"
        )
        out.append(f"  {n['host']}: own time per step {_host_figures(row)}")
        for o in others:
            out.append(
                f"  {o['host']}: own time per step {_host_figures(o)}, waiting {_ms(o['barrier_wait_s'])} per step "
                "at the step barrier"
            )
        out.append(
            f"  it explains {n['au_points_explained']:.1f} of the {n['au_loss_points']:.1f} AU points lost "
            f"({100 * n['loss_share']:.0f} %): without the wait for it ({_ms(n['wait_for_it_s'])} per step of "
            f"{_ms(s['step_s'])}) the AU would be about {n['au_without_percentage']:.1f} % "
            f"instead of {au_percentage:.1f} %"
        )
    return out


def report_lines(sources: List[Any]) -> List[str]:
    """`dlio-fast report`'s lines for the runs whose dlio-fast.json names their stragglers (or says the hosts agree)."""
    out: List[str] = []
    for s in sources:
        doc = s.doc if s.kind == "run" and isinstance(s.doc, dict) else {}
        held = (doc.get("metrics") or {}).get("stragglers") if isinstance(doc.get("metrics"), dict) else None
        if held and held.get("summary"):
            out += ["", f"hosts of {s.label} ({held['rule']}):", *held["summary"]]
    return out
