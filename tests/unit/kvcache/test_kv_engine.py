"""The C engine through the binding, on plans whose outcome is known: counters against hand-computed
values, the files each mode leaves (numpy loads them), the RAM tier's demotions, the chunked layout."""

import os

import numpy as np
import pytest

from dlio import _core

# each test runs as a measured phase (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("measured_phase")

BPT = 8192  # model (2 layers, 1 kv head, head_dim 1024, fp16): 2 x 2 x 1 x 1024 x 2
MODEL = (2, 1, 1024, 2)


def plan(tokens=(10, 20, 30), gens=(64, 32, 5)):
    """conv 0: turn 0 then turn 1 (reads turn 0); conv 1: one prefill-only turn."""
    n = len(tokens)
    r = np.zeros(n, _core.KV_REQ_DTYPE)
    r["arrival_ns"] = np.arange(n) * 1000
    r["first_step"] = np.arange(n)
    r["nsteps"] = 1
    r["conv"] = [0, 0, 1]
    r["turn"] = [0, 1, 0]
    r["gen"] = gens
    r["prio"] = 1
    r["flags"] = [0, 0, _core.KV_PREFILL_ONLY]
    s = np.zeros(n, _core.KV_STEP_DTYPE)
    s["entry"] = np.arange(n)
    e = np.zeros(n, _core.KV_ENTRY_DTYPE)
    e["tokens"] = tokens
    e["bytes"] = np.array(tokens, np.uint64) * BPT
    return r, s, e, np.array([0, 2, 3], np.uint32), np.arange(n, dtype=np.uint32)


def run(tmp_path, store="compat", **kw):
    r, s, e, cf, cr = plan()
    args = dict(
        store=store,
        folder=str(tmp_path),
        workers=1,
        alloc_slots=1,
        duration_s=30,
        bytes_per_token=BPT,
        asap=True,
        drain=True,
        stage_bytes=1 << 20,
        model=MODEL,
        drop_check=1,
    )
    args.update(kw)
    return _core.KvRun(r, s, e, cf, cr, **args).execute()


def test_counts_of_a_known_plan(tmp_path):
    res = run(tmp_path)
    c = res["counts"]
    # reads: request 0 1 + ceil(64/32); request 1 its earlier turn, 1 + ceil(32/32); request 2 none
    assert (c["requests"], c["write_ops"], c["read_ops"]) == (3, 3, 3 + 3)
    assert c["read_bytes"] == c["storage_read_bytes"] == (3 * 10 + 10 + 2 * 20) * BPT
    assert c["write_bytes"] == c["storage_write_bytes"] == 60 * BPT
    assert (c["mt_hits"], c["tokens"], c["hits"], c["misses"]) == (1, 101, 6, 0)
    assert res["hists"]["storage_read"]["count"] == 6 and res["hists"]["storage_write"]["count"] == 3
    assert res["store"]["fsyncs"] == 3 and res["store"]["fadvises"] == 6
    assert res["storage_entries"] == 3 and res["storage_used"] == 60 * BPT


@pytest.mark.parametrize("store, hdr", [("compat", 128), ("direct", 4096)])
def test_files_are_npy_of_the_models_shape(tmp_path, store, hdr):
    if store == "direct":
        why = _core.kv_store_check("direct", str(tmp_path), 30 * BPT, 1 << 20, 2)
        if why:
            pytest.skip(why)
    run(tmp_path, store=store, direct_chunk=64 << 10, direct_qd=2, stage_bytes=128 << 10)
    for i, tokens in enumerate((10, 20, 30)):
        p = os.path.join(tmp_path, f"kv_{i:08x}.npy")
        assert os.path.getsize(p) == hdr + tokens * BPT
        a = np.load(p)
        assert a.shape == (2, 2, tokens, 1, 1024) and a.dtype == np.float16
    # every 4 KiB block of every payload differs from every other (nothing to deduplicate)
    blocks = []
    for i, tokens in enumerate((10, 20, 30)):
        with open(os.path.join(tmp_path, f"kv_{i:08x}.npy"), "rb") as f:
            f.seek(hdr)
            data = f.read()
        blocks += [data[k : k + 4096] for k in range(0, len(data) - 4095, 4096)]
    assert len(set(blocks)) == len(blocks) == 60 * BPT // 4096


def test_ram_tier_demotes_to_storage(tmp_path):
    # RAM tier of 35 tokens (kept under 80 %, 28): entry 1 (20) pushes entry 0 (10) down; entry 2 (30)
    # pushes entry 1 down, and then the tier is empty (under 5 %), which takes any entry, as the reference's
    res = run(tmp_path, cpu_bytes=35 * BPT)
    c = res["counts"]
    assert (c["demotions"], c["demote_bytes"]) == (2, 30 * BPT)
    assert c["cpu_write_bytes"] == 60 * BPT and c["storage_write_bytes"] == 0  # the reference counts no demotion
    assert res["hists"]["demote_write"]["count"] == 2
    assert sorted(os.listdir(tmp_path)) == ["kv_00000000.npy", "kv_00000001.npy"]  # entry 2 is in RAM


def test_full_storage_deletes_the_least_recently_used(tmp_path):
    res = run(tmp_path, storage_bytes=50 * BPT)
    assert res["counts"]["deletes"] == 1 and res["counts"]["delete_bytes"] == 10 * BPT
    assert sorted(os.listdir(tmp_path)) == ["kv_00000001.npy", "kv_00000002.npy"]


def test_chunked_layout_one_file_per_chunk(tmp_path):
    res = run(tmp_path, chunk_bytes=8 * BPT)
    names = sorted(os.listdir(tmp_path))
    # 10, 20, 30 tokens in chunks of 8: 2, 3, 4 files
    assert len(names) == 9 and "kv_00000002_c00003.npy" in names
    assert os.path.getsize(os.path.join(tmp_path, "kv_00000002_c00003.npy")) == 128 + 6 * BPT
    assert np.load(os.path.join(tmp_path, "kv_00000002_c00003.npy")).shape == (2, 2, 6, 1, 1024)
    assert res["counts"]["storage_read_bytes"] == (3 * 10 + 10 + 2 * 20) * BPT


def test_null_store_makes_the_same_decisions_without_files(tmp_path):
    a = run(tmp_path, store="null")
    b = run(tmp_path, store="compat")
    for k in ("read_ops", "write_ops", "read_bytes", "write_bytes", "mt_hits", "hits", "misses"):
        assert a["counts"][k] == b["counts"][k], k


def test_a_missing_folder_is_an_error_naming_it(tmp_path):
    with pytest.raises(OSError) as e:
        run(tmp_path / "nope")
    assert "nope" in str(e.value)
