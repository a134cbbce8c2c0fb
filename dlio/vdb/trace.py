"""Captures of real DiskANN searches, and their replay.

A capture is what `strace -f -e trace=openat,io_submit,access` printed while a program (bench/vdb_capture.py)
searched a DiskANN index one query at a time, calling access("/nonexistent-vdb-capture/qN") before query N.
parse_strace() turns it into a Trace: per search, per hop (one io_submit: DiskANN submits a beam's reads
together and waits for all of them), the node ids read. The trace file is JSON (`dlio-fast.vdb-trace/1`): the
index parameters, the read size, the medoid, and the searches as lists of hops of node ids.

Replay (vdb.trace) feeds the searches to the C engine as they are; at another scale the node ids are
stretched to the index's node count (node * N' // N), so the medoid and the hot region keep their place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from dlio.base import inputs
from dlio.base.errors import ConfigError, DlioError
from dlio.vdb.layout import SECTOR, Layout, read_metadata

FORMAT = "dlio-fast.vdb-trace/1"
MARKER = "/nonexistent-vdb-capture/q"
MAX_NODE = 2**32 - 1  # the engine's node ids are 32-bit
MAX_READ = 1 << 30  # one node read larger than this is no DiskANN read

_OPEN = re.compile(r'openat\([^,]+, "([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+(\d+)')
_MARK = re.compile(re.escape(MARKER) + r"(\d+)")
_IOCB = re.compile(r"aio_lio_opcode=IOCB_CMD_PREAD, aio_fildes=(\d+)[^}]*?aio_nbytes=(\d+), aio_offset=(\d+)")


@dataclass
class Trace:
    """Searches as flat arrays: search s has hops hop_first[s] .. hop_first[s + 1]; hop h reads nodes
    read_first[h] .. read_first[h + 1]."""

    params: Dict[str, Any]
    read_bytes: int
    medoid: int
    hop_first: np.ndarray  # int64, searches + 1
    read_first: np.ndarray  # int64, hops + 1
    nodes: np.ndarray  # int64, one per read
    source: str = ""
    open_flags: List[str] = field(default_factory=list)

    @property
    def searches(self) -> int:
        return len(self.hop_first) - 1

    def reads_per_search(self) -> np.ndarray:
        return self.read_first[self.hop_first[1:]] - self.read_first[self.hop_first[:-1]]

    def hops_per_search(self) -> np.ndarray:
        return np.diff(self.hop_first)

    def first_reads(self) -> np.ndarray:
        """The node each search read first."""
        return self.nodes[self.read_first[self.hop_first[:-1]]]

    def to_json(self) -> Dict[str, Any]:
        out = []
        for s in range(self.searches):
            hops = range(self.hop_first[s], self.hop_first[s + 1])
            out.append([self.nodes[self.read_first[h] : self.read_first[h + 1]].tolist() for h in hops])
        return {
            "format": FORMAT,
            "source": self.source,
            "params": self.params,
            "read_bytes": self.read_bytes,
            "medoid": self.medoid,
            "open_flags": self.open_flags,
            "searches": out,
        }


def from_searches(searches: List[List[List[int]]], **kw: Any) -> Trace:
    """A Trace from nested lists (search -> hop -> node ids)."""
    hop_sizes = [len(h) for s in searches for h in s]
    hop_first = np.zeros(len(searches) + 1, dtype=np.int64)
    hop_first[1:] = np.cumsum([len(s) for s in searches])
    read_first = np.zeros(len(hop_sizes) + 1, dtype=np.int64)
    read_first[1:] = np.cumsum(hop_sizes)
    nodes = np.array([n for s in searches for h in s for n in h], dtype=np.int64)
    return Trace(hop_first=hop_first, read_first=read_first, nodes=nodes, **kw)


def parse_strace(text: str, index_path: str, params: Dict[str, Any], source: str = "") -> Trace:
    """The searches of an strace capture (see the module docstring) of the index at index_path."""
    with open(index_path, "rb") as f:
        meta = read_metadata(f.read(SECTOR))
    name = index_path.rsplit("/", 1)[-1]
    fds, flags, sizes = set(), [], set()
    searches: List[List[List[int]]] = []
    current: Optional[List[List[int]]] = None
    for line in text.splitlines():
        m = _OPEN.search(line)
        if m and m.group(1).endswith(name):
            fds.add(int(m.group(3)))
            flags.append(m.group(2))
            continue
        m = _MARK.search(line)
        if m:
            current = []
            searches.append(current)
            continue
        if current is None or "io_submit(" not in line:
            continue
        hop = []
        for fd, nbytes, off in _IOCB.findall(line):
            if int(fd) in fds:
                sizes.add(int(nbytes))
                hop.append(int(off))
        if hop:
            current.append(hop)
    if not searches or not any(searches):
        raise ValueError(f"no searches with reads of {name} in the capture (markers {MARKER}N, io_submit)")
    if len(sizes) != 1:
        raise ValueError(f"reads of several sizes in the capture: {sorted(sizes)}")
    read_bytes = sizes.pop()
    lay = _layout_of(meta, read_bytes)
    medoid_off = int(lay.node_offsets(np.array([meta.medoid]))[0])

    def ids(offs: List[int]) -> List[int]:
        # Packed sectors hold several nodes: a read names the sector only. The medoid's sector is the medoid.
        return [meta.medoid if o == medoid_off else int(n) for o, n in zip(offs, lay.offset_nodes(np.array(offs)))]

    node_searches = [[ids(h) for h in s] for s in searches if s]
    params = dict(params, node_len=meta.node_len, nodes_per_sector=meta.nodes_per_sector, vectors=meta.points)
    return from_searches(
        node_searches, params=params, read_bytes=read_bytes, medoid=meta.medoid, source=source, open_flags=flags
    )


def _layout_of(meta: Any, read_bytes: int) -> Layout:
    """A layout with the captured index's node length, which alone decides where a node is read (the split of
    that length into vector and neighbour ids does not matter: one "dimension" of node_len - 4 bytes, R = 0)."""
    lay = Layout("diskann", meta.points, 1, meta.node_len - 4, 0, 1)
    if lay.node_len != meta.node_len or lay.read_bytes != read_bytes:
        raise ValueError(f"node length {meta.node_len} does not match reads of {read_bytes} bytes")
    return lay


def save(trace: Trace, path: str) -> None:
    """Write a trace atomically: compact JSON, one search per line."""
    from dlio.system.output import atomic_write_text

    doc = trace.to_json()
    searches = doc.pop("searches")
    head = json.dumps(doc, separators=(",", ":"))[:-1]
    body = ",\n".join(json.dumps(s, separators=(",", ":")) for s in searches)
    atomic_write_text(path, f'{head},"searches":[\n{body}\n]}}\n')


def load(path: str, key: str = "vdb.trace") -> Trace:
    """A trace file, read within dlio.base.inputs' bounds (a regular file of at most VDB_TRACE_CAP bytes, no
    NaN, bounded nesting) and every number checked; a one-line ConfigError naming the key, the file and
    the field when it is not one."""
    hint = "give a trace written by bench/vdb_capture.py"
    where = f"{key} = {path}"
    try:
        doc = inputs.loads_json(
            inputs.read_regular(path, inputs.VDB_TRACE_CAP, "vector-search trace", key), where, FORMAT
        )
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise DlioError(f"{where}: not a {FORMAT} file; {hint}")
        searches = doc.get("searches")
        if not isinstance(searches, list) or not all(
            isinstance(s, list) and all(isinstance(h, list) for h in s) for s in searches
        ):
            raise DlioError(f"{where}: searches: not a list of searches of hops of node ids; {hint}")
        params = doc.get("params") or {}
        if not isinstance(params, dict):
            raise DlioError(f"{where}: params: not an object; {hint}")
        n0 = MAX_NODE + 1  # node ids index the captured index's vectors (32-bit in the engine)
        if params.get("vectors") is not None:
            n0 = inputs.field_int(params["vectors"], where, "params.vectors", 1, MAX_NODE + 1)
        ids = [
            [[inputs.field_int(n, where, "searches (a node id)", 0, n0 - 1) for n in hop] for hop in s]
            for s in searches
        ]
        tr = from_searches(
            ids,
            params=dict(params),
            read_bytes=inputs.field_int(doc.get("read_bytes"), where, "read_bytes", 1, MAX_READ),
            medoid=inputs.field_int(doc.get("medoid"), where, "medoid", 0, n0 - 1),
            source=str(doc.get("source", "")),
            open_flags=[str(f) for f in doc.get("open_flags") or []],
        )
    except DlioError as e:
        raise ConfigError(str(e), key, path) from None
    if tr.searches == 0 or np.any(np.diff(tr.read_first) == 0):
        raise ConfigError(f"{where}: no searches, or an empty hop (a replay would read nothing); {hint}", key)
    return tr
