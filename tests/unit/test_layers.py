"""The layer rule of docs/design.md ("Layers"), checked on every import of dlio/: imports at the top of a
file, inside functions, in Cython files, and `importlib.import_module("dlio...")` calls.

A module may import its own package and the layers below its own, never a layer above it and never
another package of its own layer. A failure names the file and line and both layers. The same graph
must have no cycle between packages, and none between files either.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

DLIO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dlio")


def _family_packages() -> Set[str]:
    """The packages of dlio/ with a family.py that defines FAMILY (dlio.jobs.registry), training apart: a
    new family takes its place in the families' layer without a line here."""
    out = set()
    for name in sorted(os.listdir(DLIO)):
        path = os.path.join(DLIO, name, "family.py")
        if name != "train" and os.path.isfile(path):
            with open(path) as f:
                if "\nFAMILY = " in f.read():
                    out.add(name)
    return out


FAMILY_PACKAGES = _family_packages()

# Top first. A name is a subpackage of dlio/ or a module directly in dlio/ (the base modules; "dlio" is
# the package's __init__, which holds the version only). Packages named here that do not exist yet
# (kvcache, vdb, modelload) have their place waiting.
LAYERS: List[Tuple[str, Set[str]]] = [
    ("entry", {"__main__"}),
    ("cli", {"cli"}),
    # one lifecycle for every workload family's run (driver), and the families' registry: literal
    # imports inside functions, read here like any other
    ("jobs", {"jobs"}),
    ("train", {"train"}),
    # the workload families beside checkpoints: jobs that may use mlperf's rules, the dataset, the
    # io microbenchmarks' pieces, report, storage, config and base
    ("families", {"checkpoint", "profile"} | FAMILY_PACKAGES),
    # what a family is to the driver and the command line (dlio.family: Family, Run, RunContext)
    ("family protocol", {"family"}),
    # MLPerf Storage's rules and checks: they read runs through report and size datasets through dataset
    ("mlperf", {"mlperf"}),
    ("data", {"dataset", "fsbench"}),
    # result records and their renderers; reports never import mlperf (a check is rendered, not run)
    ("report", {"report"}),
    # where the bytes go: files or S3, one backend chosen in dlio.storage
    ("storage", {"storage"}),
    ("config", {"config"}),
    # base, top first: the console (progress) on the host and process helpers (dlio.system: host facts,
    # device counters, MPI glue, child processes, output folders, bounded inputs, memory checks); the C
    # bindings; pure Python with no dlio import (dlio.base: errors, units, limits, temporary names)
    ("base: console", {"progress"}),
    ("base: host and process", {"system"}),
    ("base: C bindings", {"_core", "_mpiio"}),
    ("base: errors and units", {"base", "dlio"}),
]

# profile is a leaf: it reads traces and writes a workload with config, dataset and base only, and
# only the command line imports it.
ONLY: Dict[str, Set[str]] = {"profile": {"config", "dataset"}}
ONLY_USED_BY: Dict[str, Set[str]] = {"profile": {"cli"}}
BASE_LAYERS = {name for name, _ in LAYERS if name.startswith("base")}

# Upward edges that stay: (importing module, imported module) -> why.
CALL_TIME: Dict[Tuple[str, str], str] = {
    (
        "dlio._core",
        "dlio.system.mpi",
    ): "_core.engines() registers the MPI-IO engine through dlio.system.mpi on first use, "
    "inside the function; dlio.system.mpi imports _core (a cycle at call time, never at import time)",
}


class Edge(NamedTuple):
    src: str  # importing module, dotted
    dst: str  # imported module (or package), dotted
    path: str  # file, relative to the repository
    line: int


def _modules(root: str) -> Dict[str, str]:
    """{dotted module name: file} of every .py / .pyx file under root (a package named dlio)."""
    base = os.path.dirname(root)
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            stem, ext = os.path.splitext(f)
            if ext not in (".py", ".pyx"):
                continue
            parts = os.path.relpath(os.path.join(folder, stem), base).split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = os.path.join(folder, f)
    return out


def _resolve(name: str, modules: Dict[str, str]) -> Optional[str]:
    """The module a dotted name refers to: itself, or the nearest enclosing module (an attribute)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _import_module_arg(node: ast.Call) -> Optional[str]:
    """The constant start of importlib.import_module's name ("dlio.x." of f"dlio.x.{name}")."""
    f = node.func
    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if called not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")
    return None


# Python-level imports in a Cython file (not cimports): "from dlio.system import mpi", "import dlio.x".
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(dlio[\w.]*)\s+import\s+([\w, ]+)|import\s+(dlio[\w.]*))", re.M)


def _imports(mod: str, path: str, modules: Dict[str, str]) -> Iterator[Tuple[str, int]]:
    """(dotted name imported, line) for every dlio import of one file."""
    text = open(path, encoding="utf-8").read()
    if path.endswith(".pyx"):
        for m in _PYX_IMPORT.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            if m.group(3):
                yield m.group(3), line
            else:
                for name in m.group(2).split(","):
                    yield f"{m.group(1)}.{name.strip()}", line
        return
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                full = f"{base}.{a.name}"
                yield (full if full in modules else base), node.lineno
        elif isinstance(node, ast.Call):
            name = _import_module_arg(node)
            if name:
                yield name, node.lineno


def edges(root: str = DLIO) -> List[Edge]:
    """Every import of one dlio module by another (self-imports left out)."""
    modules = _modules(root)
    base = os.path.dirname(root)  # paths as dlio/x/y.py
    out = []
    for mod, path in modules.items():
        for name, line in _imports(mod, path, modules):
            if name != "dlio" and not name.startswith("dlio."):
                continue
            dst = _resolve(name, modules)
            if dst and dst != mod:
                out.append(Edge(mod, dst, os.path.relpath(path, base), line))
    return out


def package_of(mod: str, root: str = DLIO) -> str:
    """The layer table's name of a module: its subpackage of dlio/, or its own name for a base module. A
    workload family's keys module (dlio/<family>/keys.py: rows, found by dlio.config.families) is config's."""
    parts = mod.split(".")
    if len(parts) == 3 and parts[2] == "keys" and parts[1] in FAMILY_PACKAGES:
        return "config"
    if len(parts) > 1 and os.path.isdir(os.path.join(root, parts[1])):
        return parts[1]
    return parts[-1]


LEVEL = {pkg: (i, name) for i, (name, pkgs) in enumerate(LAYERS) for pkg in pkgs}


def violations(all_edges: List[Edge], root: str = DLIO) -> List[str]:
    """Lines naming each import that goes up a layer or sideways to another package of its layer."""
    out = []
    for e in all_edges:
        a, b = package_of(e.src, root), package_of(e.dst, root)
        if a == b or (e.src, e.dst) in CALL_TIME:
            continue
        for p in (a, b):
            if p not in LEVEL:
                out.append(f"{e.path}:{e.line}: {p} has no layer (add it to LAYERS here and to docs/design.md)")
        if a not in LEVEL or b not in LEVEL:
            continue
        (ia, la), (ib, lb) = LEVEL[a], LEVEL[b]
        only, users = ONLY.get(a), ONLY_USED_BY.get(b)
        if only is not None and b not in only and lb not in BASE_LAYERS:
            out.append(f"{e.path}:{e.line}: {e.src} imports {e.dst}: {a} may import only {sorted(only)} and base")
        elif users is not None and a not in users:
            out.append(f"{e.path}:{e.line}: {e.src} imports {e.dst}: only {sorted(users)} may import {b}")
        elif ib < ia:
            out.append(
                f"{e.path}:{e.line}: {e.src} imports {e.dst}: layer {la} ({a}) imports layer {lb} ({b}), above it"
            )
        elif ib == ia:
            out.append(f"{e.path}:{e.line}: {e.src} imports {e.dst}: {a} imports {b}, another package of layer {la}")
    return out


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _graphs(all_edges: List[Edge], root: str = DLIO) -> Tuple[Dict[str, Set[str]], Dict[str, Set[str]]]:
    """(package graph, file graph) without the known exceptions."""
    packages: Dict[str, Set[str]] = {}
    files: Dict[str, Set[str]] = {}
    for e in all_edges:
        if (e.src, e.dst) in CALL_TIME:
            continue
        files.setdefault(e.src, set()).add(e.dst)
        a, b = package_of(e.src, root), package_of(e.dst, root)
        if a != b:
            packages.setdefault(a, set()).add(b)
    return packages, files


EDGES = edges()


def test_the_import_scan_sees_top_level_function_level_and_cython_imports():
    found = {(e.src, e.dst) for e in EDGES}
    assert ("dlio.cli.main", "dlio.cli.train") in found  # top of a file
    assert ("dlio.system.mpi", "dlio._mpiio") in found  # inside a function
    assert ("dlio._core", "dlio.system.mpi") in found  # a .pyx file
    assert ("dlio.dataset.formats", "dlio.dataset.formats") not in found  # import_module of its own modules


def test_no_import_goes_up_a_layer():
    bad = violations(EDGES)
    assert not bad, "imports against the layers (docs/design.md, Layers):\n" + "\n".join(bad)


def test_every_package_and_base_module_has_a_layer():
    names = {package_of(m) for m in _modules(DLIO)}
    assert not sorted(names - set(LEVEL))


def test_known_exceptions_still_occur():
    """An exception that no longer occurs leaves the set (it may only shrink)."""
    found = {(e.src, e.dst) for e in EDGES}
    stale = sorted(set(CALL_TIME) - found)
    assert not stale, f"remove from CALL_TIME in {__file__}: {stale}"


def test_no_package_cycle():
    packages, _ = _graphs(EDGES)
    assert cycles(packages) == []


def test_no_file_cycle():
    _, files = _graphs(EDGES)
    assert cycles(files) == []


def test_a_new_upward_import_is_named_with_its_file_line_and_layers(tmp_path):
    """The checker on a small tree: report importing mlperf inside a function, a relative import
    sideways, and an import_module string upward; a cycle between the two packages."""
    root = tmp_path / "dlio"
    for pkg in ("report", "mlperf", "dataset", "fsbench", "base"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "base" / "errors.py").write_text("")
    (root / "report" / "tables.py").write_text(
        "from dlio.base import errors\n\n\ndef f():\n    from dlio.mlperf import rules\n    return rules\n"
    )
    (root / "mlperf" / "rules.py").write_text("from dlio.report import tables\n")
    (root / "dataset" / "spec.py").write_text("from ..fsbench import grid\n")
    (root / "fsbench" / "grid.py").write_text("import importlib\nimportlib.import_module('dlio.mlperf.rules')\n")
    found = edges(str(root))
    bad = violations(found, str(root))
    assert bad == [
        "dlio/dataset/spec.py:1: dlio.dataset.spec imports dlio.fsbench.grid: "
        "dataset imports fsbench, another package of layer data",
        "dlio/fsbench/grid.py:2: dlio.fsbench.grid imports dlio.mlperf.rules: "
        "layer data (fsbench) imports layer mlperf (mlperf), above it",
        "dlio/report/tables.py:5: dlio.report.tables imports dlio.mlperf.rules: "
        "layer report (report) imports layer mlperf (mlperf), above it",
    ]
    packages, files = _graphs(found, str(root))
    assert cycles(packages) == [["mlperf", "report"]]
    assert ["dlio.mlperf.rules", "dlio.report.tables"] in cycles(files)


def test_a_familys_keys_module_is_data():
    """dlio/<family>/keys.py sits with config (package_of): it may import the row type and nothing else of
    dlio, or config would reach a family's code through it."""
    found = {e.src for e in edges() if e.src.endswith(".keys") and package_of(e.src) == "config"}
    assert {f"dlio.{p}.keys" for p in FAMILY_PACKAGES if os.path.isfile(os.path.join(DLIO, p, "keys.py"))} <= found
    for e in edges():
        if e.src in found:
            assert e.dst == "dlio.config.keys.row", f"{e.path}:{e.line}: a keys module imports {e.dst}"
