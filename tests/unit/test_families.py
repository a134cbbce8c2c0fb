"""The checklist of docs/design.md's "Add a workload family", kept honest: a family that skips a step
fails here, by name. Every package with a family.py is registered; every registered family loads through
its literal import, is a dlio.family.Family named by its workflow flag, has that flag and a section of
keys in its package's keys.py (found by dlio.config.families) and a typed section (cfg.section), lists
itself in `dlio-fast workloads` and plans a run of a built-in workload."""

from __future__ import annotations

import glob
import os

import pytest

from dlio.config import families, schema
from dlio.config.load import load_config
from dlio.config.sections import CLASSES
from dlio.config.workloads import list_workloads
from dlio.family import Family, FamilyChecks
from dlio.jobs import registry

DLIO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dlio")
OWN = [f for f in registry.FAMILIES if f != registry.TRAINING]  # the families beside training


def test_every_package_with_a_family_module_is_registered():
    packages = {
        os.path.basename(os.path.dirname(p))
        for p in glob.glob(os.path.join(DLIO, "*", "family.py"))
        if "\nFAMILY = " in open(p).read()
    }
    registered = {registry.family(name).plan.__module__.split(".")[1] for name in registry.FAMILIES}
    assert packages == registered, f"family.py without a registry line: {sorted(packages - registered)}"


@pytest.mark.parametrize("name", list(registry.FAMILIES))
def test_a_registered_family_is_a_family_named_by_its_flag(name):
    fam = registry.family(name)
    assert isinstance(fam, Family) and fam.name == name and fam.title
    assert callable(fam.plan) and callable(fam.listing)
    for hook in ("describe", "check", "check_access", "places", "prepare", "measure", "keep_partial", "write"):
        assert callable(getattr(fam.plan, hook, None)), f"{name}: its Run has no {hook}"
    assert fam.checks is None or isinstance(fam.checks, FamilyChecks)


@pytest.mark.parametrize("name", OWN)
def test_a_family_has_its_flag_keys_typed_section_and_report(name):
    fam = registry.family(name)
    package = fam.plan.__module__.split(".")[1]
    keys = [m for m in families.KEY_MODULES if m.SECTION == name]
    assert keys and keys[0].__name__ == f"dlio.{package}.keys", f"no dlio/{package}/keys.py with SECTION = {name!r}"
    assert f"workflow.{name}" in {f"{k.section}.{k.name}" for k in schema.KEYS}, f"no workflow.{name} key"
    assert name in {k.section for k in schema.KEYS}, f"no {name}.* keys in the schema"
    cfg = load_config(workload="default", env={})
    assert isinstance(cfg.section(CLASSES[name]), CLASSES[name]), f"{name}: no typed section (gen_sections)"
    assert fam.report is not None, f"{name}: `dlio-fast report` cannot read its documents"
    assert fam.report.schema.startswith("dlio-fast.")


def test_report_schemas_are_one_per_family():
    reports = registry.reports()
    assert len(reports) == len(OWN)


@pytest.mark.parametrize("name", list(registry.FAMILIES))
def test_a_family_lists_a_built_in_workload(name):
    """At least one built-in workload runs the family, and it has columns of its own in `workloads`."""
    found = [w for w in list_workloads() if registry.family_of(load_config(workload=w, env={})).name == name]
    assert found, f"no built-in workload runs {name}"
    cfg = load_config(workload=found[0], env={})
    assert registry.family(name).listing(cfg)  # its own columns in `dlio-fast workloads`


def test_two_family_flags_are_refused_by_name():
    from dlio.base.errors import ConfigError

    cfg = load_config(workload="default", env={}, sets=["workflow.vdb=true", "workflow.kvcache=true"])
    with pytest.raises(ConfigError, match="one workload family per run"):
        registry.family_of(cfg)


@pytest.mark.parametrize("name", list(registry.FAMILIES))
def test_a_dry_run_prints_only_the_sections_the_family_reads(name):
    """A family's --dry-run shows its own section and the shared ones, never another family's keys."""
    from dlio.jobs.driver import shown_sections

    cfg = load_config(
        workload=next(w for w in list_workloads() if registry.family_of(load_config(workload=w, env={})).name == name),
        env={},
    )
    shown = shown_sections(cfg, registry.family(name))
    others = [f for f in registry.FAMILIES if f not in (name, registry.TRAINING)]
    assert not set(shown) & set(others) and "workflow" in shown
    assert name in shown or name == registry.TRAINING
