"""The synthetic request plan of one rank and trial, as the reference benchmark's users would send
it, in numpy arrays for the C engine (dtypes in dlio._core: KV_REQ_DTYPE, KV_STEP_DTYPE,
KV_ENTRY_DTYPE).

The user table is drawn exactly as the reference draws it (UserSimulator.generate_mixed_users after
random.seed(seed): template, QoS, context, generation, think time per user, in that order), so the
same seed gives the same users. The per-request draws, which the reference takes from one shared
generator in whatever order its threads run, come from numpy seeded with (seed, rank, trial):

  - each user sleeps think x U(0.8, 1.2) and enqueues a request, open loop, until the duration;
  - context ~ U{max(1, ctx // 4), ctx}, generation ~ U{max(1, gen // 4), gen};
  - before each of its later requests the conversation ends with probability end_p, and after
    max_turns turns; a new one starts;
  - with probability prefix_probe a request starts with the system-prompt probe (a miss) and its
    context shrinks by that prompt's words (5, 9 or 6);
  - a request of prefill_only_tokens context tokens or more only writes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import numpy as np

from dlio import _core
from dlio.base.errors import ConfigError
from dlio.kvcache.settings import KvSettings

MAX_REQUESTS = 20_000_000  # per rank and trial: 40 B of plan and ~100 B of C state each
PROMPT_WORDS = np.array([5, 9, 6])  # the reference's three system prompts, in words


@dataclass
class Users:
    template: np.ndarray  # index into settings.templates
    prio: np.ndarray  # 3 interactive, 2 responsive, 1 batch
    context: np.ndarray
    generation: np.ndarray
    think: np.ndarray


@dataclass
class Plan:
    reqs: np.ndarray
    steps: np.ndarray
    entries: np.ndarray
    conv_first: np.ndarray
    conv_reqs: np.ndarray
    source: str
    asap: bool = False
    drain: bool = False
    notes: List[str] = field(default_factory=list)
    users: Optional[Users] = None
    key_of: Optional[Callable[[np.ndarray], List[str]]] = None  # entry ids -> the reference's key names

    @property
    def nreqs(self) -> int:
        return len(self.reqs)


def user_table(s: KvSettings) -> Users:
    """The reference's users for seed s.seed (Python's random, the reference's call order)."""
    rnd = random.Random(s.seed)
    names = [t.name for t in s.templates]
    n = s.users
    tmpl, prio = np.zeros(n, np.int64), np.zeros(n, np.int64)
    ctx, gen, think = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.float64)
    inter, resp = s.qos[0], s.qos[0] + s.qos[1]
    for i in range(n):  # one user at a time: the reference's sequence of draws (users, not requests)
        t = names.index(rnd.choice(names))
        r = rnd.random()
        prio[i] = 3 if r < inter else 2 if r < resp else 1
        tp = s.templates[t]
        tmpl[i] = t
        ctx[i] = rnd.randint(*tp.context)
        gen[i] = rnd.randint(*tp.generation)
        think[i] = rnd.uniform(*tp.think)
    return Users(tmpl, prio, ctx, gen, think)


def _arrivals(s: KvSettings, users: Users, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """(user, time in s) of every request before the duration, per user in time order."""
    n = (s.duration_s / (users.think * 0.8)).astype(np.int64) + 1
    total = int(n.sum())
    if total > MAX_REQUESTS * 2:
        raise ConfigError(
            f"kvcache: {s.users} users for {s.duration_s:g} s make about {total:,} requests per rank; at most "
            f"{MAX_REQUESTS:,}: shorten kvcache.duration or lower kvcache.users",
            "kvcache.duration",
            s.duration_s,
        )
    user = np.repeat(np.arange(s.users), n)
    gaps = users.think[user] * rng.uniform(0.8, 1.2, total)
    cs = np.cumsum(gaps)
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    t = cs - np.repeat(cs[first] - gaps[first], n)
    keep = t < s.duration_s
    return user[keep], t[keep]


def _conversations(s: KvSettings, user: np.ndarray, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """(conversation, 0-based turn) of each request (per user in time order)."""
    m = len(user)
    first = np.ones(m, bool)
    first[1:] = user[1:] != user[:-1]
    if not s.multiturn:
        return np.arange(m), np.zeros(m, np.int64)
    new = first | (rng.random(m) < s.end_p)
    idx = np.arange(m)
    start = np.maximum.accumulate(np.where(new, idx, 0))
    pos = idx - start
    new |= (pos % s.max_turns) == 0  # the max_turns cap starts a new one
    start = np.maximum.accumulate(np.where(new, idx, 0))
    return np.cumsum(new) - 1, idx - start


def synthetic_plan(s: KvSettings, rank: int = 0, trial: int = 0) -> Plan:
    """The plan of rank `rank`'s trial `trial` (deterministic from s.seed, rank and trial)."""
    users = user_table(s)
    rng = np.random.default_rng([s.seed, rank, trial])
    user, t = _arrivals(s, users, rng)
    m = len(user)
    if m > MAX_REQUESTS:
        raise ConfigError(
            f"kvcache: the plan has {m:,} requests per rank; at most {MAX_REQUESTS:,}: shorten kvcache.duration",
            "kvcache.duration",
            s.duration_s,
        )
    ctx_hi, gen_hi = users.context[user], users.generation[user]
    ctx = rng.integers(np.maximum(1, ctx_hi // 4), ctx_hi + 1)
    gen = rng.integers(np.maximum(1, gen_hi // 4), gen_hi + 1)
    conv, turn = _conversations(s, user, rng)
    probe = rng.random(m) < s.prefix_probe
    ctx = np.where(probe, np.maximum(0, ctx - PROMPT_WORDS[rng.integers(0, 3, m)]), ctx)
    order = np.argsort(t, kind="stable")
    reqs = np.zeros(m, _core.KV_REQ_DTYPE)
    reqs["arrival_ns"] = np.round(t[order] * 1e9).astype(np.uint64)
    reqs["first_step"] = np.arange(m)
    reqs["nsteps"] = 1
    reqs["conv"] = conv[order]
    reqs["turn"] = turn[order]
    reqs["gen"] = gen[order]
    reqs["prio"] = users.prio[user[order]]
    reqs["flags"] = np.where(probe[order], _core.KV_PROBE, 0) | np.where(
        ctx[order] >= s.prefill_only_tokens, _core.KV_PREFILL_ONLY, 0
    )
    steps = np.zeros(m, _core.KV_STEP_DTYPE)
    steps["entry"] = np.arange(m)
    steps["kind"] = _core.KV_SYNTH
    entries = np.zeros(m, _core.KV_ENTRY_DTYPE)
    entries["tokens"] = ctx[order]
    entries["bytes"] = ctx[order].astype(np.uint64) * np.uint64(s.bytes_per_token)
    nconv = int(conv.max()) + 1 if m else 0
    conv_sorted = reqs["conv"]
    conv_reqs = np.argsort(conv_sorted, kind="stable").astype(np.uint32)  # by conversation, in time order
    conv_first = np.zeros(nconv + 1, np.uint32)
    conv_first[1:] = np.cumsum(np.bincount(conv_sorted, minlength=nconv))
    user_sorted, turn_sorted = user[order], reqs["turn"]

    def key_of(ids: np.ndarray) -> List[str]:  # the reference's conv_user_NNNN_<id>_turn_N
        return [f"conv_user_{user_sorted[i]:04d}_{conv_sorted[i]}_turn_{turn_sorted[i] + 1}" for i in ids]

    return Plan(reqs, steps, entries, conv_first, conv_reqs, "synthetic", users=users, key_of=key_of)


def plan_lines(s: KvSettings, plan: Plan) -> List[str]:
    """What a plan is, in words: the reference's user distribution lines, then the requests."""
    out = []
    if plan.users is not None:
        u, bpt = plan.users, s.bytes_per_token
        mib = 1 << 20
        out += [
            "User Context Length Distribution:",
            f"  Min: {u.context.min()} tokens ({u.context.min() * bpt / mib:.2f}MiB)",
            f"  Max: {u.context.max()} tokens ({u.context.max() * bpt / mib:.2f}MiB)",
            f"  Mean: {u.context.mean():.0f} tokens ({u.context.mean() * bpt / mib:.2f}MiB)",
            "QoS Distribution:",
            *(
                f"  {name}: {int((u.prio == p).sum())} users"
                for name, p in (("interactive", 3), ("responsive", 2), ("batch", 1))
            ),
        ]
    e = plan.entries["bytes"]
    steps = plan.steps
    out.append(
        f"plan ({plan.source}): {plan.nreqs:,} requests, {len(plan.conv_first) - 1:,} conversations, "
        f"{len(steps):,} steps, {len(e):,} entries of {_mib(e.min()) if len(e) else 0}-"
        f"{_mib(e.max()) if len(e) else 0} MiB (mean {_mib(e.mean()) if len(e) else 0} MiB)"
    )
    out += plan.notes
    return out


def _mib(x: float) -> str:
    return f"{x / (1 << 20):.1f}"
