"""The DLIO workload schema, declared once, as data.

Every key is one ``Key`` row (``dlio.config.keys.row``), kept in the module of the family that owns it
(``dlio.config.keys``: DLIO's own sections and dlio-fast's; each workload family's ``keys.py`` in its
own package, found by ``dlio.config.families``); this module gathers them into ``KEYS``, in the order the
resolved config is written.  The loader builds the section dataclasses (``dlio.config.sections``,
generated from these rows), the validation, the environment table and the resolved-config writer from
this table and from nothing else.

The 2.0.0 dialect (DLIO's PyPI release, what MLPerf Storage v1 ran) is ``LEGACY``: old dotted name ->
current dotted name.  ``model.model_size`` is in that table too: DLIO's current code ignores it (its
key is ``model_size_bytes``), so unet3d's checkpoint is 10 KB in DLIO; dlio-fast honours it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Tuple

from dlio.config.families import KEY_MODULES
from dlio.config.keys import dlio, dlio_fast
from dlio.config.keys.dlio import (
    COMPRESSIONS,
    DATA_LOADERS,
    DATATYPES,
    FORMATS,
    FRAMEWORKS,
    PROFILERS,
    SHUFFLES,
    STORAGE_TYPES,
    TIME_TYPES,
)
from dlio.config.keys.dlio_fast import DIALECTS
from dlio.config.keys.row import Key

__all__ = [
    "COMPRESSIONS",
    "DATA_LOADERS",
    "DATATYPES",
    "DIALECTS",
    "ENV",
    "ENV_SCALE",
    "FORMATS",
    "FRAMEWORKS",
    "KEYS",
    "KEYS_BY_PATH",
    "Key",
    "LEGACY",
    "LEGACY_ONLY",
    "OPTIONAL_SECTIONS",
    "PROFILERS",
    "SECTIONS",
    "SECTION_ALIASES",
    "SHUFFLES",
    "STORAGE_TYPES",
    "TIME_TYPES",
    "sections",
]


KEYS: Tuple[Key, ...] = (
    *dlio.KEYS,  # DLIO's sections
    *dlio_fast.KEYS,  # dlio_fast.* (DLIO ignores unknown top-level sections)
    *dlio_fast.CHECKPOINT_KEYS,  # checkpoint.async_*
    *(k for m in KEY_MODULES for k in m.KEYS),  # each workload family's workflow.<name> flag and <name>.*
)

KEYS_BY_PATH: Mapping[str, Key] = MappingProxyType({k.path: k for k in KEYS})

# 2.0.0 (and DLIO's ignored model.model_size) -> current name.
LEGACY: Mapping[str, str] = MappingProxyType(
    {
        "dataset.record_length": "dataset.record_length_bytes",
        "dataset.record_length_stdev": "dataset.record_length_bytes_stdev",
        "dataset.record_length_resize": "dataset.record_length_bytes_resize",
        "checkpoint.model_size": "model.model_size_bytes",
        "model.model_size": "model.model_size_bytes",
        "checkpoint.num_layers": "model.num_layers",
        "checkpoint.layer_parameters": "model.layer_parameters",
        "checkpoint.optimization_groups": "model.optimization_groups",
        "checkpoint.tensor_parallelism": "model.parallelism.tensor",
        "checkpoint.pipeline_parallelism": "model.parallelism.pipeline",
    }
)

# Spellings that only DLIO 2.0.0 wrote; seeing one makes `dlio_fast.dialect: auto` resolve to 2.0.0.
# model.model_size is not one: current DLIO's own workload files still carry it.
LEGACY_ONLY = frozenset(k for k in LEGACY if k != "model.model_size")

# Whole sections spelled another way.
SECTION_ALIASES: Mapping[str, str] = MappingProxyType({"data_reader": "reader"})

# Sections whose mere presence means something (DLIO: a `ksm:` section enables KSM); None when absent.
OPTIONAL_SECTIONS = frozenset({"checkpoint.ksm"})

# Environment variables that are not a key.
ENV_SCALE = "DLIO_FAST_SCALE"

ENV: Mapping[str, str] = MappingProxyType({k.env: k.path for k in KEYS if k.env})


def sections() -> Tuple[str, ...]:
    """Every section path ('model', 'model.parallelism', ...), parents before children."""
    out = []
    for k in KEYS:
        parts = k.path.split(".")[:-1]
        for i in range(1, len(parts) + 1):
            s = ".".join(parts[:i])
            if s not in out:
                out.append(s)
    return tuple(out)


SECTIONS = frozenset(sections())
