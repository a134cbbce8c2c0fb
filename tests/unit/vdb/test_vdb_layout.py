"""DiskANN's on-disk layout: node sizes and packing (inference-storage.md §2.2, and the index diskannpy wrote for
tests/data/vdb), offsets, file sizes, and the metadata sector."""

import numpy as np
import pytest

from dlio.vdb import trace
from dlio.vdb.layout import SECTOR, Layout, read_metadata

CAPTURE = "tests/data/vdb/diskann_n5000_d1536_r32_l64_w4.json"


def test_milvus_1536d_node_spans_two_sectors():
    lay = Layout("diskann", 1_000_000, 1536, 4, 64, 3)
    assert lay.node_len == 6404  # "max node len 6404" in DiskANN's build log
    assert lay.nodes_per_sector == 0 and lay.sectors_per_node == 2 and lay.read_bytes == 8192
    assert lay.index_bytes(0) == SECTOR * (1 + 2 * lay.nodes_in(0))
    assert sum(lay.nodes_in(s) for s in range(3)) == 1_000_000


def test_small_nodes_are_packed():
    lay = Layout("diskann", 2000, 128, 4, 32, 1)
    assert lay.node_len == 644 and lay.nodes_per_sector == 6 and lay.read_bytes == SECTOR
    # node i in sector 1 + i // 6: diskannpy's 2000 x 128 index, R=32, was 1,372,160 bytes (334 sectors + 1)
    assert lay.index_bytes(0) == 1_372_160
    assert list(lay.node_offsets(np.array([0, 5, 6, 859]))) == [4096, 4096, 8192, 144 * 4096]


def test_layout_matches_the_captured_diskann_index():
    """The capture records what diskannpy's own metadata sector said: our layout must agree."""
    tr = trace.load(CAPTURE)
    p = tr.params
    lay = Layout("diskann", p["vectors"], p["dimension"], p["dtype_bytes"], p["max_degree"], 1)
    assert lay.node_len == p["node_len"] and lay.nodes_per_sector == p["nodes_per_sector"]
    assert lay.read_bytes == tr.read_bytes


def test_aisaq_node_sizes():
    perf = Layout("aisaq_perf", 10**6, 512, 4, 32, 1, inline_pq=32, pq_bytes=256)
    assert perf.node_len == 512 * 4 + 4 + 4 * 32 + 32 * 256 and perf.read_bytes == 3 * SECTOR
    scale = Layout("aisaq_scale", 10**6, 512, 4, 32, 1, inline_pq=32, pq_bytes=256)
    assert scale.node_len == 2180 and scale.read_bytes == SECTOR
    assert scale.pq_file_bytes(0) == SECTOR * -(-(10**6 * 256) // SECTOR)


@pytest.mark.parametrize("dim", [128, 1536])
def test_offsets_round_trip(dim):
    lay = Layout("diskann", 5000, dim, 4, 32, 1)
    ids = np.array([0, 1, 7, 4999])
    back = lay.offset_nodes(lay.node_offsets(ids))
    per = max(1, lay.nodes_per_sector)
    assert list(back) == list(ids // per * per)


def test_metadata_sector_round_trip():
    lay = Layout("diskann", 2000, 128, 4, 32, 1)
    sector = lay.metadata(0, 859)
    assert len(sector) == SECTOR
    m = read_metadata(sector)
    assert (m.points, m.dimension, m.medoid, m.node_len, m.nodes_per_sector) == (2000, 128, 859, 644, 6)
    assert m.file_size == 1_372_160
    with pytest.raises(ValueError):
        read_metadata(bytes(SECTOR))
