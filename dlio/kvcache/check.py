"""`dlio-fast check` of kvcache run folders (their dlio-fast.json, schema dlio-fast.kvcache/1):

  - the run completed;
  - the attestation of every trial and rank: fsync and fadvise reached the kernel (no I/O function
    interposed by a preloaded library, the device took the bytes written and fsync'ed, the drop
    emptied the page cache); a run attested bad FAILS;
  - no verdict is `cache` (device bytes well below the application's: the page cache served them);
  - what ran: the io mode, the storage, the generation mode and the client (a note);
  - a run of one of the rules' options (Table KVCache-1) has the option's parameters, seed 42, 3 trials
    and what the table describes (the reference's buffered file I/O on a local filesystem, no generation
    time, synthetic users in one file per entry): CLOSED, else a note saying what differs.

checks() returns (name, passed, figure) tuples, passed None for a note.
"""

from __future__ import annotations

from typing import Any, Dict, List

from dlio.family import Check

# Rules 6.3.1, Table KVCache-1 (per client): model, users, cpu bytes, max concurrent allocations; all
# 300 s, generation none, seed 42, 3 trials.
OPTIONS = {
    "kvcache_llama3_8b_opt1": ("llama3.1-8b", 200, 0, 16),
    "kvcache_llama3_8b_opt2": ("llama3.1-8b", 100, 4 << 30, 16),
    "kvcache_llama3_70b_opt3": ("llama3.1-70b-instruct", 70, 0, 4),
}

# The run Table KVCache-1 describes: the reference's buffered file I/O (compat) on a local filesystem, no
# emulated generation, one file per entry, synthetic users (no trace).
REFERENCE_RUN = ("compat", "local_fs", "none", 0, None)


def checks(doc: Dict[str, Any]) -> List[Check]:
    out: List[Check] = []
    recs = doc.get("records")
    n = len(recs) if isinstance(recs, list) else 0
    measured = n > 0 and isinstance(doc.get("aggregate"), dict)
    out.append(("trials measured", measured, f"{n} rank trial(s)" if measured else "no trial was measured"))
    ok = bool(doc.get("complete"))
    out.append(("run complete", ok, "complete" if ok else f"partial run: {doc.get('reason') or 'interrupted'}"))
    for r in doc.get("records", []):
        a = r.get("attestation") or {}
        where = f"trial {r['trial']}, rank {r['rank']}"
        if a.get("not_applicable"):
            out.append((f"attestation ({where})", True, a["not_applicable"]))
        elif not a.get("problems"):
            fs, fa = a.get("fsync_reached_kernel"), a.get("fadvise_reached_kernel")
            text = f"fsync {'yes' if fs else 'unknown' if fs is None else 'no'}, fadvise " + (
                "yes" if fa else "unknown" if fa is None else "no"
            )
            out.append((f"attestation ({where})", True, text))
        else:
            out.append((f"attestation ({where})", False, "; ".join(a["problems"])))
    for v in doc.get("verdicts", []):
        if v.get("verdict") == "cache":
            out.append((f"storage, not the page cache ({v['phase']})", False, v["reason"]))
    s = doc.get("settings", {})
    ran = ", ".join(
        f"{name} {s.get(key) or '?'}"
        for name, key in (("io mode", "io_mode"), ("storage", "storage"), ("generation mode", "generation_mode"))
    )
    out.append(("what ran", None, f"{ran}; {s.get('client') or 'client not recorded'}"))
    out += _option(doc)
    return out


def _option(doc: Dict[str, Any]) -> List[Check]:
    want = OPTIONS.get(doc.get("workload") or "")
    if want is None:
        return []
    s = doc.get("settings", {})
    got = (s.get("model"), s.get("users"), s.get("cpu_bytes"), s.get("max_concurrent_allocs"))
    seq = (s.get("duration_s"), s.get("seed"), s.get("trials"))
    # what Table KVCache-1 describes beyond the option's numbers: the reference's own run
    how = (s.get("io_mode"), s.get("storage"), s.get("generation_mode"), s.get("chunk_tokens"), s.get("trace"))
    diff = [
        f"{name} {g} (the option: {w})"
        for name, g, w in zip(
            ("model", "users", "cpu_bytes", "max_concurrent_allocs", "duration", "seed", "trials")
            + ("io_mode", "storage", "generation_mode", "chunk_tokens", "trace"),
            got + seq + how,
            want + (300, 42, 3) + REFERENCE_RUN,
        )
        if g != w
    ]
    if diff:
        return [("the option's CLOSED parameters (rules 6.3.1, 6.3.2)", None, "OPEN: " + ", ".join(diff))]
    return [("the option's CLOSED parameters (rules 6.3.1, 6.3.2)", True, "as Table KVCache-1")]
