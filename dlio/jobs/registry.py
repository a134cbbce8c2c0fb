"""The workload families, by their workflow flag. Each entry imports its family when it is asked for (a
literal import_module, which the layer test reads), so `--help` loads none of them.

Adding a family: a package with a family.py that defines FAMILY (dlio.family.Family), a keys.py and its
workloads/, and one entry here (docs/design.md, "Add a workload family"; tests/unit/test_families.py
checks each step)."""

from __future__ import annotations

from importlib import import_module
from typing import Callable, Dict

from dlio.base.errors import ConfigError
from dlio.config import Config
from dlio.family import Family
from dlio.report.family import FamilyReport

# workflow flag -> the family, imported when asked for (a literal import_module, which the layer test
# reads); "train" (training and checkpoints) is what a config without another family's flag runs
FAMILIES: Dict[str, Callable[[], Family]] = {
    "train": lambda: import_module("dlio.train.family").FAMILY,
    "kvcache": lambda: import_module("dlio.kvcache.family").FAMILY,
    "vdb": lambda: import_module("dlio.vdb.family").FAMILY,
    "model_load": lambda: import_module("dlio.modelload.family").FAMILY,
}
TRAINING = "train"


def family(name: str) -> Family:
    return FAMILIES[name]()


def family_of(cfg: Config) -> Family:
    """The family a config runs: the one whose workflow flag is set, else training (and checkpoints)."""
    chosen = [f for f in FAMILIES if f != TRAINING and getattr(cfg.workflow, f, False)]
    if len(chosen) > 1:
        raise ConfigError(
            f"workflow.{chosen[0]} and workflow.{chosen[1]} are both true: one workload family per run",
            f"workflow.{chosen[1]}",
            True,
        )
    return family(chosen[0] if chosen else TRAINING)


def reports() -> Dict[str, FamilyReport]:
    """{schema: FamilyReport} of every family with documents of its own (for dlio.report.source.load)."""
    return {f.report.schema: f.report for f in (load() for load in FAMILIES.values()) if f.report is not None}
