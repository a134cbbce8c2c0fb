"""Each rank's wall-clock offset against rank 0, estimated once at a run's start (NTP's way).

A rank sends rank 0 a ping at its t0, rank 0 answers with its own wall clock ts, the answer arrives at the rank's
t3. If both legs of the trip took as long, rank 0 read ts at the rank's (t0 + t3) / 2, so rank 0's clock is
ahead of the rank's by ts - (t0 + t3) / 2. Whatever the legs' asymmetry, that estimate is off by at most half
the round trip t3 - t0, so the round with the smallest round trip gives the tightest bound: its offset is kept,
with its round trip as the uncertainty. Hosts' clocks differ (NTP keeps them within ms, not us), so the
per-rank traces of many hosts need this shift to land on one timeline (dlio.report.trace_merge).
"""

import threading
import time
from typing import Callable, Dict, List, Tuple

from dlio import _core
from dlio.system.mpi import Comm

ROUNDS = 16  # pings per rank: cheap (rank 0 serves the ranks in turn, ~50 us a round on a LAN)
TURN_POLL_S = 0.0002  # a rank waiting for its turn polls this often
TAG = 29  # the pings' MPI tag

# one round: (t0, rank 0's clock, t3), the rank's clock at the send and at the answer's arrival
Round = Tuple[int, int, int]


def wall_minus_mono_ns(rounds: int = 8) -> int:
    """The wall clock (time.time_ns) minus the core's monotonic clock (_core.now_ns): what turns the core's
    times into a trace's or a result's epoch times. Read as a bracket (now_ns, time_ns, now_ns), the tightest
    of `rounds` kept: two reads in a row are apart by however long the process was descheduled between them
    (milliseconds on a busy host), and every time of a rank's trace was shifted by that much, off the
    offset measured against rank 0."""
    best = (1 << 62, 0)
    for _ in range(rounds):
        a = _core.now_ns()
        w = time.time_ns()
        b = _core.now_ns()
        best = min(best, (b - a, w - (a + b) // 2))
    return best[1]


def best_offset(rounds: List[Round]) -> Tuple[int, int]:
    """(offset_ns, round_trip_ns) of the round with the smallest round trip: add offset_ns to this clock's
    times to put them on rank 0's clock; the true offset is within round_trip_ns / 2 of it."""
    t0, ts, t3 = min(rounds, key=lambda r: r[2] - r[0])
    return ts - (t0 + t3) // 2, t3 - t0


def estimate(ping: Callable[[], int], clock: Callable[[], int] = time.time_ns, rounds: int = ROUNDS) -> Tuple[int, int]:
    """best_offset() of `rounds` pings; ping() sends one and returns rank 0's clock from the answer."""
    samples: List[Round] = []
    for _ in range(rounds):
        t0 = clock()
        ts = ping()
        samples.append((t0, ts, clock()))
    return best_offset(samples)


def measure(comm: Comm) -> Dict[str, int]:
    """Collective: every rank's {"offset_ns", "rtt_ns"} against rank 0 (rank 0: 0, 0). Rank 0 takes the ranks
    in turn; a rank waiting for its turn, or for the others after it, sleeps between polls rather than spin in
    MPI, so that where ranks share CPUs (oversubscribed, simulated hosts) the two in a ping-pong have them, and
    the round trips stay short."""
    if not comm.is_mpi:
        return {"offset_ns": 0, "rtt_ns": 0}
    mpi = comm.comm
    if comm.rank == 0:
        for r in range(1, comm.size):
            mpi.send(None, dest=r, tag=TAG)  # your turn
            for _ in range(ROUNDS):
                mpi.recv(source=r, tag=TAG)
                mpi.send(time.time_ns(), dest=r, tag=TAG)
        _sleeping_barrier(comm)
        return {"offset_ns": 0, "rtt_ns": 0}
    turn = mpi.irecv(source=0, tag=TAG)
    while not turn.test()[0]:
        time.sleep(TURN_POLL_S)

    def ping() -> int:
        mpi.send(None, dest=0, tag=TAG)
        answer: int = mpi.recv(source=0, tag=TAG)
        return answer

    offset, rtt = estimate(ping)
    _sleeping_barrier(comm)
    return {"offset_ns": offset, "rtt_ns": rtt}


def _sleeping_barrier(comm: Comm) -> None:
    """The ranks done wait for the others without spinning (a blocking MPI call busy-polls: done ranks would
    take the CPUs of the ranks still measuring)."""
    comm.barrier_or_stop(threading.Event(), poll_s=TURN_POLL_S)
