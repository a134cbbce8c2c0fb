"""The largest number of simulated accelerators that keeps AU at or above a workload's threshold
(`dlio-fast maxacc`): the number an MLPerf Storage submitter is after.

The search brackets (N = 1, 2, 4, ... until a probe fails), bisects between the last pass and the
first fail, then repeats the probes at the edge (N and N + 1) because one short run is noisy: N is
kept only when every probe at N passed. A longer confirmation run at the answer follows; if it fails,
the answer steps down by one and is confirmed again.

Each probe is a short `dlio-fast run` in a subprocess, so probes share nothing but the dataset (the
first probe generates it when missing, the rest reuse it):
  - launcher "mpiexec": `mpiexec -n N python -m dlio run ...`: N real ranks (MPLerf's accelerators)
    reading the real storage; the answer is this system's.
  - launcher "model": one rank on the null engine, whose per-request busy-wait is N x --model-latency:
    a storage serving a fixed number of requests per second shared by N accelerators. Its answer is
    known in advance (tests): AU(N) ~ min(1, compute / (batch x N x latency / read_threads)).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

from dlio.base.errors import DlioError


@dataclass
class Probe:
    """One short run at n accelerators."""

    n: int
    au: float  # exact AU mean, percent
    samples_per_s: float  # all ranks
    mib_per_s: float  # all ranks
    folder: str = ""
    kind: str = "probe"  # probe, edge (a repeat at the edge), confirm
    verdict: str = ""  # its epochs' verdicts (is it a storage result?), e.g. "storage-bound" or "cache"

    def passed(self, threshold_pct: float) -> bool:
        return self.au >= threshold_pct


@dataclass
class Search:
    """The answer and every probe that led to it."""

    answer: int
    threshold_pct: float
    probes: List[Probe] = field(default_factory=list)
    limit_hit: bool = False  # every probe up to max_n passed: the answer is a lower bound

    def curve(self) -> Dict[int, List[float]]:
        """AU probes per n (confirmation runs included), ascending n."""
        out: Dict[int, List[float]] = {}
        for p in sorted(self.probes, key=lambda p: p.n):
            out.setdefault(p.n, []).append(p.au)
        return out

    def answer_verdict(self) -> str:
        """The verdicts of the probes at the answer: is the answer the storage's? ("" with no answer)."""
        return probe_verdict([p.verdict for p in self.probes if p.n == self.answer and p.verdict])

    def to_json(self) -> Dict:
        return {
            "answer": self.answer,
            "answer_verdict": self.answer_verdict(),
            "threshold_percentage": self.threshold_pct,
            "limit_hit": self.limit_hit,
            "probes": [asdict(p) for p in self.probes],
        }


def probe_verdict(verdicts: Sequence[str]) -> str:
    """One word for several verdicts: the word when they agree, else them all, most common first."""
    words = [w for v in verdicts for w in v.split(", ") if w]
    return ", ".join(sorted(set(words), key=lambda w: (-words.count(w), w)))


def from_memory(res: Search) -> bool:
    """The answer rests on probes the page cache (or a memory filesystem) served: not the storage's."""
    return "cache" in res.answer_verdict().split(", ")


def search(
    measure: Callable[[int, str], Probe], threshold_pct: float, max_n: int, repeats: int = 2, confirm: bool = True
) -> Search:
    """The bracketing search over n in [1, max_n]; measure(n, kind) runs one probe."""
    if max_n < 1:
        raise DlioError(f"--max {max_n}: need at least 1")
    res = Search(0, threshold_pct)
    seen: Dict[int, List[Probe]] = {}

    def run(n: int, kind: str) -> bool:
        p = measure(n, kind)
        res.probes.append(p)
        seen.setdefault(n, []).append(p)
        return all(q.passed(threshold_pct) for q in seen[n])

    lo, hi, n = 0, None, 1  # lo: largest n that passed; hi: smallest that failed
    while n <= max_n:
        if run(n, "probe"):
            lo, n = n, min(2 * n, max_n) if n < max_n else max_n + 1
        else:
            hi = n
            break
    if hi is None:
        res.limit_hit = True
        hi = max_n + 1
    while hi - lo > 1:  # bisect: lo passes, hi fails
        mid = (lo + hi) // 2
        if run(mid, "probe"):
            lo = mid
        else:
            hi = mid
    # the edge: repeat lo and lo + 1 (reported); lo stays only when every probe at it passed
    while lo >= 1:
        for m in (lo, lo + 1):
            if m <= max_n:
                for _ in range(max(0, repeats - len(seen.get(m, [])))):
                    run(m, "edge")
        if all(q.passed(threshold_pct) for q in seen[lo]):
            break
        lo -= 1
    while confirm and lo >= 1:
        if run(lo, "confirm"):
            break
        lo -= 1
    res.answer = lo
    return res


# ---- probes as subprocesses --------------------------------------------------------------------


def mpiexec_path() -> str:
    """The mpiexec next to this Python (the mpich wheel's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if not found:
        raise DlioError("maxacc --launcher mpiexec needs mpiexec (pip install mpich mpi4py), or use --launcher model")
    return found


def probe_command(
    launcher: str, n: int, workload_args: Sequence[str], folder: str, steps: int, model_latency_ns: int = 0
) -> List[str]:
    """The command line of one probe."""
    run = [
        sys.executable,
        "-m",
        "dlio",
        "-q",
        "run",
        *workload_args,
        "-o",
        folder,
        "--set",
        "train.epochs=1",
        "--set",
        f"train.total_training_steps={steps}",
        "--set",
        "workflow.checkpoint=False",
        "--set",
        "workflow.evaluation=False",
        "--set",
        "dlio_fast.mlperf_rules=off",
    ]  # a probe is a short run, not a submission
    if launcher == "model":
        return run + ["--engine", "null", "--set", f"dlio_fast.null_delay_ns={n * model_latency_ns}"]
    return [mpiexec_path(), "-n", str(n), *run]


def subprocess_measure(
    launcher: str,
    workload_args: Sequence[str],
    out_dir: str,
    steps: int,
    model_latency_ns: int = 0,
    echo: Callable[[str], None] = lambda s: None,
    timeout: float = 3600.0,
) -> Callable[[int, str], Probe]:
    """measure(n, kind) for search(): runs the probe, reads AU and throughput from its dlio-fast.json."""
    count = [0]

    def measure(n: int, kind: str) -> Probe:
        count[0] += 1
        folder = os.path.join(out_dir, f"probe{count[0]:02d}-n{n}-{kind}")
        cmd = probe_command(
            launcher, n, workload_args, folder, steps * (2 if kind == "confirm" else 1), model_latency_ns
        )
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise DlioError(f"maxacc: the probe at {n} accelerators failed (exit {p.returncode}): {last}")
        with open(os.path.join(folder, "dlio-fast.json")) as f:
            doc = json.load(f)
        m = doc["metrics"]
        pr = Probe(
            n,
            float(m.get("au_mean_percentage") or 0.0),
            float(m.get("samples_per_second_mean") or 0.0),
            float(m.get("MiB_per_second_mean") or 0.0),
            folder,
            kind,
            probe_verdict([v["verdict"] for v in doc.get("verdicts") or [] if v.get("verdict")]),
        )
        echo(
            f"{kind:<8} n={n:<4} exact AU {pr.au:6.2f} %  {pr.samples_per_s:10.1f} samples/s  "
            f"{pr.mib_per_s:10.1f} MiB/s  {pr.verdict or '-'}"
        )
        return pr

    return measure


def curve_lines(res: Search, demand_gib_s: float, hosts: int = 1) -> List[str]:
    """The AU curve table: n, accelerators per host, probes' AU (min / median / max), pass/fail."""
    rows = [
        f"{'accel':>5} {'per host':>8} {'probes':>6} {'min %':>9} {'med %':>9} {'max %':>9}  "
        f"{'demand GiB/s':>12}  AU        storage verdict   (the probes' exact AU)"
    ]
    for n, aus in res.curve().items():
        s = sorted(aus)
        ok = all(a >= res.threshold_pct for a in aus)
        seen = probe_verdict([p.verdict for p in res.probes if p.n == n and p.verdict]) or "-"
        rows.append(
            f"{n:>5} {n / hosts:>8g} {len(aus):>6} {s[0]:>9.2f} {s[len(s) // 2]:>9.2f} {s[-1]:>9.2f}  "
            f"{n * demand_gib_s:>12.4g}  {'pass' if ok else 'FAIL':<8}  {seen}"
        )
    return rows


def plot(res: Search, path: str, title: str) -> Optional[str]:
    """AU against accelerators with the threshold line (PNG), or None without matplotlib."""
    try:  # only with --plots: matplotlib takes ~2 s to import
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in res.probes:
        ax.plot(p.n, p.au, "o" if p.kind != "confirm" else "s", color="C1" if p.kind == "confirm" else "C0")
    ax.axhline(res.threshold_pct, color="C3", linestyle="--", label=f"threshold {res.threshold_pct:g} %")
    if res.answer:
        ax.axvline(res.answer, color="C2", linestyle=":", label=f"answer {res.answer}")
    ax.set_xlabel("simulated accelerators")
    ax.set_ylabel("exact AU (%)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
