"""Many processes claiming and sweeping one folder at once (64 ranks generating one dataset): no process
fails on another's claim, and a live process's claim is never swept."""

import multiprocessing as mp
import os

from dlio.base import tmpclaim


def _claim_and_sweep(folder, rounds, q):
    import secrets

    tmpclaim.TOKEN = secrets.token_hex(6)  # forked: each process its own token, as separate ranks have
    try:
        for _ in range(rounds):
            with tmpclaim.claimed(folder) as suffix:
                tmp = os.path.join(folder, f".f{suffix}-0")
                open(tmp, "w").close()
                tmpclaim.sweep(folder)  # another's dead claims only: ours, and live ones, stay
                assert os.path.exists(os.path.join(folder, tmpclaim.CLAIM + tmpclaim.TOKEN))
                assert os.path.exists(tmp), "a live claim's temporary file was swept"
                os.unlink(tmp)
        q.put(None)
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        q.put(repr(e))


def test_claims_and_sweeps_of_many_processes_at_once(tmp_path):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_claim_and_sweep, args=(str(tmp_path), 20, q)) for _ in range(12)]
    for p in procs:
        p.start()
    errors = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(10)
    assert errors == [None] * len(procs)
    assert [n for n in os.listdir(tmp_path) if n.startswith(".dlio-fast-claim")] == []  # all released
