"""Hints in the grammar of the command that was run. `dlio_benchmark` (DLIO's command line, what mlpstorage
runs) hands its job to `dlio-fast run`, whose messages advise `run`'s options (`--cache drop`, `--engine
odirect`, `--set KEY=VALUE`); `dlio_benchmark` refuses those, and takes `++workload.KEY=VALUE`. Under it,
everything the run writes to the console passes through to_dlio_benchmark(), which spells each of `run`'s
options that set a config key as the override that sets the same key."""

from __future__ import annotations

import io
import re
from typing import Callable, Dict, TextIO, Tuple

import click


def key_flags(command: click.Command) -> Dict[str, Tuple[str, bool]]:
    """{'--cache': ('dlio_fast.cache', False), '--plots': ('dlio_fast.plots', True)}: the command's options
    generated from config keys (key_option), and whether each is a flag (no value of its own)."""
    out = {}
    for p in command.params:
        if isinstance(p, click.Option) and p.name and p.name.startswith("__key__"):
            key = p.name[len("__key__") :].replace("__", ".")
            out.update({flag: (key, p.is_flag) for flag in p.opts if flag.startswith("--")})
    return out


def translator(flags: Dict[str, Tuple[str, bool]]) -> Callable[[str], str]:
    """The rewrite of a piece of text: `--set K=V`, `--flag VALUE` and `--flag` (a key option of `run`) as
    the ++workload.K=V that sets the same key (a value the text leaves out stays a placeholder: V)."""
    names = "|".join(re.escape(f) for f in sorted(flags, key=len, reverse=True))
    option = re.compile(rf"(?<![\w-])({names})(?:[ =]([\w.:/+-]+))?(?![\w-])")
    setting = re.compile(r"(?<![\w-])--set[ =]([\w.]+)=(\S+)")

    def one(m: "re.Match[str]") -> str:
        key, is_flag = flags[m.group(1)]
        if is_flag:  # a flag takes no value: the word after it is the sentence's
            return f"++workload.{key}=true" + (f" {m.group(2)}" if m.group(2) else "")
        return f"++workload.{key}={m.group(2) or 'V'}"

    def rewrite(text: str) -> str:
        return option.sub(one, setting.sub(lambda m: f"++workload.{m.group(1)}={m.group(2)}", text))

    return rewrite


class Rewriting(io.TextIOBase):
    """A text stream that writes through `rewrite` to the stream it wraps (a terminal stays a terminal)."""

    def __init__(self, wrapped: TextIO, rewrite: Callable[[str], str]) -> None:
        self.wrapped, self.rewrite = wrapped, rewrite

    def write(self, s: str) -> int:
        self.wrapped.write(self.rewrite(s))
        return len(s)

    def flush(self) -> None:
        self.wrapped.flush()

    def isatty(self) -> bool:
        return self.wrapped.isatty()

    def fileno(self) -> int:
        return self.wrapped.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.wrapped, "encoding", "utf-8")
