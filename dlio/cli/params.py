"""Parameter types and shared options of the command line.

Options that set a config key are generated from the key's schema row (choices, aliases, bounds,
help), so a flag and the key it sets cannot disagree; their values reach the config as values.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import click
from click.shell_completion import CompletionItem

from dlio.base.units import parse_duration_ns, parse_size
from dlio.config.schema import KEYS_BY_PATH
from dlio.config.workloads import list_workloads
from dlio.progress import Progress


class SizeList(click.ParamType):
    """'4k,1m' -> [4096, 1048576]; repeated options add up."""

    name = "SIZE[,SIZE...]"

    def convert(self, value: Any, param: Any, ctx: Any) -> List[int]:
        if isinstance(value, list):
            return value
        try:
            return [parse_size(v) for v in str(value).split(",") if v.strip()]
        except ValueError as e:
            self.fail(str(e), param, ctx)


class IntList(click.ParamType):
    name = "N[,N...]"

    def __init__(self, lo: int = 1, hi: Optional[int] = None):
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: Any, ctx: Any) -> List[int]:
        if isinstance(value, list):
            return value
        out = []
        for v in (v.strip() for v in str(value).split(",")):
            if not v:
                continue
            try:
                n = int(v)
            except ValueError:
                self.fail(f"{v!r} is not a whole number", param, ctx)
            if n < self.lo or (self.hi is not None and n > self.hi):
                self.fail(f"{n} is out of range {self.lo}..{self.hi if self.hi else 'inf'}", param, ctx)
            out.append(n)
        return out


class ChoiceList(click.ParamType):
    name = "CHOICE[,CHOICE...]"

    def __init__(self, choices: Sequence[str], aliases: Optional[Dict[str, str]] = None):
        self.choices = list(choices)
        self.aliases = dict(aliases or {})  # other spellings taken for a choice (fio's rw = readwrite)

    def shell_complete(self, ctx: Any, param: Any, incomplete: str) -> list:
        """Complete the last item of a comma list: --engine posix,io<TAB> -> posix,io_uring."""
        head, _, last = incomplete.rpartition(",")
        prefix = head + "," if head else ""
        return [CompletionItem(prefix + c) for c in self.choices if c.startswith(last)]

    def convert(self, value: Any, param: Any, ctx: Any) -> List[str]:
        if isinstance(value, list):
            return value
        out = []
        for v in (v.strip() for v in str(value).split(",")):
            v = self.aliases.get(v, v)
            if v and v not in self.choices:
                self.fail(f"{v!r} is not one of {', '.join(self.choices)}", param, ctx)
            if v:
                out.append(v)
        return out


class _Parsed(click.ParamType):
    """A figure as people type it, parsed by ``parse`` (its ValueError is the option's message)."""

    parse: Callable[[str], int]

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return type(self).parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class Size(_Parsed):
    name = "SIZE"
    parse = staticmethod(parse_size)


class Duration(_Parsed):
    name = "DURATION"
    parse = staticmethod(parse_duration_ns)


class KeyChoice(click.Choice):
    """The values of an enum key; its other spellings (aliases) are accepted and not listed."""

    def __init__(self, choices: Sequence[str], aliases: Any):
        super().__init__(list(choices))
        self.aliases = dict(aliases)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return super().convert(self.aliases.get(value, value), param, ctx)


def flatten(lists: Sequence[Sequence[Any]]) -> List[Any]:
    """Repeated list options (`--bs 4k,1m --bs 64k`) as one list."""
    return [x for sub in lists for x in sub]


def key_option(path: str, *decls: str, help: Optional[str] = None) -> Callable:
    """A click option that sets the config key `path`, typed and bounded by its schema row; None
    when not given (the config's layers decide)."""
    k = KEYS_BY_PATH[path]
    text = help or k.help[:1].upper() + k.help[1:] + "."
    if k.type == "bool":
        return click.option(*decls, "__key__" + path.replace(".", "__"), is_flag=True, default=None, help=text)
    if k.type == "enum":
        ptype: Any = KeyChoice(k.choices, k.aliases)
        text += f" [default {k.default}]"
    elif k.type == "int":
        ptype = click.IntRange(None if k.lo is None else int(k.lo), None if k.hi is None else int(k.hi))
        text += f" [default {k.default}]"
    else:
        raise TypeError(f"no option type for {path} ({k.type})")
    return click.option(*decls, "__key__" + path.replace(".", "__"), type=ptype, default=None, help=text)


def key_values(kwargs: dict) -> dict:
    """Pop the key options' values out of a command's kwargs: {dotted key: value} of those given."""
    out = {}
    for name in [n for n in kwargs if n.startswith("__key__")]:
        value = kwargs.pop(name)
        if value is not None:
            out[name[len("__key__") :].replace("__", ".")] = value
    return out


def console_options(f: Callable) -> Callable:
    """-v / -q on every subcommand too (`dlio-fast run ... -v`), as on the root group."""

    def set_flag(name: str) -> Callable:
        def callback(ctx: click.Context, param: Any, value: bool) -> None:
            if value:
                ctx.ensure_object(dict)[name] = True

        return callback

    # applied in this order, so that --help lists -v first
    for short, name, text in (
        ("-q", "quiet", "No progress output on stderr."),
        ("-v", "verbose", "Per-step lines (DLIO's INFO level) after each epoch."),
    ):
        flag = click.option(short, f"--{name}", is_flag=True, expose_value=False, callback=set_flag(name), help=text)
        f = flag(f)
    return f


def progress_options(f: Callable) -> Callable:
    """--status-interval / --live-csv: progress off a terminal (batch logs), like fio's --status-interval."""

    def keep(name: str) -> Callable:
        def callback(ctx: click.Context, param: Any, value: Any) -> None:
            ctx.ensure_object(dict)[name] = value

        return callback

    f = click.option(
        "--live-csv",
        type=click.Path(dir_okay=False),
        default=None,
        expose_value=False,
        callback=keep("live_csv"),
        help="Append one CSV row of the live figures per status interval (and per phase end) to FILE.",
    )(f)
    f = click.option(
        "--status-interval",
        type=click.FloatRange(0),
        default=30.0,
        expose_value=False,
        callback=keep("status_interval"),
        show_default=True,
        help="Off a terminal (pipe, file, batch job): print a status line every N seconds; 0: none.",
    )(f)
    return f


def make_progress(ctx: click.Context) -> Any:
    """The Progress of this command's options (None with -q and no --live-csv)."""
    obj = ctx.ensure_object(dict)
    live_csv = obj.get("live_csv")
    if obj.get("quiet") and not live_csv:
        return None
    if live_csv:  # a path that cannot be written is refused now, not dropped row by row during the run
        from dlio.system.output import check_output_path

        check_output_path(live_csv)
    interval = obj.get("status_interval")
    progress = Progress(
        status_interval=30.0 if interval is None else interval, live_csv=live_csv, quiet=bool(obj.get("quiet"))
    )
    ctx.call_on_close(progress.close)  # the outputs closed (and what they dropped said) when the command ends
    return progress


def complete_workload(ctx: click.Context, param: Any, incomplete: str) -> list:
    """Shell completion of --workload: the built-in workloads' names."""
    return [n for n in list_workloads() if n.startswith(incomplete)]


def examples(*lines: str) -> str:
    """A command's epilog: 'Examples:' and one command per line, kept as written (click's \\b)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
