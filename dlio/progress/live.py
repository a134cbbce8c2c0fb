"""The live display on a terminal: the run line above the phase's bar, laid out for the terminal's width
at each redraw (dlio.progress.figures.fit), with log lines printed above it (rich's Live)."""

from __future__ import annotations

import sys
from typing import Any, Iterator, Optional, TextIO

from rich.console import Console, ConsoleOptions
from rich.live import Live
from rich.text import Text

from dlio.progress.figures import Figures, fit


class LiveView:
    """One phase's display: started at the phase's begin, stopped at its end (the phase's last line
    kept, or erased when transient; the run line always erased: it is redrawn with the next phase)."""

    def __init__(self, stream: TextIO, width: Optional[int], transient: bool) -> None:
        self.console = Console(file=stream, force_terminal=True, highlight=False, width=width)
        self.fig: Optional[Figures] = None
        self.final = False
        self.live = Live(
            self,
            console=self.console,
            auto_refresh=False,
            transient=transient,
            redirect_stdout=_isatty(sys.stdout),
            redirect_stderr=False,
        )
        self.live.start()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        fig, width = self.fig, options.max_width
        if fig is None:
            return
        if fig.run is not None and not self.final:
            r = fig.run
            f = fit(f"{r.scope}: {r.unit_text()}", "", r.parts(), width, bar=False)
            yield _line(Text(f.label + ("  " + f.figures if f.figures else ""), style="dim"))
        f = fit(fig.label, fig.count(), fig.parts(), width)
        text = Text(f.label)
        filled = int(round(fig.fraction * f.bar))
        text.append(" ")
        text.append("━" * filled, style="green" if fig.fraction >= 1 else "cyan")
        if filled < f.bar:
            text.append("╺" + "━" * (f.bar - filled - 1), style="grey23")
        text.append(" " + f.count)
        if f.figures:
            text.append("  " + f.figures)
        yield _line(text)

    def show(self, fig: Figures) -> None:
        self.fig = fig
        self.live.refresh()

    def print(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def stop(self, last: Optional[Figures]) -> None:
        if last is not None:
            self.fig = last
        self.final = True  # the phase's line stays (unless transient), the run line goes
        self.live.stop()


def _line(text: Text) -> Text:
    text.no_wrap = True
    text.overflow = "crop"
    text.end = "\n"
    return text


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
