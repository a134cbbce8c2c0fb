"""Configuration: the schema of every key (schema), loading and resolving the layers of a config
(load), durations and distributions (timespec), and the built-in workload YAMLs (workloads/).

The names below are the package's public face; the modules hold the rest. They are imported on first
use (PEP 562): a command that needs only the schema (`dlio-fast --help`, a flag's choices) or the
workload list does not pay for the loader, YAML and numpy at start-up (bench/startup.py)."""

from typing import TYPE_CHECKING, Any

from dlio.base.errors import ConfigError

if TYPE_CHECKING:
    from dlio.config.load import Config, from_dict, load_config, parse_override
    from dlio.config.timespec import TimeSpec, parse_time

__all__ = ["Config", "ConfigError", "TimeSpec", "from_dict", "load_config", "parse_override", "parse_time"]

_LAZY = {
    "Config": "load",
    "from_dict": "load",
    "load_config": "load",
    "parse_override": "load",
    "TimeSpec": "timespec",
    "parse_time": "timespec",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'dlio.config' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"dlio.config.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
