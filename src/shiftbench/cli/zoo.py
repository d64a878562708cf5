"""``shiftbench zoo``: list the published models, fetch their weights, show the papers' tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ..errors import InvalidArgumentError
from ..zoo import tables as published
from ..zoo.registry import entries, fetch, get, weights_path
from ._output import stdout_console, trust_cache_flag


def _numbers(name: str) -> str:
    """The entry's published headline numbers: 'rusak2022:3 mDE 85.4, IN-C 65.3; ...'."""
    parts = []
    for t, r in published.published_for(name):
        shown = [
            f"{c.label} {r.values[c.key]:g}"
            for c in t.columns
            if c.metric in ("mce", "relative_mce", "mde", "mfr", "mt5d") or c.key == "error"
            and r.values.get(c.key) is not None
        ]
        parts.append(f"{t.id} {', '.join(shown)}")
    return "; ".join(parts)


@click.group("zoo")
@trust_cache_flag
def zoo_group() -> None:
    """Published robustness models (load with --model zoo:NAME) and the papers' tables."""


@zoo_group.command("list")
@click.option("--results-format", type=click.Choice(["table", "json"]), default="table", show_default=True)
def list_command(results_format: str) -> None:
    """The zoo's models with their published numbers and whether their weights are cached."""
    rows = []
    for name, e in sorted(entries().items()):
        rows.append(
            {
                "model": f"zoo:{name}",
                "arch": e.arch,
                "checksum": e.checksum,
                "cached": weights_path(e).is_file(),
                "published": _numbers(name),
                "description": e.description,
            }
        )
    if results_format == "json":
        click.echo(json.dumps(rows, indent=1))
        return
    t = Table(title="shiftbench model zoo (published numbers in %, by table: first author and year : table)")
    t.add_column("model", no_wrap=True)
    t.add_column("sha256", no_wrap=True)
    t.add_column("cached", no_wrap=True)
    t.add_column("published", overflow="fold")
    for r in rows:
        sha = get(r["model"]).sha256_prefix or "none published"
        t.add_row(r["model"], sha, "yes" if r["cached"] else "no", r["published"] or "-")
    stdout_console().print(t)


@zoo_group.command("info")
@click.argument("name")
def info_command(name: str) -> None:
    """Everything the zoo knows about one model: source, URL, checksum, preprocessing, published rows."""
    e = get(name)
    p = e.preprocessing
    lines = [
        f"zoo:{e.name}: {e.description}",
        f"  architecture   {e.arch}",
        f"  weights        {e.url}",
        *([f"  download page  {e.page}"] if e.page else []),
        f"  checksum       {e.checksum}" + (f" ({e.checksum_note})" if e.checksum_note else ""),
        f"  cache path     {weights_path(e)}" + (" (present)" if weights_path(e).is_file() else " (not downloaded)"),
        f"  preprocessing  {p.size} px, mean {list(p.mean)}, std {list(p.std)}, input / {p.scale:g}, "
        f"{p.interpolation}, centre crop {p.crop_fraction:g}",
        f"  source         {e.source}",
        *([f"  licence        {e.licence}"] if e.licence else []),
    ]
    for t, r in published.published_for(e.name):
        vals = ", ".join(f"{c.label} {r.values[c.key]:g}" for c in t.columns if r.values.get(c.key) is not None)
        lines.append(f"  {t.id} row '{r.label}' ({t.unit}): {vals}")
        lines.append(f"      from {t.citation}")
    click.echo("\n".join(lines))


@zoo_group.command("fetch")
@click.argument("names", nargs=-1, required=True)
@trust_cache_flag
def fetch_command(names: tuple[str, ...]) -> None:
    """Download and verify the weights of NAMES into the cache (nothing else)."""
    for n in names:
        path = fetch(n, progress=True)
        click.echo(f"zoo:{get(n).name}: {path}")


@zoo_group.command("table")
@click.argument("table_id", required=False)
@click.option(
    "--measured",
    "measured_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Values to show beside the published ones: a JSON report of `shiftbench evaluate --results-format json`, "
    'or {"MODEL": {"COLUMN": value in %}}. Repeat for several models.',
)
@click.option(
    "--results-format", "fmt", type=click.Choice(list(published.FORMATS)), default="table", show_default=True
)
def table_command(table_id: str | None, measured_files: tuple[Path, ...], fmt: str) -> None:
    """A published table (e.g. rusak2022:3 or imagenet-d:table3), with measured values and differences when
    --measured is given.

    Without TABLE_ID: the list of tables, their papers and their column keys with each column's metric.
    """
    if table_id is None:
        for t in published.tables().values():
            also = f" (also {', '.join(t.aliases)})" if t.aliases else ""
            click.echo(f"{t.id}{also}  {t.title}\n    {t.citation}\n    columns: "
                       + ", ".join(f"{c.key} [{c.metric}]" for c in t.columns))
        return
    values: dict[str, Any] = {}
    for path in measured_files:
        values.update(_read_measured(path, table_id))
    click.echo(published.render(published.compare(table_id, values), fmt))


def _read_measured(path: Path, table_id: str) -> dict[str, Any]:
    allowed = "an evaluate JSON report or a JSON object of model -> {column: value in %}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidArgumentError("measured", str(path), allowed) from e
    if isinstance(doc, dict) and "rows" in doc and "units" in doc:
        return published.measured_from_report(doc, table_id)
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise InvalidArgumentError("measured", str(path), allowed)
    return doc
