"""What `dlio-fast report` needs from a workload family's result document (model load, KV cache, vector
search: schema dlio-fast.<family>/1), so that report reads them without knowing their shapes.

Each workload family (dlio.jobs.registry) declares one FamilyReport as its report; the command line
hands the table of them to dlio.report.source.load. A family's runs are compared among themselves as
runs are (dlio.report.compare.compare_family): its settings, its figures with ratios to the first, and
every verdict it recorded with the counters it was made from.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

# (key, label, unit, decimals): a figure's row in the table
Figure = Tuple[str, str, str, Optional[int]]  # decimals None: a text figure
# (phase, verdict dict as dlio.report.verdict.classify makes it, the counters it was made from or None)
PhaseVerdict = Tuple[str, Dict[str, Any], Optional[Dict[str, Any]]]


class FamilyReading(NamedTuple):
    settings: Dict[str, Any]  # key -> value (shown as text)
    figures: Dict[str, Any]  # key -> number, or None where the run has no such figure; and "workload", "start"
    verdicts: List[PhaseVerdict]


class FamilyReport(NamedTuple):
    schema: str  # the document's schema id
    title: str  # "model load", shown above the family's table
    settings: Sequence[Tuple[str, str]]  # (key, label)
    figures: Sequence[Figure]  # its own; the report puts the verdict, workload and start before them
    read: Callable[[Dict[str, Any]], FamilyReading]  # may raise KeyError / TypeError / ValueError


def verdict_words(verdicts: Sequence[PhaseVerdict]) -> str:
    """A run's verdicts in a few words: 'storage-bound (load 1, load 2); cache (load 3)'."""
    groups: Dict[str, List[str]] = {}
    for phase, v, _ in verdicts:
        groups.setdefault(str(v.get("verdict")), []).append(phase)
    return "; ".join(f"{word} ({', '.join(phases)})" for word, phases in groups.items()) or "-"
