"""Per-host figures of a training run: its ranks' records grouped by the host they ran on.

A run across hosts is judged host by host (which client fell behind), so beside the run's totals
dlio-fast.json holds, per host and epoch, the same exact figures reduced over that host's ranks alone:
bytes read (the hosts' bytes add up to the run's), samples/s (summed over ranks, as the total is: they add
up too), AU (averaged) and bytes/s over the host's own window (its slowest rank's), so a slow host shows
a lower rate. Only for runs on more than one host: a one-host run's totals are that host's figures.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from dlio.base.units import fmt_figure
from dlio.report import metrics
from dlio.report.result import RunResult
from dlio.report.run_figures import _epoch, _epochs, _train


def host_names(result: RunResult) -> List[str]:
    """The run's hosts in the order of their first rank."""
    return list(dict.fromkeys(r["hostname"] for r in result["ranks"]))


def per_host(result: RunResult) -> List[Dict[str, Any]]:
    """[{host, ranks, bytes, epochs: [{epoch, bytes, window_s, bytes_per_second, samples_per_second,
    au_percentage}]}] for the epochs every rank trained (the totals' epochs, dlio.report.run_figures)."""
    out = []
    epochs = _epochs(result)
    for host in host_names(result):
        ranks = [r for r in result["ranks"] if r["hostname"] == host]
        rows = []
        for e in epochs:
            recs = [metrics.exact_of(_train(_epoch(r, e))) for r in ranks]
            nbytes = sum(x["bytes"] for x in recs)
            window = max(x["window_s"] for x in recs)
            rows.append(
                {
                    "epoch": e,
                    "bytes": nbytes,
                    "window_s": window,
                    "bytes_per_second": nbytes / window if window > 0 else 0.0,
                    "samples_per_second": float(np.sum([x["samples_per_second"] for x in recs])),
                    "au_percentage": float(np.mean([x["au_percentage"] for x in recs])),
                }
            )
        out.append(
            {
                "host": host,
                "ranks": [r["rank"] for r in ranks],
                "bytes": sum(ep["bytes"] for r in ranks for ep in r["epochs"]),
                "epochs": rows,
            }
        )
    return out


def host_lines(hosts: List[Dict[str, Any]]) -> List[str]:
    """The console's per-host lines (means over epochs), under the final table."""
    out = []
    for h in hosts:
        eps = h["epochs"]
        mib = float(np.mean([e["bytes_per_second"] for e in eps])) / 2**20 if eps else 0.0
        sps = float(np.mean([e["samples_per_second"] for e in eps])) if eps else 0.0
        au = float(np.mean([e["au_percentage"] for e in eps])) if eps else 0.0
        ranks = ",".join(map(str, h["ranks"]))
        out.append(
            f"host {h['host']} (ranks {ranks}): AU {au:.2f} %, {fmt_figure(sps)} samples/s, "
            f"read {fmt_figure(mib)} MiB/s, {h['bytes'] / 2**20:.2f} MiB read"
        )
    return out
