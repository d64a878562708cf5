"""Names from a store, a file or the command line print as typed: no rich markup, no terminal control sequences, and
every model name shows in the report's figures."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from shiftbench.cli import main
from shiftbench.cli._output import SafeConsole, one_line

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"
HOSTILE = "\x1b]0;PWN\x07\x1b[2J[red]x[/] [/] [link=http://evil]y"


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    s = tmp_path / "s.sqlite"
    shutil.copyfile(FIXTURES / "v3_all.sqlite", s)
    db = sqlite3.connect(s)
    db.execute("UPDATE models SET name=?", (HOSTILE,))
    db.commit()
    db.close()
    return s


@pytest.mark.parametrize("argv", [["results"], ["results", "--runs"], ["results", "--results-format", "csv"]])
def test_stored_names_print_as_typed(store: Path, capsys, monkeypatch, argv: list[str]) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # wide enough that the runs table does not wrap the name
    assert main([*argv, "--store", str(store)]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    if "csv" not in argv:  # CSV to a file or pipe is data (kept as stored); tables are for people
        assert "\x1b" not in text and "\x07" not in text
        assert "[red]x[/] [/] [link=http://evil]y" in text and "\\x1b]0;PWN\\x07" in text


def test_safe_console_never_reads_markup_or_sends_control_characters() -> None:
    import io

    buf = io.StringIO()
    c = SafeConsole(file=buf, width=200, force_terminal=False)
    c.print("[/] [bold]b[/bold] \x1b[31mred\x9b")
    assert buf.getvalue().strip() == "[/] [bold]b[/bold] \\x1b[31mred\\x9b"
    assert one_line("a\nb\x1b") == "a\\nb\\x1b"


def test_error_lines_escape_control_characters(tmp_path: Path, capsys) -> None:
    rc = main(["results", "--store", str(tmp_path / "a\nb\x1b[2J.sqlite")])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "\x1b" not in err


def test_every_model_name_shows_in_figures() -> None:
    from shiftbench.evaluation.figures import bar_chart, line_chart, published_scatter

    names = ["_hidden", "$\\frac{1}{$", "plain", "a$b$c"]
    figs = [
        line_chart({n: {1: 1.0 + i, 2: 2.0 + i} for i, n in enumerate(names)}, xlabel="x", ylabel="y"),
        bar_chart(["c1", "c2"], {n: {"c1": 1.0, "c2": 2.0} for n in names}, ylabel="y"),
        published_scatter([], [(n, 1.0 + i, 2.0) for i, n in enumerate(names)], xlabel="x", ylabel="y"),
    ]
    import io

    import matplotlib.pyplot as plt

    for fig in figs:
        fig.savefig(io.BytesIO(), format="png")  # mathtext would fail on an unbalanced $
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert len(labels) == len(names) and labels[0].strip() == "_hidden"
        plt.close(fig)
