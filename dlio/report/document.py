"""The report document that dlio.report.compare.build() makes: what `report --json` writes and every
renderer (dlio.report.tables, html) reads, as types. Runs side by side (RunSection, a RunColumn per run,
also one per workload family), io / ceiling points side by side (IoComparison) and every recorded verdict
with its counters (VerdictRow).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:  # Python >= 3.11
    from typing import NotRequired, TypedDict
except ImportError:  # pragma: no cover - older Pythons
    from typing_extensions import NotRequired, TypedDict


class FigureDef(TypedDict):
    key: str
    label: str
    unit: str
    decimals: Optional[int]  # None: a text figure


class SettingDef(TypedDict):
    key: str
    label: str


class RunColumn(TypedDict):
    """One run of a comparison: its settings (as text), figures and ratios to the first run's."""

    label: str
    source: str  # the absolute path it was read from
    complete: bool
    reason: Optional[str]  # why it is not complete (dlio.report.incomplete), None when it is
    settings: Dict[str, str]
    figures: Dict[str, Any]  # key -> number, text, or None where the run has no such figure
    ratios: Dict[str, Optional[float]]


class RunSection(TypedDict):
    """Runs side by side (compare_runs), or one workload family's runs (compare_family: title, schema)."""

    reference: str
    settings: List[SettingDef]
    differ: List[str]  # the settings' keys not the same in every run
    figures: List[FigureDef]
    runs: List[RunColumn]
    title: NotRequired[str]
    schema: NotRequired[str]


class PointFigureDef(TypedDict):
    key: str
    label: str
    unit: str


class IoSourceRef(TypedDict):
    label: str
    source: str
    kind: str  # io or ceiling
    where: str  # the storage it measured (storage_path)
    complete: bool
    reason: Optional[str]  # why it is not complete, None when it is


class IoComparison(TypedDict):
    """io / ceiling points side by side (compare_points). A point row holds the KEY_FIELDS, target,
    qd_used, direct and "values": per source None or its point_figures plus "ratios"."""

    reference: str
    sources: List[IoSourceRef]
    figures: List[PointFigureDef]
    points: List[Dict[str, Any]]


class VerdictRow(TypedDict):
    """A recorded verdict with the counters it was made from (_verdict_row)."""

    source: str
    phase: str
    verdict: Optional[str]
    part: Optional[str]
    reason: Optional[str]
    setting: Optional[str]
    app_bytes: Optional[int]
    device_bytes: Optional[int]
    storage_ratio: Optional[float]
    resident_before: Optional[float]
    reader_cores: Optional[float]
    host_busy_share: Optional[float]


class ReportTables(TypedDict, total=False):
    runs: RunSection
    io: IoComparison
    families: List[RunSection]


class Report(ReportTables):
    schema: str
    verdicts: List[VerdictRow]
