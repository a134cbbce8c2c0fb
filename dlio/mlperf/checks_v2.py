"""MLPerf Storage style checks of training runs (docs/peers.md §4.5, Submission_guidelines v2.0).

  - the run completed (a partial run is not a result);
  - dataset >= 5x the hosts' RAM: bytes on disk vs host memory x number of distinct hosts, so that
    epochs after the first cannot be served from the page cache;
  - >= 500 steps per epoch (the smallest epoch of any rank);
  - AU >= the workload's threshold (settings.metric_au x 100), the exact AU and DLIO's formula;
  - repeated runs of one workload within 5 % of each other in samples/s (max / min - 1); runs are
    repeats only when their settings (tool, engine, qd, threads, O_DIRECT, cache mode, ranks, batch,
    compute, dataset, host) are the same; runs of one workload with other settings get a note
    naming the settings that differ;
  - no epoch's verdict is `cache` (dlio.report.verdict: device bytes well below the application's).

A DLIO output folder is checked on what DLIO recorded (its AU formula, its samples/s).
run_checks() returns (name, passed, figure_text) tuples, passed None for a note; nothing here prints.
"""

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, cast

from dlio.base.units import fmt_bytes
from dlio.mlperf import datasize
from dlio.report.compare import RUN_SETTINGS, settings_of
from dlio.report.dlio.files import summary
from dlio.report.dlio.folder import dlio_summary
from dlio.report.exact import metrics_of
from dlio.report.result import RunResult
from dlio.report.run_figures import trained

Doc = Dict[str, Any]  # a Result dict (dlio.report.result.build_result) or a dlio-fast.json document
Check = Tuple[str, Optional[bool], str]  # (name, passed, figure); passed None: a note

RAM_FACTOR = 5
MIN_STEPS = 500
REPEAT_TOLERANCE = 0.05


def _label(result: Doc, i: int, labels: Optional[Sequence[str]], several: bool) -> str:
    if not several:
        return ""
    if labels and i < len(labels):
        return f"{labels[i]}: "
    return f"run {i + 1}: "


def check_complete(result: Doc) -> Check:
    ok = bool(result.get("complete", True))
    return ("run complete", ok, "complete" if ok else f"partial run: {result.get('reason') or 'interrupted'}")


def check_dataset(result: Doc, ram_bytes: Optional[int] = None) -> Check:
    """Dataset >= 5x the RAM of all hosts summed: each host's as its ranks measured it, else rank 0's for every
    host (ram_bytes: one host's RAM instead of the recorded ones)."""
    nbytes = int((result.get("dataset") or {}).get("bytes_on_disk") or 0)
    hosts = len(set(result.get("hostnames") or [])) or 1
    per_host = int(ram_bytes) if ram_bytes else int((result.get("host") or {}).get("memory_bytes") or 0)
    each = None if ram_bytes else datasize.recorded_hosts_memory(result)
    if each is not None and len(each) == hosts and len(set(each)) > 1:
        need = RAM_FACTOR * sum(each)
        ram = f"({' + '.join(fmt_bytes(m) for m in each)}) RAM of the {hosts} hosts"
    else:
        per_host = each[0] if each and len(each) == hosts else per_host
        need = RAM_FACTOR * per_host * hosts
        ram = f"{fmt_bytes(per_host)} RAM x {hosts} host{'s' if hosts != 1 else ''}"
    ok = need > 0 and nbytes >= need
    text = f"dataset {fmt_bytes(nbytes)} on disk, need >= {RAM_FACTOR} x {ram} = {fmt_bytes(need)}" + (
        f" ({nbytes / need:.2f}x of that)" if need else " (host RAM unknown)"
    )
    return (f"dataset >= {RAM_FACTOR}x host RAM", ok, text)


def check_steps(result: Doc) -> Check:
    """The smallest number of training steps in an epoch, over ranks and epochs."""
    steps = [
        ep["train"].get("steps", len(ep["train"].get("load", [])))
        for r in result.get("ranks", [])
        for ep in r.get("epochs", [])
        if ep.get("train")
    ]
    n = min(steps) if steps else 0
    return (
        f">= {MIN_STEPS} steps per epoch",
        n >= MIN_STEPS,
        f"{n} steps per epoch (fewest over {len(result.get('ranks', []))} rank(s) and epochs), need >= {MIN_STEPS}",
    )


def _summary(result: Doc) -> Dict[str, Any]:
    """DLIO's summary.json of the run: the one DLIO wrote for a DLIO folder, else computed."""
    return dlio_summary(result) or summary(cast(RunResult, result))


def check_au(result: Doc) -> List[Check]:
    """Two checks: exact AU mean and DLIO's AU mean against settings.metric_au x 100 (a DLIO run has
    only DLIO's)."""
    thr = 100.0 * float((result.get("settings") or {}).get("metric_au", 0.9))
    exact = metrics_of(result).get("au_mean_percentage")
    dlio = _summary(result)["metric"].get("train_au_mean_percentage", 0.0)  # none in a checkpoint-only run
    out: List[Check] = []
    if exact is not None or result.get("tool") is None:
        exact = exact or 0.0
        out.append(
            (f"AU (exact) >= {thr:g} %", exact >= thr, f"AU {exact:.2f} % (exact, monotonic clock), need >= {thr:g} %")
        )
    out.append((f"AU (DLIO formula) >= {thr:g} %", dlio >= thr, f"AU {dlio:.2f} % (DLIO's formula), need >= {thr:g} %"))
    return out


def _samples_per_s(result: Doc) -> float:
    """Exact samples/s mean; DLIO's figure for a DLIO run (the only one it has)."""
    m = metrics_of(result)
    v = m.get("samples_per_second_mean")
    return v if v is not None else (_summary(result)["metric"].get("train_throughput_mean_samples_per_second") or 0.0)


def check_not_cache(result: Doc) -> Optional[Check]:
    """No epoch's verdict is `cache` (dlio.report.verdict): its reads came from the page cache, not
    storage. None (the check does not apply) for a run recorded without counters. The checkpoints' verdicts
    (a save left in the page cache without checkpoint.fsync, as DLIO's) are not the epochs' reads."""
    verdicts = [
        v
        for v in result.get("verdicts") or []
        if isinstance(v, dict) and not str(v.get("phase", "")).startswith("checkpoint ")
    ]
    if not verdicts:
        return None
    cached = [v for v in verdicts if v.get("verdict") == "cache"]
    text = (
        f"{len(cached)} of {len(verdicts)} epoch verdict(s) are cache, e.g. {cached[0].get('phase')}: "
        f"{cached[0].get('reason')}"
        if cached
        else f"no epoch read from the page cache ({', '.join(sorted({str(v.get('verdict')) for v in verdicts}))})"
    )
    return ("reads from storage, not the page cache", not cached, text)


def check_repeats(results: Sequence[Doc], names: Sequence[str]) -> List[Check]:
    """Runs of one workload and the same settings within 5 % of each other in samples/s (exact
    means), and a note for runs of one workload whose settings differ (they are not repeats)."""
    labels = dict(RUN_SETTINGS)
    out: List[Check] = []
    groups: Dict[Tuple[str, Tuple[Tuple[str, Any], ...]], List[Tuple[Doc, str]]] = {}
    by_workload: Dict[str, List[Tuple[str, Dict[str, Any]]]] = {}
    for res, name in zip(results, names):
        if trained(cast(RunResult, res)):
            wl = res.get("workload") or res.get("model") or "-"
            st = settings_of(res)
            groups.setdefault((wl, tuple(sorted(st.items()))), []).append((res, name))
            by_workload.setdefault(wl, []).append((name, st))
    for wl, runs in by_workload.items():
        kinds = {tuple(sorted(st.items())) for _, st in runs}
        if len(kinds) < 2:
            continue
        ref_name, ref = runs[0]
        diffs = []
        for name, st in runs[1:]:
            d = [f"{labels[k]} {ref[k]} vs {st[k]}" for k, _ in RUN_SETTINGS if st[k] != ref[k]]
            if d:
                diffs.append(
                    f"{(name or 'run').rstrip(': ')} differs from {(ref_name or 'run').rstrip(': ')} in " + "; ".join(d)
                )
        out.append((f"{wl}: runs with other settings are not repeats", None, " | ".join(diffs)))
    for (wl, _), repeats in groups.items():
        if len(repeats) < 2:
            continue
        sps = [_samples_per_s(r) for r, _ in repeats]
        lo, hi = min(sps), max(sps)
        spread = (hi / lo - 1.0) if lo > 0 else float("inf")
        ok = spread <= REPEAT_TOLERANCE + 1e-12
        figs = ", ".join(f"{(n or 'run').rstrip(': ')} {v:.1f}" for (_, n), v in zip(repeats, sps))
        spread_txt = f"{spread * 100:.2f} %" if lo > 0 else "infinite"
        out.append(
            (
                f"{wl}: {len(repeats)} runs within {REPEAT_TOLERANCE * 100:g} % (samples/s)",
                ok,
                f"samples/s {figs}: spread {spread_txt} (max/min - 1), need <= {REPEAT_TOLERANCE * 100:g} %",
            )
        )
    return out


def run_checks(
    result_dicts: Iterable[Doc], ram_bytes: Optional[int] = None, labels: Optional[Sequence[str]] = None
) -> List[Check]:
    """Every check of every result, then the repeat check per workload.

    result_dicts: Result dicts (as dlio.report.result.build_result makes them) or dlio-fast.json documents.
    ram_bytes: the RAM of one host, instead of what each result recorded.
    labels: names of the results, used to prefix the checks when there are several.
    Returns [(name, passed, figure_text)]."""
    results = list(result_dicts)
    several = len(results) > 1
    out: List[Check] = []
    names: List[str] = []
    for i, res in enumerate(results):
        pre = _label(res, i, labels, several)
        names.append(pre)
        checks = [check_complete(res)]
        if trained(cast(RunResult, res)):
            checks.append(check_dataset(res, ram_bytes))
            checks.append(check_steps(res))
            checks += check_au(res)
            checks += [c for c in [check_not_cache(res)] if c is not None]
        elif not res.get("checkpoints"):
            checks.append(("training epochs present", False, "the run has no training epoch"))
        out += [(pre + n, ok, t) for n, ok, t in checks]
    if several:
        out += check_repeats(results, names)
    return out
