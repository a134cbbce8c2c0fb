"""DiskANN's on-disk index layout, and AISAQ's two variants of it.

A segment's `_disk.index` (knowhere thirdparty/DiskANN pq_flash_index.cpp; checked against diskannpy 0.7.0's
files) is 4 KiB sectors. Sector 0 holds the metadata: int32 9, int32 1, then nine uint64: points, dimension,
medoid, max node length, nodes per sector, frozen points, frozen location, reorder flag, file size. Node i is
[vector | neighbour count (uint32) | R neighbour ids (uint32)]. Nodes that fit in a sector are packed
floor(4096 / len) per sector (node i in sector 1 + i // per_sector); a larger node spans ceil(len / 4096)
sectors (node i at sector 1 + i * that). A search reads whole sectors: the node's sector, or its span.

AISAQ (knowhere pq_flash_aisaq_index.cpp) moves the PQ codes onto the SSD. Performance mode stores the codes of
`inline_pq` neighbours inside each node (one read per node, a bigger node); scale mode keeps the codes in a
separate file of 4 KiB pages read beside the nodes (`pq_reads_per_hop` pages per hop).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

SECTOR = 4096
META_WORDS = 9  # the metadata's uint64 count (DiskANN writes "9 x 1")


@dataclass(frozen=True)
class Layout:
    """One index's layout. Every segment has the same layout; segment s holds nodes_in(s) nodes."""

    kind: str  # diskann | aisaq_perf | aisaq_scale | hnsw
    vectors: int
    dimension: int
    dtype_bytes: int
    degree: int  # R
    segments: int
    inline_pq: int = 0  # aisaq_perf: neighbours whose PQ codes are stored in the node
    pq_bytes: int = 0  # PQ code bytes per vector

    @property
    def node_len(self) -> int:
        """Bytes of one node: vector, neighbour count, R ids (+ inline PQ codes in AISAQ performance mode)."""
        n = self.dimension * self.dtype_bytes + 4 + 4 * self.degree
        if self.kind == "aisaq_perf":
            n += self.inline_pq * self.pq_bytes
        return n

    @property
    def nodes_per_sector(self) -> int:
        """Nodes packed in one sector; 0 when a node spans sectors (DiskANN writes 0 then too)."""
        return SECTOR // self.node_len

    @property
    def sectors_per_node(self) -> int:
        return 1 if self.nodes_per_sector else -(-self.node_len // SECTOR)

    @property
    def read_bytes(self) -> int:
        """One node read: its sector, or all the sectors it spans."""
        return self.sectors_per_node * SECTOR

    def nodes_in(self, segment: int) -> int:
        """Nodes of a segment: the vectors split as evenly as compaction leaves them."""
        base, extra = divmod(self.vectors, self.segments)
        return base + (1 if segment < extra else 0)

    def node_sectors(self, nodes: int) -> int:
        if self.nodes_per_sector:
            return -(-nodes // self.nodes_per_sector)
        return nodes * self.sectors_per_node

    def index_bytes(self, segment: int) -> int:
        """Size of a segment's _disk.index: the metadata sector and the node sectors."""
        return SECTOR * (1 + self.node_sectors(self.nodes_in(segment)))

    def pq_file_bytes(self, segment: int) -> int:
        """AISAQ scale mode: the segment's PQ code file, in whole pages (0 for the other kinds)."""
        if self.kind != "aisaq_scale":
            return 0
        return SECTOR * -(-self.nodes_in(segment) * self.pq_bytes // SECTOR)

    def hnsw_bytes(self, segment: int) -> int:
        """HNSW (in memory; storage sees only the index file): vectors and the level-0 links (2R ids)."""
        per = self.dimension * self.dtype_bytes + 4 + 8 * self.degree
        return SECTOR * -(-self.nodes_in(segment) * per // SECTOR)

    def node_offsets(self, nodes: np.ndarray) -> np.ndarray:
        """File offset of each node's read (uint64), vectorised."""
        ids = np.asarray(nodes, dtype=np.uint64)
        if self.nodes_per_sector:
            sector = ids // np.uint64(self.nodes_per_sector)
        else:
            sector = ids * np.uint64(self.sectors_per_node)
        return (sector + np.uint64(1)) * np.uint64(SECTOR)

    def offset_nodes(self, offsets: np.ndarray) -> np.ndarray:
        """Node ids of reads at these offsets (the sector's first node when nodes are packed)."""
        sector = np.asarray(offsets, dtype=np.int64) // SECTOR - 1
        if self.nodes_per_sector:
            return sector * self.nodes_per_sector
        return sector // self.sectors_per_node

    def metadata(self, segment: int, medoid: int) -> bytes:
        """Sector 0 of a segment's _disk.index, as DiskANN writes it."""
        words = [
            self.nodes_in(segment),
            self.dimension,
            medoid,
            self.node_len,
            self.nodes_per_sector,
            0,
            0,
            0,
            self.index_bytes(segment),
        ]
        head = struct.pack("<ii", META_WORDS, 1) + struct.pack(f"<{META_WORDS}Q", *words)
        return head + bytes(SECTOR - len(head))


@dataclass(frozen=True)
class Metadata:
    """What sector 0 of a _disk.index says."""

    points: int
    dimension: int
    medoid: int
    node_len: int
    nodes_per_sector: int
    file_size: int


def read_metadata(data: bytes) -> Metadata:
    """Parse sector 0 of a _disk.index (DiskANN's or ours); ValueError when it is not one."""
    if len(data) < 8 + 8 * META_WORDS:
        raise ValueError("shorter than DiskANN's metadata")
    nr, nc = struct.unpack_from("<ii", data)
    if nr < META_WORDS or nc != 1:
        raise ValueError(f"not DiskANN metadata (header {nr} x {nc})")
    w = struct.unpack_from(f"<{META_WORDS}Q", data, 8)
    return Metadata(w[0], w[1], w[2], w[3], w[4], w[8])
