"""Score a replay against the original: one row per figure, pass/fail against a documented bound.

  figure              measure                                              pass when
  transfer sizes      KS distance of the contiguous byte runs a loader takes
                      per sample (a visit's union of ranges, visits.py; the
                      read calls for range reads), weighted by bytes, 5 % tol <= 0.10
  per-step volume     KS distance of bytes per step (steps.find_steps: b
                      samples, per reader or over all readers), 10 % tol    <= 0.20
  inter-burst gaps    KS distance of time between step starts in the steady
                      state (signals.steady_period: not the prefetch fill at
                      an epoch start, not epoch ends), 10 % tol             <= 0.25
  concurrency         KS distance of reads in flight at each read start      <= 0.25
  file order          |difference| of the first-visit order's rank
                      correlation with the sorted paths (sorted walk ~1,
                      shuffled ~0; median over passes)                        <= 0.30
  epoch order         |difference| of the rank correlation between the
                      orders of consecutive passes (the same order ~1, a new
                      shuffle each epoch ~0; '-' with one pass)              <= 0.30
  total bytes         replay / original, bytes taken per visit (a library's
                      re-reads of a header counted once)                     0.90 .. 1.10
  duration            replay / original of the time in passes (each pass from
                      its first steady step, the later of the two sides',
                      to its last read, summed)                             0.80 .. 1.25
KS distances take a relative tolerance (signals.ks_distance): values within it count as equal.
An unweighted KS bound is never tighter than the distance two samples of one distribution reach
1 % of the time at their sizes (1.628 sqrt((n + m) / (n m)): 0.42 for 30 steps against 30, 0.30 for
60): with a few dozen steps a tighter bound would fail replays for the luck of the draw. Where that
value reaches 1 (a handful of steps: 1.651 for 1 gap against 35) no distance can exceed it, and the
figure is a failure marked untestable, not a pass.
Transfer sizes are a visit's contiguous runs, not its read calls: np.load takes a 4.5 KB npz in 7
calls that read 8.9 KB (the first 4 KiB twice), and its storage sees one 4.5 KB file, which the
replay reads in one call. The call sizes are in the report (transfer).
The duration leaves out the pauses between passes and each pass's fill (its steps read back to
back before the trainer sets the pace): there a DataLoader starts its worker processes again
(persistent_workers=False), or the job evaluates or saves; the replay has none of that, and the
profile's report says how long the pauses between passes were (pass_pauses).
The inter-burst gaps leave out an epoch's start because there the loaders, not the workload,
decide: dlio-fast's replay reads two batches per reader back to back, PyTorch one per worker and
prefetch slot; with a few dozen steps those transients would be a quarter of the sample.
Bytes weight the transfer sizes because they say where the bytes come from; a loader's many tiny
metadata reads would otherwise outvote the data reads."""

import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from dlio.profile import signals, steps
from dlio.profile.dataview import DataView, data_view
from dlio.profile.events import Trace
from dlio.profile.order import file_order

KS_LIMITS = {
    "transfer sizes": (0.05, 0.10),
    "per-step volume": (0.10, 0.20),
    "inter-burst gaps": (0.10, 0.25),
    "concurrency": (0.0, 0.25),
}
# two-sample KS at 1 %: samples of one distribution stay within c * sqrt((n + m) / (n m)) 99 % of the time
KS_C01 = 1.628
ORDER_LIMIT = 0.30
BYTES_RANGE = (0.90, 1.10)
DURATION_RANGE = (0.80, 1.25)


def ks_limit(name: str, n: int, m: int, weighted: bool = False) -> float:
    """The bound of a KS figure: its own, or for unweighted samples the distance two samples of
    n and m values from one distribution stay within 99 % of the time, whichever is larger. A KS
    distance is at most 1: a bound of 1 or more (a handful of values) tests nothing (testable)."""
    lim = KS_LIMITS[name][1]
    if weighted or not n or not m:
        return lim
    return round(max(lim, KS_C01 * float(np.sqrt((n + m) / (n * m)))), 3)


def testable(lim: float) -> bool:
    """Whether a KS bound can fail: any distance, even 1 (no overlap), passes a bound of 1 or more."""
    return lim < 1.0


def _orders(dv: DataView, tr: Trace) -> Tuple[float, float]:
    """(rank correlation with the sorted paths, between consecutive passes (nan: one pass))."""
    if not dv.whole:
        return signals.order_correlation(dv.rd, tr.paths), float("nan")
    fo = file_order(dv.units, dv.epoch, tr.paths)
    return fo["rho_path"], fo["rho_epochs"]


def compare(orig: Trace, replay: Trace) -> List[Dict]:
    """Rows {figure, original, replay, score, limit, ok}."""
    da, db = data_view(orig), data_view(replay)
    a, b = da.rd, db.rd
    sa, sb = steps.find_steps(da.units, da.epoch), steps.find_steps(db.units, db.epoch)
    ga, gb = steps.step_period(sa), steps.step_period(sb)
    rows = []

    def ks(
        name: str,
        xa: np.ndarray,
        xb: np.ndarray,
        wa: Optional[np.ndarray] = None,
        wb: Optional[np.ndarray] = None,
        unit: float = 1.0,
        fmt: str = "{:.3g}",
    ) -> None:
        tol = KS_LIMITS[name][0]
        lim = ks_limit(name, len(xa), len(xb), weighted=wa is not None)
        d = signals.ks_distance(xa, xb, wa, wb, rel_tol=tol)
        med = lambda x: fmt.format(np.median(x) / unit) if len(x) else "-"  # noqa: E731
        can = testable(lim)  # else: too few values to tell any two distributions apart
        rows.append(
            {
                "figure": name,
                "original": f"median {med(xa)}",
                "replay": f"median {med(xb)}",
                "score": f"KS {d:.3f}",
                "limit": f"<= {lim}" if can else f"untestable: {len(xa)} vs {len(xb)} values",
                "ok": can and d <= lim,
            }
        )

    ks("transfer sizes", da.extents, db.extents, da.extents, db.extents, 1024, "{:.1f} KiB")
    ks("per-step volume", sa["bytes"], sb["bytes"], unit=1024, fmt="{:.1f} KiB")
    ks("inter-burst gaps", ga, gb, unit=1e6, fmt="{:.2f} ms")
    ks("concurrency", signals.in_flight(a), signals.in_flight(b))
    (ra, ea), (rb, eb) = _orders(da, orig), _orders(db, replay)
    rows.append(
        {
            "figure": "file order",
            "original": f"rho {ra:.2f}",
            "replay": f"rho {rb:.2f}",
            "score": f"diff {abs(ra - rb):.2f}",
            "limit": f"<= {ORDER_LIMIT}",
            "ok": abs(ra - rb) <= ORDER_LIMIT,
        }
    )
    one = math.isnan(ea) or math.isnan(eb)
    rows.append(
        {
            "figure": "epoch order",
            "original": "-" if math.isnan(ea) else f"rho {ea:.2f}",
            "replay": "-" if math.isnan(eb) else f"rho {eb:.2f}",
            "score": "-" if one else f"diff {abs(ea - eb):.2f}",
            "limit": f"<= {ORDER_LIMIT}",
            "ok": (math.isnan(ea) and math.isnan(eb)) or (not one and abs(ea - eb) <= ORDER_LIMIT),
        }
    )
    # the same steps of each pass on both sides: from the later of the two first steady steps
    ka, kb = steps.steady_starts(sa), steps.steady_starts(sb)
    skip = [max(x, y) for x, y in zip(ka, kb)] + (ka[len(kb) :] if len(ka) > len(kb) else kb[len(ka) :])
    for name, xa, xb, rng, unit, u in (
        ("total bytes", da.logical_bytes, db.logical_bytes, BYTES_RANGE, 2**20, "MiB"),
        ("duration", steps.steady_time(sa, skip), steps.steady_time(sb, skip), DURATION_RANGE, 1e9, "s"),
    ):
        r = xb / xa if xa else (1.0 if not xb else float("inf"))
        rows.append(
            {
                "figure": name,
                "original": f"{xa / unit:.3f} {u}",
                "replay": f"{xb / unit:.3f} {u}",
                "score": f"ratio {r:.3f}",
                "limit": f"{rng[0]}..{rng[1]}",
                "ok": rng[0] <= r <= rng[1],
            }
        )
    return rows


def table(rows: List[Dict]) -> str:
    cols = ("figure", "original", "replay", "score", "limit")
    w = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    line = lambda vals: "  ".join(f"{v:<{w[c]}}" for c, v in zip(cols, vals))  # noqa: E731
    out = [line(cols) + "  result", line(["-" * w[c] for c in cols]) + "  ------"]
    out += [line([str(r[c]) for c in cols]) + ("  pass" if r["ok"] else "  FAIL") for r in rows]
    n = sum(r["ok"] for r in rows)
    out.append(f"{n}/{len(rows)} figures within bounds: " + ("the replay matches" if n == len(rows) else "no match"))
    return "\n".join(out) + "\n"
