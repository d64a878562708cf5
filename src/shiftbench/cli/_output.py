"""The command line's one output writer and one progress display.

Every benchmark hands a :class:`~shiftbench.evaluation.protocol.Report` (or
``results`` sections); :func:`emit` writes it as a table, JSON or CSV to stdout
or ``--results-file``. :func:`check_results_file` runs before any work starts,
so an unwritable destination fails at once, not after an hour of evaluation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ..errors import InvalidArgumentError
from ..evaluation.protocol import Report
from ..progress import progress_for

__all__ = ["FORMATS", "TABLE_WIDTH", "check_results_file", "emit", "emit_table", "emit_text", "progress", "stdout_console", "UserError", "one_line", "safe_markup", "SafeConsole", "printable", "trust_cache_option", "trust_cache_flag"]

FORMATS = ("table", "json", "csv")
TABLE_WIDTH = 160


def _trust_cache(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """``--trust-cache``: set ``SHIFTBENCH_TRUST_CACHE`` for this command (what the zoo reads), as it was afterwards."""
    if value:
        before = os.environ.get("SHIFTBENCH_TRUST_CACHE")
        os.environ["SHIFTBENCH_TRUST_CACHE"] = "1"

        def restore() -> None:
            if before is None:
                os.environ.pop("SHIFTBENCH_TRUST_CACHE", None)
            else:
                os.environ["SHIFTBENCH_TRUST_CACHE"] = before

        ctx.find_root().call_on_close(restore)
    return value


_TRUST_CACHE: dict[str, Any] = {
    "is_flag": True, "default": False, "expose_value": False, "is_eager": True, "callback": _trust_cache,
    "help": "Use cached zoo weights even when their checksum differs from the published one (default: refused, "
    "naming both digests and the file). Also SHIFTBENCH_TRUST_CACHE=1.",
}


def trust_cache_option() -> click.Option:
    """The ``--trust-cache`` option as a parameter (accepted by the root command, ``evaluate``, ``sweep``,
    ``reproduce`` and the zoo commands alike)."""
    return click.Option(["--trust-cache"], **_TRUST_CACHE)


trust_cache_flag = click.option("--trust-cache", **_TRUST_CACHE)
"""``--trust-cache`` as a decorator (see :func:`trust_cache_option`)."""


class UserError(click.UsageError):
    """One line naming the option, the value and what is allowed; exit code 2, no usage text."""

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control or format character (escape sequences, BEL, bidi overrides, ...) except those in
    ``keep`` written as a Python escape (``\\x1b``): it sends nothing to a terminal but characters."""
    return "".join(ch if ch.isprintable() or ch == " " or ch in keep else repr(ch)[1:-1] for ch in str(text))


def one_line(text: str) -> str:
    """``text`` as one printable line: newlines and every other control character escaped (:func:`printable`)."""
    return printable(text)


class SafeConsole(Console):
    """The command line's rich console: text is never read as markup (a stored name ``[red]`` or ``[/]`` prints as
    typed) and control characters other than newlines and tabs are escaped (no terminal escape sequences from a
    store, a file name or user input)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["markup"] = False
        return super().render_str(printable(text, "\n\t"), **kwargs)


def safe_markup(value: Any) -> str:
    """A value from a store, a file name or user input made safe for rich: control characters escaped
    (:func:`one_line`) and markup brackets escaped, so ``[red]`` or ``[link=...]`` print as typed."""
    from rich.markup import escape

    return escape(one_line(str(value)))


def stdout_console() -> Console:
    """A console on stdout, at least :data:`TABLE_WIDTH` wide when not a terminal."""
    c = SafeConsole()
    if not c.is_terminal or c.width < TABLE_WIDTH:
        c = SafeConsole(width=max(TABLE_WIDTH, c.width) if not c.is_terminal else c.width)
    return c


def check_results_file(path: str | None, option: str = "--results-file") -> None:
    """Fail now if ``path`` cannot be written: its folder must exist and be writable, and it must not be a folder."""
    if not path:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise InvalidArgumentError(option, path, "a file path, not a folder")
    if not parent.is_dir():
        raise InvalidArgumentError(option, path, "a file in an existing folder", f"Folder {str(parent)!r} does not exist.")
    if (p.exists() and not os.access(p, os.W_OK)) or not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgumentError(option, path, "a writable file path", "Permission denied.")


def _write(path: str, text: str) -> None:
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    click.echo(f"Results written to {path}", err=True)


def emit_text(text: str, results_file: str | None) -> None:
    """Text to stdout, or to ``results_file`` (written whole, then renamed into place)."""
    if results_file:
        _write(results_file, text)
    else:
        click.echo(printable(text, "\n\t\r") if _stdout_is_terminal() else text, nl=False)


def _stdout_is_terminal() -> bool:
    import sys

    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def emit(report: Report, fmt: str, results_file: str | None) -> None:
    """Write a report in ``fmt`` (table, json, csv) to stdout or ``results_file``."""
    for line in report.status:
        click.echo(printable(line, "\n\t"), err=True)
    if fmt == "json":
        emit_text(report.json(), results_file)
    elif fmt == "csv":
        emit_text(report.csv(), results_file)
    else:
        emit_table(report.table, results_file)


def emit_table(draw: Any, results_file: str | None) -> None:
    """Tables drawn by ``draw(console)`` on stdout, or as plain text in ``results_file``."""
    if not results_file:
        draw(stdout_console())
        return
    with open(os.devnull, "w", encoding="utf-8") as sink:
        c = SafeConsole(record=True, width=TABLE_WIDTH, file=sink)
        draw(c)
    _write(results_file, c.export_text())


def progress(noun: str = "images", unit: str = "img") -> Any:
    """The one progress display: a rich bar with rate and ETA on a terminal, lines about every 10 % otherwise."""
    return progress_for(SafeConsole(stderr=True), noun, unit)
