"""``shiftbench results``: every registered benchmark's stored evaluations, as leaderboards, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import click

from ..benchmarks import get_benchmark, list_benchmarks
from ..evaluation.protocol import Section
from ..evaluation.report import to_json
from ..evaluation.store import DEFAULT_STORE, EXPORT_TABLES, ResultsStore, records_to_csv
from ._output import FORMATS, check_results_file, emit_table, emit_text

__all__ = ["results_cmd", "stored_runs"]


def stored_runs(store: Path, benchmarks: list[str], *, model: str | None, evaluation: int | None) -> list[dict[str, Any]]:
    """Every stored run of the benchmarks' evaluations, one record each (one query over the store's runs)."""
    out: list[dict[str, Any]] = []
    with ResultsStore(store, create=False) as db:
        for e in db.evaluations_of(benchmarks, model, evaluation):
            for r in db.runs(e.id):
                out.append({"benchmark": e.benchmark, "evaluation": e.id, "run": r.id, "model": e.model,
                            "data": e.source_kind, "condition": r.condition, "level": r.level, "frames": r.frames,
                            "status": r.status, "done": r.n_predicted + r.n_skipped, "expected": r.n_expected,
                            "skipped": r.n_skipped, "top1_error": r.top1_error})
    return out


def _runs_table(console: Any, store: str, recs: list[dict[str, Any]]) -> None:
    from rich.table import Table

    t = Table(title=f"Runs in {store}", title_justify="left", header_style="bold")
    for col in ("Benchmark", "Eval", "Run", "Model", "Data", "Condition", "Level", "Frames", "Status", "Done",
                "Skipped", "Error (%)"):
        t.add_column(col)
    for r in recs:
        t.add_row(r["benchmark"], str(r["evaluation"]), str(r["run"]), r["model"], r["data"], r["condition"],
                  str(r["level"]), str(r["frames"]), r["status"], f"{r['done']}/{r['expected']}", str(r["skipped"]),
                  "–" if r["top1_error"] is None else f"{100 * r['top1_error']:.1f}")
    console.print(t)


def _merged_csv(sections: list[tuple[str, Section]]) -> str:
    """One CSV for several benchmarks: a ``benchmark`` column, then the union of their columns."""
    rows: list[dict[str, Any]] = []
    fields: list[str] = ["benchmark"]
    for name, sec in sections:
        for rec in csv.DictReader(io.StringIO(sec.csv())):
            rows.append({"benchmark": name, **rec} if "benchmark" not in rec else rec)
            fields += [k for k in rec if k not in fields]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


@click.command("results")
@click.option("--store", type=click.Path(dir_okay=False), default=str(DEFAULT_STORE), show_default=True)
@click.option("--model", default=None, help="Only models whose name contains this text.")
@click.option("--benchmark", "benchmarks", default=None, help="Only these benchmarks (comma-separated). Default: all.")
@click.option("--baseline", default="alexnet", show_default=True,
              help="CE baseline: alexnet, none, a model name in the store, eval:<id>, or a .json file.")
@click.option("--runs", is_flag=True, help="List the stored runs with their status instead of the leaderboard.")
@click.option("--export", type=click.Path(dir_okay=False), default=None,
              help="Write stored records to a .csv or .json file (see --table).")
@click.option("--table", type=click.Choice(EXPORT_TABLES), default="runs", show_default=True,
              help="What --export writes: one record per run, or per image (top-5 predictions and label); "
              "p_runs / p_videos: the same for ImageNet-P (per video: the top-5 list of every frame).")
@click.option("--evaluation", type=int, default=None, help="Only this evaluation id (ImageNet-C/P evaluations).")
@click.option("--results-format", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--results-file", type=click.Path(dir_okay=False), default=None)
def results_cmd(
    store: str,
    model: str | None,
    benchmarks: str | None,
    baseline: str,
    runs: bool,
    export: str | None,
    table: str,
    evaluation: int | None,
    results_format: str,
    results_file: str | None,
) -> None:
    """List and compare stored evaluations of every benchmark: leaderboards by mCE, mFR, mDE."""
    check_results_file(results_file)
    check_results_file(export, "--export")
    with ResultsStore(store, create=False) as db:  # opens read-only (upgraded in memory), or says why not
        if evaluation is not None:
            db.evaluation(evaluation)  # an id that is not stored: an error, not an empty listing
        if export:
            n = db.export(export, table=table, evaluation_id=evaluation)
            click.echo(f"Exported {n} {table} record(s) to {export}", err=True)
            return
    names = list_benchmarks() if not benchmarks else [get_benchmark(b).name for b in benchmarks.split(",") if b.strip()]
    path = Path(store)
    if runs:
        recs = stored_runs(path, names, model=model, evaluation=evaluation)
        if not recs:
            click.echo(f"No stored runs in {store}.", err=True)
        elif results_format == "json":
            emit_text(json.dumps(recs, indent=1, default=str) + "\n", results_file)
        elif results_format == "csv":
            emit_text(records_to_csv(recs), results_file)
        else:
            emit_table(lambda console: _runs_table(console, store, recs), results_file)
        return
    sections = [(n, s) for n in names
                if (s := get_benchmark(n).stored(path, model=model, baseline=baseline, evaluation=evaluation))]
    if not sections:
        click.echo(f"No stored evaluations in {store}" + (f" matching {model!r}" if model else "") + ".", err=True)
        return
    if results_format == "json":
        doc = json.loads(to_json([], [f"Store: {store}"]))
        for _, sec in sections:
            doc[sec.key] = sec.value
        emit_text(json.dumps(doc, indent=1, default=str) + "\n", results_file)
    elif results_format == "csv":
        emit_text(sections[0][1].csv() if len(sections) == 1 else _merged_csv(sections), results_file)
    else:

        def draw(console: Any) -> None:
            for _, sec in sections:
                sec.table(console)

        emit_table(draw, results_file)
