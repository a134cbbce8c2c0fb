"""DLIO's command line as Hydra reads it, composed into what dlio-fast's loader takes.

``dlio_benchmark [--config-dir DIR] [--config-path DIR] [--config-name NAME] workload=NAME
++workload.KEY=VALUE ... ++hydra.run.dir=DIR ++hydra.output_subdir=SUB`` (MLPerf Storage's mlpstorage
builds exactly this line) is composed here: the config search path, the primary config (its
``defaults`` list names the workload when no ``workload=`` does, its ``hydra:`` section gives the run
folder), the workload file, Hydra's checks of ``+`` and plain overrides against that file, and the
run folder with the interpolations DLIO's configs use (``${now:FORMAT}``, ``${workload.model.name}``).
The result is the arguments of ``dlio-fast run`` (dlio.cli.dlio_benchmark hands them over), so the run
itself, its errors and its files are ``run``'s.

Search path: every ``--config-dir`` (in the order given), then ``--config-path`` (or, without one, the
built-in workloads and DLIO's own primary config). Hydra puts a ``--config-dir`` *after* the package's
own configs, so with DLIO installed a workload of the same name in DLIO's package shadows the caller's
file (mlpstorage's ``unet3d_h100.yaml`` is replaced by DLIO 2.0.0's, whose ``model: unet3d`` string then
breaks mlpstorage's report); dlio-fast reads the caller's file first, on purpose.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set

import yaml

from dlio.base import inputs
from dlio.base.errors import ConfigError, DlioError
from dlio.config.workloads import list_workloads, workload_text
from dlio.config.workloads import resolve as resolve_builtin

if TYPE_CHECKING:
    from dlio.config.load import Config

JOB_NAME = "dlio_benchmark"
# DLIO's configs/config.yaml: the workload when none is named, and the run folder (Hydra's run.dir).
BUILTIN_PRIMARY = {
    "defaults": ["_self_", {"workload": "default"}],
    "hydra": {"run": {"dir": "./hydra_log/${workload.model.name}/${now:%Y-%m-%d}-${now:%H-%M-%S}"}},
}
BUILTIN_SOURCE = {"path": "dlio.config.workloads", "schema": "pkg", "provider": "main"}


@dataclass
class HydraArgs:
    """The command line split as Hydra's argparse splits it."""

    overrides: List[str] = field(default_factory=list)
    config_dirs: List[str] = field(default_factory=list)
    config_path: Optional[str] = None
    config_name: Optional[str] = None
    cfg: Optional[str] = None  # --cfg job | hydra | all: print the config, run nothing
    help: bool = False
    hydra_help: bool = False
    version: bool = False


# Hydra's flags that take a value, by every spelling, and the HydraArgs field they set.
_VALUED = {
    "--config-dir": "config_dirs",
    "-cd": "config_dirs",
    "--config-path": "config_path",
    "-cp": "config_path",
    "--config-name": "config_name",
    "-cn": "config_name",
    "--cfg": "cfg",
    "-c": "cfg",
}
_FLAGS = {"--help": "help", "-h": "help", "--hydra-help": "hydra_help", "--version": "version"}
# Hydra's flags dlio-fast does not offer, with what to do instead.
_REFUSED = {
    ("--multirun", "-m"): "Hydra's sweeps (--multirun) are not supported: run one job per setting",
    ("--package", "-p"): "--package is not supported: --cfg prints the whole config",
    ("--info", "-i"): "--info is not supported: --cfg job prints the composed config",
    ("--shell-completion", "-sc"): "Hydra's shell completion is not supported (dlio-fast has its own)",
    ("--experimental-rerun",): "--experimental-rerun is not supported: run the command line again",
    ("--run", "-r"): None,  # Hydra's default mode: accepted, nothing to do
    ("--resolve",): None,  # --cfg prints resolved values anyway
}


def parse_argv(argv: List[str]) -> HydraArgs:
    """Hydra's command line: flags (``--flag VALUE`` or ``--flag=VALUE``) and overrides, in any order."""
    args = HydraArgs()
    i = 0
    while i < len(argv):
        word = argv[i]
        flag, eq, inline = word.partition("=") if word.startswith("-") else (word, "", "")
        if flag in _VALUED:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise ConfigError(f"{flag} expects a value")
            if _VALUED[flag] == "config_dirs":
                args.config_dirs.append(value)
            else:
                setattr(args, _VALUED[flag], value)
        elif word in _FLAGS:
            setattr(args, _FLAGS[word], True)
        elif word.startswith("-"):
            refused = next((why for names, why in _REFUSED.items() if flag in names), "unknown")
            if refused == "unknown":
                raise ConfigError(f"unrecognized argument {word} (see dlio_benchmark --help)")
            if refused is not None:
                raise ConfigError(refused)
        else:
            args.overrides.append(word)
        i += 1
    if args.cfg is not None and args.cfg not in ("job", "hydra", "all"):
        raise ConfigError(f"--cfg {args.cfg}: expected job, hydra or all")
    return args


@dataclass
class Composed:
    """What the command line asks for, ready for the loader: the workload and its file, the overrides
    as typed (task: Hydra's overrides.yaml; hydra: Hydra's own), the run folder and the Hydra subdir."""

    workload: str
    workload_file: Optional[str]  # None: a built-in workload
    task: List[str]
    hydra: List[str]
    run_dir: Optional[str]  # may hold ${...} until resolve_run_dir
    output_subdir: Any  # a folder name, or None (no Hydra files), or ... (not given: .hydra)
    config_name: str
    sources: List[Dict[str, str]]


def search_path(args: HydraArgs) -> List[str]:
    """The folders searched, first first; the built-in configs (not a folder) come after them unless
    --config-path replaces them."""
    dirs = []
    for d in args.config_dirs + ([args.config_path] if args.config_path else []):
        d = os.path.abspath(os.path.expanduser(d))
        if not os.path.isdir(d):
            raise ConfigError(f"config directory {d} not found")
        dirs.append(d)
    return dirs


def _read_yaml(path: str) -> Any:
    try:
        return inputs.loads_yaml(inputs.read_regular(path, inputs.YAML_CAP, "config (YAML) file"), path, "YAML file")
    except DlioError as e:
        raise ConfigError(str(e), origin=path) from None


def _primary(args: HydraArgs, dirs: List[str]) -> Dict[str, Any]:
    """The primary config: config_name in the search path, else DLIO's own."""
    name = args.config_name or "config"
    name = name[:-5] if name.endswith(".yaml") else name
    for d in dirs:
        path = os.path.join(d, name + ".yaml")
        if os.path.isfile(path):
            tree = _read_yaml(path)
            if tree is not None and not isinstance(tree, dict):
                raise ConfigError(f"{path}: expected a mapping (Hydra's primary config)", origin=path)
            return tree or {}
    if args.config_name is not None and name != "config" or args.config_path:
        where = ", ".join(dirs) or "the built-in configs"
        raise ConfigError(f"cannot find primary config '{name}' in {where} (--config-name / --config-path)")
    return BUILTIN_PRIMARY


def _default_workload(primary: Dict[str, Any]) -> Optional[str]:
    """The `workload: NAME` entry of a primary config's defaults list, if any."""
    for entry in primary.get("defaults") or []:
        if isinstance(entry, dict) and "workload" in entry:
            value = entry["workload"]
            return None if value is None else str(value)
    return None


def workload_files(dirs: List[str]) -> List[str]:
    """Every workload name the search path offers (its folders' workload/*.yaml, then the built-ins)."""
    names: Set[str] = set()
    for d in dirs:
        folder = os.path.join(d, "workload")
        if os.path.isdir(folder):
            names.update(n[:-5] for n in os.listdir(folder) if n.endswith(".yaml"))
    return sorted(names | set(list_workloads()))


def _find_workload(name: str, dirs: List[str], builtin: bool) -> Optional[str]:
    """The caller's workload/NAME.yaml, or None for the built-in NAME; ConfigError when neither exists."""
    for d in dirs:
        path = os.path.join(d, "workload", name + ".yaml")
        if os.path.isfile(path):
            return path
    if builtin:
        resolve_builtin(name)  # ConfigError naming the choices
        return None
    raise ConfigError(
        f"could not find 'workload/{name}' in {', '.join(dirs)}; available: {', '.join(workload_files(dirs))}"
    )


def compose(args: HydraArgs) -> Composed:
    """The workload, its file, the overrides and the run folder of a DLIO command line."""
    dirs = search_path(args)
    primary = _primary(args, dirs)
    builtin = args.config_path is None  # --config-path replaces the package's configs, as in Hydra
    task, hydra, name = [], [], None
    for o in args.overrides:
        key = o.lstrip("+~").split("=", 1)[0].strip()
        if key == "hydra" or key.startswith(("hydra.", "hydra/")) or o.startswith("override hydra/"):
            hydra.append(o)
        else:
            task.append(o)
            if key == "workload" and "=" in o and not o.startswith("~"):
                name = o.split("=", 1)[1].strip()
    if name is None:
        name = _default_workload(primary)
        if name is None:
            raise ConfigError("no workload: give workload=NAME (the primary config's defaults name none)")
    path = _find_workload(name, dirs, builtin)
    check_overrides(task, path, name)
    run_dir, subdir = _hydra_setting(primary, "run.dir"), _hydra_setting(primary, "output_subdir", ...)
    for o in hydra:
        key, _, value = o.lstrip("+").partition("=")
        if key == "hydra.run.dir":
            run_dir = value.strip()
        elif key == "hydra.output_subdir":
            subdir = None if value.strip() in ("null", "None", "~") else value.strip()
    # Hydra's providers: "main" is the primary config's place (--config-path, or the package), "command-line"
    # a --config-dir
    sources = [
        {"path": d, "schema": "file", "provider": "main" if d == dirs[-1] and args.config_path else "command-line"}
        for d in dirs
    ]
    if builtin:
        sources.append(dict(BUILTIN_SOURCE))
    return Composed(name, path, task, hydra, run_dir, subdir, args.config_name or "config", sources)


def _hydra_setting(primary: Dict[str, Any], dotted: str, missing: Any = None) -> Any:
    node: Any = primary.get("hydra") or {}
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return missing
        node = node[part]
    return node


def _workload_tree(path: Optional[str], name: str) -> Dict[str, Any]:
    tree = _read_yaml(path) if path is not None else yaml.safe_load(workload_text(name))
    if isinstance(tree, dict) and len(tree) == 1 and "workload" in tree:
        tree = tree["workload"]
    return tree if isinstance(tree, dict) else {}


def _has(tree: Dict[str, Any], dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def check_overrides(task: List[str], path: Optional[str], name: str) -> None:
    """Hydra's rules against the workload file: `workload.KEY=V` changes a key the file has, `+workload.KEY=V`
    adds one it has not (`++` does either); one line in Hydra's words otherwise."""
    tree = None
    for o in task:
        if o.startswith("++") or o.startswith("~") or "=" not in o:
            continue
        key, value = o.lstrip("+").split("=", 1)
        if not key.startswith("workload."):
            continue
        tree = _workload_tree(path, name) if tree is None else tree
        exists = _has(tree, key[len("workload.") :])
        if o.startswith("+") and exists:
            raise ConfigError(
                f"Could not append to config. An item is already at '{key}': use {key}={value} to override it, "
                f"or ++{key}={value} to add or override it"
            )
        if not o.startswith("+") and not exists:
            raise ConfigError(
                f"Could not override '{key}': not in workload {name}. To append to your config use +{key}={value}"
            )


_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")
_HONOURED = ("hydra.run.dir=", "hydra.output_subdir=")  # composed into the run's own settings


def resolve_run_dir(text: str, cfg: Config, now: Optional[float] = None) -> str:
    """The run folder with the interpolations DLIO's and mlpstorage's configs use: ${now:FORMAT} (the
    time, strftime) and ${workload.KEY} (the workload's value; ${workload.model} is the model's name,
    as it was in DLIO 2.0.0's `model: NAME`). Others are refused: dlio-fast does not run OmegaConf."""
    stamp = time.localtime(time.time() if now is None else now)

    def value(m: "re.Match[str]") -> str:
        expr = m.group(1).strip()
        if expr.startswith("now:"):
            return time.strftime(expr[4:], stamp)
        if expr.startswith("workload."):
            key = expr[len("workload.") :]
            key = "model.name" if key == "model" else key
            try:
                v = cfg.get(key)
            except KeyError:
                v = None
            if v is not None and not hasattr(v, "__dataclass_fields__"):
                return str(v)
        raise ConfigError(f"hydra.run.dir = {text}: cannot resolve ${{{expr}}} (give hydra.run.dir a plain path)")

    return _INTERPOLATION.sub(value, text)


def run_arguments(c: Composed, run_dir: Optional[str]) -> List[str]:
    """`dlio-fast run`'s arguments for a composed command line (the job's facts for hydra.yaml ride
    along as hydra.* settings, which dlio.report.dlio.hydra writes back)."""
    named = any(t.split("=", 1)[0].strip() == "workload" for t in c.task)
    if c.workload_file:  # the caller's NAME.yaml is the workload (load_config checks NAME against it)
        out = ["--config", c.workload_file, *([] if named else [f"workload={c.workload}"]), *c.task]
    else:
        out = ["--workload", c.workload, *c.task]
    if run_dir is not None:
        out.append(f"hydra.run.dir={run_dir}")
    if c.output_subdir is not ...:
        out.append(f"++hydra.output_subdir={'null' if c.output_subdir is None else c.output_subdir}")
    # the other hydra.KEY settings go along: the loader warns that they are not followed (Hydra's config
    # groups, hydra/NAME=..., only go into hydra.yaml)
    out += [o for o in c.hydra if o.lstrip("+").startswith("hydra.") and not o.lstrip("+").startswith(_HONOURED)]
    out += [
        f"++hydra.job.name={JOB_NAME}",
        f"++hydra.job.config_name={c.config_name}",
        f"++hydra.runtime.config_sources={json.dumps(c.sources)}",
        f"++hydra.overrides.hydra={json.dumps(c.hydra)}",
    ]
    return out
