"""The verdicts as lines: one per phase, a point's short word, and the console's block under a run or a grid,
phases with the same verdict and reason grouped (epochs 1-3 on hosts hA,hB). The verdicts themselves are
dlio.report.verdict's."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dlio.base.units import fmt_size
from dlio.report.verdict import THRESHOLDS


def line(phase: str, v: Dict[str, Any]) -> str:
    """'epoch 2: cache: device vda moved ...; change: ...'"""
    fix = f"; change: {v['setting']}" if v.get("setting") and v["verdict"] != "storage-bound" else ""
    part = f" ({v['part']})" if v.get("part") else ""
    return f"{phase}: {v['verdict']}{part}: {v['reason']}{fix}"


def short(v: Optional[Dict[str, Any]]) -> str:
    """A verdict in one word for a table's column: storage, client, cache, memory or inconcl."""
    if not isinstance(v, dict) or not v.get("verdict"):
        return "-"
    if str(v.get("part") or "").startswith("memory filesystem"):
        return "memory"
    return {"storage-bound": "storage", "client-bound": "client", "inconclusive": "inconcl"}.get(
        str(v["verdict"]), str(v["verdict"])
    )


def point_name(p: Dict[str, Any]) -> str:
    """An io point as the table names it: 'randread 128KiB io_uring qd8 t1'."""
    return " ".join(point_axes(p))


def point_axes(p: Dict[str, Any]) -> Tuple[str, ...]:
    """A point's place in its grid, as the labels of its axes."""
    bs = fmt_size(p["bs"]) if isinstance(p.get("bs"), int) else str(p.get("bs"))
    return (str(p.get("rw")), bs, str(p.get("engine")), f"qd{p.get('qd')}", f"t{p.get('threads')}")


def grouped_lines(items: Sequence[Tuple[Any, ...]], names: str = "phases") -> List[str]:
    """One line per distinct verdict (verdict, part, setting) with the phases it covers; a phase alone
    keeps its full reason, several share the verdict's summary and the range of their storage ratio.
    items: (name, verdict) or (name, verdict, axes): axes (a tuple of labels, one per axis of a grid) let
    a group that covers a whole sub-grid be named by its axes (read,randread x 4KiB,1MiB x posix ...)."""
    groups: "OrderedDict[tuple, List[Tuple[Any, ...]]]" = OrderedDict()
    for it in items:
        v = it[1]
        groups.setdefault((v.get("verdict"), v.get("part"), v.get("setting")), []).append(it)
    out = []
    for (verd, part, setting), members in groups.items():
        if len(members) == 1:
            out.append("  " + line(members[0][0], members[0][1]))
            continue
        ratios = [m[1]["storage_ratio"] for m in members if m[1].get("storage_ratio") is not None]
        rng = ""
        if ratios and not str(part or "").startswith("memory"):
            lo, hi = f"{min(ratios):.2f}x", f"{max(ratios):.2f}x"
            rng = f" ({lo}{'' if hi == lo else '-' + hi} of the application's bytes)"
        summaries = {m[1].get("summary") or m[1]["reason"] for m in members}
        why = summaries.pop() if len(summaries) == 1 else members[0][1].get("summary") or members[0][1]["reason"]
        if verd == "inconclusive":  # why, with the figures: the first phase's, to judge the rest by
            why += f" ({members[0][0]}: {members[0][1]['reason']})"
        fix = f"; change: {setting}" if setting and verd != "storage-bound" else ""
        label = f" ({part})" if part else ""
        out.append(f"  {verd}{label}, {len(members)} {names} ({_covered(members)}): {why}{rng}{fix}")
    return out


def _covered(members: Sequence[Tuple[Any, ...]]) -> str:
    """The members' names, or, when they have axes, the sub-grids they fill
    ('read 4KiB,128KiB (posix qd1 t1 | io_uring qd1,qd8 t1); randread 128KiB ...')."""
    axes = [m[2] for m in members if len(m) > 2 and m[2]]
    if len(axes) == len(members):
        return _factor(list(OrderedDict.fromkeys(axes)), top=True)
    names = [m[0] for m in members]
    return "; ".join(names) if len(names) <= 6 else "; ".join(names[:5]) + f"; and {len(names) - 5} more"


def _factor(tuples: List[Tuple[str, ...]], top: bool = False) -> str:
    """Tuples of axis labels in few words: the values of the first axis that share the same rest are
    written together ('4KiB,128KiB'), then their rest; groups with different rests are separated."""
    if not tuples or not tuples[0]:
        return ""
    rest: "OrderedDict[str, List[Tuple[str, ...]]]" = OrderedDict()
    for t in tuples:
        rest.setdefault(t[0], []).append(t[1:])
    groups: "OrderedDict[frozenset, List[str]]" = OrderedDict()
    for head, r in rest.items():
        groups.setdefault(frozenset(r), []).append(head)
    parts = []
    for key, heads in groups.items():
        tail = _factor(rest[heads[0]])
        parts.append(",".join(heads) + (" " + tail if tail else ""))
    if len(parts) == 1:
        return parts[0]
    return "; ".join(parts) if top else "(" + " | ".join(parts) + ")"


def phase_names(verdicts: Sequence[Dict[str, Any]]) -> List[str]:
    """Each verdict's phase, with its host in brackets when the verdicts come from more than one host."""
    hosts = len({v["host"] for v in verdicts})
    return [str(v["phase"]) + (f" [{v['host']}]" if hosts > 1 else "") for v in verdicts]


def run_lines(verdicts: Sequence[Dict[str, Any]]) -> List[str]:
    """The verdict lines printed at the end of a run (epochs with one verdict grouped) and the thresholds."""
    if not verdicts:
        return []
    hosts = len({v["host"] for v in verdicts})
    items = [
        (name, v, ("epoch", str(v.get("epoch")), *((v["host"],) if hosts > 1 else ())) if "epoch" in v else None)
        for name, v in zip(phase_names(verdicts), verdicts)
    ]
    what = "epochs" if all("epoch" in v for v in verdicts) else "phases"
    return ["Verdict (is this a storage result?):", *grouped_lines(items, what), f"  thresholds: {THRESHOLDS}"]


def point_lines(points: Sequence[Dict[str, Any]]) -> List[str]:
    """The verdict lines of an io grid or a ceiling search: one per distinct verdict, with its points."""
    items = [(point_name(p), p["verdict"], point_axes(p)) for p in points if p.get("verdict")]
    if not items:
        return []
    return ["Verdict (is this a storage result?):", *grouped_lines(items, "points"), f"  thresholds: {THRESHOLDS}"]
