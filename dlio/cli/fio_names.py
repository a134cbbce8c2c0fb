"""fio's option names on `dlio-fast io`: each answered with dlio-fast's own spelling.

A fio user types `--iodepth 32 --numjobs 4 --output-format=json --time_based --direct=1`; click alone
would suggest the nearest name by spelling (`--iodepth` -> `--independent`). Each fio name below gets
one line naming the option that does the same here, e.g. "did you mean --qd (fio's --iodepth)?". They
are pointed at rather than taken silently: the values differ (fio's `--runtime=10` is seconds, its
`--size` is per job, `--ioengine=libaio` has no twin here) and a result must say what was run.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import click

# fio's name -> dlio-fast's spelling, or (spelling, what else to know), or a function of the value given
_ENGINES = {"psync": "posix", "sync": "posix", "pvsync": "posix", "pvsync2": "posix", "libaio": "io_uring"}


def _ioengine(value: Optional[str]) -> Tuple[str, str]:
    if value in ("io_uring", "mmap", "null", "posix"):
        return f"--engine {value}", ""
    if value in _ENGINES:
        return f"--engine {_ENGINES[value]}", ""
    return "--engine", "the engines here: posix, io_uring, mmap, null"


def _direct(value: Optional[str]) -> Tuple[str, str]:
    return ("--buffered", "") if value in ("0", "false") else ("--direct", "")


def _output_format(value: Optional[str]) -> Tuple[str, str]:
    if value and "json" in value:
        return "--json -", "or --json FILE"
    return "--json FILE or --csv FILE", "'-' for stdout"


FIO_NAMES: Dict[str, Any] = {
    "iodepth": "--qd",
    "numjobs": "--threads",
    "blocksize": "--bs",
    "readwrite": "--rw",
    "ioengine": _ioengine,
    "direct": _direct,
    "buffered": "--buffered",
    "output_format": _output_format,
    "time_based": ("--runtime DURATION", "a point runs that long, reading its files over and over"),
    "ramp_time": "--ramp",
    "rwmixwrite": ("--rwmixread", "the share of reads: 100 minus the writes'"),
    "filename": ("PATH", "the file goes on the command line: dlio-fast io FILE"),
    "directory": ("PATH", "the folder goes on the command line: dlio-fast io FOLDER"),
    "invalidate": ("--cache", "drop (the default for buffered points) or keep"),
    "name": ("nothing", "a point is named by its settings"),
}


def fio_hint(arg: str) -> Optional[str]:
    """The answer to one command-line word when it is fio's spelling (not dlio-fast's), else None."""
    if not arg.startswith("--"):
        return None
    name, eq, value = arg[2:].partition("=")
    key = name.replace("-", "_").lower()
    if key not in FIO_NAMES:
        return None
    if key in ("direct", "buffered") and not eq:
        return None  # dlio-fast's own flags
    ours = FIO_NAMES[key]
    if callable(ours):
        ours = ours(value if eq else None)
    spelling, note = ours if isinstance(ours, tuple) else (ours, "")
    shown = f"--{name}" + (f"={value}" if eq and key in ("direct", "ioengine", "output_format") else "")
    return f"unknown option {shown}; did you mean {spelling} (fio's {shown})?" + (f" ({note})" if note else "")


class FioNamesCommand(click.Command):
    """A command that answers fio's option names (FIO_NAMES) before click parses the rest."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[Any]:
        ours = {n for p in self.params for n in [*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())]}
        for arg in args:
            if arg == "--":
                break
            hint = None if arg in ours else fio_hint(arg)
            if hint is not None:
                raise click.UsageError(hint, ctx)
        return super().parse_args(ctx, args)
