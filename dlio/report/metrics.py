"""Training metrics from the runner's per-step timestamps: DLIO's formulas and exact ones.

DLIO compatibility (docs/dlio-facts.md §3.3), per block of n steps on one rank:
    load[i]    = time waiting for batch i (our t_ready - t_fetch)
    compute[i] = measured compute of step i;  proc[i] = load[i] + compute[i]
    T          = block wall time - sum(proc[:s]) - sum(proc[e+1:]),  s = exclude_start_steps,
                 e = n - 1 - exclude_end_steps
    AU         = 100 * sum(compute[s:e+1]) / T
    throughput = (n - 2) * batch / T       (current DLIO's hard-coded -2, kept in compat figures)
DLIO 2.0.0 (a config in its dialect, dlio_block_figures): AU the same with s = 1, e = n - 1 whatever
the config says (2.0.0 has no exclude settings), throughput = n * batch / block wall time.
Exact figures use one window for everything, the whole block on the monotonic clock: from the
trainer's first fetch (when the readers start too) to the end of the last step. Every byte of
the block is read inside it, so bytes / window is never inflated by prefetching (a window that
skipped the first step would count batches read before it began); the first step's wait is
storage time too, so it is not excluded. MB/s come from the bytes the runner read. The exact AU
counts each step's compute up to its set value (the plan's): a spin that overran (a preempted
thread on a loaded host) is the client's time, not the storage's, and must not raise the AU; the
overruns are reported next to it. DLIO's AU keeps DLIO's definition (the measured compute).
"""

from typing import Any, Dict, Iterable, Mapping, Sequence, Tuple

import numpy as np

from dlio.report.result import BlockFigures


def _arrays(st: Mapping[str, Any]) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    t_fetch = np.asarray(st["t_fetch"], dtype=np.int64)
    t_ready = np.asarray(st["t_ready"], dtype=np.int64)
    t_end = np.asarray(st["t_end"], dtype=np.int64)
    compute = np.asarray(st["compute_ns"], dtype=np.int64)
    nbytes = np.asarray(st["bytes"], dtype=np.int64)
    return t_fetch, t_ready, t_end, compute, nbytes


def counted_range(n: int, exclude_start: int, exclude_end: int) -> Tuple[int, int]:
    """[s, e] inclusive indices of the steps that count; all steps when too few remain."""
    s, e = exclude_start, n - 1 - exclude_end
    if e < s:
        return 0, n - 1
    return s, e


def block_metrics(st: Mapping[str, Any], batch: int, exclude_start: int = 1, exclude_end: int = 0) -> BlockFigures:
    """Both sets of figures for one block (one rank). st: the runner's step_times arrays."""
    t_fetch, t_ready, t_end, compute, nbytes = _arrays(st)
    n = len(t_fetch)
    if n == 0:
        return {"steps": 0, "au": 0.0, "throughput": 0.0, "exact": None}
    load = (t_ready - t_fetch) / 1e9
    comp = compute / 1e9
    proc = load + comp
    s, e = counted_range(n, exclude_start, exclude_end)
    wall = (t_end[-1] - t_fetch[0]) / 1e9
    T = wall - proc[:s].sum() - proc[e + 1 :].sum()
    csum = comp[s : e + 1].sum()
    au = 100.0 * csum / T if csum > 0 and T > 0 else 0.0
    thr = (n - 2) * batch / T if T > 0 and n > 2 else 0.0
    window = wall
    total_compute = comp.sum()
    set_comp = np.asarray(st["set_compute_ns"], dtype=np.int64) / 1e9 if "set_compute_ns" in st else comp
    over = comp - set_comp
    exact = {
        "window_s": window,
        "steps": int(n),
        "au_percentage": 100.0 * np.minimum(comp, set_comp).sum() / window if window > 0 else 0.0,
        "samples_per_second": n * batch / window if window > 0 else 0.0,
        "bytes": int(nbytes.sum()),
        "bytes_per_second": nbytes.sum() / window if window > 0 else 0.0,
        "io_wait_mean_s": float(load.mean()),
        "io_wait_p99_s": float(np.percentile(load, 99)),
        "io_wait_max_s": float(load.max()),
        "compute_mean_s": float(comp.mean()),
        "compute_total_s": float(total_compute),
        "compute_set_mean_s": float(set_comp.mean()),
        "compute_overrun_mean_s": float(np.maximum(over, 0).mean()),
        "compute_overrun_max_s": float(over.max()),
    }
    return {
        "steps": n,
        "start_ns": int(t_fetch[0]),
        "end_ns": int(t_end[-1]),
        "duration_s": wall,
        "load": load.tolist(),
        "compute": comp.tolist(),
        "proc": proc.tolist(),
        "au": au,
        "throughput": thr,
        "exact": exact,
    }


def eval_metrics(st: Mapping[str, Any], batch: int) -> BlockFigures:
    """DLIO's eval figures: AU with the same formula (exclusions), throughput n*batch/duration."""
    m = block_metrics(st, batch)
    if m["steps"]:
        m["throughput"] = m["steps"] * batch / m["duration_s"] if m["duration_s"] > 0 else 0.0
    return m


def exact_of(block: BlockFigures) -> Dict[str, Any]:
    """The exact figures of a block that has steps (a block without steps has none)."""
    ex = block["exact"]
    assert ex is not None, "a block without steps has no exact figures"
    return ex


def mean_std(values: Iterable[float]) -> Tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    if len(a) == 0:
        return 0.0, 0.0
    return float(a.mean()), float(a.std())


def combine_blocks(blocks: Sequence[BlockFigures], batch: int) -> BlockFigures:
    """One epoch's figures from its blocks (step checkpoints split an epoch into blocks).

    DLIO: AU and throughput are step-weighted means over the blocks. Exact: the blocks' windows
    add up (the checkpoints between them are not training time)."""
    blocks = [b for b in blocks if b["steps"]]
    if not blocks:
        return {"steps": 0, "au": 0.0, "throughput": 0.0, "exact": None}
    if len(blocks) == 1:
        return blocks[0]
    n = np.array([b["steps"] for b in blocks], dtype=np.float64)
    load = np.concatenate([b["load"] for b in blocks])
    comp = np.concatenate([b["compute"] for b in blocks])
    window = sum(exact_of(b)["window_s"] for b in blocks)
    nbytes = sum(exact_of(b)["bytes"] for b in blocks)
    steps = int(n.sum())
    exact = {
        "window_s": window,
        "steps": steps,
        "au_percentage": 100.0 * comp.sum() / window if window > 0 else 0.0,
        "samples_per_second": steps * batch / window if window > 0 else 0.0,
        "bytes": int(nbytes),
        "bytes_per_second": nbytes / window if window > 0 else 0.0,
        "io_wait_mean_s": float(load.mean()),
        "io_wait_p99_s": float(np.percentile(load, 99)),
        "io_wait_max_s": float(load.max()),
        "compute_mean_s": float(comp.mean()),
        "compute_total_s": float(comp.sum()),
    }
    return {
        "steps": steps,
        "start_ns": blocks[0]["start_ns"],
        "end_ns": blocks[-1]["end_ns"],
        "duration_s": sum(b["duration_s"] for b in blocks),
        "load": load.tolist(),
        "compute": comp.tolist(),
        "proc": np.concatenate([b["proc"] for b in blocks]).tolist(),
        "au": float(np.dot(n, [b["au"] for b in blocks]) / n.sum()),
        "throughput": float(np.dot(n, [b["throughput"] for b in blocks]) / n.sum()),
        "exact": exact,
    }


# The throughput formula of each DLIO dialect, as stated in dlio-fast.json (metrics.dlio_compat).
THROUGHPUT_FORMULA = {
    "2.0.0": "n * batch / T; T = block wall time (DLIO 2.0.0)",
    "current": "(n - 2) * batch / T; T = block wall time - proc time of the excluded steps (current DLIO)",
}


def dlio_block_figures(block: BlockFigures, batch: int, dialect: str) -> Tuple[float, float]:
    """(AU %, samples/s) of one block (one rank) by the formulas of DLIO `dialect`. The block's
    recorded "au"/"throughput" are current DLIO's; DLIO 2.0.0 (statscounter.compute_metrics_train)
    divides all n steps by the whole block wall time and always excludes the first step from AU."""
    if dialect != "2.0.0":
        return float(block["au"]), float(block["throughput"])
    n, wall = int(block["steps"]), float(block["duration_s"])
    if n == 0 or wall <= 0:
        return 0.0, 0.0
    comp = np.asarray(block["compute"], dtype=np.float64)
    proc = np.asarray(block["proc"], dtype=np.float64)
    csum = comp[1:].sum()
    T = wall - proc[0]
    au = 100.0 * csum / T if csum > 0 and T > 0 else 0.0
    return float(au), n * batch / wall


def dlio_epoch_figures(blocks: Sequence[BlockFigures], batch: int, dialect: str) -> Tuple[float, float]:
    """(AU %, samples/s) of one epoch (one rank) from its blocks: DLIO's end_train, the step-weighted
    mean over the blocks (both dialects)."""
    figs = [dlio_block_figures(b, batch, dialect) for b in blocks]
    n = np.array([b["steps"] for b in blocks], dtype=np.float64)
    if not len(blocks) or n.sum() == 0:
        return 0.0, 0.0
    return float(np.dot(n, [f[0] for f in figs]) / n.sum()), float(np.dot(n, [f[1] for f in figs]) / n.sum())
