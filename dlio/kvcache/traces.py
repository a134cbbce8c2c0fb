"""Traces in, request plans out (the same arrays as plan.py's):

  csv       the reference's --io-trace-log (oplog.read_csv): each operation replayed as recorded, in
            its tier (Tier-0/1 the RAM tier, Tier-2 storage), an Evict Read+Write pair as one
            demotion; a read waits for its entry's write, as it followed it in the reference;
  mooncake  Mooncake's request trace (FAST'25, JSONL of {timestamp ms, input_length, output_length,
            hash_ids}): each hash id a block of block_tokens tokens, read when cached (prefix reuse)
            and written when not, in order;
  sharegpt  ShareGPT conversations (JSON [{id, conversations: [{from: human|gpt, value}]}]): each
            human/gpt pair a turn of the reference's request (context = characters / 4 up to 16,384,
            generation up to 2,048, as the reference's loader without tiktoken), conversations in a
            seeded shuffle, request_rate per second (0: as fast as possible).

QoS priorities the traces lack are drawn with the configured mix.
"""

from __future__ import annotations

import os
from typing import Any, List, Tuple

import numpy as np

from dlio import _core
from dlio.base import inputs
from dlio.base.errors import DlioError
from dlio.kvcache import oplog
from dlio.kvcache.plan import MAX_REQUESTS, Plan
from dlio.kvcache.settings import KvSettings

SHAREGPT_MAX_CONTEXT, SHAREGPT_MAX_GEN = 16384, 2048
KEY = "kvcache.trace"
MAX_GEN = 1 << 20  # output tokens of one request: a million is past any model's generation


def detect(path: str, given: str) -> str:
    """The trace's format: as given, else from the name and the first bytes."""
    if given != "auto":
        return given
    base = path[:-3] if path.endswith((".gz", ".xz")) else path[:-4] if path.endswith(".zst") else path
    if base.endswith(".jsonl"):
        return "mooncake"
    if base.endswith(".csv"):
        return "csv"
    head = next((line.lstrip() for line in oplog.trace_lines(path, KEY) if line.strip()), "")
    if head.startswith("Timestamp,"):
        return "csv"
    if head.startswith("["):
        return "sharegpt"
    if head.startswith("{"):
        return "mooncake"
    raise DlioError(f"{KEY} = {path}: not a trace dlio-fast knows; set kvcache.trace_format (csv, mooncake, sharegpt)")


def _prios(s: KvSettings, n: int, rng: np.random.Generator) -> np.ndarray:
    r = rng.random(n)
    return np.where(r < s.qos[0], 3, np.where(r < s.qos[0] + s.qos[1], 2, 1)).astype(np.uint8)


def _empty_convs(n: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(1, np.uint32), np.zeros(0, np.uint32), np.full(n, np.iinfo(np.uint32).max, np.uint32)


def csv_plan(s: KvSettings, path: str) -> Plan:
    ops, names = oplog.read_csv(path, KEY)
    order = np.argsort(ops["t"], kind="stable")
    ops = ops[order]
    evict, write = ops["phase"] == oplog.PHASES["Evict"], ops["op"] == 1
    # An Evict pair (Read from the upper tier, Write to the lower) is one demotion; only a demotion to
    # storage moves bytes here (Tier-0 and Tier-1 are both the RAM tier).
    keep = ~evict | (write & (ops["tier"] == 2))
    ops = ops[keep]
    n = len(ops)
    if n > MAX_REQUESTS:
        raise DlioError(f"{path}: {n:,} operations; at most {MAX_REQUESTS:,}")
    nkeys = len(names)
    size = np.zeros(nkeys, np.uint64)
    np.maximum.at(size, ops["key"], ops["size"])
    written = np.zeros(nkeys, bool)
    written[ops["key"][ops["op"] == 1]] = True
    reads = ops["op"] == 0
    orphan = reads & ~written[ops["key"]]
    notes = []
    if orphan.any():
        notes.append(f"{int(orphan.sum()):,} reads of entries the trace never writes: left out")
        ops, n = ops[~orphan], int((~orphan).sum())
    if n == 0:
        raise DlioError(f"{KEY} = {path}: no operations to replay (an empty trace measures nothing); give a trace")
    is_w, is_ev = ops["op"] == 1, ops["phase"] == oplog.PHASES["Evict"]
    steps = np.zeros(n, _core.KV_STEP_DTYPE)
    steps["entry"] = ops["key"]
    steps["kind"] = np.where(is_ev, _core.KV_DEMOTE, np.where(is_w, _core.KV_WRITE, _core.KV_READ))
    steps["tier"] = np.where(is_w & ~is_ev, np.where(ops["tier"] == 2, _core.KV_TIER_STORAGE, _core.KV_TIER_CPU), 0)
    conv_first, conv_reqs, conv = _empty_convs(n)
    reqs = np.zeros(n, _core.KV_REQ_DTYPE)
    t = ops["t"] - (ops["t"][0] if n else 0)
    reqs["arrival_ns"] = np.round(t * 1e9).astype(np.uint64)
    reqs["first_step"] = np.arange(n)
    reqs["nsteps"] = 1
    reqs["conv"] = conv
    reqs["prio"] = 1  # one FIFO, in the trace's order
    entries = np.zeros(nkeys, _core.KV_ENTRY_DTYPE)
    entries["bytes"] = size
    entries["tokens"] = size // np.uint64(max(1, s.bytes_per_token))
    entries["flags"] = np.where(written, _core.KV_WRITTEN_LATER, 0)
    notes.append(
        f"trace {os.path.basename(path)}: {n:,} operations over {float(t[-1]) if n else 0:.1f} s, "
        f"{int(written.sum()):,} entries written ({_gib(int(size[written].sum()))} GiB to hold)"
    )

    def key_of(ids: np.ndarray) -> List[str]:
        return [str(names[i]) for i in ids]

    return Plan(
        reqs, steps, entries, conv_first, conv_reqs, f"csv {path}", s.trace_timing == "asap", True, notes, key_of=key_of
    )


def mooncake_plan(s: KvSettings, path: str) -> Plan:
    ts: List[float] = []
    outl: List[int] = []
    ids: List[Any] = []
    counts: List[int] = []
    where = f"{KEY} = {path}"
    for n, line in enumerate(oplog.trace_lines(path, KEY), 1):
        if not line.strip():
            continue
        at = f"{where}: line {n}"
        r = inputs.loads_json(line, at, "Mooncake request ({timestamp, input_length, output_length, hash_ids})")
        if not isinstance(r, dict) or "timestamp" not in r or not isinstance(r.get("hash_ids"), list):
            raise DlioError(f"{at}: not a Mooncake request; expected {{timestamp, output_length, hash_ids}}")
        ts.append(inputs.field_real(r["timestamp"], at, "timestamp", 0.0, inputs.LIMIT / 1e6))
        outl.append(inputs.field_int(r.get("output_length", 0), at, "output_length", 0, MAX_GEN))
        inputs.field_int(r.get("input_length", 0), at, "input_length")
        h = r["hash_ids"]
        ids.extend(inputs.field_int(x, at, "hash_ids", 0, 2**63 - 1) for x in h)
        counts.append(len(h))
        if len(counts) > MAX_REQUESTS or len(ids) > 4 * MAX_REQUESTS:
            raise DlioError(f"{where}: too large (more than {MAX_REQUESTS:,} requests); cut the trace")
    n = len(counts)
    if not sum(counts):
        raise DlioError(f"{where}: no requests with blocks (an empty trace measures nothing); give another trace")
    blocks, step_entry = np.unique(np.array(ids, dtype=np.int64), return_inverse=True)
    order = np.argsort(np.array(ts), kind="stable")
    first = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    cnt = np.array(counts, np.int64)
    # the steps (block ids) in the requests' time order: each request's run of ids, moved
    new_first = np.concatenate(([0], np.cumsum(cnt[order])[:-1])).astype(np.int64)
    idx = np.arange(int(cnt.sum())) + np.repeat(first[order] - new_first, cnt[order])
    steps = np.zeros(len(idx), _core.KV_STEP_DTYPE)
    steps["entry"] = step_entry[idx]
    steps["kind"] = _core.KV_READ_OR_WRITE
    reqs = np.zeros(n, _core.KV_REQ_DTYPE)
    t_ms = np.array(ts)[order]
    reqs["arrival_ns"] = np.round((t_ms - (t_ms[0] if n else 0)) * 1e6).astype(np.uint64)
    reqs["nsteps"] = cnt[order]
    reqs["first_step"] = new_first
    reqs["gen"] = np.array(outl, np.int64)[order]
    reqs["prio"] = _prios(s, n, np.random.default_rng(s.seed))
    conv_first, conv_reqs, conv = _empty_convs(n)
    reqs["conv"] = conv
    empty = reqs["nsteps"] == 0
    if empty.any():  # a request without blocks has nothing to do: dropped
        reqs = reqs[~empty]
    entries = np.zeros(len(blocks), _core.KV_ENTRY_DTYPE)
    entries["tokens"] = s.block_tokens
    entries["bytes"] = s.block_tokens * s.bytes_per_token
    notes = [
        f"trace {os.path.basename(path)}: {len(reqs):,} requests, {len(blocks):,} distinct blocks of "
        f"{s.block_tokens} tokens, {len(idx) - len(blocks):,} block reuses"
    ]
    return Plan(
        reqs,
        steps,
        entries,
        conv_first,
        conv_reqs,
        f"mooncake {path}",
        s.trace_timing == "asap",
        True,
        notes,
        key_of=lambda e: [f"block_{blocks[i]}" for i in e],
    )


def sharegpt_plan(s: KvSettings, path: str) -> Plan:
    where = f"{KEY} = {path}"
    data = inputs.loads_json(inputs.read_text(path, inputs.KV_TRACE_CAP, "ShareGPT trace", KEY), where, "ShareGPT")
    if not isinstance(data, list):
        raise DlioError(f"{path}: expected a JSON list of conversations (ShareGPT)")
    rng = np.random.default_rng(s.seed)
    convs = []
    for c in data:
        turns = c.get("conversations") if isinstance(c, dict) else None
        if not isinstance(turns, list):
            continue
        pairs = []
        for i in range(0, len(turns) - 1, 2):
            h, g = turns[i], turns[i + 1]
            if isinstance(h, dict) and isinstance(g, dict) and h.get("from") == "human" and g.get("from") == "gpt":
                tokens = min(max(1, len(str(h.get("value", ""))) // 4), SHAREGPT_MAX_CONTEXT)
                made = min(max(1, len(str(g.get("value", ""))) // 4), SHAREGPT_MAX_GEN)
                pairs.append((tokens, made))
        if pairs:
            convs.append(pairs)
    if not convs:
        raise DlioError(f"{path}: no human/gpt turns found (ShareGPT: [{{id, conversations: [{{from, value}}]}}])")
    convs = [convs[i] for i in rng.permutation(len(convs))]
    ctx = np.array([p[0] for c in convs for p in c], np.int64)
    gen = np.array([p[1] for c in convs for p in c], np.int64)
    lens = np.array([len(c) for c in convs], np.int64)
    n = len(ctx)
    if n > MAX_REQUESTS:
        raise DlioError(f"{path}: {n:,} turns; at most {MAX_REQUESTS:,}")
    conv = np.repeat(np.arange(len(convs)), lens)
    turn = np.arange(n) - np.repeat(np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    rate = s.request_rate
    reqs = np.zeros(n, _core.KV_REQ_DTYPE)
    reqs["arrival_ns"] = (np.arange(n) * (1e9 / rate)).astype(np.uint64) if rate else 0
    reqs["first_step"] = np.arange(n)
    reqs["nsteps"] = 1
    reqs["conv"] = conv
    reqs["turn"] = turn
    reqs["gen"] = gen
    reqs["prio"] = _prios(s, n, rng)
    reqs["flags"] = np.where(ctx >= s.prefill_only_tokens, _core.KV_PREFILL_ONLY, 0)
    steps = np.zeros(n, _core.KV_STEP_DTYPE)
    steps["entry"] = np.arange(n)
    entries = np.zeros(n, _core.KV_ENTRY_DTYPE)
    entries["tokens"] = ctx
    entries["bytes"] = ctx.astype(np.uint64) * np.uint64(s.bytes_per_token)
    conv_first = np.concatenate(([0], np.cumsum(lens))).astype(np.uint32)
    notes = [
        f"trace {os.path.basename(path)}: {len(convs):,} conversations, {n:,} turns, mean context "
        f"{ctx.mean():.0f} tokens"
    ]
    return Plan(
        reqs,
        steps,
        entries,
        conv_first,
        np.arange(n, dtype=np.uint32),
        f"sharegpt {path}",
        rate == 0,
        True,
        notes,
        key_of=lambda e: [f"conv_{conv[i]}_turn_{turn[i] + 1}" for i in e],
    )


def trace_plan(s: KvSettings) -> Plan:
    """The plan of the configured trace (kvcache.trace)."""
    path = s.trace
    assert path is not None
    kind = detect(path, s.trace_format)
    return {"csv": csv_plan, "mooncake": mooncake_plan, "sharegpt": sharegpt_plan}[kind](s, path)


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f}"
