"""Where a workload's dataset is on S3 (DLIO's spellings) and how a storage_options key is overridden."""

import pytest

from dlio.base.errors import ConfigError
from dlio.config.load import load_config
from dlio.storage import backend_for


def location(cfg):
    """(bucket, prefix) of the dataset root the S3 backend names."""
    bucket, _, prefix = backend_for(cfg).dataset_root(cfg)[5:].partition("/")
    return bucket, prefix


def cfg_with(*sets, overrides=()):
    return load_config(workload="unet3d", sets=("storage.storage_type=s3", *sets), dlio_overrides=overrides)


def test_bucket_from_storage_root_and_prefix_from_data_folder():
    cfg = cfg_with("storage.storage_root=mybucket", "dataset.data_folder=./data/unet3d/")
    assert location(cfg) == ("mybucket", "data/unet3d/")


def test_data_folder_as_uri_like_dlio_s3_configs():
    cfg = cfg_with("storage.storage_root=s3pytorchconnector", "dataset.data_folder=s3://s3pytorchconnector")
    assert location(cfg) == ("s3pytorchconnector", "")
    cfg = cfg_with("dataset.data_folder=s3://b-1/some/prefix")
    assert location(cfg) == ("b-1", "some/prefix/")


def test_bucket_disagreement_and_missing_bucket_are_refused():
    with pytest.raises(ConfigError, match="same bucket"):
        location(cfg_with("storage.storage_root=one", "dataset.data_folder=s3://two/x"))
    with pytest.raises(ConfigError, match="storage.storage_root"):
        location(cfg_with("dataset.data_folder=data"))


def test_cache_drop_is_refused_on_s3():
    cfg = cfg_with("storage.storage_root=b12", "dlio_fast.cache=drop")
    with pytest.raises(ConfigError, match="dlio_fast.cache = drop: not available on S3"):
        backend_for(cfg).check_config(cfg)


def test_a_file_engine_set_on_s3_is_refused_not_replaced():
    cfg = cfg_with("storage.storage_root=b12", "dlio_fast.engine=io_uring")
    with pytest.raises(ConfigError, match="dlio_fast.engine = io_uring: not available on S3"):
        backend_for(cfg).check_config(cfg)
    cfg = cfg_with("storage.storage_root=b12")  # the default engine word: the S3 client, said so
    backend_for(cfg).check_config(cfg)
    assert backend_for(cfg).engine_spec(cfg) == ("s3dlio", False)


def test_one_storage_option_overridden_keeps_the_others():
    """++workload.storage.storage_options.endpoint_url=... (Hydra): one key set, the map's others kept."""
    cfg = cfg_with(
        "storage.storage_options.access_key_id=k",
        "storage.storage_options.region=eu-west-1",
        overrides=["++workload.storage.storage_options.endpoint_url=http://h:9"],
    )
    assert cfg.storage.storage_options == {"access_key_id": "k", "region": "eu-west-1", "endpoint_url": "http://h:9"}
