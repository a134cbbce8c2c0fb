"""Paired repeats for side-by-side benches: each repeat runs both tools back to back, the verdict is the
median of the per-repeat ratios (not the ratio of the medians: on a shared VM the disk and the CPU share
move by 2x from one minute to the next, and a pair sees the same minute), printed with the pairs' spread
so that a reader can tell a verdict from the noise.
"""

import os
import statistics
import subprocess
import sys

MIN_REPEATS = 5  # fewer pairs than this and the median is one lucky pair away from another verdict


class Paired:
    """The ratios of one point's pairs: median (the verdict's figure), min, max and quartiles."""

    def __init__(self, ratios):
        self.ratios = [float(r) for r in ratios]
        if not self.ratios:
            raise ValueError("no pairs")
        s = sorted(self.ratios)
        self.median = statistics.median(s)
        self.lo, self.hi = s[0], s[-1]
        self.q1, _, self.q3 = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else (s[0],) * 3

    @classmethod
    def of(cls, ours, theirs):
        """The pairs ours[i] / theirs[i]."""
        return cls(o / t for o, t in zip(ours, theirs))

    def spread(self):
        """'min-max (IQR q1-q3, n pairs)': printed beside every verdict."""
        return f"{self.lo:.3f}-{self.hi:.3f} (IQR {self.q1:.3f}-{self.q3:.3f}, n={len(self.ratios)})"

    def half_iqr(self):
        """How far the middle half of the pairs reaches from 1: the noise a median of such pairs has."""
        return max(abs(self.q1 - 1), abs(self.q3 - 1))


def add_repeat_args(ap, default=MIN_REPEATS):
    """--repeats (pairs per point, default 5) and --quick (each bench's shorter runs, still paired)."""
    ap.add_argument("--repeats", type=int, default=default, help=f"paired repeats per point (>= {MIN_REPEATS})")
    ap.add_argument("--quick", action="store_true", help="shorter runs / smaller data, the same number of pairs")


def warn_few(repeats):
    if repeats < MIN_REPEATS:
        print(f"note: {repeats} pairs (< {MIN_REPEATS}): the verdicts below are indicative only")


def compiled_like_an_install(tree=None):
    """Byte-compile the dlio package as pip does when it installs it. An editable or PYTHONPATH tree is
    otherwise compiled from source by every process (0.11-0.14 s of a 0.45 s start here) wherever
    PYTHONDONTWRITEBYTECODE is set, a cost no installed copy has."""
    if tree is None:
        import importlib.util

        tree = os.path.dirname(os.path.dirname(importlib.util.find_spec("dlio").origin))
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.join(tree, "dlio")], check=True, stdout=subprocess.DEVNULL
    )
