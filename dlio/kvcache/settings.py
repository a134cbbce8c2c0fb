"""A config's kvcache.* keys checked and resolved once: sizes parsed, defaults derived (workers,
allocation slots), the templates and the QoS mix validated. Bad input is a ConfigError naming the key,
the value, where it came from and what to do."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from dlio.base.errors import ConfigError
from dlio.base.same_names import build_from
from dlio.base.units import parse_size
from dlio.config import Config
from dlio.config.sections import KvcacheConfig
from dlio.kvcache.models import KvModel, resolve_model

# The reference's user templates (kv_cache/workload.py UserSimulator, config.yaml user_templates):
# context tokens, generated tokens, think time in seconds, each [lo, hi].
DEFAULT_TEMPLATES: Tuple[Tuple[str, Tuple[int, int], Tuple[int, int], Tuple[float, float]], ...] = (
    ("chatbot", (512, 4096), (50, 200), (0.1, 0.5)),
    ("coding", (4096, 25000), (100, 500), (0.2, 1.0)),
    ("document", (4096, 16384), (200, 800), (0.3, 1.5)),
)
GENERATION_NS = {"none": 0, "fast": 2_000_000, "realistic": 30_000_000}  # per token (GENERATION_TIMING)
MAX_WORKERS = 500  # the reference's min(users, 500)
MAX_SIZE = 1 << 50  # 1 PiB: any size key above is a typo


@dataclass(frozen=True)
class Template:
    name: str
    context: Tuple[int, int]
    generation: Tuple[int, int]
    think: Tuple[float, float]


@dataclass(frozen=True)
class KvSettings:
    model: KvModel
    users: int
    workers: int
    duration_s: float
    seed: int
    trials: int
    templates: Tuple[Template, ...]
    qos: Tuple[float, float, float]  # interactive, responsive, batch
    multiturn: bool
    end_p: float
    max_turns: int
    decode_batch: int
    prefix_probe: float
    prefill_only_tokens: int
    max_concurrent_allocs: int  # as configured (0: unlimited)
    alloc_slots: int  # what the C engine gets
    cpu_bytes: int
    storage_capacity: int  # 0: engine.storage_capacity's default, found per rank at the start
    eviction_target: float
    eviction_skip: float
    io_mode: str
    cache_dir: str
    chunk_tokens: int
    direct_chunk: int
    direct_qd: int
    stage_bytes: int  # 0: auto (engine.stage_bytes)
    gen_ns_per_token: int
    generation_mode: str
    trace: Optional[str]
    trace_format: str
    trace_timing: str
    request_rate: float
    block_tokens: int
    io_trace_log: Optional[str]
    drop_check: int
    max_conversations: int = 1000  # the reference's conversation window (0: none)
    trial_gap_s: float = 0.0  # idle before and after each trial (the reference wrapper's TEST_DELAY)

    @property
    def bytes_per_token(self) -> int:
        return self.model.bytes_per_token

    @property
    def chunk_bytes(self) -> int:
        return self.chunk_tokens * self.bytes_per_token


def _size(cfg: Config, key: str, lo: int = 0) -> int:
    raw = cfg.get(key)
    try:
        n = parse_size(str(raw))
    except (ValueError, TypeError):
        n = None
    if n is None or n < lo or n > MAX_SIZE:
        floor = f" of at least {lo}" if lo else ""
        raise ConfigError(
            f"{key} = {raw!r} (from {cfg.origin(key)}): expected a size{floor} such as 4GiB, 512MiB or a byte count",
            key,
            raw,
            cfg.origin(key),
        )
    return int(n)


def _pair(name: str, field: str, v: Any, origin: str, integer: bool) -> Tuple[Any, Any]:
    key = f"kvcache.templates.{name}.{field}"
    ok = isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)
    if ok:
        lo, hi = v
        ok = 0 < lo <= hi and (not integer or (float(lo).is_integer() and float(hi).is_integer()))
    if not ok:
        what = "integers" if integer else "numbers"
        raise ConfigError(f"{key} = {v!r} (from {origin}): expected [lo, hi], {what} with 0 < lo <= hi", key, v, origin)
    return (int(lo), int(hi)) if integer else (float(lo), float(hi))


def _templates(cfg: Config) -> Tuple[Template, ...]:
    given: Optional[Mapping[str, Any]] = cfg.section(KvcacheConfig).templates
    if not given:
        return tuple(Template(n, c, g, t) for n, c, g, t in DEFAULT_TEMPLATES)
    origin = cfg.origin("kvcache.templates")
    out = []
    for name, t in given.items():
        if not isinstance(t, Mapping) or set(t) != {"context", "generation", "think"}:
            raise ConfigError(
                f"kvcache.templates.{name} (from {origin}): expected {{context: [lo, hi], generation: [lo, hi], "
                "think: [lo, hi]}",
                f"kvcache.templates.{name}",
                t,
                origin,
            )
        out.append(
            Template(
                str(name),
                _pair(name, "context", t["context"], origin, True),
                _pair(name, "generation", t["generation"], origin, True),
                _pair(name, "think", t["think"], origin, False),
            )
        )
    return tuple(out)


def settings(cfg: Config) -> KvSettings:
    """The resolved kvcache settings of a config (ConfigError on a bad value)."""
    kv = cfg.section(KvcacheConfig)
    model = resolve_model(kv)
    if kv.qos_interactive + kv.qos_responsive > 1 + 1e-9:
        raise ConfigError(
            f"kvcache.qos_interactive = {kv.qos_interactive} with kvcache.qos_responsive = {kv.qos_responsive}: "
            "the shares add up to more than 1 (the rest is batch)",
            "kvcache.qos_responsive",
            kv.qos_responsive,
            cfg.origin("kvcache.qos_responsive"),
        )
    workers = kv.workers or min(kv.users, MAX_WORKERS)
    direct_chunk = _size(cfg, "kvcache.direct_chunk", 4096)
    if direct_chunk % 4096 or direct_chunk > (1 << 30):
        raise ConfigError(
            f"kvcache.direct_chunk = {kv.direct_chunk!r} (from {cfg.origin('kvcache.direct_chunk')}): expected a "
            "multiple of 4 KiB up to 1 GiB (O_DIRECT transfers)",
            "kvcache.direct_chunk",
            kv.direct_chunk,
        )
    stage = 0 if str(kv.stage_bytes).strip().lower() == "auto" else _size(cfg, "kvcache.stage_bytes", 4096)
    stage = (stage + 4095) // 4096 * 4096
    trace = kv.trace
    if trace is not None and not os.path.exists(trace):
        raise ConfigError(
            f"kvcache.trace = {trace!r} (from {cfg.origin('kvcache.trace')}): no such file",
            "kvcache.trace",
            trace,
            cfg.origin("kvcache.trace"),
        )
    # every other field is the kvcache key of its name, as loaded
    return build_from(
        KvSettings,
        kv,
        model=model,
        workers=workers,
        duration_s=kv.duration,
        templates=_templates(cfg),
        qos=(kv.qos_interactive, kv.qos_responsive, max(0.0, 1.0 - kv.qos_interactive - kv.qos_responsive)),
        end_p=kv.multiturn_end,
        alloc_slots=min(kv.max_concurrent_allocs or workers, workers),
        cpu_bytes=_size(cfg, "kvcache.cpu_bytes"),
        storage_capacity=_size(cfg, "kvcache.storage_capacity"),
        direct_chunk=direct_chunk,
        stage_bytes=stage,
        gen_ns_per_token=GENERATION_NS[kv.generation_mode],
        trace=trace,
        trial_gap_s=kv.trial_gap,
    )
