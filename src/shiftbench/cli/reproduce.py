"""``shiftbench reproduce TABLE``: a published table's models from the zoo, evaluated on your data, side by side.

The table (``shiftbench zoo table`` lists them) names its rows' zoo entries and the benchmarks
its columns come from. Every row model the zoo has (``--models`` restricts them) has its weights
fetched first (offline: the zoo's error naming the URL and the cache path, or ``--skip-missing``
to go on without it), then all of them go through :func:`shiftbench.cli.sweep.sweep` with the
evaluate options given (so finished pairs are skipped on a rerun), and the measured values are
put next to the published ones with :func:`shiftbench.zoo.tables.compare`.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..benchmarks import get_benchmark
from ..errors import InvalidArgumentError
from ..evaluation.store import check_store_path
from ..evaluation.threads import model_threads
from ..zoo.errors import DownloadError
from ..zoo.registry import entries, fetch
from ..zoo.tables import compare, measured_from_records, render, table, tables
from ._output import check_results_file, emit_text
from .evaluate import given_options, refuse_given
from .sweep import SweepResult, evaluate_params, run_sweep_command

__all__ = ["reproduce_cmd", "plan", "measured_of"]


def plan(table_id: str, models: str | None) -> tuple[Any, list[str], list[str]]:
    """(the table, its row models the zoo has, those it lacks), restricted to ``models`` (comma-separated
    zoo names or row labels) when given.

    Raises:
        UnknownNameError: no such table.
        InvalidArgumentError: the table names no benchmark, or a ``--models`` name is none of its rows.
    """
    t = table(table_id)
    if not t.benchmarks:
        raise InvalidArgumentError("TABLE", table_id, "a table whose benchmarks are known: "
                                   + ", ".join(k for k, v in tables().items() if v.benchmarks))
    names = list(dict.fromkeys(r.model for r in t.rows))
    if models:
        by_label = {r.label.lower(): r.model for r in t.rows} | {r.model: r.model for r in t.rows}
        wanted = []
        for w in (x.strip() for x in models.split(",")):
            key = w[4:] if w.lower().startswith("zoo:") else w
            if not key:
                continue
            if key.lower() not in by_label and key not in by_label:
                raise InvalidArgumentError("--models", w, f"rows of {t.id}: {', '.join(names)}")
            wanted.append(by_label.get(key, by_label.get(key.lower())))
        names = [n for n in names if n in wanted]
    zoo = entries()
    return t, [n for n in names if n in zoo], [n for n in names if n not in zoo]


def measured_of(table_id: str, result: SweepResult) -> dict[str, dict[str, float]]:
    """Each model's measured values of the table's columns (in %) from the sweep's records."""
    out: dict[str, dict[str, float]] = {}
    for cell in result.cells:
        for model, metrics in measured_from_records(table_id, cell.benchmark, cell.records).items():
            out.setdefault(model, {}).update(metrics)
    return out


def _reproduce(ctx: click.Context, **kw: Any) -> None:
    table_id, models, skip_missing = kw.pop("table_id"), kw.pop("models"), kw.pop("skip_missing")
    threads = kw.pop("threads", "auto")
    t, in_zoo, not_in_zoo = plan(table_id, models)
    given = given_options(ctx)
    for b in t.benchmarks:  # evaluate's rule, before any download
        refuse_given(get_benchmark(b), given)
    check_results_file(kw.get("results_file"))
    check_store_path(kw["store"])
    missing: dict[str, str] = {}
    ready: list[str] = []
    for name in in_zoo:
        try:
            fetch(name, progress=bool(kw.get("progress", True)))
            ready.append(name)
        except DownloadError as e:
            if not skip_missing:
                raise
            missing[name] = str(e)
    if ready:
        with model_threads(threads):
            result = run_sweep_command(ctx, [f"zoo:{n}" for n in ready], list(t.benchmarks), kw)
    else:
        result = SweepResult(kw["store"], [], list(t.benchmarks), [])
    comparison = compare(t.id, measured_of(t.id, result))
    fmt = kw["results_format"]
    if fmt == "json":
        doc = json.loads(render(comparison, "json"))
        doc["benchmarks"] = list(t.benchmarks)
        doc["evaluated"] = [f"zoo:{n}" for n in ready]
        doc["not_in_zoo"] = not_in_zoo
        doc["not_fetched"] = missing
        doc["sweep"] = result.to_dict()
        text = json.dumps(doc, indent=1, default=str) + "\n"
    elif fmt == "csv":
        text = render(comparison, "csv")
    else:
        lines = [render(comparison, "table")]
        if not_in_zoo:
            lines.append(f"Not in the zoo (not evaluated): {', '.join(not_in_zoo)}.")
        for n, why in missing.items():
            lines.append(f"Not fetched, skipped (--skip-missing): zoo:{n}: {why}")
        if not ready:
            lines.append("No model of this table was evaluated.")
        text = "\n".join(lines) + "\n"
    if fmt != "table":
        for n in not_in_zoo:
            click.echo(f"{n}: not in the zoo (not evaluated)", err=True)
        for n, why in missing.items():
            click.echo(f"zoo:{n}: not fetched, skipped: {why}", err=True)
    emit_text(text, kw["results_file"])


reproduce_cmd = click.Command(
    "reproduce",
    callback=click.pass_context(_reproduce),
    params=[
        click.Argument(["table_id"], metavar="TABLE"),
        click.Option(["--models"], default=None,
                     help="Only these rows: comma-separated zoo names or row labels (default: every row the zoo has)."),
        click.Option(["--skip-missing"], is_flag=True,
                     help="Go on without the models whose weights cannot be fetched (offline), listing them."),
        *evaluate_params("model", "benchmark", "weights", "model_args"),
    ],
    help="Evaluate a published table's zoo models on your data and print published and measured values side by "
    "side with the differences.\n\n"
    "TABLE: hendrycks2018:1, hendrycks2018:2 (ImageNet-C; also imagenet-c:table1, imagenet-c:table2), "
    "laugros2020:3, laugros2020:4 (ImageNet-NOC), laugros2021:1 (ImageNet-C, border and obstruction), "
    "rusak2022:3 (ImageNet-D), hendrycks2019:P (ImageNet-P); "
    "`shiftbench zoo table` lists them with their papers. Takes the options of `shiftbench evaluate` (forwarded to the table's "
    "benchmarks unchanged); a rerun skips the evaluations already finished.\n\n"
    "\b\nExample:\n  shiftbench reproduce imagenet-c:table1 --data /data/imagenet/val --models resnet18,resnet50",
)
