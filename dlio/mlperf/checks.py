"""The MLPerf Storage checks under one rules version (`dlio-fast check --rules`): v2.0 (checks_v2) or
v3.0 (checks_v3), run and rendered as lines. Each check is (name, passed, figure), passed None for a note."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from dlio.mlperf import checks_v2, checks_v3, rules
from dlio.report.tables import check_lines

Check = Tuple[str, Optional[bool], str]


def run_checks(
    docs: Sequence[Dict[str, Any]],
    version: str = "v2.0",
    ram_bytes: Optional[int] = None,
    labels: Optional[Sequence[str]] = None,
) -> List[Check]:
    """Every check of one rules version for run documents (see checks_v2.run_checks for the arguments)."""
    if rules.check_version(version) == "v3.0":
        return checks_v3.run_checks(docs, ram_bytes, labels)
    return checks_v2.run_checks(docs, ram_bytes, labels)


def lines(checks: Sequence[Check], version: str, labels: Sequence[str] = ()) -> List[str]:
    """The checks as printed: v3.0's table with the rules' numbers and its roll-up per rule (labels:
    the results' names, as given to run_checks), v2.0's 'PASS  name: figure' lines."""
    if rules.check_version(version) == "v3.0":
        return checks_v3.table(checks, labels)
    return check_lines(checks)
