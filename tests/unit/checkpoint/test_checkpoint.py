"""Checkpoint emulation: sizes, rank layout, file names (dlio.checkpoint.layout), the schedule
(dlio.checkpoint.schedule) and the I/O (dlio.checkpoint.transfers, save, load, only_mode).

Every expected value is computed here independently of dlio.checkpoint: the golden llama totals
(docs/dlio-facts.md §2) from a closed-form sum over tensor-parallel / pipeline / data-parallel shards, file
counts from DLIO's test_checkpoint_epoch formulas (docs/dlio-facts.md §8), bytes on disk with os.stat, file
content with numpy, and the summary reductions by hand from the records.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import REPO

from dlio import _core
from dlio.checkpoint import load as ckpt_load
from dlio.checkpoint import only_mode
from dlio.checkpoint import save as ckpt_save
from dlio.checkpoint.layout import plan_checkpoint, rank_files
from dlio.checkpoint.schedule import checkpoint_schedule
from dlio.checkpoint.transfers import TransferOptions
from dlio.config import ConfigError, load_config
from dlio.report import checkpoint as ckpt_figures
from dlio.storage import file_sets

GiB = 2**30

# --------------------------------------------------------------------------------------------------
# golden sizes


def closed_form_total(L, H, FFN, V, heads, kv, TP, PP, DP, zero, mdt=2, odt=4):
    """Total bytes over all ranks, written as sums over shards (not DLIO's per-rank loop):
    each TP shard of a transformer layer holds [H, H(H+2dkv)/TP, H^2/TP, H, 2H*FFN/TP, H*FFN/TP],
    embedding and lm_head H*V/TP, the final norm H; ZeRO-1 keeps one model replica (dp 0), ZeRO-3
    shards each tensor over DP; the optimizer is 3 x (nparam // shards) + 3 x 5H per shard."""
    dkv = H // heads * kv
    sf = DP if zero == 3 else 1
    layer = [
        H // sf,
        H * (H + 2 * dkv) // TP // sf,
        H * H // TP // sf,
        H // sf,
        2 * H * FFN // TP // sf,
        H * FFN // TP // sf,
    ]
    per_tp_model = 2 * (H * V // TP // sf) + H // sf + L * sum(layer)
    replicas = DP if zero == 3 else 1  # zero 3: DP shards; zero 0 / 1 / 2: one replica is written
    model = TP * per_tp_model * replicas * mdt
    nparam = 2 * V * H + L * (2 * H + H * (H + 2 * dkv) + H * H + 3 * H * FFN) + H
    shards = TP * PP * (DP if zero > 0 else 1)
    opt = shards * (3 * (nparam // shards) + 15 * H) * odt
    return model + opt


# workload, ranks (the minimum), total GiB to 2 decimals, docs/dlio-facts.md §2 table (model, optimizer, total,
# to its precision; its 1-decimal totals are sums of the rounded parts: 2203.7 + 13222.2 = 15425.9)
GOLDEN = [
    ("llama_7b", 1, 87.86, (12.55, 75.31, 87.86)),
    ("llama_7b_zero3", 1, 87.86, (12.55, 75.31, 87.86)),
    ("llama_8b_zero3", 1, 104.70, (14.96, 89.75, 104.70)),
    ("llama_70b", 32, 911.20, (130.18, 781.0, 911.2)),
    ("llama_70b_zero3", 8, 911.19, (130.18, 781.0, 911.2)),
    ("llama_405b", 256, 5292.01, (756.0, 4536.0, 5292.0)),
    ("llama_1t", 512, 15425.85, (2203.7, 13222.2, 15425.9)),
]


@pytest.mark.parametrize("name,ranks,golden,table", GOLDEN)
def test_golden_llama_sizes(name, ranks, golden, table):
    cfg = load_config(name)
    m, t, par = cfg.model, cfg.model.transformer, cfg.model.parallelism
    dp = ranks // (par.tensor * par.pipeline)
    want = closed_form_total(
        m.num_layers,
        t.hidden_size,
        t.ffn_hidden_size,
        t.vocab_size,
        t.num_attention_heads,
        t.num_kv_heads,
        par.tensor,
        par.pipeline,
        dp,
        par.zero_stage,
    )
    plan = plan_checkpoint(cfg, 0, ranks)
    assert plan.total_tensor_bytes == want
    assert round(plan.total_tensor_bytes / GiB, 2) == golden
    tm, to, tt = table
    assert abs(plan.model_bytes / GiB - tm) <= 0.051 and abs(plan.optimizer_bytes / GiB - to) <= 0.051
    assert abs(plan.total_tensor_bytes / GiB - tt) <= 0.06
    # on disk: the tensors plus torch.save's container, well under 1 KiB per tensor
    tensors = sum(f.tensors for r in plan.writers for f in rank_files(cfg, r, ranks))
    assert 0 < plan.total_bytes - plan.total_tensor_bytes < 1024 * tensors
    assert round(plan.dlio_size_GiB, 2) == golden  # DLIO's own figure agrees (zero 1/3)
    assert sum(plan.per_rank_bytes) == plan.total_bytes
    assert plan.writers == tuple(range(ranks))  # ZeRO >= 1: every rank writes


def test_golden_independent_of_dp_for_zero():
    for name in ("llama_7b", "llama_8b_zero3"):
        cfg = load_config(name)
        one = plan_checkpoint(cfg, 0, 1).total_bytes
        for n in (2, 4, 8):
            assert round(plan_checkpoint(cfg, 0, n).total_bytes / GiB, 2) == round(one / GiB, 2)


def test_llama_7b_files_one_rank():
    plan = plan_checkpoint(load_config("llama_7b"), 0, 1)
    names = [f.name for f in plan.files]
    assert names == ["model_0_model_states.pt", "zero_pp_rank_0_mp_rank_0_optim_states.pt"]
    H, V, L, FFN = 4096, 32000, 32, 11008
    model = 2 * (2 * H * V + H + L * (2 * H + H * 3 * H + H * H + 3 * H * FFN))
    assert plan.files[0].tensor_bytes == model and plan.files[0].dtype == "fp16"
    assert plan.files[1].dtype == "fp32"


def test_unet3d_model_size_honoured():
    cfg = load_config("unet3d_a100")
    assert cfg.model.model_size_bytes == 499153191
    plan = plan_checkpoint(cfg, 0, 1)
    assert [(f.name, f.tensor_bytes) for f in plan.files] == [("model_states-0.pt", 499153191)]
    assert plan.dlio_size_GiB == pytest.approx(499153191 / GiB)
    # zero 0: only ranks < TP*PP = 1 write
    p4 = plan_checkpoint(cfg, 3, 4)
    assert p4.files == () and p4.writers == (0,) and p4.total_tensor_bytes == 499153191


# --------------------------------------------------------------------------------------------------
# layout and names (DLIO test_checkpoint_epoch / test_checkpoint_step, docs/dlio-facts.md §8)


def dlio_test_cfg(framework, optimizers, num_layers, zero, nranks, folder="ck", **extra):
    sets = [
        f"framework={framework}",
        "model.model_size=1024",
        f"model.optimization_groups={optimizers}",
        f"model.num_layers={num_layers}",
        f"model.parallelism.zero_stage={zero}",
        "model.layer_parameters=[16]",
        f"model.parallelism.tensor={nranks}",
        "workflow.checkpoint=true",
        "train.epochs=8",
        "checkpoint.epochs_between_checkpoints=2",
        f"checkpoint.checkpoint_folder={folder}",
    ]
    sets += [f"{k.replace('__', '.')}={v}" for k, v in extra.items()]
    return load_config(sets=sets, env={})


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
@pytest.mark.parametrize("optimizers,num_layers,zero", [("[1024,128]", 2, 0), ("[1024,128]", 2, 3), ("[128]", 1, 0)])
@pytest.mark.parametrize("nranks", [1, 2, 4])
def test_dlio_checkpoint_epoch_counts(framework, optimizers, num_layers, zero, nranks):
    cfg = dlio_test_cfg(framework, optimizers, num_layers, zero, nranks)
    epochs, per = 8, 2
    ncks = sum(len(checkpoint_schedule(cfg, e, 10)) for e in range(1, epochs + 1))
    assert ncks == epochs // per
    files = [f for r in range(nranks) for f in rank_files(cfg, r, nranks)]
    per_ckpt = 3 * nranks if framework == "pytorch" else 3 * nranks * 2 + 1
    assert len(files) == per_ckpt
    assert ncks * len(files) == (epochs / per * (3 * nranks if framework == "pytorch" else 3 * nranks * 2 + 1))
    assert plan_checkpoint(cfg, 0, nranks).total_files == per_ckpt
    ext = ".pt" if framework == "pytorch" else ".pb-1.data-00000-of-00001"
    for r in range(nranks):
        names = {f.name for f in rank_files(cfg, r, nranks)}
        assert {
            f"model_states-{r}{ext}",
            f"zero_pp_rank_0_mp_rank_{r}_model_states{ext}",
            f"zero_pp_rank_0_mp_rank_{r}_optim_states{ext}",
        } <= names
        byname = {f.name: f.tensor_bytes for f in rank_files(cfg, r, nranks)}
        groups = [int(x) for x in optimizers.strip("[]").split(",")]
        assert byname[f"zero_pp_rank_0_mp_rank_{r}_optim_states{ext}"] == 3 * sum(groups)  # a, b, combined (int8)
        # DLIO puts one dict under every layer: torch.save stores its tensor once
        assert byname[f"zero_pp_rank_0_mp_rank_{r}_model_states{ext}"] == 16 // nranks
        assert byname[f"model_states-{r}{ext}"] == 1024


def test_dlio_checkpoint_step_counts():
    cfg = load_config(
        sets=["framework=pytorch", "workflow.checkpoint=true", "checkpoint.steps_between_checkpoints=2"], env={}
    )
    for nstep in (1, 2, 5, 8):
        pts = checkpoint_schedule(cfg, 3, nstep)
        assert len(pts) == nstep // 2
        assert [p.step for p in pts] == list(range(2, nstep + 1, 2))
        assert [p.stats_key for p in pts] == [f"save_ckpt{i}" for i in range(1, nstep // 2 + 1)]
    # default model: a 10240-byte non-transformer model_states file, rank 0 only (zero 0, MP 1)
    assert [(f.name, f.tensor_bytes) for f in rank_files(cfg, 0, 2)] == [("model_states-0.pt", 10240)]
    assert rank_files(cfg, 1, 2) == []


def test_epoch_schedule_like_dlio():
    cfg = load_config(
        sets=[
            "workflow.checkpoint=true",
            "checkpoint.checkpoint_after_epoch=3",
            "checkpoint.epochs_between_checkpoints=2",
        ],
        env={},
    )
    got = {e: checkpoint_schedule(cfg, e, 7) for e in range(1, 10)}
    assert [e for e, p in got.items() if p] == [3, 5, 7, 9]
    assert got[3][0].folder == "global_epoch3_step8" and got[3][0].stats_key == "save_ckpt1"
    cfg0 = load_config(sets=["workflow.checkpoint=true", "checkpoint.checkpoint_after_epoch=0"], env={})
    assert all(not checkpoint_schedule(cfg0, e, 7) for e in range(1, 10))


def small_transformer(tmp, tp=1, pp=1, zero=1, L=4, H=256, **extra):
    sets = [
        "model.type=transformer",
        f"model.num_layers={L}",
        f"model.transformer.hidden_size={H}",
        f"model.transformer.ffn_hidden_size={H * 3}",
        "model.transformer.vocab_size=1000",
        "model.transformer.num_attention_heads=8",
        "model.transformer.num_kv_heads=8",
        f"model.parallelism.tensor={tp}",
        f"model.parallelism.pipeline={pp}",
        f"model.parallelism.zero_stage={zero}",
        "framework=pytorch",
        f"checkpoint.checkpoint_folder={tmp}",
        "workflow.checkpoint=true",
        "workflow.train=false",
        "checkpoint.time_between_checkpoints=0",
    ]
    sets += [f"{k}={v}" for k, v in extra.items()]
    return load_config(sets=sets, env={})


def test_pipeline_layer_files_zero1(tmp_path):
    # L=5 over PP=2: stage 0 owns layers 1..3 (+ embedding 0), stage 1 owns 4..5 (+ 6 lm_head, 7 norm)
    cfg = small_transformer(tmp_path, tp=2, pp=2, zero=1, L=5)
    n = 8  # DP 2
    stage = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    for r in range(n):
        pp_r, dp_r, mp_r = (r // 2) % 2, r // 4, r % 4
        names = [f.name for f in rank_files(cfg, r, n)]
        layer_files = [f"layer_{i}-model_{mp_r}_model_states.pt" for i in stage[pp_r]] if dp_r == 0 else []
        assert names == layer_files + [f"zero_pp_rank_{dp_r}_mp_rank_{mp_r}_optim_states.pt"]
    H, V = 256, 1000
    f0 = {f.name: f.tensor_bytes for f in rank_files(cfg, 0, n)}
    assert f0["layer_0-model_0_model_states.pt"] == H * V // 2 * 2
    f2 = {f.name: f.tensor_bytes for f in rank_files(cfg, 2, n)}
    assert f2["layer_7-model_2_model_states.pt"] == H * 2


def test_zero0_and_zero3_names(tmp_path):
    c0 = small_transformer(tmp_path, tp=2, zero=0)
    assert [f.name for f in rank_files(c0, 1, 4)] == [
        "zero_pp_rank_0_mp_rank_1_model_states.pt",
        "zero_pp_rank_0_mp_rank_1_optim_states.pt",
    ]
    assert rank_files(c0, 2, 4) == [] and rank_files(c0, 3, 4) == []
    assert plan_checkpoint(c0, 0, 4).writers == (0, 1)
    c3 = small_transformer(tmp_path, tp=2, zero=3)
    assert [f.name for f in rank_files(c3, 3, 4)] == [
        "zero_pp_rank_1_mp_rank_1_model_states.pt",
        "zero_pp_rank_1_mp_rank_1_optim_states.pt",
    ]
    with pytest.raises(ConfigError, match="multiple of tensor"):
        plan_checkpoint(c3, 0, 3)


def test_subset_mode(tmp_path):
    cfg = small_transformer(
        tmp_path, tp=2, pp=2, zero=1, L=4, **{"checkpoint.mode": "subset", "model.parallelism.data": 4}
    )
    p = plan_checkpoint(cfg, 0, 1)  # one rank of a DP 4 x MP 4 job
    assert p.layout.dp == 4 and p.layout.mp == 4
    assert [f.name for f in p.files][-1] == "zero_pp_rank_0_mp_rank_0_optim_states.pt"


# --------------------------------------------------------------------------------------------------
# --scale


@pytest.mark.parametrize("name,ranks", [("llama_7b", 1), ("llama_8b_zero3", 1), ("llama_70b", 32), ("llama_405b", 256)])
@pytest.mark.parametrize("factor", [0.1, 0.01, 0.001])
def test_scale_keeps_layout(name, ranks, factor):
    full = plan_checkpoint(load_config(name), 0, ranks)
    small_cfg = load_config(name, scale=factor)
    small = plan_checkpoint(small_cfg, 0, ranks)
    assert 0.75 < small.total_bytes / (full.total_bytes * factor) < 1.34
    assert [f.name for f in small.files] == [f.name for f in full.files]
    assert small.writers == full.writers and small.total_files == full.total_files
    p = small_cfg.model.parallelism
    assert (p.tensor, p.pipeline, p.zero_stage) == (
        load_config(name).model.parallelism.tensor,
        load_config(name).model.parallelism.pipeline,
        load_config(name).model.parallelism.zero_stage,
    )
    assert small_cfg.model.transformer.hidden_size % small_cfg.model.transformer.num_attention_heads == 0


def test_scale_model_size_bytes():
    assert load_config("unet3d_a100", scale=0.01).model.model_size_bytes == round(499153191 * 0.01)


# --------------------------------------------------------------------------------------------------
# real I/O


def test_save_load_bytes_fsync(tmp_path):
    cfg = small_transformer(tmp_path / "ck", zero=1, **{"checkpoint.fsync": "true"})
    plan = plan_checkpoint(cfg, 0, 1)
    rec = ckpt_save.save(cfg, None, 2, 7, TransferOptions(transfer=1 << 20))
    folder = tmp_path / "ck" / "global_epoch2_step7"
    assert rec["folder"] == str(folder)
    for f in plan.files:
        assert os.stat(folder / f.name).st_size == f.nbytes
    assert sorted(os.listdir(folder)) == sorted(f.name for f in plan.files)
    assert rec["bytes"] == sum(os.stat(folder / f.name).st_size for f in plan.files)
    assert rec["fsync"] is True and rec["fsync_s"] > 0
    # each file is fsynced by its writer thread right after its last write: inside the I/O window
    assert rec["fsync_s"] <= rec["io_s"] <= rec["duration_s"]
    assert rec["GiB_per_second"] == pytest.approx(rec["bytes"] / GiB / rec["duration_s"])
    assert rec["dlio_throughput_GB_per_second"] == pytest.approx(plan.dlio_size_GiB / rec["duration_s"])
    data = np.fromfile(folder / plan.files[0].name, dtype=np.uint8)
    assert len(np.unique(data[:65536])) > 200  # random bytes, not ones or zeros
    ld = ckpt_load.load(cfg, None, 2, 7, TransferOptions(transfer=1 << 20))
    assert ld["bytes"] == plan.rank_bytes and ld["source_rank"] == 0
    assert ld["cache"].startswith("dropped")
    assert ckpt_load.load(cfg, None, 2, 7, TransferOptions(drop=False))["cache"] == "kept"


def test_no_fsync_recorded_zero(tmp_path):
    cfg = small_transformer(tmp_path / "ck", zero=1)
    rec = ckpt_save.save(cfg, None, 1, 1)
    assert rec["fsync"] is False and rec["fsync_s"] == 0.0


@pytest.mark.parametrize("engine", ["posix", "io_uring"])
@pytest.mark.parametrize("direct", [False, True])
def test_randomize_false_writes_ones(tmp_path, direct, engine):
    if engine == "io_uring" and not {n: ok for n, _, ok, _ in _core.engines()}.get("io_uring"):
        pytest.skip("io_uring not available here")
    cfg = small_transformer(tmp_path / "ck", zero=1, H=96, **{"checkpoint.randomize_tensor": "false"})
    plan = plan_checkpoint(cfg, 0, 1)
    assert any(f.nbytes % 4096 for f in plan.files)  # an unaligned tail to pad and truncate
    try:
        rec = ckpt_save.save(cfg, None, 1, 1, TransferOptions(engine=engine, direct=direct, transfer=1 << 20))
    except Exception as e:  # pragma: no cover - a filesystem without O_DIRECT
        if direct:
            pytest.skip(f"O_DIRECT not available here: {e}")
        raise
    assert rec["engine"] == engine and rec["randomize_tensor"] is False
    folder = tmp_path / "ck" / "global_epoch1_step1"
    np_dt = {"fp16": np.float16, "fp32": np.float32}
    for f in plan.files:
        raw = np.fromfile(folder / f.name, dtype=np.uint8)
        assert raw.size == f.nbytes
        tf = f.torch_file  # the container's bytes where torch.save puts them, ones in every tensor
        for off, seg in tf.segments:
            assert raw[off : off + len(seg)].tobytes() == seg
        for off, n in tf.storages:
            assert np.all(raw[off : off + n].view(np_dt[f.dtype]) == 1)
    ld = ckpt_load.load(cfg, None, 1, 1, TransferOptions(direct=direct))
    assert ld["bytes"] == plan.rank_bytes


def test_direct_random_exact_sizes(tmp_path):
    cfg = small_transformer(tmp_path / "ck", zero=1, H=96)
    plan = plan_checkpoint(cfg, 0, 1)
    try:
        rec = ckpt_save.save(cfg, None, 1, 1, TransferOptions(direct=True, transfer=1 << 20))
    except Exception as e:  # pragma: no cover
        pytest.skip(f"O_DIRECT not available here: {e}")
    assert rec["direct"] and rec["randomize_tensor"] is True
    for f in plan.files:
        assert os.stat(tmp_path / "ck" / "global_epoch1_step1" / f.name).st_size == f.nbytes
    assert rec["bytes"] == plan.rank_bytes and rec["bytes_issued"] >= plan.rank_bytes


def test_io_uring_save_load(tmp_path):
    from dlio import _core

    if not any(n == "io_uring" and ok for n, _, ok, _ in _core.engines()):
        pytest.skip("io_uring not available")
    cfg = small_transformer(tmp_path / "ck", zero=1, **{"dlio_fast.engine": "io_uring", "dlio_fast.qd": 4})
    rec = ckpt_save.save(cfg, None, 1, 1)
    assert rec["engine"] == "io_uring" and rec["qd"] == 4
    assert ckpt_load.load(cfg, None, 1, 1)["bytes"] == plan_checkpoint(cfg, 0, 1).rank_bytes


def test_load_missing_is_clear(tmp_path):
    cfg = small_transformer(tmp_path / "ck")
    with pytest.raises(Exception, match="missing: rank 0's checkpoint file of global_epoch1_step1; write the"):
        ckpt_load.load(cfg, None, 1, 1)


def test_checkpoint_only_mode(tmp_path):
    cfg = small_transformer(
        tmp_path / "ck",
        **{"checkpoint.num_checkpoints_write": 2, "checkpoint.num_checkpoints_read": 2, "checkpoint.fsync": "true"},
    )
    lines = []
    out = only_mode.run_checkpoint_only(cfg, None, lines.append)
    assert sorted(os.listdir(tmp_path / "ck")) == ["global_epoch1_step1", "global_epoch1_step2"]
    recs = out["records"]
    assert [(r["kind"], r["step"]) for r in recs] == [("save", 1), ("save", 2), ("load", 1), ("load", 2)]
    s = out["summary"]
    saves = [r for r in recs if r["kind"] == "save"]
    loads = [r for r in recs if r["kind"] == "load"]
    size = plan_checkpoint(cfg, 0, 1).dlio_size_GiB
    assert s["checkpoint_size_GB"] == pytest.approx(size)
    assert s["save_checkpoint_duration_mean_seconds"] == pytest.approx(np.mean([r["duration_s"] for r in saves]))
    assert s["save_checkpoint_io_mean_GB_per_second"] == pytest.approx(np.mean([size / r["duration_s"] for r in saves]))
    assert s["load_checkpoint_io_stdev_GB_per_second"] == pytest.approx(np.std([size / r["duration_s"] for r in loads]))
    assert s["exact"]["save"]["count"] == 2 and s["exact"]["save"]["fsync_seconds_max"] > 0
    st = out["per_epoch_stats"]["1"]
    assert set(st) >= {"start", "end", "save_ckpt1", "save_ckpt2", "load_ckpt1", "load_ckpt2"}
    assert st["save_ckpt1"]["throughput"] == pytest.approx(size / st["save_ckpt1"]["duration"])
    assert "Checkpointing write started" in lines and "Checkpointing read finished" in lines
    assert any(line.startswith("Total checkpoint size:") for line in lines)
    json.dumps(out)  # JSON-ready


def test_checkpoint_only_read_more_than_exist(tmp_path):
    cfg = small_transformer(
        tmp_path / "ck", **{"checkpoint.num_checkpoints_write": 0, "checkpoint.num_checkpoints_read": 1}
    )
    with pytest.raises(Exception, match="only 0 checkpoints"):
        only_mode.run_checkpoint_only(cfg, None)


def test_summary_fields_reduction_synthetic():
    """Hand-made records of 3 ranks x 2 saves: DLIO's fields from rank 0 only, exact over all."""

    def rec(rank, step, start, dur, nbytes, fs=0.0):
        return {
            "kind": "save",
            "rank": rank,
            "epoch": 1,
            "step": step,
            "block": step,
            "bytes": nbytes,
            "wall_start_ns": int(start * 1e9),
            "wall_end_ns": int((start + dur) * 1e9),
            "duration_s": dur,
            "fsync_s": fs,
            "GiB_per_second": nbytes / GiB / dur,
            "checkpoint_size_GB": 3.0,
            "dlio_throughput_GB_per_second": 3.0 / dur,
        }

    recs = [
        rec(0, 1, 100.0, 2.0, GiB, 0.5),
        rec(1, 1, 100.5, 3.0, GiB, 0.25),
        rec(2, 1, 100.0, 1.0, GiB),
        rec(0, 2, 200.0, 4.0, GiB),
        rec(1, 2, 200.0, 1.0, GiB),
        rec(2, 2, 201.0, 6.0, GiB, 1.0),
    ]
    s = ckpt_figures.summary_fields(recs, 3)
    assert s["save_checkpoint_duration_mean_seconds"] == pytest.approx(3.0)
    assert s["save_checkpoint_duration_stdev_seconds"] == pytest.approx(1.0)
    assert s["save_checkpoint_io_mean_GB_per_second"] == pytest.approx((1.5 + 0.75) / 2)
    assert "load_checkpoint_io_mean_GB_per_second" not in s
    ex = s["exact"]["save"]
    c1, c2 = ex["checkpoints"]
    assert c1["window_seconds"] == pytest.approx(3.5) and c1["aggregate_GiB_per_second"] == pytest.approx(3 / 3.5)
    assert c2["window_seconds"] == pytest.approx(7.0) and c2["aggregate_GiB_per_second"] == pytest.approx(3 / 7)
    assert c1["slowest_rank"] == 1 and c2["slowest_rank"] == 2
    assert ex["slowest_rank"] == 2 and ex["slowest_rank_seconds_mean"] == pytest.approx(3.5)  # r0 3, r1 2
    assert ex["aggregate_GiB_per_second_mean"] == pytest.approx((3 / 3.5 + 3 / 7) / 2)
    assert ex["fsync_seconds_max"] == 1.0 and ex["fsync_seconds_mean"] == pytest.approx(1.75 / 6)
    assert ex["per_rank_GiB_per_second_mean"]["1"] == pytest.approx((1 / 3 + 1) / 2)


# --------------------------------------------------------------------------------------------------
# two ranks under MPI


DRIVER = textwrap.dedent("""
    import json, sys
    from dlio.checkpoint import only_mode
    from dlio.config import load_config
    from dlio.system.mpi import world
    folder, out = sys.argv[1], sys.argv[2]
    comm = world()
    cfg = load_config(sets=["framework=pytorch", "model.type=transformer", "model.num_layers=2",
                            "model.transformer.hidden_size=256",
                            "model.transformer.ffn_hidden_size=768", "model.transformer.vocab_size=1000",
                            "model.transformer.num_attention_heads=8", "model.transformer.num_kv_heads=8",
                            "model.parallelism.tensor=2", "model.parallelism.zero_stage=0",
                            "workflow.checkpoint=true", "workflow.train=false", "checkpoint.fsync=true",
                            "checkpoint.checkpoint_folder=" + folder, "checkpoint.time_between_checkpoints=0",
                            "checkpoint.num_checkpoints_write=2", "checkpoint.num_checkpoints_read=1",
                            "checkpoint.rank_sync=true", "checkpoint.recovery_rank_shift=true"], env={})
    res = only_mode.run_checkpoint_only(cfg, comm)
    if comm.rank == 0:
        json.dump({"size": comm.size, "summary": res["summary"], "all": res["all_records"]}, open(out, "w"))
""")


def test_two_ranks_mpi(tmp_path):
    if shutil.which("mpiexec") is None:
        pytest.skip("no mpiexec")
    pytest.importorskip("mpi4py")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=REPO)
    p = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, str(script), str(tmp_path / "ck"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["size"] == 2
    for step in (1, 2):
        names = set(os.listdir(tmp_path / "ck" / f"global_epoch1_step{step}"))
        assert names == {f"zero_pp_rank_0_mp_rank_{r}_{k}_states.pt" for r in (0, 1) for k in ("model", "optim")}
    recs = res["all"]
    assert sorted({r["rank"] for r in recs}) == [0, 1]
    loads = [r for r in recs if r["kind"] == "load"]
    assert all(r["source_rank"] == r["rank"] for r in loads)  # one node: the shift wraps to itself
    s = res["summary"]
    saves = [r for r in recs if r["kind"] == "save"]
    r0 = [r for r in saves if r["rank"] == 0]
    assert s["save_checkpoint_duration_mean_seconds"] == pytest.approx(np.mean([r["duration_s"] for r in r0]))
    for step in (1, 2):
        g = [r for r in saves if r["step"] == step]
        window = (max(r["wall_end_ns"] for r in g) - min(r["wall_start_ns"] for r in g)) / 1e9
        total = sum(r["bytes"] for r in g)
        c = s["exact"]["save"]["checkpoints"][step - 1]
        assert c["bytes"] == total
        assert total == sum(
            os.stat(tmp_path / "ck" / f"global_epoch1_step{step}" / n).st_size
            for n in os.listdir(tmp_path / "ck" / f"global_epoch1_step{step}")
        )
        assert c["aggregate_GiB_per_second"] == pytest.approx(total / GiB / window)
        assert set(c["per_rank_GiB_per_second"]) == {"0", "1"}
    assert s["exact"]["load"]["bytes_per_checkpoint"] == s["exact"]["save"]["bytes_per_checkpoint"]
    assert all(r["sync_s"] >= 0 for r in recs)


def test_thread_plan_one_thread_per_file():
    files = [5 << 20, 17 << 20, 3 << 20, 0]  # sizes: a set's files
    ops, first, n = file_sets.thread_plan(files, 1, 1 << 20, 1, 2)
    assert n == 2 and first[0] == 0 and first[-1] == len(ops) == 5 + 17 + 3
    owner = {}
    for t in range(n):
        for o in ops[int(first[t]) : int(first[t + 1])]:
            assert owner.setdefault(int(o["file"]), t) == t  # a file never spans two threads
    assert owner[1] != owner[0] and owner[0] == owner[2]  # 17 MiB alone, 5 + 3 together
    for f in range(3):  # sequential within the file
        offs = ops["offset"][ops["file"] == f]
        assert list(offs) == [i << 20 for i in range(len(offs))]
    ops1, first1, n1 = file_sets.thread_plan(files[1:2], 1, 1 << 20, 1, 4)  # fewer files than threads
    assert n1 == 4 and len(ops1) == 17 and list(first1) == sorted(first1)
