"""The benchmark protocol: a benchmark declares, the evaluation driver runs.

This module names no benchmark. A benchmark is one module (see
``shiftbench.benchmarks``) holding one :class:`Benchmark` subclass that
declares:

* its options as a typed :class:`Settings` dataclass (each field is an
  ``evaluate`` option: name, type, default, help and validation, written with
  :func:`option`); the command line builds ``--option`` from it and refuses
  the options it does not declare;
* its :meth:`Benchmark.plan`: the conditions of an evaluation, the sources of
  their items and what is recorded per item (a :class:`Plan`);
* its :meth:`Benchmark.score`: a typed :class:`Summary` recomputed from the
  results store, with named headline fields and their direction;
* how a summary is rendered (:meth:`Benchmark.render`, a :class:`Report`) and
  how its stored evaluations are listed (:meth:`Benchmark.stored`).

It never loads a model, opens the store or loops over batches:
:mod:`shiftbench.evaluation.driver` does that, the same way for every benchmark.
"""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from ..errors import InvalidArgumentError

__all__ = [
    "is_fraction_key",
    "COMMON_OPTIONS",
    "Benchmark",
    "Metric",
    "OptionSpec",
    "Paper",
    "Plan",
    "PlanContext",
    "Planned",
    "Progress",
    "Report",
    "Section",
    "Settings",
    "Summary",
    "option",
    "set_runner",
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
    "ray",
    "ray_cpus_per_worker",
    "ray_gpus_per_worker",
    "results_format",
    "results_file",
    "progress",
    "details",
)
"""``evaluate`` options every benchmark accepts: the model, the data folder, inference (here or on a Ray
cluster), the store, the output. Everything else is a field of the benchmark's :class:`Settings`."""


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


# -- settings ---------------------------------------------------------------------------------


def option(
    default: Any = None,
    *,
    help: str,  # noqa: A002 - the word every CLI library uses
    choices: Sequence[str] | None = None,
    minimum: float | None = None,
    allowed: str | None = None,
    metavar: str | None = None,
) -> Any:
    """A field of a :class:`Settings` dataclass: one ``evaluate`` option.

    Args:
        default: its value when not given.
        help: one sentence for ``--help`` (cite papers by authors and year).
        choices: the only values allowed (strings).
        minimum: the smallest number allowed.
        allowed: what the error message says is allowed (default: from the type).
        metavar: how ``--help`` names the value.
    """
    meta = {"help": help, "choices": tuple(choices) if choices else None, "minimum": minimum, "allowed": allowed,
            "metavar": metavar}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionSpec:
    """One declared option: what the command line builds ``--name`` from."""

    name: str
    annotation: Any
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    allowed: str | None = None
    metavar: str | None = None

    @property
    def flag(self) -> str:
        """``--name-with-dashes``."""
        return "--" + self.name.replace("_", "-")

    @property
    def kinds(self) -> tuple[Any, ...]:
        """The types a value may have (None left out), the command line's type first."""
        args = typing.get_args(self.annotation) if _is_union(self.annotation) else (self.annotation,)
        return tuple(a for a in args if a is not type(None))

    @property
    def optional(self) -> bool:
        return _is_union(self.annotation) and type(None) in typing.get_args(self.annotation)

    @property
    def cli_type(self) -> Any:
        """``bool``, ``int``, ``float``, ``Path`` or ``str``: how the command line reads it."""
        first = self.kinds[0] if self.kinds else str
        return first if first in (bool, int, float, Path) else str

    def describe_allowed(self) -> str:
        if self.allowed:
            return self.allowed
        if self.choices:
            return "one of " + ", ".join(self.choices)
        names = {bool: "True or False", int: "an integer", float: "a number", str: "a string", Path: "a path"}
        parts = [names.get(k, getattr(k, "__name__", str(k))) for k in self.kinds]
        text = " or ".join(dict.fromkeys(parts))
        if self.minimum is not None:
            text += f" >= {self.minimum:g}"
        return text + (" (or None)" if self.optional else "")

    def check(self, value: Any) -> Any:
        """The value, checked against the declaration (a typed error naming the option otherwise)."""
        if value is None and (self.optional or self.default is None):
            return None
        if not any(_accepts(value, k) for k in self.kinds):
            raise InvalidArgumentError(self.name, value, self.describe_allowed())
        if self.choices and isinstance(value, str) and value not in self.choices:
            raise InvalidArgumentError(self.name, value, self.describe_allowed())
        if self.minimum is not None and isinstance(value, (int, float, np.integer, np.floating)) and value < self.minimum:
            raise InvalidArgumentError(self.name, value, self.describe_allowed())
        return value


def _is_union(tp: Any) -> bool:
    import types

    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _accepts(value: Any, kind: Any) -> bool:
    origin = typing.get_origin(kind)
    if kind is Any:
        return True
    if kind is bool:
        return isinstance(value, (bool, np.bool_))
    if kind is int:
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if kind is float:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if kind is Path:
        return isinstance(value, (str, os.PathLike))
    if origin in (list, tuple, Sequence, typing.Sequence) or kind in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return False
        args = [a for a in typing.get_args(kind) if a is not Ellipsis]
        return not args or all(_accepts(v, args[0]) for v in value)
    if _is_union(kind):
        return any(_accepts(value, k) for k in typing.get_args(kind))
    return isinstance(value, kind) if isinstance(kind, type) else True


S = TypeVar("S", bound="Settings")


@dataclass(frozen=True)
class Settings:
    """A benchmark's ``evaluate`` options as a frozen dataclass; subclass it and add fields with :func:`option`.

    Every field is checked when an instance is made (type, choices, minimum) and a wrong value raises
    :class:`~shiftbench.errors.InvalidArgumentError` naming the option. The fields below are the data
    options every benchmark has; a benchmark may redeclare one to change its default or help.
    """

    data: str | Path | None = option(None, help="The benchmark's data (a folder or file; see its description).",
                                     metavar="PATH")
    limit: int | None = option(None, minimum=1, help="At most N items per condition, spread over the classes.")
    bad_images: str = option("skip", choices=("skip", "fail"),
                             help="Unreadable or truncated images: skip and count them, or stop.")

    def __post_init__(self) -> None:
        for spec in self.specs():
            object.__setattr__(self, spec.name, spec.check(getattr(self, spec.name)))

    @classmethod
    def specs(cls) -> tuple[OptionSpec, ...]:
        """Every declared option, in declaration order."""
        cached = cls.__dict__.get("_specs")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            if f.name.startswith("_"):
                continue
            m = f.metadata
            default = f.default if f.default is not dataclasses.MISSING else None
            out.append(OptionSpec(f.name, hints.get(f.name, Any), default, m.get("help", ""), m.get("choices"),
                                  m.get("minimum"), m.get("allowed"), m.get("metavar")))
        specs = tuple(out)
        type.__setattr__(cls, "_specs", specs)
        return specs

    @classmethod
    def own_specs(cls) -> tuple[OptionSpec, ...]:
        """The options beyond the common data options of :class:`Settings`."""
        common = {f.name for f in dataclasses.fields(Settings)}
        return tuple(s for s in cls.specs() if s.name not in common)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(s.name for s in cls.specs())

    @classmethod
    def from_options(cls: type[S], values: Mapping[str, Any], *, benchmark: str = "") -> S:
        """Settings from keyword options; one it does not declare is refused, naming the ones it does."""
        names = cls.names()
        unknown = [k for k in values if k not in names]
        if unknown:
            own = ", ".join(s.name for s in cls.own_specs()) or "none beyond data, limit and bad_images"
            raise InvalidArgumentError(unknown[0], values[unknown[0]],
                                       f"an option of {benchmark or cls.__name__}: {own}")
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        """The options and their values (paths as strings)."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}


# -- plan -----------------------------------------------------------------------------------


@dataclass
class Planned:
    """One condition of an evaluation: the loop's key, where its items come from, and its stored name and level.

    Attributes:
        condition: the key the loop and the record writer use (e.g. ``("fog", 3)``).
        source: the :class:`~shiftbench.evaluation.data.Source` of its items (``source.items(condition)``).
        name: the stored condition name (``runs.condition``; default: ``condition[0]``).
        level: the stored level (severity, difficulty, 0; default: ``condition[1]``).
        frames: frames per item (1: still images; T: videos of T frames).
    """

    condition: Any
    source: Any
    name: str | None = None
    level: int | None = None
    frames: int = 1

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = str(self.condition[0])
        if self.level is None:
            self.level = int(self.condition[1])


@dataclass
class Plan:
    """What one evaluation of a benchmark runs: the driver registers, resumes, loops and stores it.

    Attributes:
        conditions: the conditions in order (:class:`Planned`).
        edition: the stored edition (e.g. ``"224"``).
        source: the evaluation's data (default: the first condition's source; the clean images may be others).
        seed: the seed of on-the-fly data given to the sources.
        stored_seed: the seed the evaluation is stored with (-1: the data are not seeded).
        release: JPEG round trip of on-the-fly images (stored with the evaluation).
        options: what else identifies the evaluation (JSON-able, ``evaluations.options``).
        classes: the requested label space (``"auto"``, ``"model"``, ``"data"`` or class ids).
        default_space: what ``"auto"`` means when the model's classes are known.
        data_classes: the data's classes for the label space (default: the first source's).
        model_classes: the model's classes for the label space (default: the model's own).
        space: a fixed label space instead (then ``classes`` is not used).
        label_map: a fixed map of every source's labels into the label space (default: by class id).
        check_absent: refuse data whose classes are outside the label space.
        writer: makes the record writer (default: top-5 per item, :class:`~shiftbench.evaluation.driver.TopK`).
        describe: names a condition on the progress display and in errors.
        model: the classifier of this evaluation when the benchmark makes its own (e.g. one trained per split).
        model_record: ``(name, identity, checksum, details)`` the model is stored with (default: the classifier's).
        source_record: ``(kind, identity, location, classes)`` the first source is stored with, or a function
            returning it after the label space is chosen (default: the source's own).
        versions: extra packages whose versions are stored with the runs.
        prefetch: decode the next batches in a thread (None: where it helps).
        keep: store the evaluation in the results store (False: in a temporary one, e.g. a one-pass reference row).
        context: anything the benchmark's :meth:`Benchmark.score` needs back (e.g. the parsed selections).
    """

    conditions: list[Planned]
    edition: str = ""
    source: Any = None
    seed: int = 0
    stored_seed: int = -1
    release: bool = False
    options: dict[str, Any] | None = None
    classes: Any = "auto"
    default_space: str = "model"
    data_classes: Sequence[str] | None = None
    model_classes: Sequence[str] | None = None
    space: Any = None
    label_map: np.ndarray | None = None
    check_absent: bool = True
    writer: Callable[..., Any] | None = None
    describe: Callable[[Any], str] | None = None
    model: Any = None
    model_record: tuple[str, str, str, dict[str, Any]] | None = None
    source_record: Any = None
    versions: tuple[str, ...] = ()
    prefetch: bool | None = None
    keep: bool = True
    context: dict[str, Any] = field(default_factory=dict)


class PlanContext(Protocol):
    """What a benchmark's :meth:`Benchmark.plan` may ask the driver for."""

    model_spec: Any
    """The ``model`` as given (a name, a checkpoint path, a module...)."""
    device: str | None
    store: Path | None
    rerun: bool
    remote: bool
    """The model runs through an executor (e.g. on a Ray cluster)."""

    def classifier(self) -> Any:
        """The model, loaded once by the driver (a :class:`~shiftbench.evaluation.models.Classifier`)."""


# -- summary --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """A headline number of a benchmark: its name (a field or property of the summary) and direction."""

    name: str
    better: str = "lower"
    title: str = ""


class Summary:
    """What :meth:`Benchmark.score` returns: a typed result whose :attr:`HEADLINE` metrics are named attributes.

    Subclasses are dataclasses (the engines' result types); :meth:`headline` reads the named
    numbers, :attr:`HEADLINE` says whether lower or higher is better.
    """

    HEADLINE: ClassVar[tuple[Metric, ...]] = ()

    def headline(self) -> dict[str, float | None]:
        """Headline name -> value (fractions, e.g. 0.654 for 65.4 %)."""
        out = {}
        for m in self.HEADLINE:
            v = getattr(self, m.name, None)
            out[m.name] = None if v is None else float(v)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Its fields and headline numbers (what the default report writes as JSON)."""
        fields = dataclasses.asdict(self) if dataclasses.is_dataclass(self) else {}
        return {**fields, **self.headline()}


# -- output ---------------------------------------------------------------------------------


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


# -- the benchmark ----------------------------------------------------------------------------

_RUNNER: Callable[..., Any] | None = None


def set_runner(runner: Callable[..., Any]) -> None:
    """Install what :meth:`Benchmark.evaluate` runs: ``shiftbench.benchmarks`` does, with its Ray executor (the
    evaluation core reaches that layer without importing it, as it reaches the model zoo)."""
    global _RUNNER
    _RUNNER = runner



@dataclass(frozen=True)
class Paper:
    """The paper a benchmark comes from, as users cite it: authors, title, venue and year."""

    authors: str
    title: str
    venue: str
    year: int

    def cite(self) -> str:
        """``Authors (year)``, the short form of the help texts and captions."""
        return f"{self.authors} ({self.year})"

    def reference(self) -> str:
        """``Authors (year). Title. Venue.``"""
        return f"{self.authors} ({self.year}). {self.title}. {self.venue}."

    def to_dict(self) -> dict[str, Any]:
        return {"authors": self.authors, "title": self.title, "venue": self.venue, "year": self.year}


class Benchmark(ABC, Generic[S]):
    """One benchmark: declare the attributes and :attr:`Settings`, implement :meth:`plan`, :meth:`score`, :meth:`render`.

    Attributes:
        name: the ``--benchmark`` value (lower case, dashes).
        title: the name in reports.
        measures: one sentence: what it measures.
        Settings: its options (a :class:`Settings` subclass); the command line builds them and
            refuses any other.
        refusals: why an option does not apply, where "it accepts --a, --b" says too little.
        conditions: what its conditions are (corruption x severity, domain, ...).
        sources: where its data come from (on the fly, released files, ...).
        records: what it stores per item.
        items: what the progress display counts (noun, unit), e.g. ("frames", "frames").
        headline: keys of its :meth:`stored` records that ``shiftbench report`` compares across
            models (e.g. ``("clean_error", "mce")``), shown in the units of the records.
        model_by_name: whether Ray workers may load ``--model`` by name (False: the benchmark
            makes its own models and sends them).
        full_images: how many images (or videos) the benchmark's full evaluation set has per condition
            (ImageNet-C: the 50 000 validation images); the report flags evaluations on fewer. None: it varies
            (:meth:`coverage` may still know it per record).
        full_set: what the full evaluation set is, in words, with its source (``list benchmarks`` shows it).
        full_unit: what :attr:`full_images` counts ("images", "videos").
        paper: the paper that defines the benchmark (:class:`Paper`).
    """

    name: str = ""
    title: str = ""
    measures: str = ""
    Settings: type[S] = Settings  # type: ignore[assignment]
    conditions: str = ""
    sources: tuple[str, ...] = ()
    records: str = ""
    items: tuple[str, str] = ("images", "img")
    refusals: Mapping[str, str] = {}
    headline: tuple[str, ...] = ()
    model_by_name: bool = True
    full_images: int | None = None
    full_set: str = ""
    full_unit: str = "images"
    paper: Paper | None = None

    @abstractmethod
    def plan(self, settings: S, ctx: PlanContext) -> Plan | list[Plan]:
        """The evaluation(s) to run for ``settings`` (several: e.g. one per held-out split)."""

    @abstractmethod
    def score(self, store: Any, evaluation: Any) -> Summary:
        """The typed summary recomputed from the store (``evaluation``: an :class:`~shiftbench.evaluation.driver.Evaluated`)."""

    def render(self, summary: Any, *, details: bool = True) -> Report:
        """The summary as JSON, CSV and tables (default: its :meth:`Summary.to_dict` as one record)."""
        import json

        from .store import records_to_csv

        rec = summary.to_dict()
        flat = {k: v for k, v in rec.items() if not isinstance(v, (dict, list, tuple))}

        def table(console: Any) -> None:
            from rich.table import Table

            t = Table(title=self.title or self.name, title_justify="left", header_style="bold")
            for k in flat:
                t.add_column(k)
            t.add_row(*("–" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat.values()))
            console.print(t)

        return Report(lambda: json.dumps(rec, indent=1, default=str) + "\n", lambda: records_to_csv([flat]), table)

    @property
    def options(self) -> tuple[str, ...]:
        """The names of its own options (the fields of :attr:`Settings` beyond data, limit, bad_images)."""
        return tuple(s.name for s in self.Settings.own_specs())

    def settings(self, **values: Any) -> S:
        """Its :attr:`Settings` from keyword options (an undeclared one is refused)."""
        return self.Settings.from_options(values, benchmark=self.name)

    def stored(
        self, store: Path, *, model: str | None, baseline: str, evaluation: int | None
    ) -> Section | None:
        """Its evaluations stored in ``store`` (None: none there); default: the top-1 error of each condition."""
        from .store import ResultsStore, records_to_csv

        with ResultsStore(store, create=False) as db:
            recs = [{"evaluation": e.id, "model": e.model, "data": e.source,
                     **{f"error_{r.condition}" + (f"_{r.level}" if r.level else ""): r.top1_error for r in db.runs(e.id)}}
                    for e in db.evaluations_of([self.name], model, evaluation)]
        if not recs:
            return None

        def table(console: Any) -> None:
            from rich.table import Table

            t = Table(title=f"{self.title or self.name}: stored (top-1 error, %)", title_justify="left")
            cols = list(dict.fromkeys(k for r in recs for k in r))
            for c in cols:
                t.add_column(c)
            for r in recs:
                t.add_row(*("–" if r.get(c) is None else f"{100 * r[c]:.1f}" if c.startswith("error_") else str(r[c])
                            for c in cols))
            console.print(t)

        return Section(self.name.replace("-", "_"), recs, lambda: records_to_csv(recs), table)

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        """Figures for ``shiftbench report`` from its stored section (default: none; the report still shows its tables).

        Returns :class:`shiftbench.evaluation.figures.ReportFigure` objects, drawn with the
        helpers of that module (published models next to the user's, per-condition
        curves and bars). Called only when matplotlib is installed.
        """
        return []

    def accepts(self, option: str) -> bool:
        """Whether ``option`` (a parameter name) applies to this benchmark."""
        return option in COMMON_OPTIONS or option in self.Settings.names()

    def evaluate(self, options: Mapping[str, Any], progress: Progress | None = None) -> Report:
        """Run it with ``evaluate`` options by name (common ones and its own, as ``sweep`` passes them) through the
        evaluation driver; the report (``shiftbench.evaluate`` returns the whole result)."""
        if _RUNNER is None:
            raise RuntimeError("no benchmark runner: import shiftbench.benchmarks first")
        return _RUNNER(self, options, progress)  # type: ignore[no-any-return]

    def combine(self, summaries: list[Summary]) -> Summary:
        """One summary of several evaluations of one call (a benchmark whose plan returns several overrides it)."""
        if len(summaries) != 1:
            raise NotImplementedError(f"{type(self).__name__}.combine: {len(summaries)} evaluations in one call")
        return summaries[0]

    def coverage(self, record: Mapping[str, Any]) -> tuple[int, int] | None:
        """``(evaluated, full)``: the images (or videos) one stored record was scored on per condition, and the
        size of the benchmark's full set for it; None when either is unknown. Default: the record's ``n_images``
        against :attr:`full_images`."""
        n = record.get("n_images")
        if self.full_images and isinstance(n, int) and not isinstance(n, bool):
            return n, int(self.full_images)
        return None

    def describe(self) -> dict[str, Any]:
        """What ``shiftbench list benchmarks`` shows."""
        return {
            "name": self.name,
            "title": self.title,
            "paper": None if self.paper is None else self.paper.to_dict(),
            "citation": None if self.paper is None else self.paper.reference(),
            "full_set": self.full_set,
            "full_images": self.full_images,
            "measures": self.measures,
            "conditions": self.conditions,
            "sources": list(self.sources),
            "records": self.records,
            "options": [s.flag for s in self.Settings.own_specs()],
        }
