"""The benchmark protocol: what a benchmark declares so that one command line, one store and one report writer serve it.

This module names no benchmark. A benchmark is one module (see
``shiftbench.benchmarks``) holding one :class:`Benchmark` subclass: its name
and title, the ``evaluate`` options it accepts beyond the common ones, its
conditions, data sources and per-item records (described for
``shiftbench list benchmarks``), how it evaluates (:meth:`Benchmark.evaluate`)
and how it lists what is stored (:meth:`Benchmark.stored`). Both return a
:class:`Report`; the command line decides the format (table, JSON, CSV) and
where it goes, the same way for every benchmark.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "is_fraction_key",
    "COMMON_OPTIONS",
    "BENCHMARK_OPTIONS",
    "Benchmark",
    "CountCallback",
    "Progress",
    "Report",
    "Section",
    "accepted_list",
]

COMMON_OPTIONS: tuple[str, ...] = (
    "model",
    "weights",
    "data",
    "batch_size",
    "device",
    "store",
    "limit",
    "bad_images",
    "rerun",
    "results_format",
    "results_file",
    "progress",
    "details",
)
"""``evaluate`` options every benchmark accepts (the model, the data folder, inference, the store, the output)."""

BENCHMARK_OPTIONS: tuple[str, ...] = (
    "released",
    "edition",
    "corruptions",
    "severities",
    "perturbations",
    "difficulties",
    "seed",
    "release",
    "baseline",
    "classes",
    "clean",
    "mapping",
    "styles",
    "style_backend",
    "holdout",
    "recipe",
    "seen_data",
    "tta",
    "preprocess",
    "ray",
    "ray_cpus_per_worker",
    "ray_gpus_per_worker",
)
"""``evaluate`` options a benchmark may accept (it lists the ones it does in :attr:`Benchmark.options`).

``ray``, ``ray_cpus_per_worker`` and ``ray_gpus_per_worker`` (``--ray [ADDRESS]``: the model on a Ray
cluster) go to every benchmark whose evaluation runs through
:func:`~shiftbench.evaluation.runner.run_conditions`; it lists them and passes
``shiftbench.distributed.ray_predictions(settings)`` as the loop's executor."""


_FRACTION = re.compile(
    r"(?:^|[._])(?:clean_error|error|errors|top1_error|ce|mce|relative_mce|relative_ce|mfr|mt5d|fr|t5d|fp|mean_fp|"
    r"accuracy|heldout_accuracy|seen_accuracy|gap)(?:$|[._])"
)
"""Record keys the benchmarks store as fractions of 1 (reports and tables show them in %); mDE is stored in % already."""


def is_fraction_key(key: str) -> bool:
    """A record key whose values are fractions of 1 (errors, CE, mCE, FR, accuracies): the report shows them in %."""
    return bool(_FRACTION.search(key)) and not key.endswith(("_ci", "_complete"))


class Progress(Protocol):
    """Receives the progress of an evaluation (the command line shows it with rich: rate and ETA)."""

    def start(self, total: int, description: str) -> None:
        """Called once with the number of items to predict."""

    def advance(self, n: int, description: str) -> None:
        """Called after each stored batch with the items it held."""

    def stop(self) -> None:
        """Called at the end (also after an error or Ctrl-C)."""


class CountCallback:
    """Turns an engine's ``callback(done, total[, label])`` into :class:`Progress` calls; :meth:`close` stops it."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.done, self.started = progress, 0, False

    def __call__(self, done: int, total: int, label: str = "") -> None:
        if not self.started:
            self.progress.start(total, label)
            self.started = True
        self.progress.advance(done - self.done, label)
        self.done = done

    def close(self) -> None:
        if self.started:
            self.progress.stop()


@dataclass
class Report:
    """A result in every output format: the command line picks one and writes it to stdout or ``--results-file``.

    Attributes:
        json: the JSON text.
        csv: the CSV text (one record per row).
        table: draws the tables and notes on a rich console.
        status: lines for stderr (not part of the result), e.g. "resumed from the store".
    """

    json: Callable[[], str]
    csv: Callable[[], str]
    table: Callable[[Any], None]
    status: list[str] = field(default_factory=list)


@dataclass
class Section:
    """A benchmark's part of ``shiftbench results``: its stored evaluations for JSON, CSV and tables.

    Attributes:
        key: its key in the JSON document (``rows`` for the corruption leaderboards).
        value: what goes under ``key`` in JSON.
        csv: its records as CSV text (with a header row).
        table: draws its leaderboard(s) on a rich console.
    """

    key: str
    value: Any
    csv: Callable[[], str]
    table: Callable[[Any], None]


class Benchmark(ABC):
    """One benchmark: declare the class attributes, implement :meth:`evaluate` and :meth:`stored`.

    Attributes:
        name: the ``--benchmark`` value (lower case, dashes).
        title: the name in reports.
        measures: one sentence: what it measures.
        options: the ``evaluate`` options it accepts beyond :data:`COMMON_OPTIONS`
            (names from :data:`BENCHMARK_OPTIONS`). Any other option given on the
            command line is refused with one message.
        refusals: why an option does not apply, for the options where the
            refusal should say more than which options the benchmark accepts.
        conditions: what its conditions are (corruption x severity, domain, ...).
        sources: where its data come from (on the fly, released files, ...).
        records: what it stores per item.
        items: what the progress display counts (noun, unit), e.g. ("frames", "frames").
        headline: keys of its :meth:`stored` records that ``shiftbench report`` compares across
            models (e.g. ``("clean_error", "mce")``), shown in the units of the records.
        full_images: how many images (or videos) the benchmark's full evaluation set has per condition
            (ImageNet-C: the 50 000 validation images); the report flags evaluations on fewer. None: it varies.
    """

    name: str = ""
    title: str = ""
    measures: str = ""
    options: tuple[str, ...] = ()
    conditions: str = ""
    sources: tuple[str, ...] = ()
    records: str = ""
    items: tuple[str, str] = ("images", "img")
    refusals: Mapping[str, str] = {}
    headline: tuple[str, ...] = ()
    full_images: int | None = None

    @abstractmethod
    def evaluate(self, settings: dict[str, Any], progress: Progress | None) -> Report:
        """Evaluate a model with the ``evaluate`` options in ``settings`` (common ones and :attr:`options`)."""

    def stored(
        self, store: Path, *, model: str | None, baseline: str, evaluation: int | None
    ) -> Section | None:
        """Its evaluations stored in ``store`` (None: none there)."""
        return None

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        """Figures for ``shiftbench report`` from its stored section (default: none; the report still shows its tables).

        Returns :class:`shiftbench.report.figures.ReportFigure` objects, drawn with the
        helpers of that module (published models next to the user's, per-condition
        curves and bars). Called only when matplotlib is installed.
        """
        return []

    def stored_runs(self, store: Path, console: Any, *, model: str | None, evaluation: int | None) -> bool:
        """Print its stored runs with their status (``results --runs``); returns whether there were any."""
        return False

    def accepts(self, option: str) -> bool:
        """Whether ``option`` (a parameter name) applies to this benchmark."""
        return option in COMMON_OPTIONS or option in self.options

    def describe(self) -> dict[str, Any]:
        """What ``shiftbench list benchmarks`` shows."""
        return {
            "name": self.name,
            "title": self.title,
            "measures": self.measures,
            "conditions": self.conditions,
            "sources": list(self.sources),
            "records": self.records,
            "options": ["--" + o.replace("_", "-") for o in self.options],
        }


def accepted_list(bench: Benchmark, known: Sequence[str]) -> str:
    """The benchmark's own options among ``known``, as ``--a, --b`` (for refusal messages)."""
    own = [o for o in known if o in bench.options]
    return ", ".join("--" + o.replace("_", "-") for o in own) or "none beyond the common ones"
