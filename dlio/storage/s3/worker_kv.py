"""Worker task `kv_relay`: the S3 side of the C core's relay KV store (src/dlio_core/kvcache/relay.c),
inside `python -m dlio.storage.s3.worker`.

The C engine decides and times every request; this process only issues them. It makes the slots file
(one slot of `slot_len` bytes per C worker, shared memory) and the listening socket, says it is ready,
then serves each C worker's connection: a 32-byte record in (op, object, bytes, sequence), the request
made with s3dlio from or into that worker's slot (PUT borrowing the slot's bytes, GET landing in it, no
copy), a 32-byte reply out (status, the request's start and end on CLOCK_MONOTONIC, the C clock). All
connections share one asyncio loop: one request in flight per C worker. `null`: replies without a
request (the relay's own cost, measured against the same engine).

Counters go to the parent (dlio.storage.s3.shared) a few times a second, with a beat while no request
is outstanding (the engine is idle, not the server silent). The task ends when the parent writes a
line (the C run is over) or closes stdin, or on SIGTERM; it answers with its tally.
"""

from __future__ import annotations

import asyncio
import errno
import json
import mmap
import os
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from dlio.storage.s3.failures import classify, short

REQ = struct.Struct("<IIQQQ")  # struct dc_kv_relay_req: op, chunk, entry, len, seq
REP = struct.Struct("<iIQQQ")  # struct dc_kv_relay_rep: status, pad, seq, t0_ns, t1_ns
HELLO, PUT, GET, DEL = 0, 1, 2, 3
SOCKET, SLOTS = "relay.sock", "slots"
FLUSH_S = 0.2  # counters to the parent this often
ERRNO = {  # an s3dlio failure's class (dlio.storage.s3.failures) -> the errno the C run records
    "timeout": errno.ETIMEDOUT,
    "connect": errno.ECONNREFUSED,
    "auth": errno.EACCES,
    "bucket": errno.ENOENT,
    "files": errno.EMFILE,
}


def object_key(prefix: str, entry: int, chunk: int) -> str:
    """An object's key: the file store's names (src/dlio_core/kvcache/file.c), the raw KV bytes (no .npy header)."""
    return f"{prefix}kv_{entry:08x}.bin" if chunk == 0 else f"{prefix}kv_{entry:08x}_c{chunk:05d}.bin"


class Relay:
    def __init__(self, s3: Any, t: Dict[str, Any], counters: Any) -> None:
        self.s3, self.c = s3, counters
        self.base = f"s3://{t['bucket']}/"
        self.prefix = t["prefix"]
        self.null = bool(t.get("null"))
        self.slot_len, self.workers = int(t["slot_len"]), int(t["workers"])
        self.tally = {"puts": 0, "put_bytes": 0, "gets": 0, "get_bytes": 0, "deletes": 0, "requests": 0}
        self.first_error: Optional[str] = None
        self.first_kind: Optional[str] = None
        self.inflight = 0
        self.unflushed = [0, 0]  # requests, bytes not yet in the shared counters
        path = os.path.join(t["dir"], SLOTS)
        with open(path, "w+b") as f:
            f.truncate(self.slot_len * self.workers)
            self.mm = mmap.mmap(f.fileno(), self.slot_len * self.workers)
        self.view = memoryview(self.mm)
        self.sock_path = os.path.join(t["dir"], SOCKET)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(self.sock_path)
        self.listener.listen(self.workers)
        self.listener.setblocking(False)
        self.conns: List[asyncio.Task] = []

    async def request(self, op: int, key: str, slot: memoryview, n: int) -> None:
        if self.null:
            return
        uri = self.base + key
        if op == PUT:
            await self.s3.put_bytes_async(uri, slot[:n])
        elif op == GET:
            await self.s3.get_into_async(uri, slot[:n], expected_len=n)
        elif op == DEL:  # s3dlio has no async delete: one thread of the loop's pool waits for it
            await asyncio.get_running_loop().run_in_executor(None, self.s3.delete, uri)

    def failed(self, e: BaseException) -> int:
        text = short(str(e)) or type(e).__name__
        kind = "missing" if type(e).__name__ == "ObjectNotFoundError" else classify(text)
        if self.first_error is None:
            self.first_error, self.first_kind = text, kind
        return -(errno.ENOENT if kind == "missing" else ERRNO.get(kind, errno.EIO))

    async def serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        slot: Optional[memoryview] = None
        tally = self.tally
        try:
            while True:
                data = await loop.sock_recv(conn, REQ.size)
                if len(data) != REQ.size:
                    return  # the C worker closed its end (or broke the protocol)
                op, chunk, entry, n, seq = REQ.unpack(data)
                status, t0 = 0, time.monotonic_ns()
                if op == HELLO:
                    if entry >= self.workers or n != self.slot_len:
                        status = -errno.EPROTO
                    else:
                        slot = self.view[entry * self.slot_len : (entry + 1) * self.slot_len]
                elif slot is None or n > self.slot_len or op not in (PUT, GET, DEL):
                    status = -errno.EPROTO
                else:
                    self.inflight += 1
                    try:
                        await self.request(op, object_key(self.prefix, entry, chunk), slot, n)
                    except Exception as e:  # the C run records the errno; the parent reads the words
                        status = self.failed(e)
                    finally:
                        self.inflight -= 1
                    if status == 0:
                        name = {PUT: "puts", GET: "gets", DEL: "deletes"}[op]
                        tally[name] += 1
                        tally["requests"] += 1
                        if op != DEL:
                            tally["put_bytes" if op == PUT else "get_bytes"] += n
                            self.unflushed[1] += n
                        self.unflushed[0] += 1
                t1 = time.monotonic_ns()
                await loop.sock_sendall(conn, REP.pack(status, 0, seq, t0, t1))
        except OSError:
            return
        finally:
            conn.close()

    async def accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self.listener)
            self.conns.append(asyncio.ensure_future(self.serve(conn)))

    async def flush(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            self.flush_now()

    def flush_now(self) -> None:
        ops, nbytes = self.unflushed
        self.unflushed = [0, 0]
        if ops:
            self.c.add(ops, nbytes)
        if not self.inflight:
            self.c.beat()  # no request outstanding: the engine is idle, not the server silent

    async def run(self, done: asyncio.Event) -> None:
        acceptor = asyncio.ensure_future(self.accept())
        flusher = asyncio.ensure_future(self.flush())
        await done.wait()
        acceptor.cancel()
        flusher.cancel()
        if self.conns:  # the C workers closed their ends when the run ended: these return now
            await asyncio.wait(self.conns, timeout=5)
        self.flush_now()

    def close(self) -> None:
        self.listener.close()
        try:
            self.view.release()
            self.mm.close()
        except BufferError:  # a request still holds its slot: the process exits next
            pass


def task_kv_relay(s3: Any, t: Dict[str, Any], c: Any) -> Dict[str, Any]:
    relay = Relay(s3, t, c)
    if not relay.null:  # client built and a connection open before the engine's clock starts
        s3.list(f"{relay.base}{relay.prefix}.dlio-fast-probe/")
    loop = asyncio.new_event_loop()
    done = asyncio.Event()

    def end(*_: Any) -> None:
        loop.call_soon_threadsafe(done.set)

    def wait_parent() -> None:  # a line, or stdin closed: the C run is over
        sys.stdin.readline()
        end()

    signal.signal(signal.SIGTERM, end)
    threading.Thread(target=wait_parent, daemon=True).start()
    sys.stdout.write(json.dumps({"ready": True, "socket": relay.sock_path}) + "\n")
    sys.stdout.flush()
    try:
        loop.run_until_complete(relay.run(done))
    finally:
        relay.close()
    return {**relay.tally, "first_error": relay.first_error, "first_kind": relay.first_kind}
