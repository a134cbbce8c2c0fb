"""`dlio-fast check` of vector-search run folders (their dlio-fast.json, schema dlio-fast.vdb/1), by
MLPerf Storage v3's rules for vector search (Rules section 5) as far as an emulation can meet them:

  - the run completed;
  - 5 timed runs of the index (5.3), each with the fields the rules' summary.json carries
    (throughput_qps and the mean, p95, p99 and p99.9 latency in ms, vdbbench's definitions);
  - the index type is one CLOSED allows (DiskANN, HNSW, AISAQ);
  - no run's verdict is `cache` (the page cache served the reads);
  - what this is (a note): the emulated search of that index type over dlio-fast's C engine, not Milvus,
    and no recall (the index holds no real vectors; the rules score recall against a FLAT index).
"""

from __future__ import annotations

from typing import Any, Dict, List

from dlio.family import Check
from dlio.vdb import metrics
from dlio.vdb.ranks import run_verdicts

RUNS = 5  # Rules 5.3: five runs of each index
CLOSED_INDEXES = {"diskann": "DISKANN", "aisaq_perf": "AISAQ", "aisaq_scale": "AISAQ", "hnsw": "HNSW"}


def checks(doc: Dict[str, Any]) -> List[Check]:
    runs = doc.get("runs") or []
    out: List[Check] = []
    ok = bool(doc.get("complete"))
    out.append(("run complete", ok, "complete" if ok else "partial run: stopped or failed"))
    out.append((f"{RUNS} timed runs (rules 5.3)", len(runs) == RUNS, f"{len(runs)} run(s)"))
    missing = sorted({k for r in runs for k in metrics.RULE_FIELDS if not isinstance(r.get(k), (int, float))})
    out.append(
        (
            "the summary's fields (throughput, mean / p95 / p99 / p99.9 latency, vdbbench's)",
            bool(runs) and not missing,
            "every run has them" if runs and not missing else f"missing: {', '.join(missing) or 'no runs'}",
        )
    )
    kind = (doc.get("layout") or {}).get("kind")
    index = CLOSED_INDEXES.get(kind or "")
    out.append(("index type CLOSED allows", index is not None, f"{kind} ({index or 'not DISKANN, HNSW or AISAQ'})"))
    for r in runs:
        for phase, v, _ in run_verdicts(r):
            if v.get("verdict") == "cache":
                out.append((f"storage, not the page cache ({phase})", False, v.get("reason", "")))
    out.append(
        (
            "what ran",
            None,
            f"{index or kind} search emulated by dlio-fast's C engine over its index files, not Milvus; no recall "
            "(the rules score it against a FLAT index; the emulated index holds no real vectors)",
        )
    )
    return out
