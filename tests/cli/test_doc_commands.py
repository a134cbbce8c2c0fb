"""Every dlio-fast command in the README and the docs pages is a real command, as written.

Each is taken from a code block (continuations joined, comments and an MPI launcher in front dropped).
Commands that plan (`run`, `generate`) plan without an error with --dry-run; `datasize` runs
whole (it only computes); the rest (`check`, `maxacc`, `profile`, ...) run jobs or read folders a user has, so their
options and values are parsed by the command itself, which is what a typo in the docs would break.
The runs themselves are the families' own tests' business (the README's family commands take a minute
each)."""

import glob
import os
import re
import shlex

import click
import pytest
from conftest import REPO

DOCS = ["README.md"] + sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
LAUNCHER = re.compile(r"^(mpiexec|mpirun)\b.*?\s(?=\S*dlio-fast\s)")
PLANS = {"run", "generate"}
# Inputs that an earlier command of the same page makes: the profile example's chain, which
# tests/cli/test_profile.py runs as written (profile_cases: "the README's example").
MADE_ON_THE_PAGE = ("prof/workload.yaml", "prof/raw")


def doc_commands():
    """(page, command) for every `dlio-fast ...` line in a code block of the README and docs/."""
    found = []
    for page in DOCS:
        with open(os.path.join(REPO, page)) as f:
            text = f.read()
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                command = LAUNCHER.sub("", line.split(" #")[0].strip())
                command = re.sub(r"^\S*/(?=dlio-fast\s)", "", command.split("&& ")[-1])
                if command.startswith("dlio-fast "):
                    found.append(pytest.param(page, command, id=f"{page}:{command[10:50]}"))
    return found


def test_the_docs_have_commands_of_every_family():
    commands = " ".join(p.values[1] for p in doc_commands())
    for workload in ("imagenet", "vdb_", "kvcache_", "load_", "llama_7b"):
        assert workload in commands, workload


@pytest.mark.parametrize("page,command", doc_commands())
def test_a_documented_command_is_a_real_command(run_cli, monkeypatch, page, command):
    from dlio.cli.main import cli

    if any(made in command for made in MADE_ON_THE_PAGE):
        pytest.skip("its input is made by the command before it on the page: tests/cli/test_profile.py runs the chain")
    # The repository is the folder the docs' relative inputs (tests/data/...) are named from; a plan
    # writes nothing, and what else runs (datasize) only computes.
    monkeypatch.chdir(REPO)
    args = shlex.split(command)[1:]
    name = next(a for a in args if not a.startswith("-"))
    if name in PLANS or name == "datasize":
        code, out, err = run_cli(*args, *(["--dry-run"] if name in PLANS else []))
        assert code == 0, (page, command, err)
        return
    # Parse only: the command's own options, types and choices, as click checks them before it runs.
    ctx = cli.make_context("dlio-fast", list(args), resilient_parsing=False)
    _, sub, rest = cli.resolve_command(ctx, ctx.protected_args + ctx.args)
    assert sub is not None, (page, command)
    try:
        sub.make_context(name, rest, parent=ctx)
    except click.UsageError as e:
        pytest.fail(f"{page}: `{command}`: {e.format_message()}")
