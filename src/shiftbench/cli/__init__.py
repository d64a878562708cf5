"""The ``shiftbench`` command line: one root group, module-level commands, one error and output path.

Every typed :class:`~shiftbench.errors.ShiftbenchError` prints one line on stderr
and no traceback. Exit codes: 2 for a bad argument (an option's value, a name,
an output path: :class:`~shiftbench.errors.InvalidArgumentError`,
:class:`~shiftbench.errors.ImageTypeError`, and click's usage errors), 1 for
input data or an environment that cannot be used (unreadable or refused files,
a failed write, a missing optional package), 130 for Ctrl-C.

Failures of the environment that are not shiftbench's own errors get the same one
line and exit code 1: an ``OSError`` (a name too long, a read-only or full file
system, a missing folder, ``/proc``), a damaged SQLite file, running out of memory,
a file that is not valid text. Control characters of names and paths in a message
are escaped (one line, nothing sent to the terminal as a command).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

import click

from ..errors import ImageTypeError, InvalidArgumentError, ShiftbenchError
from ..overlap.cli import overlap_group, select_cmd
from ..version import __version__
from ._output import trust_cache_flag
from .corrupt import corrupt_cmd, generate_group, list_cmd
from .evaluate import evaluate_cmd
from .report import report_cmd
from .reproduce import reproduce_cmd
from .results import results_cmd
from .sweep import sweep_cmd
from .zoo import zoo_group

__all__ = ["cli", "main"]


def _environment_message(e: BaseException) -> str | None:
    """One line for a failure of the environment (not a bug of shiftbench), or None."""
    import errno

    if isinstance(e, OSError):
        what = e.strerror or str(e) or type(e).__name__
        if e.errno == errno.ENAMETOOLONG:
            what = "file name too long (the system allows 255 bytes per name)"
        names = [str(n) for n in (e.filename, getattr(e, "filename2", None)) if n is not None]
        where = f" ({' -> '.join(repr(n) for n in names)})" if names else ""
        return f"{what}{where}"
    if isinstance(e, sqlite3.Error):
        return f"an SQLite file could not be used (damaged, locked or not a database): {e}"
    if isinstance(e, MemoryError):
        return "not enough memory for this input (use smaller images or batches)"
    if isinstance(e, UnicodeError):
        return f"a file is not valid UTF-8 text: {e}"
    return None


class _Group(click.Group):
    """Turns shiftbench's typed errors (and failures of the environment) into one clear line and exit code 2 or 1."""

    def invoke(self, ctx: click.Context) -> object:
        from ._output import one_line

        try:
            return super().invoke(ctx)
        except ShiftbenchError as e:
            err = click.ClickException(one_line(str(e)))
            err.exit_code = 2 if isinstance(e, (InvalidArgumentError, ImageTypeError)) else 1
            raise err from e
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except (OSError, MemoryError, UnicodeError, sqlite3.Error) as e:
            msg = _environment_message(e)
            err = click.ClickException(one_line(msg or str(e)))
            err.exit_code = 1
            raise err from e



@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shiftbench")
@trust_cache_flag
def cli() -> None:
    """shiftbench: measure how image classifiers hold up under distribution shift."""


@list_cmd.command("benchmarks")
@click.option("--results-format", type=click.Choice(["table", "json"]), default="table", show_default=True)
def list_benchmarks_cmd(results_format: str) -> None:
    """List the registered benchmarks: their paper (authors, title, venue, year), what they measure, their
    conditions, full evaluation set, data and options."""
    import json

    from rich.table import Table

    from ..benchmarks import get_benchmark, list_benchmarks
    from ._output import stdout_console

    docs = [get_benchmark(n).describe() for n in list_benchmarks()]
    if results_format == "json":
        click.echo(json.dumps(docs, indent=1))
        return
    t = Table(title="Benchmarks (shiftbench evaluate --benchmark NAME)", title_justify="left", header_style="bold")
    for col in ("name", "paper", "measures", "conditions", "full set", "data", "options"):
        t.add_column(col)
    for d in docs:
        t.add_row(d["name"], d["citation"] or "–", d["measures"], d["conditions"], d["full_set"] or "–",
                  "\n".join(d["sources"]), " ".join(d["options"]))
    stdout_console().print(t)


for _cmd in (list_cmd, corrupt_cmd, generate_group, evaluate_cmd, results_cmd, sweep_cmd, reproduce_cmd, report_cmd, overlap_group, select_cmd, zoo_group):
    cli.add_command(_cmd)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (so tests can call it)."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="shiftbench", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Exit as e:
        return int(e.exit_code or 0)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except SystemExit as e:
        code: Any = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
