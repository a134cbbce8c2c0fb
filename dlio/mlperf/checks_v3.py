"""MLPerf Storage v3.0 checks of dlio-fast run folders (`dlio-fast check --rules v3.0`).

Training results, each:  2.1.11 the workload is part of v3.0; Table 1 AU >= the workload's threshold
(exact and DLIO's formula); 3.1.2 / 3.3.1 the dataset-size rule recomputed from the run's accelerators,
hosts, batch, record length and host RAM (exact file count when --ram declares the RAM, else at least);
3.3.4 one client in single-host mode, the same accelerators on every host otherwise; 3.6.2 a CLOSED
run changed only the parameters the Rules let it tune (dlio.mlperf.closed); 6.6 (Submission guidelines:
caching) no epoch read from the host's page cache (its verdict, dlio.report.verdict, is not `cache`).
Across training results of one workload: 2.1.17 / 2.1.18 one warm-up then 5 consecutive runs (each
starting after the previous ended) with the same settings.
Checkpoint records across all folders: 4.x 10 writes then 10 reads; 4.7.1 the first read starts within
30 s of the last write ending (measured from the records' wall clocks); 4.3.1 the cache was flushed
before the reads when the data written per client is under 3x its RAM.

Each check is (name, passed, figure) with the rule's number leading the name, as checks_v2.run_checks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from dlio.base.units import fmt_bytes
from dlio.mlperf import closed, datasize, rules
from dlio.mlperf.checks_v2 import check_complete, check_not_cache
from dlio.report.dlio.files import summary
from dlio.report.exact import metrics_of
from dlio.report.result import RunResult
from dlio.report.run_figures import trained

Check = Tuple[str, Optional[bool], str]  # passed None: a note
# Keys of `settings` that may differ between the runs of one result: none of them change the workload.
_FREE_SETTINGS = ("seed",)


def check_workload(doc: Dict[str, Any]) -> Check:
    wl = doc.get("workload") or "-"
    r = rules.rule(wl, "v3.0")
    text = f"{wl}: v3.0 {r.division}" if r else f"{wl} is not a v3.0 workload (CLOSED: unet3d/retinanet on b200/mi355)"
    return ("2.1.11 workload in v3.0", r is not None, text)


def check_au(doc: Dict[str, Any]) -> List[Check]:
    r = rules.rule(doc.get("workload"), "v3.0")
    au = r.au if r and r.au is not None else float((doc.get("settings") or {}).get("metric_au", 0.9))
    thr = 100.0 * au
    exact = metrics_of(doc).get("au_mean_percentage") or 0.0
    dlio = summary(cast(RunResult, doc))["metric"].get("train_au_mean_percentage", 0.0)  # none if checkpoint-only
    src = f"{doc.get('workload')} threshold" if r and r.au is not None else "metric.au (threshold not public)"
    return [
        (f"Table 1 AU (exact) >= {thr:g} %", exact >= thr, f"AU {exact:.2f} %, need >= {thr:g} % ({src})"),
        (f"Table 1 AU (DLIO formula) >= {thr:g} %", dlio >= thr, f"AU {dlio:.2f} %, need >= {thr:g} % ({src})"),
    ]


def check_datasize(doc: Dict[str, Any], ram_bytes: Optional[int]) -> Check:
    s, d = doc.get("settings") or {}, doc.get("dataset") or {}
    hosts = len(set(doc.get("hostnames") or [])) or 1
    acc = int(doc.get("comm_size") or 1)
    ram = int(ram_bytes) if ram_bytes else int((doc.get("host") or {}).get("memory_bytes") or 0)
    each = None if ram_bytes else datasize.recorded_hosts_memory(doc)  # each host's own, as its ranks measured it
    name = "3.1.2 dataset size" + (" (3.3.1 exact)" if ram_bytes else "")
    if acc % hosts or not ram:
        return (name, False, f"cannot recompute: {acc} accelerators on {hosts} hosts, host RAM {ram} B")
    spf = int(d.get("num_samples_per_file") or 1)
    ds = datasize.minimum(
        int(s.get("batch_size") or 1),
        acc,
        hosts,
        each if each is not None and len(each) == hosts else ram,
        float(s.get("record_length_bytes") or 1),
        spf,
        doc.get("workload") or "-",
    )
    files = int(d.get("num_files_train") or 0)
    ok = files == ds.files if ram_bytes else files * spf >= ds.samples
    return (
        name,
        ok,
        f"{files} files x {spf}; the rule gives {ds.files} files = max({ds.samples_by_steps} by steps, "
        f"{ds.samples_by_memory} by {datasize.memory_sum(ds)} RAM x {rules.RAM_FACTOR}), "
        f"{acc} accelerators" + (", need exactly that" if ram_bytes else ", need at least that"),
    )


def check_closed(doc: Dict[str, Any]) -> Optional[Check]:
    """3.6.2: a CLOSED workload's run changed none of its parameters but the tunable ones; None for a
    workload that is not CLOSED in v3.0 (2.1.11 says so)."""
    wl = doc.get("workload")
    r = rules.rule(wl, "v3.0")
    if r is None or r.division != "closed":
        return None
    found, source = closed.changes(doc)
    if found:
        text = f"{len(found)} CLOSED parameter(s) changed: {closed.describe(found)} (from {source})"
    else:
        text = f"only tunable parameters differ from {wl}'s (from {source})"
    if doc.get("scale") not in (None, 1, 1.0):
        text += f"; scaled by --scale {doc['scale']:g}"
    return ("3.6.2 CLOSED parameters unchanged", not found, text)


def check_page_cache(doc: Dict[str, Any]) -> Check:
    """6.6: no epoch read from the page cache (its verdict); a run recorded without verdicts cannot
    show it, and fails."""
    c = check_not_cache(doc)
    if c is None:
        return ("6.6 reads from storage, not the page cache", False, "no verdicts recorded: cannot tell")
    return ("6.6 " + c[0], c[1], c[2])


def check_clients(doc: Dict[str, Any]) -> Check:
    per_host = Counter(doc.get("hostnames") or [])
    if len(per_host) <= 1:
        return ("3.3.4 clients", True, f"single-host: 1 client, {doc.get('comm_size', 1)} accelerators")
    counts = sorted(set(per_host.values()))
    return (
        "3.3.4 same accelerators per host",
        len(counts) == 1,
        ", ".join(f"{h} {n}" for h, n in sorted(per_host.items())) + " accelerators",
    )


def _signature(doc: Dict[str, Any]) -> Tuple:
    s = {k: v for k, v in (doc.get("settings") or {}).items() if k not in _FREE_SETTINGS}
    d = doc.get("dataset") or {}
    return (
        doc.get("workload"),
        doc.get("comm_size"),
        tuple(sorted(Counter(doc.get("hostnames") or []).values())),
        tuple(sorted((k, repr(v)) for k, v in s.items())),
        d.get("num_files_train"),
        d.get("num_samples_per_file"),
    )


def check_series(docs: Sequence[Dict[str, Any]], names: Sequence[str]) -> List[Check]:
    """Per workload: 1 warm-up + 5 runs, consecutive (no overlap, in start order), same settings; a
    consecutive window of a longer series is accepted (2.1.18a)."""
    need = rules.WARMUP_RUNS + rules.MEASURED_RUNS
    groups: Dict[str, List[Tuple[Dict[str, Any], str]]] = {}
    for doc, name in zip(docs, names):
        if trained(cast(RunResult, doc)):
            groups.setdefault(doc.get("workload") or "-", []).append((doc, name))
    out: List[Check] = []
    for wl, runs in groups.items():
        runs.sort(key=lambda x: x[0].get("start") or "")
        best, why = None, f"{len(runs)} run(s), need {need} (1 warm-up + {rules.MEASURED_RUNS})"
        for i in range(len(runs) - need + 1):
            win = runs[i : i + need]
            sigs = [_signature(d) for d, _ in win]
            overlap = [n for (a, _), (b, n) in zip(win, win[1:]) if (b.get("start") or "") < (a.get("end") or "")]
            if len(set(sigs)) != 1:
                odd = next(n for (d, n), s in zip(win, sigs) if s != sigs[0])
                why = f"{odd} has other settings than {win[0][1]}"
            elif overlap:
                why = f"{overlap[0]} started before the previous run ended"
            else:
                best = win
                break
        text = f"warm-up {best[0][1]}, runs {', '.join(n for _, n in best[1:])}" if best else why
        out.append((f"2.1.17 {wl}: 1 warm-up + {rules.MEASURED_RUNS} consecutive runs", best is not None, text))
    return out


def _records(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    c = doc.get("checkpoints")
    if isinstance(c, dict):
        return list(c.get("records") or [])
    if isinstance(c, list):
        return list(c)
    return [x for r in doc.get("ranks") or [] for x in (r.get("checkpoints") or [])] + [
        x for r in doc.get("ranks") or [] for ep in r.get("epochs") or [] for x in (ep.get("checkpoints") or [])
    ]


def check_checkpoints(docs: Sequence[Dict[str, Any]], ram_bytes: Optional[int]) -> List[Check]:
    """10 writes then 10 reads, the write-to-read gap, the cache flush; over every folder's records."""
    recs = []
    for doc in docs:
        hosts = doc.get("hostnames") or []
        ram = int(ram_bytes) if ram_bytes else int((doc.get("host") or {}).get("memory_bytes") or 0)
        for r in _records(doc):
            rank = int(r.get("rank", 0))
            recs.append(dict(r, _host=hosts[rank] if rank < len(hosts) else "-", _ram=ram))
    if not recs:
        return []
    saves = [r for r in recs if r.get("kind") == "save"]
    loads = [r for r in recs if r.get("kind") == "load"]
    # one record per rank and checkpoint: count rank 0's
    nw = sum(int(r.get("rank", 0)) == 0 for r in saves)
    nr = sum(int(r.get("rank", 0)) == 0 for r in loads)
    last_write = max((r["wall_end_ns"] for r in saves), default=None)
    first_read = min((r["wall_start_ns"] for r in loads), default=None)
    ordered = last_write is not None and first_read is not None and first_read >= last_write
    out = [
        (
            f"4.x {rules.CKPT_WRITES} writes then {rules.CKPT_READS} reads",
            nw == rules.CKPT_WRITES and nr == rules.CKPT_READS and ordered,
            f"{nw} checkpoint writes, {nr} reads" + ("" if ordered or not loads else ", a read before the last write"),
        )
    ]
    if last_write is not None and first_read is not None:
        gap = (first_read - last_write) / 1e9
        out.append(
            (
                f"4.7.1 read starts <= {rules.CKPT_READ_GAP_S:g} s after the write",
                0 <= gap <= rules.CKPT_READ_GAP_S,
                f"write ended -> read started: {gap:.2f} s",
            )
        )
    per_client: Counter[str] = Counter()
    ram_of = {}
    for r in saves:
        per_client[r["_host"]] += int(r.get("bytes") or 0)
        ram_of[r["_host"]] = r["_ram"]
    small = [h for h, b in per_client.items() if b < rules.CKPT_CACHE_FACTOR * ram_of[h]]
    if loads:
        kept = [
            r
            for r in loads
            if r["_host"] in small
            and not r.get("direct")
            and not str(r.get("cache", "")).startswith(("dropped", "nothing to drop"))
        ]
        fig = "; ".join(
            f"{h}: wrote {fmt_bytes(b)} vs {rules.CKPT_CACHE_FACTOR} x {fmt_bytes(ram_of[h])} RAM"
            for h, b in sorted(per_client.items())
        )
        fig += f"; flush needed, {len(kept)} of {len(loads)} reads without it" if small else "; no flush needed"
        out.append((f"4.3.1 cache flushed when written < {rules.CKPT_CACHE_FACTOR}x RAM", not kept, fig))
    return out


def run_checks(
    docs: Sequence[Dict[str, Any]], ram_bytes: Optional[int] = None, labels: Optional[Sequence[str]] = None
) -> List[Check]:
    """Every v3.0 check of every result, then the series and checkpoint checks."""
    docs = list(docs)
    several = len(docs) > 1
    names = [(labels[i] if labels and i < len(labels) else f"run {i + 1}") for i in range(len(docs))]
    out: List[Check] = []
    for doc, name in zip(docs, names):
        pre = f"{name}: " if several else ""
        checks = [check_complete(doc)]
        if trained(cast(RunResult, doc)):
            checks += [check_workload(doc), *check_au(doc), check_datasize(doc, ram_bytes), check_clients(doc)]
            checks += [c for c in (check_closed(doc), check_page_cache(doc)) if c is not None]
        out += [(pre + n, ok, t) for n, ok, t in checks]
    out += check_series(docs, names)
    out += check_checkpoints(docs, ram_bytes)
    return out


def table(checks: Sequence[Check], labels: Sequence[str] = ()) -> List[str]:
    """A PASS/FAIL table: result, rule and check, figure; then the roll-up per rule (rollup)."""
    w = max((len(n) for n, _, _ in checks), default=5)
    rows = [f"{'result':<6}  {'rule / check':<{w}}  figure"]
    rows += [f"{'PASS' if ok else 'FAIL':<6}  {n:<{w}}  {t}" for n, ok, t in checks]
    return rows + ["", *rollup(checks, labels)]


def rollup(checks: Sequence[Check], labels: Sequence[str] = ()) -> List[str]:
    """One line per rule / check over every result (the 'label: ' prefix of a per-result check taken
    off, `labels` being the results' names), in the order first met: PASS or FAIL, how many of the
    results passed it, and the results that failed. Notes (passed None) are not rules."""
    groups: Dict[str, List[Tuple[str, bool]]] = {}
    for name, ok, _ in checks:
        if ok is None:
            continue
        who, rule = "", name
        for label in labels:
            if name.startswith(f"{label}: "):
                who, rule = label, name[len(label) + 2 :]
                break
        groups.setdefault(rule, []).append((who, ok))
    if not groups:
        return []
    w = max(len(r) for r in groups)
    rows = [f"per rule ({len(groups)})", f"{'result':<6}  {'rule / check':<{w}}  passed   failed by"]
    for rule, results in groups.items():
        failed = [who for who, ok in results if not ok and who]
        passed = sum(ok for _, ok in results)
        count = f"{passed} of {len(results)}"
        verdict = "PASS" if passed == len(results) else "FAIL"
        rows.append(f"{verdict:<6}  {rule:<{w}}  {count:<8} {', '.join(failed)}".rstrip())
    return rows
