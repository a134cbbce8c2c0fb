"""The README's try-it commands are real commands: each one, as written, plans without an error (--dry-run;
the runs themselves take a minute each and are the families' own tests' business)."""

import os
import re
import shlex

import pytest
from conftest import REPO


def family_commands():
    """The commands of the README's 'Each workload family in about a minute' block, continuations joined."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    block = re.search(r"\*\*Each workload family in about a minute\*\*.*?```\n(.*?)```", text, re.S)
    assert block, "the README has no 'Each workload family in about a minute' block"
    joined = block.group(1).replace("\\\n", " ")
    return [line.split("#")[0].strip() for line in joined.splitlines() if line.strip()]


@pytest.mark.parametrize("command", family_commands())
def test_a_readme_family_command_plans(run_cli, command):
    args = shlex.split(command)
    assert args[0] == "dlio-fast"
    code, out, err = run_cli(*args[1:], "--dry-run")
    assert code == 0, (command, err)
