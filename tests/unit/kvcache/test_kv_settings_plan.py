"""The model table, the settings and the synthetic plan: the reference's users for the seed, the
request arrays' invariants, determinism."""

import numpy as np
import pytest

from dlio import _core
from dlio.base.errors import ConfigError
from dlio.config import load_config
from dlio.config.sections import KvcacheConfig
from dlio.kvcache.models import MODELS, resolve_model
from dlio.kvcache.plan import synthetic_plan, user_table
from dlio.kvcache.settings import settings

# each test runs as a measured phase (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("measured_phase")

NOENV: dict = {}


def cfg(name="kvcache_llama3_8b_opt1", *sets):
    return load_config(name, env=NOENV, sets=list(sets))


def test_bytes_per_token_as_the_reference_computes_it():
    assert MODELS["llama3.1-8b"].bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131072
    assert MODELS["llama3.1-70b-instruct"].bytes_per_token == 327680
    assert MODELS["tiny-1b"].bytes_per_token == 24576
    m = resolve_model(
        cfg(
            "kvcache_llama3_8b_opt1",
            "kvcache.model=mine",
            "kvcache.layers=4",
            "kvcache.kv_heads=2",
            "kvcache.head_dim=64",
        ).section(KvcacheConfig)
    )
    assert m.bytes_per_token == 2 * 4 * 2 * 64 * 2


def test_unknown_model_names_the_key():
    with pytest.raises(ConfigError, match="kvcache.model = 'nope': unknown model"):
        settings(cfg("kvcache_llama3_8b_opt1", "kvcache.model=nope"))


@pytest.mark.parametrize(
    "key, value, said",
    [
        ("kvcache.cpu_bytes", "4 parsecs", "expected a size"),
        ("kvcache.direct_chunk", "5000", "multiple of 4 KiB"),
        ("kvcache.qos_responsive", "0.9", "add up to more than 1"),
    ],
)
def test_bad_values_are_one_line_naming_the_key(key, value, said):
    with pytest.raises(ConfigError) as e:
        settings(cfg("kvcache_llama3_8b_opt1", f"{key}={value}"))
    assert key in str(e.value) and said in str(e.value) and "\n" not in str(e.value)


def test_the_options_settings():
    s1, s2, s3 = (
        settings(cfg(n)) for n in ("kvcache_llama3_8b_opt1", "kvcache_llama3_8b_opt2", "kvcache_llama3_70b_opt3")
    )
    assert (s1.users, s1.workers, s1.alloc_slots, s1.cpu_bytes, s1.duration_s, s1.trials) == (200, 200, 16, 0, 300, 3)
    assert (s2.users, s2.cpu_bytes, s2.alloc_slots) == (100, 4 << 30, 16)
    assert (s3.users, s3.alloc_slots, s3.bytes_per_token) == (70, 4, 327680)
    assert settings(cfg("kvcache_llama3_8b_opt1", "kvcache.users=900")).workers == 500  # min(users, 500)


def test_users_are_the_references_for_the_seed():
    # The reference, run with --model llama3.1-8b --num-users 200 --seed 42, printed: context min 598,
    # max 24836, mean 9330 tokens; QoS 25 interactive, 78 responsive, 97 batch.
    u = user_table(settings(cfg()))
    assert (u.context.min(), u.context.max(), round(u.context.mean())) == (598, 24836, 9330)
    assert [(u.prio == p).sum() for p in (3, 2, 1)] == [25, 78, 97]


def test_plan_invariants():
    s = settings(cfg("kvcache_llama3_8b_opt1", "kvcache.duration=20", "kvcache.max_turns=3"))
    p = synthetic_plan(s, rank=0, trial=0)
    r, e = p.reqs, p.entries
    assert np.all(np.diff(r["arrival_ns"].astype(np.int64)) >= 0) and r["arrival_ns"].max() < 20e9
    assert np.array_equal(e["bytes"], e["tokens"].astype(np.uint64) * 131072)
    assert np.array_equal(r["flags"] & _core.KV_PREFILL_ONLY > 0, e["tokens"] >= 10000)
    assert r["turn"].max() == 2  # max_turns 3
    # conversations: each one's requests in turn order, turns 0, 1, 2 ...
    for c in range(len(p.conv_first) - 1):
        rs = p.conv_reqs[p.conv_first[c] : p.conv_first[c + 1]]
        assert list(r["turn"][rs]) == list(range(len(rs)))
        assert np.all(r["conv"][rs] == c)
    # per user, think x U(0.8, 1.2) apart: a chatbot user (0.1-0.5 s) sends 40-250 requests in 20 s
    assert 200 * 20 / 1.5 / 1.2 < len(r) < 200 * 20 / 0.1 / 0.8


def test_plan_is_deterministic_per_rank_and_trial():
    s = settings(cfg("kvcache_llama3_8b_opt1", "kvcache.duration=5"))
    a, b = synthetic_plan(s, 0, 0), synthetic_plan(s, 0, 0)
    assert np.array_equal(a.reqs, b.reqs) and np.array_equal(a.entries, b.entries)
    other = synthetic_plan(s, 1, 0)
    assert not np.array_equal(a.reqs["arrival_ns"], other.reqs["arrival_ns"])
    # the reference's wrapper seeds client N with seed + N: rank 1's users are rank 0's of seed 43
    assert not np.array_equal(a.users.context, other.users.context)
    shifted = settings(cfg("kvcache_llama3_8b_opt1", "kvcache.duration=5", "kvcache.seed=43"))
    assert np.array_equal(other.users.context, user_table(shifted).context)
    assert np.array_equal(other.users.think, user_table(shifted).think)
    assert np.array_equal(a.users.context, user_table(s, 0).context)
