"""`dlio_fast.dialect`: which DLIO a config was written for, detected from its spellings or given."""

import pytest

from dlio.base.errors import ConfigError
from dlio.config.load import from_dict, load_config


@pytest.mark.parametrize(
    "tree",
    [
        {"dataset": {"record_length": 4096}},
        {"model": "unet3d"},
        {"checkpoint": {"num_layers": 4}},
    ],
)
def test_a_2_0_0_spelling_makes_the_dialect_2_0_0(tree):
    cfg = from_dict(tree)
    assert cfg.dlio_fast.dialect == "2.0.0"
    assert "2.0.0's spelling" in cfg.origin("dlio_fast.dialect")


def test_current_spellings_and_model_size_keep_current():
    # current DLIO's own workload files still carry model.model_size: not a 2.0.0 sign
    cfg = from_dict({"dataset": {"record_length_bytes": 4096}, "model": {"model_size": 1000}})
    assert cfg.dlio_fast.dialect == "current"
    assert load_config(workload="unet3d_h100").dlio_fast.dialect == "current"


def test_a_given_dialect_wins_over_detection():
    cfg = from_dict({"dataset": {"record_length": 4096}}, sets=["dlio_fast.dialect=current"])
    assert cfg.dlio_fast.dialect == "current"
    with pytest.raises(ConfigError, match="dlio_fast.dialect"):
        from_dict({}, sets=["dlio_fast.dialect=1.0"])
