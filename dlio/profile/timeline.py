"""The job's own thread timeline: how long a thread waited for a CPU between two moments.

A busy host stretches every wall-clock gap: another process on the same cores keeps the job's
threads runnable but off the CPU (a trainer's compute takes longer, its wake-up from an
accelerator wait comes late; a reader decodes its sample later). The interposer samples the
kernel's counters of the job's threads at their I/O (schedstat: ns on a CPU, ns runnable but
waiting for one; OP_SCHED records, events.SCHED_DTYPE), and of the main thread of the job's first
process, the trainer, which may do no I/O of its own. Between two moments a thread's wall time
splits into

  on a CPU     its own work (a GPU-less job's compute, handing batches over, decoding)
  waiting      runnable, but another thread or process had the CPU: the busy host's share
  blocked      neither: an accelerator's wait, a sleep, waiting for a batch or a lock

and what the interval would take on an idle host is its wall time less the waiting. Counters are
read at I/O moments (at most once a millisecond per thread), so between two samples they are
interpolated linearly; step boundaries are reads, where samples are taken."""

from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from dlio.profile.events import Trace


@dataclass
class Clock:
    """One thread's cumulative counters (ns) at the times t (ns, the trace's clock)."""

    t: np.ndarray
    cpu: np.ndarray
    wait: np.ndarray

    def waited(self, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
        """ns runnable but off a CPU within each [t0, t1] (0 outside the samples' span)."""
        w0 = np.interp(np.asarray(t0, np.float64), self.t, self.wait)
        w1 = np.interp(np.asarray(t1, np.float64), self.t, self.wait)
        return np.maximum(w1 - w0, 0.0)


def _clock(x: np.ndarray) -> Optional[Clock]:
    """A thread's samples as a Clock (None under 2). Samples that run backwards (a reused
    descriptor read as counters) are left out."""
    x = x[np.lexsort((x["wait"], x["cpu"], x["t"]))]
    x = x[(np.maximum.accumulate(x["cpu"]) == x["cpu"]) & (np.maximum.accumulate(x["wait"]) == x["wait"])]
    if len(x) < 2:
        return None
    f = np.float64
    return Clock(x["t"].astype(f), x["cpu"].astype(f), x["wait"].astype(f))


class Timeline:
    """Every sampled thread's Clock by reader key (pid << 32 | tid, visits.VISIT_DTYPE's key)."""

    def __init__(self, tr: Trace):
        self.clocks: Dict[int, Clock] = {}
        s = tr.sched
        if s is None or not len(s):
            return
        keys = (s["pid"].astype(np.int64) << 32) | (s["tid"].astype(np.int64) & 0xFFFFFFFF)
        o = np.argsort(keys, kind="stable")
        uk, first = np.unique(keys[o], return_index=True)
        for k, a, z in zip(uk, first, np.r_[first[1:], len(o)]):
            c = _clock(s[o[a:z]])
            if c is not None:
                self.clocks[int(k)] = c

    def __bool__(self) -> bool:
        return bool(self.clocks)

    def has(self, key: int) -> bool:
        return int(key) in self.clocks

    def waited(self, keys: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
        """ns each thread keys[i] waited for a CPU within [t0[i], t1[i]]; 0 for a thread without
        samples (a trace without a timeline changes nothing)."""
        keys = np.asarray(keys, np.int64)
        out = np.zeros(len(keys), np.float64)
        t0, t1 = np.asarray(t0), np.asarray(t1)
        for k in np.unique(keys):
            c = self.clocks.get(int(k))
            if c is not None:
                sel = keys == k
                out[sel] = c.waited(t0[sel], t1[sel])
        return out
