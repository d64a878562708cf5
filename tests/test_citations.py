"""What users read cites papers by authors and year, never by the numbers of a local folder of paper texts.

The shared folder of paper texts names its files 000-004; those numbers mean nothing to a reader of a help text,
an error, a report or a data file. Scanned here: the help of every command (and ``evaluate --benchmark NAME
--help`` for every benchmark), every text file shipped in the package (source, data, study configurations), the
README and docs/, and what ``list benchmarks`` and the zoo commands print.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from shiftbench.cli import cli, main

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "shiftbench"
FILE_NUMBER = re.compile(r"(?<![\d.,\w])(?<!\d )00[0-4](?![.,]?\d)(?!\w)")
"""000-004 standing alone: not inside a longer number (``0.003``, ``1.004``, ``50 000``, ``1,000``) or a name."""

LEGACY_TABLE_IDS = "id_aliases"
"""zoo_tables.json keeps the tables' former identifiers (``000:1``...) so that old commands still work; they are
accepted on input and never shown (checked below)."""


def _hits(text: str) -> list[str]:
    return [text[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ") for m in FILE_NUMBER.finditer(text)]


def test_the_pattern_finds_file_numbers_and_nothing_else() -> None:
    assert _hits("as 003 Section 4 states") and _hits("(000 Table 1)") and _hits("004's mapping") and _hits('"001:P"')
    for fine in ("0.003 -> 0.032", "1.004", "50 000 images", "1,000 classes", "n02708093", "x004", "0040"):
        assert not _hits(fine), fine


def _commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = [(path, group)]
    if isinstance(group, click.Group):
        for name in group.list_commands(click.Context(group)):
            sub = group.get_command(click.Context(group), name)
            if sub is not None:
                out += _commands(sub, (*path, name))
    return out


def test_no_help_text_cites_a_file_number() -> None:
    seen = 0
    for path, cmd in _commands(cli):
        ctx = click.Context(cmd, info_name=" ".join(("shiftbench", *path)))
        text = cmd.get_help(ctx)
        assert not _hits(text), (path, _hits(text))
        seen += 1
    assert seen > 20  # every command and sub-command


def test_no_benchmark_help_cites_a_file_number(capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.benchmarks import list_benchmarks

    for name in list_benchmarks():
        assert main(["evaluate", "--benchmark", name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Usage" in out and not _hits(out), (name, _hits(out))


def _shipped_text_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".toml", ".txt", ".md", ".tsv", ".csv"))


def test_no_shipped_file_cites_a_file_number() -> None:
    files = _shipped_text_files()
    assert any(p.name == "zoo_tables.json" for p in files) and any(p.suffix == ".toml" for p in files)
    for p in files:
        text = p.read_text(encoding="utf-8")
        if p.name == "zoo_tables.json":
            doc = json.loads(text)
            for t in doc["tables"].values():
                t.pop(LEGACY_TABLE_IDS, None)
            text = json.dumps(doc, ensure_ascii=False)
        assert not _hits(text), (str(p.relative_to(ROOT)), _hits(text)[:3])


@pytest.mark.parametrize("doc", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_no_doc_cites_a_file_number(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert not _hits(text), _hits(text)[:3]


def test_former_table_ids_are_accepted_and_never_shown(capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.zoo.tables import table

    doc = json.loads((PACKAGE / "data" / "zoo_tables.json").read_text(encoding="utf-8"))
    legacy = [a for t in doc["tables"].values() for a in t.get(LEGACY_TABLE_IDS, ()) if _hits(a)]
    assert legacy  # e.g. "000:1"
    for tid, t in doc["tables"].items():
        for a in t.get(LEGACY_TABLE_IDS, ()):
            assert table(a).id == tid  # old commands still find their table
    for args in (["zoo", "list", "--results-format", "json"], ["zoo", "list"], ["list", "benchmarks"],
                 ["list", "benchmarks", "--results-format", "json"], ["zoo", "info", "resnet50"]):
        assert main(args) == 0
        out = capsys.readouterr().out
        assert not _hits(out), (args, _hits(out)[:3])


def test_imagenet_d_evaluations_stored_before_the_notes_were_reworded_still_count(tmp_path: Path) -> None:
    """The mapping files' notes cite by authors now, which changed their digests; the earlier digests are kept
    (``previous_digests``), so evaluations stored with the earlier texts (the store fixtures') still count."""
    import shutil
    import sqlite3

    from shiftbench.domains.evaluate import stored_domain_errors
    from shiftbench.domains.mapping import MAPPINGS, load_mapping

    store = tmp_path / "s.sqlite"
    shutil.copyfile(Path(__file__).with_name("fixtures") / "stores" / "v3_all.sqlite", store)
    con = sqlite3.connect(store)
    stored = {json.loads(o).get("mapping_digest") for (o,) in con.execute(
        "SELECT options FROM evaluations WHERE benchmark = 'imagenet-d'")}
    con.close()
    shipped = {n: load_mapping(n) for n in MAPPINGS}
    previous = {d: n for n, m in shipped.items() for d in m.previous_digests}
    assert stored and not stored & {m.digest for m in shipped.values()} and stored <= set(previous)
    recs = stored_domain_errors(store)
    assert recs and {r["mapping"] for r in recs} == {previous[d] for d in stored}
