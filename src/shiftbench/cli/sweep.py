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

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.table import Table

from ..benchmarks import get_benchmark
from ..errors import InvalidArgumentError, ShiftbenchError
from ..evaluation.model_sources import (
    format_model_spec,
    parse_model_args,
    split_model_spec,
)
from ..evaluation.protocol import Benchmark, Progress, Report, is_fraction_key
from ..evaluation.store import ResultsStore, check_store_path, marker_key, records_to_csv
from ..evaluation.threads import model_threads
from ._output import check_results_file, emit, progress
from .evaluate import evaluate_cmd, given_options, refuse_given

__all__ = ["SweepCell", "SweepModel", "SweepResult", "sweep", "read_sweep_file", "sweep_models", "one_line", "sweep_cmd", "headline_of", "evaluation_ids", "evaluate_params", "run_sweep_command", "NOT_RESULT_OPTIONS", "bench_options"]

NOT_RESULT_OPTIONS = frozenset(
    {"model", "model_args", "threads", "store", "results_format", "results_file", "progress", "details", "rerun", "batch_size", "device"}
)
"""Options that change how an evaluation runs or prints, not what it measures: left out of the resume marker."""

UNITS = ("values as each benchmark stores them (shiftbench results --results-format json): errors, accuracies, "
         "CE, mCE, FR and mFR as fractions (1.0 = 100 %), mDE in %")
TABLE_UNITS = "% (errors, accuracies, CE, mCE, FR and mFR; mDE is a percentage too)"


@dataclass
class SweepCell:
    """One model x benchmark of a sweep.

    Attributes:
        model: the ``--model`` value.
        benchmark: the benchmark's name.
        evaluations: the store's evaluation ids behind the numbers.
        skipped: True when the pair was finished before (nothing evaluated this time).
        error: why the pair failed (one line), None when it finished.
        headline: the benchmark's ``headline`` keys -> value (mean over its records when several, e.g. splits).
        records: the benchmark's stored records of these evaluations (``shiftbench results`` JSON).
    """

    model: str
    benchmark: str
    evaluations: list[int]
    skipped: bool
    headline: dict[str, float | None]
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

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

    @property
    def failed(self) -> list[SweepCell]:
        """The pairs that failed (the sweep went on past them)."""
        return [c for c in self.cells if c.error is not None]

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
                 "headline": c.headline, "partial": c.partial, "error": c.error}
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
                t.add_column(f"{b}\n{k}" + (" (%)" if is_fraction_key(k) else ""), justify="right")
            by = {(c.model, c.benchmark): c for c in self.cells}
            for m in self.models:
                cells = []
                for b, k in cols:
                    c = by.get((m, b))
                    v = None if c is None else c.headline.get(k)
                    star = "*" if c is not None and k in c.partial else ""
                    if c is not None and c.error is not None:
                        cells.append("failed")
                    else:
                        shown = None if v is None else (f"{100 * v:.2f}" if is_fraction_key(k) else f"{v:.2f}")
                        cells.append("–" if shown is None else shown + star)
                t.add_row(m, *cells)
            console.print(t)
            console.print(f"• Units: {TABLE_UNITS} (JSON and CSV: {UNITS}).", highlight=False)
            console.print(f"• Stored in {self.store} (`shiftbench results --store {self.store}` for the details).",
                          highlight=False)
            if any(c.partial for c in self.cells):
                console.print("• * over fewer corruptions or severities than the protocol: not comparable with the "
                              "papers' values.", highlight=False)
            for c in self.failed:
                console.print(f"• Failed: {c.model} x {c.benchmark}: {c.error}", highlight=False)
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
    """The resume marker of a pair: the benchmark, the model and every option that decides its results (the
    benchmark's whole Settings, defaults included, so a changed default is not taken for a finished pair)."""
    what = {k: v for k, v in sorted(settings.items()) if k not in NOT_RESULT_OPTIONS and v is not None}
    # keyed by content: weights, data folders and other files named by an option are digested with their names
    return marker_key("sweep", {"benchmark": bench.name, "model": model, "settings": what})


def _given_marker_key(bench: Benchmark, model: str, options: Mapping[str, Any]) -> str:
    """The marker key of stores written before the sweep built each benchmark's Settings: the options given (not
    None) only. A marker found under it is moved to :func:`_marker_key`'s."""
    return _marker_key(bench, model, {k: v for k, v in options.items() if bench.accepts(k)})


def bench_options(bench: Benchmark, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a benchmark gets from the sweep's: the common ones it accepts, and its Settings built the way
    ``evaluate`` builds them (unset ones from the Settings' defaults; a bad value is refused before any work)."""
    names = bench.Settings.names()
    own = bench.Settings.from_options({k: v for k, v in options.items() if k in names and v is not None},
                                      benchmark=bench.name)
    common = {k: v for k, v in options.items() if bench.accepts(k) and k not in names}
    return common | {n: getattr(own, n) for n in names}


def _finished(store: Path, key: str, legacy: str) -> str | None:
    """A pair's marker (a marker under the legacy key is moved to ``key``)."""
    if not store.is_file():
        return None
    with ResultsStore(store) as db:
        done = db.marker(key)
        if done is None and legacy != key:
            done = db.marker(legacy)
            if done is not None:
                db.set_marker(key, done)
                db.set_marker(legacy, None)
    return done


def _records(bench: Benchmark, store: Path, settings: Mapping[str, Any], ids: list[int]) -> list[dict[str, Any]]:
    baseline = str(settings.get("baseline") or "alexnet")
    sec = bench.stored(store, model=None, baseline=baseline, evaluation=None)
    if sec is None or not isinstance(sec.value, list):
        return []
    return [r for r in sec.value if isinstance(r, dict) and r.get("evaluation") in ids and not r.get("reference")]


@dataclass(frozen=True)
class SweepModel:
    """One model of a sweep with its own weights and arguments.

    Attributes:
        model: the model as ``evaluate --model`` names it (may carry ``?key=value,...``).
        weights: its local checkpoint (``evaluate --weights``), ``"none"``, or None for its own weights.
        args: arguments for its factory (``evaluate --model-args``).
        label: the name in the comparison table (default: the model with its arguments, and the
            checkpoint's file name).
    """

    model: str
    weights: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    @property
    def spec(self) -> str:
        """The model with its arguments folded in (what ``load_model`` reads)."""
        name, args = split_model_spec(self.model)
        return format_model_spec(name, {**args, **dict(self.args)})

    @property
    def display(self) -> str:
        if self.label:
            return self.label
        return self.spec + (f" [{Path(self.weights).name}]" if self.weights else "")


def _entries(models: Sequence[str | SweepModel]) -> list[SweepModel]:
    out: list[SweepModel] = []
    seen: set[tuple[str, str | None]] = set()
    for m in models:
        e = m if isinstance(m, SweepModel) else SweepModel(str(m))
        if (e.spec, e.weights) in seen:
            continue
        seen.add((e.spec, e.weights))
        out.append(e)
    labels = [e.display for e in out]
    for i, e in enumerate(out):  # two entries shown alike get #1, #2
        if labels.count(e.display) > 1:
            n = labels[: i + 1].count(e.display)
            out[i] = SweepModel(e.model, e.weights, e.args, f"{e.display} #{n}")
    return out


_MODEL_ARGUMENTS = ("model", "weights", "model_args")


def _model_failure(e: BaseException) -> bool:
    """The model itself cannot be loaded (its other benchmarks would fail the same way)."""
    return getattr(e, "argument", None) in _MODEL_ARGUMENTS or hasattr(e, "url") or isinstance(e, ImportError)


def one_line(e: BaseException) -> str:
    """An error as one line: shiftbench's own message, or the exception's type and first line."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return text if isinstance(e, ShiftbenchError) else f"{type(e).__name__}: {text}"


def sweep(
    models: Sequence[str | SweepModel],
    benchmarks: Sequence[str | Benchmark],
    options: Mapping[str, Any],
    *,
    given: Iterable[str] = (),
    progress_for: Callable[[Benchmark], Progress | None] | None = None,
    on_cell: Callable[[SweepCell], None] | None = None,
) -> SweepResult:
    """Evaluate every model on every benchmark into one store; finished pairs are skipped, failed ones recorded.

    Args:
        models: ``--model`` values (``zoo:NAME``, ``torchvision:ARCH``, a checkpoint for the structural
            benchmarks...) or :class:`SweepModel` entries with their own weights and arguments.
        benchmarks: registered benchmark names (or instances).
        options: the ``evaluate`` options (parameter names, e.g. ``{"store": ..., "data": ..., "limit": 8}``);
            each benchmark gets the ones it accepts, unchanged. ``store`` is required.
        given: the option names the user set explicitly; one a benchmark does not accept is refused before
            any work with evaluate's message (a ``click.UsageError``: exit code 2 on the command line).
        progress_for: a progress display per benchmark (None: none).
        on_cell: called after each pair (e.g. to print a status line).

    Returns:
        A :class:`SweepResult` whose :meth:`~SweepResult.report` is the comparison table. A pair that fails
        (weights offline, bad data, a broken model) is recorded with its error (:attr:`SweepResult.failed`)
        and the sweep goes on; a model that cannot be loaded is not tried on its other benchmarks.
    """
    benches = [b if isinstance(b, Benchmark) else get_benchmark(b) for b in benchmarks]
    benches = list({b.name: b for b in benches}.values())
    entries = _entries(models)
    given = set(given)
    for b in benches:
        refuse_given(b, given)
    store = Path(options["store"])
    cells: list[SweepCell] = []
    rerun = bool(options.get("rerun"))
    built = {b.name: bench_options(b, options) for b in benches}
    for entry in entries:
        model_error: str | None = None
        for b in benches:
            settings = dict(built[b.name])
            settings["model"] = entry.spec
            if entry.weights is not None:
                settings["weights"] = entry.weights
            if model_error is not None:
                cell = SweepCell(entry.display, b.name, [], False, {k: None for k in b.headline or ()}, [], model_error)
                cells.append(cell)
                if on_cell is not None:
                    on_cell(cell)
                continue
            key = _marker_key(b, entry.spec, settings)
            legacy = _given_marker_key(b, entry.spec, {**options, "weights": settings.get("weights")})
            done = None if rerun else _finished(store, key, legacy)
            if done is not None:
                ids = [int(i) for i in json.loads(done)["evaluations"]]
                skipped = True
            else:
                try:
                    report = b.evaluate(settings, progress_for(b) if progress_for else None)
                    ids = evaluation_ids(json.loads(report.json()))
                except (KeyboardInterrupt, click.exceptions.ClickException):
                    raise
                except Exception as e:  # noqa: BLE001 - a sweep goes on past a failing pair and names it
                    err = one_line(e)
                    if _model_failure(e):
                        model_error = err
                    cell = SweepCell(entry.display, b.name, [], False, {k: None for k in b.headline or ()}, [], err)
                    cells.append(cell)
                    if on_cell is not None:
                        on_cell(cell)
                    continue
                if ids:  # a pair that stored nothing (no evaluation named) is tried again next time
                    with ResultsStore(store) as db:
                        db.set_marker(key, json.dumps({"benchmark": b.name, "model": entry.spec,
                                                       "weights": entry.weights, "evaluations": ids}))
                skipped = False
            recs = _records(b, store, settings, ids)
            cell = SweepCell(entry.display, b.name, ids, skipped, headline_of(b, recs), recs)
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell)
    return SweepResult(store, [e.display for e in entries], [b.name for b in benches], cells)


def read_sweep_file(path: str | Path) -> tuple[list[SweepModel], list[str], dict[str, Any]]:
    """A TOML sweep file: its models (each with its own weights and arguments), benchmarks and evaluate options.

    ::

        benchmarks = ["imagenet-c", "imagenet-noc"]

        [options]                       # any `shiftbench evaluate` option
        data = "/data/imagenet/val"
        limit = 100

        [[models]]
        model = "zoo:resnet50"

        [[models]]
        model = "torchvision:resnet50"
        weights = "checkpoints/r50-augmix.pth"
        label = "resnet50 (our AugMix)"

        [[models]]
        model = "timm:resnet18"
        args = {drop_rate = 0.1}        # or "drop_rate=0.1"

    Raises:
        InvalidArgumentError: the file is missing, not TOML, or has a key outside this layout.
    """
    import tomllib

    p = Path(path).expanduser()
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidArgumentError("--sweep-file", str(path), "a readable TOML file", str(e)) from e
    except tomllib.TOMLDecodeError as e:
        raise InvalidArgumentError("--sweep-file", str(path), "a TOML file", f"Not TOML: {e}.") from e
    extra = sorted(set(doc) - {"models", "benchmarks", "options"})
    if extra:
        raise InvalidArgumentError("--sweep-file", str(path), "the keys benchmarks, options and [[models]]",
                                   f"Unknown key(s): {', '.join(extra)}.")
    models: list[SweepModel] = []
    for i, m in enumerate(doc.get("models", [])):
        if isinstance(m, str):
            m = {"model": m}
        if not isinstance(m, dict) or not isinstance(m.get("model"), str) or set(m) - {"model", "weights", "args", "label"}:
            raise InvalidArgumentError("--sweep-file", f"{path}: models[{i}]", "a table with model and optionally "
                                       "weights, args, label (e.g. {model = \"zoo:resnet50\"})")
        args = parse_model_args(m.get("args"), f"{path}: models[{i}].args")
        weights = m.get("weights")
        if weights is not None and str(weights).lower() != "none":
            wp = Path(str(weights)).expanduser()
            weights = str(wp if wp.is_absolute() else (p.parent / wp))
        models.append(SweepModel(m["model"], None if weights is None else str(weights), args, m.get("label")))
    benches = doc.get("benchmarks", [])
    if isinstance(benches, str):
        benches = [benches]
    if not isinstance(benches, list) or not all(isinstance(b, str) for b in benches):
        raise InvalidArgumentError("--sweep-file", f"{path}: benchmarks", "a list of benchmark names")
    options = doc.get("options", {})
    if not isinstance(options, dict):
        raise InvalidArgumentError("--sweep-file", f"{path}: options", "a table of evaluate options")
    return models, list(benches), {k.replace("-", "_"): v for k, v in options.items()}


def status_line(cell: SweepCell) -> None:
    """One stderr line per finished pair."""
    if cell.error is not None:
        click.echo(f"{cell.model} x {cell.benchmark}: FAILED: {cell.error}", err=True)
        return
    what = "finished before, skipped" if cell.skipped else "evaluated"
    evs = ", ".join(f"#{e}" for e in cell.evaluations) or "no evaluation id"
    click.echo(f"{cell.model} x {cell.benchmark}: {what} ({evs})", err=True)


def run_sweep_command(ctx: click.Context, models: Sequence[str | SweepModel], benchmarks: Sequence[str],
                      kw: dict[str, Any], given: Iterable[str] | None = None) -> SweepResult:
    """The shared body of ``sweep`` and ``reproduce``: refuse, check the outputs, run, handle Ctrl-C."""
    given = given_options(ctx) if given is None else set(given)
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


def _paired(values: Sequence[Any], n: int, option: str) -> list[Any]:
    if not values:
        return [None] * n
    if len(values) == 1:
        return list(values) * n
    if len(values) != n:
        raise InvalidArgumentError(option, f"{len(values)} values", f"one value (for every --model) or one per --model ({n})")
    return list(values)


def sweep_models(models: Sequence[str], weights: Sequence[str], model_args: Sequence[str]) -> list[SweepModel]:
    """The command line's models: ``--weights`` and ``--model-args`` given once apply to every ``--model``,
    given once per ``--model`` they pair with them in order."""
    ws = _paired(weights, len(models), "--weights")
    args = _paired(model_args, len(models), "--model-args")
    return [SweepModel(m, w, parse_model_args(a, "--model-args")) for m, w, a in zip(models, ws, args)]


def _sweep(ctx: click.Context, **kw: Any) -> None:
    file = kw.pop("sweep_file")
    models = sweep_models(list(kw.pop("model")), list(kw.pop("weights")), list(kw.pop("model_args")))
    benchmarks = list(kw.pop("benchmark"))
    given = given_options(ctx) - {"model", "weights", "model_args", "benchmark", "sweep_file", "threads"}
    if file is not None:
        f_models, f_benches, f_options = read_sweep_file(file)
        models = f_models + models
        benchmarks = f_benches + benchmarks
        params = {p.name: p for p in ctx.command.params}
        for k, v in f_options.items():
            if k not in params or k in ("model", "benchmark", "weights", "model_args", "sweep_file"):
                raise InvalidArgumentError("--sweep-file", f"{file}: options.{k}", "options of `shiftbench evaluate` "
                                           "other than model, weights, model-args and benchmark (those go in [[models]] "
                                           "and benchmarks)")
            if k not in given:  # the command line wins
                kw[k] = params[k].type_cast_value(ctx, v)
                given.add(k)
    if not models:
        raise click.UsageError("Give at least one --model (or [[models]] in --sweep-file).")
    if not benchmarks:
        raise click.UsageError("Give at least one --benchmark (or benchmarks in --sweep-file).")
    with model_threads(kw.pop("threads", "auto")):
        result = run_sweep_command(ctx, models, benchmarks, kw, given)
    emit(result.report(), kw["results_format"], kw["results_file"])
    if result.failed:
        names = "; ".join(f"{c.model} x {c.benchmark}" for c in result.failed)
        raise click.ClickException(f"{len(result.failed)} of {len(result.cells)} pair(s) failed: {names} "
                                   "(the reasons are above; the table shows the others)")


sweep_cmd = click.Command(
    "sweep",
    callback=click.pass_context(_sweep),
    params=[
        click.Option(["--model"], multiple=True,
                     help="A model (as evaluate --model); repeat for several."),
        click.Option(["--weights"], multiple=True,
                     help="A local checkpoint (as evaluate --weights): once for every --model, or once per --model "
                     "in the same order ('none': random weights)."),
        click.Option(["--model-args"], multiple=True, metavar="KEY=VALUE,...",
                     help="Arguments for the model's factory (as evaluate --model-args): once for every --model, or "
                     "once per --model in the same order."),
        click.Option(["--benchmark"], multiple=True,
                     help="A registered benchmark (`shiftbench list benchmarks`); repeat for several."),
        click.Option(["--sweep-file"], type=click.Path(dir_okay=False), default=None,
                     help="A TOML file listing benchmarks, [options] and [[models]] (each with its own model, "
                     "weights, args and label); command-line models and benchmarks are added, options override."),
        *evaluate_params("model", "benchmark", "weights", "model_args"),
    ],
    help="Evaluate every --model on every --benchmark into one store and print one comparison table.\n\n"
    "Takes every option of `shiftbench evaluate`, forwarded to each benchmark unchanged; an option a benchmark "
    "does not accept is refused before any work. Pairs finished before are skipped (a rerun does no work); "
    "--rerun evaluates them again. A pair that fails (weights not available offline, a broken model) is "
    "reported and the sweep goes on; the table shows the others and the exit status is 1.\n\n"
    "\b\nExample:\n  shiftbench sweep --model zoo:resnet18 --model zoo:resnet50 --benchmark imagenet-c "
    "--benchmark imagenet-noc --data /data/imagenet/val",
)
