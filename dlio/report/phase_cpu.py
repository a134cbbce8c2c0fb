"""A phase's CPU, as the verdicts count it (dlio.report.verdict): split three ways, the readers (their thread
CPU, from the C core), the harness (the rest of the benchmark, its worker processes included) and the emulated
accelerator (the compute spin: it stands for a GPU, it is not the client's CPU); and how the emulated compute
kept to its set time."""

from __future__ import annotations

from typing import Any, Dict, Optional


def compute_overrun(c: Dict[str, Any]) -> Optional[float]:
    """How much longer the emulated compute took than it was set to (achieved / set - 1), or None."""
    want, got = float(c.get("compute_set_s") or 0.0), float(c.get("compute_s") or 0.0)
    return got / want - 1.0 if want > 0 else None


def accelerator_share(c: Dict[str, Any]) -> Optional[float]:
    """compute / (compute + I/O wait) of the phase's steps (the AU of all its steps), or None when the
    phase has no emulated accelerator (io points, checkpoints)."""
    comp = float(c.get("compute_s") or 0.0)
    wait = c.get("io_wait_s")
    if comp <= 0 or wait is None:
        return None
    return comp / (comp + max(0.0, float(wait)))


def cpu_split(c: Dict[str, Any]) -> Dict[str, float]:
    """The phase's CPU in cores (CPU seconds / wall seconds): the readers, the harness (the rest of the
    benchmark, its worker processes included), the emulated accelerator's spin, and their sum."""
    wall = float(c["wall_s"])
    proc = (float(c.get("cpu_user_s") or 0.0) + float(c.get("cpu_sys_s") or 0.0)) / wall
    worker = float(c.get("worker_cpu_s") or 0.0) / wall
    accel = min(proc + worker, float(c.get("compute_cpu_s") or 0.0) / wall)
    readers = float(c.get("reader_cpu_s") or 0.0) / wall
    client = max(0.0, proc + worker - accel)
    return {
        "readers": min(readers, client),
        "harness": max(0.0, client - readers),
        "accelerator": accel,
        "client": client,
        "total": proc + worker,
    }


def cpu_text(c: Dict[str, Any]) -> str:
    """'readers 0.02, harness 0.03, emulated accelerator 0.98 cores' (no accelerator for io points)."""
    s = cpu_split(c)
    acc = f", emulated accelerator {s['accelerator']:.2f}" if c.get("compute_s") else ""
    return f"readers {s['readers']:.2f}, harness {s['harness']:.2f}{acc} cores"


def reader_cores(c: Dict[str, Any]) -> int:
    return max(1, min(max(1, int(c.get("reader_threads") or 0)), int(c.get("cores") or 1)))


def reader_share(c: Dict[str, Any]) -> float:
    return float(c.get("reader_cpu_s") or 0.0) / float(c["wall_s"]) / reader_cores(c)
