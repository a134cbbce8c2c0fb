"""Vector search's defaults are Milvus's: a search pool of 4 x the usable cores (knowhere's for disk indexes) and
DiskANN's CPU per hop (55 us measured at 1536-d R=64, scaled by dimension x R); storage-only chains are a key of
their own, named as the ceiling they are."""

import pytest

from dlio.base.errors import ConfigError
from dlio.config.load import load_config
from dlio.config.sections import VdbConfig
from dlio.system.counters import usable_cores
from dlio.vdb.config import vdb_spec


def spec(workload, *sets):
    return vdb_spec(load_config(workload=workload, env={}, sets=list(sets)))


def test_search_pool_is_milvuss_four_per_core():
    assert spec("vdb_diskann_1m").search_threads == 4 * usable_cores()
    assert spec("vdb_diskann_1m", "vdb.search_threads=3").search_threads == 3


def test_cpu_per_hop_is_diskanns_scaled_to_the_index():
    s = spec("vdb_diskann_1m")  # 1536-d, R=64: the measured shape
    assert s.cpu_per_hop_ns == 55_000 and "measured at 1536-d R=64" in s.cpu_note
    a = spec("vdb_aisaq_perf")  # 512-d, R=32: a sixth of the neighbours' distance work
    assert a.cpu_per_hop_ns == round(55_000 * 512 * 32 / (1536 * 64))
    assert spec("vdb_diskann_1m", "vdb.cpu_per_hop_us=7").cpu_per_hop_ns == 7000


def test_storage_only_chains_spin_no_cpu_and_refuse_a_cpu_per_hop():
    s = spec("vdb_diskann_1m", "vdb.storage_only=true")
    assert s.cpu_per_hop_ns == 0 and s.cpu_note == "storage-only"
    with pytest.raises(ConfigError, match="vdb.cpu_per_hop_us"):
        spec("vdb_diskann_1m", "vdb.storage_only=true", "vdb.cpu_per_hop_us=3")


def test_scale_shrinks_the_collection_unless_given():
    """--scale means something for vector search: the collection's vectors (never below 1,000), as it
    shrinks a training dataset; a count given for the run stays as given."""
    assert load_config(workload="vdb_diskann_1m", env={}, scale=0.01).section(VdbConfig).vectors == 10_000
    assert load_config(workload="vdb_diskann_1m", env={}, scale=1e-6).section(VdbConfig).vectors == 1000
    cfg = load_config(workload="vdb_diskann_1m", env={}, scale=0.01, sets=["vdb.vectors=5000"])
    assert cfg.section(VdbConfig).vectors == 5000


@pytest.mark.parametrize(
    "workload, key, folder",
    [
        ("vdb_diskann_1m", "vdb.index_folder", "/mnt/nvme/vdb"),
        ("kvcache_llama3_8b_opt1", "kvcache.cache_dir", "/mnt/nvme/kvcache"),
        ("load_llama3_8b", "checkpoint.checkpoint_folder", "/mnt/nvme/model"),
    ],
)
def test_every_familys_data_follows_the_data_folder_given_for_the_run(workload, key, folder):
    """dataset.data_folder names where a run's data goes, whatever the family (issue: vector search built
    its index under the current folder whatever the user gave)."""
    cfg = load_config(workload=workload, env={}, sets=["dataset.data_folder=/mnt/nvme"])
    assert cfg.get(key) == folder and "dataset.data_folder" in cfg.origin(key)
    assert load_config(workload=workload, env={}, sets=["dataset.data_folder=/a", f"{key}=/b"]).get(key) == "/b"


def test_the_index_follows_the_data_folder_given_for_the_run():
    cfg = load_config(workload="vdb_diskann_1m", env={}, sets=["dataset.data_folder=/mnt/nvme"])
    assert cfg.section(VdbConfig).index_folder == "/mnt/nvme/vdb" and "dataset.data_folder" in cfg.origin(
        "vdb.index_folder"
    )
    both = load_config(workload="vdb_diskann_1m", env={}, sets=["dataset.data_folder=/a", "vdb.index_folder=/b"])
    assert both.section(VdbConfig).index_folder == "/b"
    assert load_config(workload="vdb_diskann_1m", env={}).section(VdbConfig).index_folder == "data/vdb"
