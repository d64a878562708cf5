"""The ``shiftbench`` command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from . import __version__
from .errors import ImageTypeError, InvalidArgumentError, ShiftbenchError


class _Group(click.Group):
    """Turns shiftbench's typed errors into one clear line and exit code 2."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ShiftbenchError as e:
            err = click.ClickException(str(e))
            if isinstance(e, (InvalidArgumentError, ImageTypeError)):
                err.exit_code = 2  # a bad argument, as click's usage errors (data problems stay 1)
            raise err from e


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shiftbench")
def cli() -> None:
    """shiftbench: measure how image classifiers hold up under distribution shift."""


def _register_subcommands() -> None:
    from . import _cli_corrupt

    _cli_corrupt.register(cli)
    from .zoo import cli as _zoo_cli  # the model zoo: `shiftbench zoo list|info|fetch|table`

    _zoo_cli.register(cli)
    try:
        from .overlap import cli as _overlap_cli
    except ImportError:  # overlap package not present in this build
        pass
    else:
        _overlap_cli.register(cli)
    try:
        from .evaluation import cli_commands as _eval_cli
    except ImportError:  # evaluation package not present in this build
        return
    _eval_cli.register(cli)


_register_subcommands()


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
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
