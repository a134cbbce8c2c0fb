"""Whether a result document is complete, and why not, in the words every output of `dlio-fast report`
shows next to its figures (tables, Markdown, HTML, CSV, JSON, the plots' titles).

Every family's document says it the same way: "complete": false and "reason" (a training or checkpoint
run's dlio-fast.json, a KV-cache, vector-search or model-load run's, an io or ceiling --json file). A
document without "complete" (DLIO's own folders, older results) is taken as complete.
"""

from __future__ import annotations

from typing import Any, Optional

NO_REASON = "no reason recorded"


def reason_of(doc: Any) -> Optional[str]:
    """None for a complete result; else why it is not ('interrupted by SIGINT', a failure's message)."""
    if not isinstance(doc, dict) or doc.get("complete", True) is not False:
        return None
    reason = doc.get("reason")
    if isinstance(reason, str) and reason.strip():
        return reason.strip()
    build = doc.get("build")  # a vector-search run stopped in its build says why there
    if isinstance(build, dict) and isinstance(build.get("reason"), str) and build["reason"].strip():
        return build["reason"].strip()
    return NO_REASON


def mark(reason: str) -> str:
    """The words beside a figure of an incomplete result: 'incomplete: interrupted by SIGINT'."""
    return f"incomplete: {reason}"


def cell(reason: Optional[str]) -> str:
    """A table's 'complete' cell: 'yes', or 'no: interrupted by SIGINT'."""
    return "yes" if reason is None else f"no: {reason}"


def note(label: str, reason: str) -> str:
    """The line under a table that names an incomplete result."""
    return f"note: {label} is incomplete ({reason}): its figures cover only what ran before it ended"
