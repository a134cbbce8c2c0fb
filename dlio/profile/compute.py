"""The trainer's compute per step, what a busy host took out of it, and how sure that is.

With readers, the compute is the steady step period (steps.steady_steps): the time from one
step's first read to the next's, which is the trainer's step when the readers wait for it. On a
busy host other processes keep the trainer runnable but off the CPU (its compute stretches, its
wake-up from an accelerator wait comes late), so each step is taken less the time the trainer's
thread waited for a CPU in it (its schedstat, timeline.py): what the step takes on an idle host.
A loop without readers reads its batch itself: its time from a batch's last sample to the next
batch, less its time per sample, each gap already less its wait (steps.find_steps).

The verdict says how far the figure can be trusted, from the evidence: the steady steps seen,
the spread of their durations, the 95 % interval of their mean, and the share of the trainer's
time it waited for a CPU (taken out, but the larger it is the more the figure rests on the
correction). `cannot tell` when there are too few steps, no steps at all, or a 95 % interval
wider than half the mean; `uncertain` when the interval is wider than a tenth of the mean, the
steps vary by more than half their median, or nearly all the trainer's time was the host's;
else `confident`. Measured beside a real CPU hog per core (tests/cli/test_profile_busy.py), the
correction held with the host taking 91 % of the trainer's time."""

from typing import Dict, List, Optional, Tuple

import numpy as np

from dlio.profile import steps
from dlio.profile.events import Trace
from dlio.profile.inferred import Inferred
from dlio.profile.timeline import Timeline

MIN_STEPS = 4  # fewer steady steps: no period to speak of
SURE_STEPS = 10  # fewer: a few late steps move the mean
MAX_HALF_WIDTH = 0.10  # 95 % interval of the mean, as a share of it
NO_HALF_WIDTH = 0.5  # an interval this wide says nothing: cannot tell
MAX_SPREAD = 0.5  # robust spread of the steps, as a share of their median
MAX_WAIT_SHARE = 0.95  # beyond this the figure is nearly all correction: the host had the trainer


def trainer_key(tr: Trace, tl: Timeline, reader_keys: np.ndarray) -> Optional[int]:
    """The trainer's thread among the sampled ones: the main thread of a process that is not a
    forked worker, the readers' own process first (threads), else the one sampled most (the job's
    process, whose DataLoader workers sample it)."""
    forked = tr.forked if tr.forked is not None else np.zeros(0, np.int64)
    mains = [k for k in tl.clocks if k >> 32 == k & 0xFFFFFFFF and not np.isin(k >> 32, forked)]
    if not mains:
        return None
    own = [k for k in mains if np.isin(k >> 32, np.asarray(reader_keys) >> 32)]
    return max(own or mains, key=lambda k: len(tl.clocks[k].t))


def mean95(x: np.ndarray) -> float:
    """Mean of the values up to the 95th percentile (0 for none)."""
    if not len(x):
        return 0.0
    return float(np.mean(x[x <= np.percentile(x, 95)]))


def _stderr(d: np.ndarray) -> float:
    """Standard error of the mean of consecutive steps d, by batch means: the steps' means over
    blocks of a few. A step's ends are reads that come late or early (a reader's wake-up), which
    lengthens one step as much as it shortens the next: that jitter spreads the steps but cancels
    in their mean, and a block's mean keeps only its ends'."""
    k = max(1, len(d) // 6)
    m = d[: len(d) // k * k].reshape(-1, k).mean(axis=1)
    return float(np.std(m, ddof=1) / np.sqrt(len(m))) if len(m) > 1 else float("inf")


def verdict(d: np.ndarray, wait_share: Optional[float]) -> Tuple[str, float, str]:
    """(confident | uncertain | cannot tell, confidence 0..1, evidence) of a mean step from the
    steady steps' durations d (ns, the host's share taken out) and the share of the trainer's time
    it waited for a CPU (None: the trace has no thread timeline)."""
    n = len(d)
    mean = float(np.mean(d)) if n else 0.0
    facts = [f"{n} steady steps"]
    spread = half = float("inf")
    if n >= 2 and mean > 0:
        q1, q3 = np.percentile(d, [25, 75])
        spread = float((q3 - q1) / 1.349 / max(float(np.median(d)), 1e-9))
        half = 1.96 * _stderr(d) / mean
        facts += [f"spread {spread:.0%} of the median", f"95 % interval +-{half * mean / 1e6:.1f} ms"]
    facts.append(
        "no thread timeline in this trace (a busy host's share cannot be taken out)"
        if wait_share is None
        else f"the trainer waited for a CPU {wait_share:.0%} of the time (taken out)"
    )
    said = ", ".join(facts)
    if n < MIN_STEPS or mean <= 0:
        return "cannot tell", 0.1, f"{said}: cannot tell, too short a job to see its step period"
    if half > NO_HALF_WIDTH:
        return "cannot tell", 0.1, f"{said}: cannot tell, the interval is over {NO_HALF_WIDTH:.0%} of the mean"
    why: List[str] = []
    if n < SURE_STEPS:
        why.append(f"fewer than {SURE_STEPS} steps")
    if half > MAX_HALF_WIDTH:
        why.append(f"the interval is wider than {MAX_HALF_WIDTH:.0%} of the mean")
    if spread > MAX_SPREAD:
        why.append("the steps vary too much")
    if wait_share is not None and wait_share > MAX_WAIT_SHARE:
        why.append("the host, not the job, had nearly all the trainer's time")
    if wait_share is None and spread > 0.1:
        why.append("the steps vary and the trace cannot say why")
    if why:
        return "uncertain", round(min(0.5, 1 - half), 2), f"{said}: uncertain, " + "; ".join(why)
    return "confident", round(1 - half, 2), said


def compute(st: Dict, sync: bool, tl: Timeline, trainer: Optional[int]) -> Dict[str, Inferred]:
    """computation_time, its spread, and compute_confidence (the verdict, with its evidence)."""
    if st["b"] == 1 and not sync:
        why = (
            "the readers never pause for the trainer: reading and decoding set the pace, and the "
            "compute time is hidden behind them"
        )
        return {
            "computation_time": Inferred(0.0, 0.1, why),
            "compute_confidence": Inferred("cannot tell", 0.1, "no steps seen: " + why),
        }
    t0, t1 = steps.steady_steps(st)
    wall = (t1 - t0).astype(np.float64)
    has = trainer is not None and tl.has(trainer)
    wait = tl.waited(np.full(len(t0), trainer), t0, t1) if has else np.zeros(len(t0))
    share = float(wait.sum() / wall.sum()) if has and wall.sum() > 0 else (0.0 if has else None)
    if sync:
        sg, inner = st["step_gaps"], mean95(st["sample_gaps"])
        d = sg - inner
        c = max(0.0, mean95(sg) - inner)
        how = (
            f"the trainer reads its own batches: its mean time from a batch's last sample to the next batch "
            f"less its time per sample ({mean95(sg) / 1e6:.2f} - {inner / 1e6:.2f} ms; the top 5 % left out)"
        )
    else:
        d = wall - wait
        c = float(d.mean()) if len(d) else 0.0
        how = (
            f"mean time between the starts of steps' reads over each pass after its fill "
            f"({float(wall.mean()) / 1e6 if len(wall) else 0:.2f} ms) less the trainer's wait for a CPU "
            f"({float(wait.mean()) / 1e6 if len(wait) else 0:.2f} ms)"
        )
    word, conf, why = verdict(d, share)
    if len(d):
        how += f"; p10/p50/p90 {'/'.join(f'{v / 1e6:.2f}' for v in np.percentile(d, [10, 50, 90]))} ms"
    q1, q3 = np.percentile(d, [25, 75]) if len(d) else (0.0, 0.0)
    sd = float(q3 - q1) / 1.349
    return {
        "computation_time": Inferred(c / 1e9, conf, f"{word}: {how}"),
        "computation_time_stdev": Inferred(sd / 1e9, 0.5, "interquartile spread of those steps / 1.349"),
        "compute_confidence": Inferred(word, conf, why),
    }
