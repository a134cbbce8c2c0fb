"""Every --help ends with examples that name real commands; shell completion lists workloads, engines, rw modes."""

import os
import re
import shutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from dlio.cli.main import cli
from dlio.config.workloads import list_workloads


def all_commands(group=cli, path=()):
    yield path, group
    if isinstance(group, click.Group):
        for name, cmd in group.commands.items():
            yield from all_commands(cmd, path + (name,))


@pytest.mark.parametrize("path", [p for p, _ in all_commands()], ids=lambda p: " ".join(p) or "dlio-fast")
def test_every_help_has_examples(path):
    res = CliRunner().invoke(cli, [*path, "--help"])
    assert res.exit_code == 0, res.output
    text = res.output
    assert "Examples:" in text
    ex = text[text.index("Examples:") :].splitlines()[1:]
    cmds = [line.strip() for line in ex if line.strip().startswith(("dlio-fast", "mpiexec"))]
    assert cmds, text
    # each example names the command it documents (the root group: any command)
    if path:
        assert any(" ".join(path) in c for c in cmds), cmds


def _script():
    return shutil.which("dlio-fast", path=os.path.dirname(sys.executable)) or shutil.which("dlio-fast")


def complete(words):
    """What bash completion offers for the last word of `words` (click's bash_complete protocol)."""
    env = dict(
        os.environ, COMP_WORDS=" ".join(words), COMP_CWORD=str(len(words) - 1), _DLIO_FAST_COMPLETE="bash_complete"
    )
    out = subprocess.run([_script()], env=env, capture_output=True, text=True, timeout=60).stdout
    return [line.split(",", 1)[1] for line in out.splitlines() if line.startswith("plain,")]


needs_script = pytest.mark.skipif(_script() is None, reason="the dlio-fast script is not installed")


@needs_script
def test_completion_of_workloads_engines_rw():
    assert complete(["dlio-fast", "run", "--workload", "unet"]) == [n for n in list_workloads() if n.startswith("unet")]
    assert "resnet50" in complete(["dlio-fast", "workloads", "show", "res"])
    assert complete(["dlio-fast", "io", "/tmp", "--engine", "posix,io"]) == ["posix,io_uring"]
    assert complete(["dlio-fast", "io", "/tmp", "--rw", "rand"]) == ["randread", "randwrite", "randrw"]
    assert "io_uring" in complete(["dlio-fast", "run", "--engine", ""])


@needs_script
def test_bash_source_script():
    out = subprocess.run(
        [_script()], env=dict(os.environ, _DLIO_FAST_COMPLETE="bash_source"), capture_output=True, text=True, timeout=60
    ).stdout
    assert "_DLIO_FAST_COMPLETE=bash_complete" in out and "complete " in out


def test_workloads_tables_are_aligned():
    """A table per family, each cell starting under its column's name: no value runs into the next column
    (mmap_indexed_binary did), and no family's rows squeezed into another's columns."""
    res = CliRunner().invoke(cli, ["workloads"])
    assert res.exit_code == 0, res.output
    tables = [t.splitlines() for t in res.output.strip().split("\n\n")]
    assert [t[0] for t in tables] == ["training:", "KV cache:", "vector search:", "model load:"]
    for _, header, *rows in tables:
        starts = [m.start() for m in re.finditer(r"(?<=  )\S", header)]  # where each column's name begins
        assert rows and starts
        for r in rows:
            for c in starts:
                assert r[c - 2 : c] == "  " and r[c] != " ", (header, r)
