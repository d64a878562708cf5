"""Progress reporting for long commands: a rich bar with rate and ETA on a terminal,
plain lines about every 10 % or every 30 s, whichever comes first, otherwise (logs, CI)."""

from __future__ import annotations

import math
import time
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class _RateColumn(ProgressColumn):
    """Items per second."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"– {self.unit}/s" if speed is None else f"{speed:.1f} {self.unit}/s", style="cyan")


class RichProgress:
    """Progress bar with count, rate, elapsed time and ETA."""

    def __init__(self, console: Console, unit: str = "img", width: int = 26) -> None:
        self._p = Progress(
            TextColumn(f"{{task.description:<{width}}}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(unit),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task: Any = None

    def start(self, total: int, description: str) -> None:
        self._p.start()
        self._task = self._p.add_task(description, total=total)

    def advance(self, n: int, description: str) -> None:
        self._p.update(self._task, advance=n, description=description)

    def stop(self) -> None:
        self._p.stop()


class LineProgress:
    """Progress as plain lines on stderr, about every 10 % and at least every ``every`` seconds."""

    def __init__(self, noun: str = "images", unit: str = "img", every: float = 30.0) -> None:
        self.noun, self.unit = noun, unit
        self.total = self.done = 0
        self.t0 = self.last = 0.0
        self.next_mark = 0.1
        self.every = every

    def start(self, total: int, description: str) -> None:
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.last = self.t0
        click.echo(f"evaluating {total} {self.noun} ...", err=True)

    def advance(self, n: int, description: str) -> None:
        self.done += n
        now = time.monotonic()
        if self.total and (self.done / self.total >= self.next_mark or now - self.last >= self.every):
            self.last = now
            dt = max(now - self.t0, 1e-9)
            rate = self.done / dt
            eta = (self.total - self.done) / rate if rate > 0 else math.inf
            click.echo(
                f"  {self.done}/{self.total} {self.noun} ({100 * self.done / self.total:.0f} %), "
                f"{rate:.1f} {self.unit}/s, ETA {eta:.0f} s ({description})",
                err=True,
            )
            self.next_mark = math.floor(self.done / self.total * 10 + 1) / 10

    def stop(self) -> None:
        return None


def progress_for(console: Console, noun: str = "images", unit: str = "img", width: int = 26) -> RichProgress | LineProgress:
    """A bar when ``console`` is a terminal, else plain lines."""
    return RichProgress(console, unit, width) if console.is_terminal else LineProgress(noun, unit)
