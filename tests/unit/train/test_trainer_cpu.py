"""The trainer thread's CPU, measured by the C core (trainer_cpu_ns), is what bounds the emulated
accelerator's spin in dlio.train.epoch_record.cpu_accounts: a real train run on the null engine."""

import numpy as np

from dlio import _core
from dlio.train.epoch_record import cpu_accounts

COMPUTE_NS = 50_000_000


def train(mode, threads=1):
    ops = np.zeros(8, dtype=_core.OP_DTYPE)
    ops["length"] = 512
    steps = np.zeros(4, dtype=_core.STEP_DTYPE)
    steps["first_op"] = [0, 2, 4, 6]
    steps["nops"] = 2
    steps["nsamples"] = 2
    steps["compute_ns"] = COMPUTE_NS
    return _core.Run("train", "null", ["x"], ops, threads=threads, steps=steps, compute_mode=mode).execute()


def test_the_trainers_cpu_bounds_the_spin():
    spin, hybrid = train(0), train(1)
    for res in (spin, hybrid):
        wall = res["t_end"] - res["t_start"]
        assert 0 < res["trainer_cpu_ns"] <= wall + 5_000_000  # a thread's CPU, within the run
        assert res["step_times"]["compute_ns"].sum() >= 4 * COMPUTE_NS
    # hybrid sleeps all but the last COMPUTE_SPIN_NS of each step: far less CPU than spinning it all
    assert hybrid["trainer_cpu_ns"] < spin["trainer_cpu_ns"]
    assert hybrid["trainer_cpu_ns"] < 4 * _core.COMPUTE_SPIN_NS + 20_000_000
    a = cpu_accounts(10.0, spin, 0, 1, np.full(4, COMPUTE_NS))
    spun = spin["step_times"]["compute_ns"].sum() / 1e9
    assert a["accelerator_s"] == min(spun, spin["trainer_cpu_ns"] / 1e9)  # less than spun when preempted
    assert a["compute_set_s"] == 0.2 and a["compute_s"] >= 0.2
    no_readers = train(0, threads=0)  # the trainer reads: its CPU less the spin is the reading's
    b = cpu_accounts(10.0, no_readers, 0, 0)
    assert b["readers_s"] == max(0.0, no_readers["threads"][0]["cpu_ns"] / 1e9 - b["accelerator_s"])
