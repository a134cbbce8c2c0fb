"""dlio/config/sections.py is what the schema rows generate, and every loaded value is of its field's type."""

import collections.abc
import dataclasses
import math
import typing
from types import MappingProxyType

import pytest

from dlio.config import gen_sections, sections
from dlio.config.load import Config, load_config
from dlio.config.schema import KEYS, OPTIONAL_SECTIONS, SECTIONS
from dlio.config.sections import ModelLoadConfig
from dlio.config.timespec import TimeSpec
from dlio.config.workloads import list_workloads


def test_sections_py_is_generated_from_the_schema():
    with open(gen_sections.PATH, encoding="utf-8") as f:
        committed = f.read()
    assert committed == gen_sections.source(), (
        f"dlio/config/sections.py is stale (the schema rows changed): run `{gen_sections.COMMAND}` and commit it"
    )


def test_every_section_has_its_class_and_every_key_its_field():
    """A section's fields are its visible rows' names in KEYS order, then its child sections' in name order."""
    assert set(sections.CLASSES) == SECTIONS
    for sec, cls in sections.CLASSES.items():
        rows = [k.name for k in KEYS if k.section == sec and not k.hidden]
        children = sorted(s.rpartition(".")[2] for s in SECTIONS if s.rpartition(".")[0] == sec)
        assert [f.name for f in dataclasses.fields(cls)] == rows + children
    for cls in sections.CLASSES.values():
        assert cls.__dataclass_params__.frozen


def _is(value, hint) -> bool:
    """value is of the annotation hint (the few forms sections.py uses)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin is typing.Union:
        return any(_is(value, a) for a in args)
    if origin is typing.Literal:
        return value in args and all(type(value) is type(a) for a in args if a == value)
    if origin is tuple:
        return type(value) is tuple and all(_is(x, args[0]) for x in value)
    if origin is collections.abc.Mapping:
        return type(value) is MappingProxyType
    if hint is type(None):
        return value is None
    if hint in (int, float, str, bool):
        return type(value) is hint
    if dataclasses.is_dataclass(hint):
        return type(value) is hint
    if hint is TimeSpec:
        return type(value) is TimeSpec
    raise AssertionError(f"no check for {hint!r}")


def _check(obj, where: str) -> None:
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        assert _is(v, hints[f.name]), f"{where}.{f.name} = {v!r} ({type(v).__name__}) is not {hints[f.name]}"
        if dataclasses.is_dataclass(v) and not isinstance(v, TimeSpec):
            _check(v, f"{where}.{f.name}")


def _check_config(cfg: Config) -> None:
    hints = typing.get_type_hints(Config)
    assert _is(cfg.framework, hints["framework"])
    for sec in (s for s in SECTIONS if "." not in s):
        v = cfg.top(sec)
        kind = (
            hints[sec] if sec in hints else sections.CLASSES[sec]
        )  # a workload family's section: cfg.section(its class)
        assert _is(v, kind), f"{sec}: {type(v).__name__} is not {kind}"
        _check(v, sec)


@pytest.mark.parametrize("name", sorted(list_workloads()))
def test_builtin_workload_values_are_of_their_field_types(name):
    _check_config(load_config(workload=name, env={}))


@pytest.mark.parametrize(
    "sets",
    [
        # numbers as typed: an int stays an int where a float is also allowed (num), a float key is a float
        ["dataset.record_length_bytes=1.5", "dataset.record_length_bytes_stdev=2", "metric.au=1"],
        [
            "profiling.iostat_devices=sda",
            "storage.storage_options={endpoint_url: http://x}",
            "checkpoint.ksm={}",
            "checkpoint.randomize_tensor=false",
        ],
        ["train.computation_time={type: gamma, shape: 2, scale: 0.1}", "reader.data_loader_sampler=index"],
        [
            "dataset.record_dims=[4, 4]",
            "dataset.record_length_bytes_stdev=0",
            "model.layer_parameters=[10, 20]",
            "output.folder=out",
            "kvcache.trace=t.csv",
        ],
        ["dataset.parquet.columns=[{name: a, dtype: float32}]", "dlio_fast.engine=io-uring", "workflow.vdb=true"],
        ["reader.file_shuffle=false", "profiling.profiler=off", "kvcache.templates={chat: {context: [1, 2]}}"],
    ],
)
def test_set_values_are_of_their_field_types(sets):
    _check_config(load_config(workload="unet3d", sets=sets, env={}, scale=0.5))


def test_optional_sections_are_none_when_absent():
    cfg = load_config(workload="unet3d", env={})
    for path in OPTIONAL_SECTIONS:
        assert cfg.get(path) is None
    assert math.isclose(load_config(workload="unet3d", sets=["metric.au=1"], env={}).metric.au, 1.0)


def test_a_bytes_key_takes_a_size_as_typed():
    """model_load.model_bytes is bytes: 300m is 300 MiB, and a word that is no size is refused by name."""
    import pytest

    from dlio.base.errors import ConfigError
    from dlio.config.load import load_config

    cfg = load_config(workload="load_model", env={}, sets=["model_load.model_bytes=300m"])
    assert cfg.section(ModelLoadConfig).model_bytes == 300 << 20
    with pytest.raises(ConfigError, match="model_load.model_bytes.*expected a size"):
        load_config(workload="load_model", env={}, sets=["model_load.model_bytes=3x"])


def test_an_unknown_workload_is_one_short_line():
    import pytest

    from dlio.base.errors import ConfigError
    from dlio.config.load import load_config

    with pytest.raises(ConfigError) as e:
        load_config(workload="unet4d", env={})
    text = str(e.value)
    assert "did you mean unet3d?" in text and "`dlio-fast workloads` lists" in text and len(text) < 160
