"""`dlio-fast --version`: the version, the git commit it was built from (or runs from), and what was
compiled in (io_uring, the MPI-IO engine), so that a result can be traced to the build that made it."""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Optional

import click

import dlio

PKG = os.path.dirname(os.path.abspath(dlio.__file__))
BUILD_COMMIT = os.path.join(PKG, "_build_commit.txt")  # written by setup.py when built from a git checkout


def run_commit(folder: str = os.path.dirname(PKG)) -> Optional[str]:
    """The commit of the checkout the package runs from (an editable install), '+dirty' if modified."""
    if not os.path.exists(os.path.join(folder, ".git")):
        return None
    from dlio.mlperf.provenance import git_commit  # the one git query (provenance.json names the commit too)

    got = git_commit(folder)
    return None if got is None else got["commit"][:12] + ("+dirty" if got["dirty"] else "")


def build_commit() -> Optional[str]:
    try:
        with open(BUILD_COMMIT) as f:
            return f.read().strip() or None
    except OSError:
        return None


def compiled_in() -> str:
    """'io_uring yes, MPI-IO yes (MPICH ...)': what this build can do, whatever this host allows."""
    from dlio import _core

    uring = dict((n, why) for n, _, ok, why in _core.engines()).get("io_uring", "")
    parts = ["io_uring " + ("no (built with DLIO_FAST_NO_URING)" if "not compiled in" in uring else "yes")]
    try:  # the MPI-IO extension is optional: built only with an MPI compiler
        _mpiio = importlib.import_module("dlio._mpiio")  # no stub: the extension is optional

        lib = " ".join(_mpiio.library_version().splitlines()[0].split()) if _mpiio.library_version() else ""
        parts.append("MPI-IO yes" + (f" ({lib})" if lib else ""))
    except ImportError:
        parts.append("MPI-IO no (no MPI compiler at build time)")
    return ", ".join(parts)


def version_text() -> str:
    commit, where = run_commit(), "checkout"
    if commit is None:
        commit, where = build_commit(), "build"
    lines = [
        f"dlio-fast {dlio.__version__}",
        f"commit: {commit} ({where})" if commit else "commit: unknown (not built from a git checkout)",
        f"compiled in: {compiled_in()}",
    ]
    return "\n".join(lines)


def version_option() -> Callable[[Any], Any]:
    def callback(ctx: click.Context, param: Any, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            click.echo(version_text())
            ctx.exit()

    return click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=callback,
        help="Show the version, the commit and what was compiled in, and exit.",
    )
