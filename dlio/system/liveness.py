"""Signs of life between the ranks of a multi-rank run, so that a host lost mid-run (its processes killed, its
machine gone) ends the run on every other host within seconds, with their results written and the lost host
named, instead of leaving them in a barrier that never completes.

Outside MPI, on purpose: once a peer is gone, Open MPI 4 (without ULFM) and MPICH may block for good in any
call that touches it (a send, the step barrier's MPI_Test), holding the library's lock, so the main thread's
next MPI call blocks too and no Python signal handler runs. So a thread per rank beats over UDP (never blocks
on a dead peer): rank 0 to every rank, every rank to rank 0 (a star: 2(N-1) datagrams a beat, not N^2). A
watched rank silent for LOST_S (after its first beat) is lost: rank 0 watches the others, the others watch
rank 0. The finder tells the survivors, and each survivor, from this thread and without MPI, writes what it
measured so far (marked incomplete, the lost hosts named from the map of rank to host gathered at the start)
and exits 1.

A rank that is done with the others (its results gathered) says so and is no longer watched.

The launcher must leave the survivors alive for that: MPICH's hydra kills them at once unless started with
-disable-auto-cleanup, Open MPI's mpirun SIGTERMs them odls_base_sigkill_timeout seconds (1 by default) after
the loss (docs/multihost.md)."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from dlio.system.mpi import Comm

BEAT_S = 0.5  # between two beats
# silent this long, a rank is lost: 10 beats missed, far above a loaded machine's scheduling delays (or a
# C call that holds the GIL for a while), and short enough that the others write and exit within 10 s
LOST_S = 5.0
BEAT, DONE, LOST = b"B", b"D", b"L"

# (why, the lost ranks) -> None: what a survivor does (write what it measured, exit)
OnLost = Callable[[str, Tuple[int, ...]], None]


def lost_hosts(lost: Sequence[int], hosts: Sequence[str]) -> str:
    """'host hB (ranks 2, 3)' / 'hosts hB (rank 2), hC (rank 4)': the lost ranks grouped by host."""
    by_host: Dict[str, List[int]] = {}
    for r in sorted(lost):
        by_host.setdefault(hosts[r] if r < len(hosts) else "?", []).append(r)
    parts = [f"{h} (rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))})" for h, rs in by_host.items()]
    return f"host{'s' if len(parts) > 1 else ''} {', '.join(parts)}"


def _addresses() -> List[str]:
    """This host's IPv4 addresses (every interface's, loopback too): where the others may reach this rank."""
    out = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:  # SIOCGIFADDR
                raw = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
                out.append(socket.inet_ntoa(raw[20:24]))
            except OSError:
                continue  # an interface without an IPv4 address
    finally:
        probe.close()
    return out or ["127.0.0.1"]


class Liveness:
    """One rank's beat thread and what it found; start() makes one."""

    def __init__(
        self,
        rank: int,
        where: Sequence[Tuple[str, int, List[str]]],
        sock: socket.socket,
        token: bytes,
        on_lost: OnLost,
        lost_s: float = LOST_S,
    ) -> None:
        self.rank, self.token, self.on_lost, self.lost_s = rank, token, on_lost, lost_s
        self.hosts = [h for h, _, _ in where]
        self._where = where
        self._sock = sock
        self.watched = set(range(1, len(where))) if rank == 0 else {0}
        # a rank is watched from its first beat on: where the network drops these datagrams (a firewall
        # between the hosts), the run goes on unwatched, as without this thread, never called lost
        self._last: Dict[int, float] = {}
        self._quit = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dlio-fast-liveness", daemon=True)
        self._thread.start()

    def _send(self, kind: bytes, to: Sequence[int], body: bytes = b"") -> None:
        msg = self.token + kind + struct.pack("!I", self.rank) + body
        for r in to:
            _, port, addrs = self._where[r]
            for a in addrs:
                try:
                    self._sock.sendto(msg, (a, port))
                except OSError:
                    pass  # an address of that host this one cannot reach: another may

    def _hear(self, deadline: float) -> Optional[Tuple[int, ...]]:
        """Take the datagrams until deadline; the ranks a LOST notice names, if one came."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._sock.settimeout(left)
            try:
                msg = self._sock.recv(65536)
            except (socket.timeout, BlockingIOError):
                return None
            except OSError:
                continue  # ICMP unreachable from an earlier send (Linux reports it on the next call)
            n = len(self.token)
            if len(msg) < n + 5 or msg[:n] != self.token:
                continue  # not this job's
            kind, src = msg[n : n + 1], struct.unpack("!I", msg[n + 1 : n + 5])[0]
            if kind == LOST:
                return tuple(struct.unpack(f"!{(len(msg) - n - 5) // 4}I", msg[n + 5 :]))
            if kind == DONE:
                self.watched.discard(src)
            elif src in self.watched:
                self._last[src] = time.monotonic()

    def _run(self) -> None:
        while not self._quit.is_set():
            self._send(BEAT, sorted(self.watched))
            told = self._hear(time.monotonic() + BEAT_S)
            if self._quit.is_set():
                return
            now = time.monotonic()
            heard = [r for r in self.watched if r in self._last]
            silent = tuple(sorted(r for r in heard if now - self._last[r] > self.lost_s))
            if silent:  # the ranks killed with them went a beat or two later: those silent 3 beats are lost too
                silent = tuple(sorted(r for r in heard if now - self._last[r] > 3 * BEAT_S))
            if told or silent:
                self._lost(told or silent, found=not told)
                return

    def _lost(self, lost: Tuple[int, ...], found: bool) -> None:
        if found and self.rank == 0:  # the others watch rank 0 only: they hear it from here
            survivors = [r for r in range(len(self._where)) if r != 0 and r not in lost]
            for _ in range(3):  # datagrams: thrice, a few ms apart
                self._send(LOST, survivors, struct.pack(f"!{len(lost)}I", *lost))
                time.sleep(0.005)
        were = "were" if len({self.hosts[r] for r in lost}) > 1 else "was"
        self.on_lost(f"{lost_hosts(lost, self.hosts)} {were} lost: no sign of life for {self.lost_s:.0f} s", lost)

    def close(self) -> None:
        """Done with the others: no longer beat nor watch, and they no longer watch this rank."""
        self._quit.set()
        self._thread.join()
        self._send(DONE, sorted(self.watched))
        self._sock.close()


def start(comm: Comm, on_lost: OnLost) -> Optional[Liveness]:
    """The watch of a multi-rank run (collective: every rank calls it), or None for one rank."""
    if not comm.is_mpi:
        return None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", 0))
    token: bytes = comm.bcast(os.urandom(8) if comm.rank == 0 else b"")
    where = comm.allgather((socket.gethostname(), sock.getsockname()[1], _addresses()))
    return Liveness(comm.rank, where, sock, token, on_lost)
