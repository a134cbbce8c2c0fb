"""MLPerf Storage's hybrid_storage.yaml (data on several S3 endpoints spread over the ranks, checkpoints on
file://): refused in one line naming what is not supported yet; its s3dlio spelling is dlio-fast's S3."""

import pytest
import yaml

from dlio.base.errors import ConfigError
from dlio.config import load_config

# The storage and checkpoint sections of mlcommons/storage configs/dlio/workload/hybrid_storage.yaml (74cd0c4)
HYBRID = {
    "model": {"name": "resnet50_hybrid_storage", "type": "cnn"},
    "workflow": {"generate_data": False, "train": True, "checkpoint": True},
    "dataset": {"format": "npz", "num_files_train": 10, "num_samples_per_file": 2, "record_length_bytes": 301500},
    "storage": {
        "storage_type": "s3dlio",
        "storage_root": "s3://training-bucket/imagenet-1k/",
        "endpoint_uris": ["http://s3-endpoint1:9000", "http://s3-endpoint2:9000"],
        "use_mpi_endpoint_distribution": True,
        "storage_options": {"region": "us-east-1"},
    },
    "checkpoint": {"checkpoint_folder": "file:///nvme/checkpoints/resnet50/", "checkpoint_after_epoch": 10},
}


def _load(tmp_path, doc):
    path = tmp_path / "hybrid_storage.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_config(config_file=path, env={})


def test_several_endpoints_are_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, HYBRID)
    msg = str(e.value)
    assert msg.startswith("storage.endpoint_uris = ") and "not supported yet" in msg and "endpoint_url" in msg
    assert "hybrid_storage.yaml line" in msg and "\n" not in msg


def test_checkpoints_on_files_beside_s3_are_refused(tmp_path):
    doc = yaml.safe_load(yaml.safe_dump(HYBRID))
    del doc["storage"]["endpoint_uris"]
    with pytest.raises(ConfigError, match=r"checkpoint.checkpoint_folder = .*file:///nvme.* not supported yet"):
        _load(tmp_path, doc)
    doc["checkpoint"]["checkpoint_folder"] = "s3://training-bucket/ckpt"
    cfg = _load(tmp_path, doc)
    assert cfg.storage.storage_type == "s3" and cfg.storage.use_mpi_endpoint_distribution is True
