"""Configuration: the schema of every key (schema), loading and resolving the layers of a config
(load), durations and distributions (timespec), and the built-in workload YAMLs (workloads/).

The names below are the package's public face; the modules hold the rest."""

from dlio.base.errors import ConfigError
from dlio.config.load import Config, from_dict, load_config, parse_override
from dlio.config.timespec import TimeSpec, parse_time

__all__ = ["Config", "ConfigError", "TimeSpec", "from_dict", "load_config", "parse_override", "parse_time"]
