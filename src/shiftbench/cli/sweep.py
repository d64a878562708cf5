"""``shiftbench sweep``: every model x benchmark into one store, finished pairs skipped, one comparison table.

:func:`sweep` is the loop (usable from Python); :data:`sweep_cmd` is the command. The command
takes every option of ``shiftbench evaluate`` (its parameters are copied from that command when
this module is imported, so an option added there is a sweep option too) and forwards them
unchanged to each benchmark; ``--model`` and ``--benchmark`` may be repeated. An option that
one of the benchmarks does not accept is refused by evaluate's rule before any work starts.

Resume: when a pair finishes and its report names its evaluations, a marker (the benchmark, the model and the options that decide
the results, hashed) goes into the store with the evaluations it made. A rerun skips marked
pairs without loading the model or reading data; an interrupted pair is resumed by its
benchmark from the stored predictions. ``--rerun`` ignores the markers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.table import Table

from ..benchmarks import get_benchmark
from ..evaluation.protocol import Benchmark, Progress, Report
from ..evaluation.store import ResultsStore, check_store_path, records_to_csv
from ._output import check_results_file, emit, progress
from .evaluate import evaluate_cmd, given_options, refuse_given

__all__ = ["SweepCell", "SweepResult", "sweep", "sweep_cmd", "headline_of", "evaluation_ids", "evaluate_params", "run_sweep_command", "NOT_RESULT_OPTIONS"]

NOT_RESULT_OPTIONS = frozenset(
    {"model", "store", "results_format", "results_file", "progress", "details", "rerun", "batch_size", "device"}
)
"""Options that change how an evaluation runs or prints, not what it measures: left out of the resume marker."""

UNITS = ("values as each benchmark stores them (shiftbench results --results-format json): errors, accuracies, "
         "CE, mCE, FR and mFR as fractions (1.0 = 100 %), mDE in %")


@dataclass
class SweepCell:
    """One model x benchmark of a sweep.

    Attributes:
        model: the ``--model`` value.
        benchmark: the benchmark's name.
        evaluations: the store's evaluation ids behind the numbers.
        skipped: True when the pair was finished before (nothing evaluated this time).
        headline: the benchmark's ``headline`` keys -> value (mean over its records when several, e.g. splits).
        records: the benchmark's stored records of these evaluations (``shiftbench results`` JSON).
    """

    model: str
    benchmark: str
    evaluations: list[int]
    skipped: bool
    headline: dict[str, float | None]
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def partial(self) -> list[str]:
        """Headline keys averaged over less than the benchmark's protocol (a record's ``mce_complete`` is false
        for mCE and relative mCE): not comparable with the papers."""
        if any(r.get("mce_complete") is False for r in self.records):
            return [k for k in self.headline if "mce" in k and self.headline[k] is not None]
        return []


@dataclass
class SweepResult:
    """Every cell of a sweep, in model-major order, and the store they are in."""

    store: Path
    models: list[str]
    benchmarks: list[str]
    cells: list[SweepCell]

    def columns(self) -> list[tuple[str, str]]:
        """(benchmark, headline key) of the comparison table, in benchmark order."""
        cols: list[tuple[str, str]] = []
        for b in self.benchmarks:
            keys = get_benchmark(b).headline or tuple(k for c in self.cells if c.benchmark == b for k in c.headline)
            cols += [(b, k) for k in dict.fromkeys(keys)]
        return cols

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": str(self.store),
            "units": UNITS,
            "models": self.models,
            "benchmarks": self.benchmarks,
            "columns": [f"{b} {k}" for b, k in self.columns()],
            "cells": [
                {"model": c.model, "benchmark": c.benchmark, "evaluations": c.evaluations, "skipped": c.skipped,
                 "headline": c.headline, "partial": c.partial}
                for c in self.cells
            ],
        }

    def report(self) -> Report:
        """The comparison as a :class:`Report` (table: models x headline metrics; JSON; CSV one line per cell)."""
        cols = self.columns()

        def table(console: Any) -> None:
            t = Table(title=f"Sweep: {len(self.models)} model(s) x {len(self.benchmarks)} benchmark(s)",
                      title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
            t.add_column("Model", no_wrap=True)
            for b, k in cols:
                t.add_column(f"{b}\n{k}", justify="right")
            by = {(c.model, c.benchmark): c for c in self.cells}
            for m in self.models:
                cells = []
                for b, k in cols:
                    c = by.get((m, b))
                    v = None if c is None else c.headline.get(k)
                    star = "*" if c is not None and k in c.partial else ""
                    cells.append("–" if v is None else f"{v:.4f}".rstrip("0").rstrip(".") + star)
                t.add_row(m, *cells)
            console.print(t)
            console.print(f"• Units: {UNITS}.", highlight=False)
            console.print(f"• Stored in {self.store} (`shiftbench results --store {self.store}` for the details).",
                          highlight=False)
            if any(c.partial for c in self.cells):
                console.print("• * over fewer corruptions or severities than the protocol: not comparable with the "
                              "papers' values.", highlight=False)
            skipped = [f"{c.model} x {c.benchmark}" for c in self.cells if c.skipped]
            if skipped:
                console.print(f"• Finished before, not evaluated again: {', '.join(skipped)}.", highlight=False)

        def csv() -> str:
            recs = [{"model": c.model, "benchmark": c.benchmark,
                     "evaluations": " ".join(str(e) for e in c.evaluations), "skipped": c.skipped,
                     **{k: c.headline.get(k) for b, k in cols if b == c.benchmark}} for c in self.cells]
            keys: list[str] = []
            for r in recs:
                keys += [k for k in r if k not in keys]
            return records_to_csv([{k: r.get(k) for k in keys} for r in recs])

        return Report(lambda: json.dumps(self.to_dict(), indent=1, default=str) + "\n", csv, table)


def evaluation_ids(doc: Any) -> list[int]:
    """Every integer under a key ``evaluation`` or ``evaluation_id`` in a benchmark's JSON report, in order."""
    out: list[int] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("evaluation", "evaluation_id") and isinstance(v, int) and not isinstance(v, bool):
                    if v not in out:
                        out.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return out


def headline_of(bench: Benchmark, records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The benchmark's headline keys over its records: the value, or the mean when several records have one."""
    keys = bench.headline or ()
    out: dict[str, float | None] = {}
    for k in keys:
        vals = [float(r[k]) for r in records if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
        out[k] = sum(vals) / len(vals) if vals else None
    return out


def _marker_key(bench: Benchmark, model: str, settings: Mapping[str, Any]) -> str:
    what = {k: v for k, v in sorted(settings.items()) if k not in NOT_RESULT_OPTIONS and v is not None}
    text = json.dumps({"benchmark": bench.name, "model": model, "settings": what}, sort_keys=True, default=str)
    return "sweep:" + hashlib.sha256(text.encode()).hexdigest()


def _records(bench: Benchmark, store: Path, settings: Mapping[str, Any], ids: list[int]) -> list[dict[str, Any]]:
    baseline = str(settings.get("baseline") or "alexnet")
    sec = bench.stored(store, model=None, baseline=baseline, evaluation=None)
    if sec is None or not isinstance(sec.value, list):
        return []
    return [r for r in sec.value if isinstance(r, dict) and r.get("evaluation") in ids and not r.get("reference")]


def sweep(
    models: Sequence[str],
    benchmarks: Sequence[str | Benchmark],
    options: Mapping[str, Any],
    *,
    given: Iterable[str] = (),
    progress_for: Callable[[Benchmark], Progress | None] | None = None,
    on_cell: Callable[[SweepCell], None] | None = None,
) -> SweepResult:
    """Evaluate every model on every benchmark into one store; finished pairs are skipped.

    Args:
        models: ``--model`` values (``zoo:NAME``, ``torchvision:ARCH``, a checkpoint for the structural benchmarks...).
        benchmarks: registered benchmark names (or instances).
        options: the ``evaluate`` options (parameter names, e.g. ``{"store": ..., "data": ..., "limit": 8}``);
            each benchmark gets the ones it accepts, unchanged. ``store`` is required.
        given: the option names the user set explicitly; one a benchmark does not accept is refused before
            any work with evaluate's message (a ``click.UsageError``: exit code 2 on the command line).
        progress_for: a progress display per benchmark (None: none).
        on_cell: called after each pair (e.g. to print a status line).

    Returns:
        A :class:`SweepResult` whose :meth:`~SweepResult.report` is the comparison table.
    """
    benches = [b if isinstance(b, Benchmark) else get_benchmark(b) for b in benchmarks]
    benches = list({b.name: b for b in benches}.values())
    models = list(dict.fromkeys(models))
    given = set(given)
    for b in benches:
        refuse_given(b, given)
    store = Path(options["store"])
    cells: list[SweepCell] = []
    rerun = bool(options.get("rerun"))
    for m in models:
        for b in benches:
            settings = {k: v for k, v in options.items() if b.accepts(k)}
            settings["model"] = m
            key = _marker_key(b, m, settings)
            done = None
            if not rerun and store.is_file():
                with ResultsStore(store) as db:
                    done = db.marker(key)
            if done is not None:
                ids = [int(i) for i in json.loads(done)["evaluations"]]
                skipped = True
            else:
                report = b.evaluate(settings, progress_for(b) if progress_for else None)
                ids = evaluation_ids(json.loads(report.json()))
                if ids:  # a pair that stored nothing (no evaluation named) is tried again next time
                    with ResultsStore(store) as db:
                        db.set_marker(key, json.dumps({"benchmark": b.name, "model": m, "evaluations": ids}))
                skipped = False
            recs = _records(b, store, settings, ids)
            cell = SweepCell(m, b.name, ids, skipped, headline_of(b, recs), recs)
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell)
    return SweepResult(store, models, [b.name for b in benches], cells)


def status_line(cell: SweepCell) -> None:
    """One stderr line per finished pair."""
    what = "finished before, skipped" if cell.skipped else "evaluated"
    evs = ", ".join(f"#{e}" for e in cell.evaluations) or "no evaluation id"
    click.echo(f"{cell.model} x {cell.benchmark}: {what} ({evs})", err=True)


def run_sweep_command(ctx: click.Context, models: Sequence[str], benchmarks: Sequence[str], kw: dict[str, Any]) -> SweepResult:
    """The shared body of ``sweep`` and ``reproduce``: refuse, check the outputs, run, handle Ctrl-C."""
    given = given_options(ctx)
    check_results_file(kw.get("results_file"))
    check_store_path(kw["store"])
    show = bool(kw.get("progress", True))
    try:
        return sweep(models, benchmarks, kw, given=given,
                     progress_for=(lambda b: progress(*b.items)) if show else None, on_cell=status_line)
    except KeyboardInterrupt:
        click.echo(f"\nInterrupted. Everything finished so far is stored in {kw['store']}; run the same command "
                   "again to resume.", err=True)
        raise


def evaluate_params(*leave_out: str) -> list[click.Parameter]:
    """``shiftbench evaluate``'s parameters except ``leave_out`` (the sweep forwards all the others)."""
    return [p for p in evaluate_cmd.params if p.name not in leave_out]


def _sweep(ctx: click.Context, **kw: Any) -> None:
    models, benchmarks = list(kw.pop("model")), list(kw.pop("benchmark"))
    result = run_sweep_command(ctx, models, benchmarks, kw)
    emit(result.report(), kw["results_format"], kw["results_file"])


sweep_cmd = click.Command(
    "sweep",
    callback=click.pass_context(_sweep),
    params=[
        click.Option(["--model"], multiple=True, required=True,
                     help="A model (as evaluate --model); repeat for several."),
        click.Option(["--benchmark"], multiple=True, required=True,
                     help="A registered benchmark (`shiftbench list benchmarks`); repeat for several."),
        *evaluate_params("model", "benchmark"),
    ],
    help="Evaluate every --model on every --benchmark into one store and print one comparison table.\n\n"
    "Takes every option of `shiftbench evaluate`, forwarded to each benchmark unchanged; an option a benchmark "
    "does not accept is refused before any work. Pairs finished before are skipped (a rerun does no work); "
    "--rerun evaluates them again.\n\n"
    "\b\nExample:\n  shiftbench sweep --model zoo:resnet18 --model zoo:resnet50 --benchmark imagenet-c "
    "--benchmark imagenet-noc --data /data/imagenet/val",
)
