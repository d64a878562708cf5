"""ImageNet-NOC and user-built benchmarks of non-overlapping corruptions.

ImageNet-NOC (Laugros et al., 2020, Section 4) is the benchmark Algorithm 1 builds from the 23 candidates at
overlapping threshold 0.1 with ResNet-18: quantization, blur, vertical artifacts, rain,
border, shear, brightness and hue (the order of Laugros et al.'s (2020) Tables 6 and 8). Its CE divides a
model's error on each corruption by the error of torchvision's pretrained AlexNet on
that corruption (Laugros et al., 2020, Appendix A); mCE is their mean. (The authors' later code normalises by
a ResNet-50 instead and lists only 7 corruptions; shiftbench follows the paper.)

A benchmark built by :func:`~shiftbench.overlap.select.select_benchmark` is saved as a
JSON document (:func:`save_benchmark`) holding its corruptions, the baseline errors that
normalise its CE (AlexNet's published ones where Laugros et al. (2020) give them, else those of a model
the user chose) and the selection that produced it; the ``imagenet-noc`` benchmark
(``shiftbench.benchmarks.imagenet_noc``) evaluates ImageNet-NOC and saved benchmarks the same way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..corruptions.candidates import CANDIDATES
from ..errors import DataError, InvalidArgumentError
from ..evaluation.data import CLEAN, Condition, Item, Source, WorkBatch
from ..evaluation.protocol import Metric, Summary
from .sampling import corrupt_candidate
from .select import Selection
from .store import OverlapStore

__all__ = [
    "IMAGENET_NOC",
    "BORDER_OBSTRUCTION",
    "BORDER_OBSTRUCTION_NAME",
    "border_obstruction",
    "NocBaseline",
    "NocBenchmark",
    "alexnet_noc_baseline",
    "imagenet_noc",
    "save_benchmark",
    "load_benchmark",
    "benchmark_from_selection",
    "NocResult",
    "CandidateSource",
    "find_benchmark",
    "stored_options",
    "BENCHMARK_FORMAT",
]

BENCHMARK_FORMAT = "shiftbench-noc-benchmark/1"

IMAGENET_NOC: tuple[str, ...] = (
    "noc_quantization",
    "noc_blur",
    "noc_vertical_artifacts",
    "noc_rain",
    "noc_border",
    "noc_shear",
    "noc_brightness",
    "noc_hue",
)
"""The 8 corruptions of ImageNet-NOC (Laugros et al., 2020, threshold 0.1), in the order of its Tables 6 and 8."""


@dataclass(frozen=True)
class NocBaseline:
    """Errors that normalise CE: ``{corruption: error}`` and the clean error, with their source."""

    name: str
    errors: dict[str, float]
    clean_error: float | None
    source: str


@lru_cache(maxsize=1)
def alexnet_noc_baseline() -> NocBaseline:
    """torchvision AlexNet's published errors on the 23 candidates (Laugros et al., 2020, Appendix A, Figures 5-6; not re-measured)."""
    text = resources.files("shiftbench").joinpath("data/imagenet_noc_alexnet.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    return NocBaseline(
        doc["name"], {k: float(v) for k, v in doc["errors"].items()}, float(doc["clean_error"]), doc["source"]
    )


@dataclass(frozen=True)
class NocBenchmark:
    """A benchmark of candidate corruptions with the baseline errors of its CE."""

    name: str
    corruptions: tuple[str, ...]
    baseline: NocBaseline
    title: str = ""
    selection: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": BENCHMARK_FORMAT,
            "name": self.name,
            "title": self.title,
            "corruptions": list(self.corruptions),
            "baseline": {
                "name": self.baseline.name,
                "errors": {c: self.baseline.errors[c] for c in self.corruptions if c in self.baseline.errors},
                "clean_error": self.baseline.clean_error,
                "source": self.baseline.source,
            },
            "selection": self.selection,
        }


def imagenet_noc() -> NocBenchmark:
    """ImageNet-NOC with AlexNet's published errors."""
    return NocBenchmark(
        "imagenet-noc",
        IMAGENET_NOC,
        alexnet_noc_baseline(),
        "ImageNet-NOC (Laugros, Caplier & Ospici, 2021; threshold 0.1, ResNet-18)",
    )


BORDER_OBSTRUCTION: tuple[str, ...] = ("border", "obstruction")
"""The two corruptions of Laugros, Caplier & Ospici (2021), Section 4.3 and Table 1, with their ranges (10-45 px
bands, 50-120 px squares); no ImageNet-C corruption overlaps them."""

BORDER_OBSTRUCTION_NAME = "border-obstruction"

_NEAREST_PUBLISHED = {"border": "noc_border", "obstruction": "noc_obstruction"}


def border_obstruction(baseline: NocBaseline | Mapping[str, float] | None = None, baseline_name: str = "custom") -> NocBenchmark:
    """Border and obstruction as Laugros, Caplier & Ospici (2021) measure them in Table 1 (CE against a baseline's errors).

    The paper normalises CE by AlexNet's errors but publishes none for these two corruptions. The default baseline is
    the nearest published one: AlexNet's errors on the same corruptions in Laugros, Caplier & Ospici (2020), Appendix A
    (``noc_border``, 9-46 px; ``noc_obstruction``, 47-125 px: nearly the same ranges). ``baseline``:
    the errors of a reference model (e.g. AlexNet measured on the same images: the paper's protocol exactly).
    """
    if baseline is None:
        pub = alexnet_noc_baseline()
        base = NocBaseline(
            pub.name,
            {c: pub.errors[n] for c, n in _NEAREST_PUBLISHED.items()},
            pub.clean_error,
            f"{pub.source} Used for the border (10-45 px) and obstruction (50-120 px) of Laugros, Caplier & Ospici "
            "(2021), whose AlexNet errors are not published: these ranges are 9-46 px and 47-125 px.",
        )
    elif isinstance(baseline, NocBaseline):
        base = baseline
    else:
        base = NocBaseline(baseline_name, {k: float(v) for k, v in baseline.items()}, None, f"user-given ({baseline_name})")
    missing = [c for c in BORDER_OBSTRUCTION if c not in base.errors]
    if missing:
        raise InvalidArgumentError("baseline", base.name, f"errors for {', '.join(BORDER_OBSTRUCTION)}; missing: {', '.join(missing)}")
    for c in BORDER_OBSTRUCTION:
        if not 0 < base.errors[c] <= 1:
            raise InvalidArgumentError(f"baseline[{c!r}]", base.errors[c], "an error rate in (0, 1]")
    return NocBenchmark(BORDER_OBSTRUCTION_NAME, BORDER_OBSTRUCTION, base,
                        "Border and obstruction (Laugros, Caplier & Ospici, 2021, Table 1)")


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or any(ch in name for ch in "/\\"):
        raise InvalidArgumentError("name", name, "a non-empty benchmark name without slashes")
    return name.strip()


def benchmark_from_selection(
    selection: Selection | Sequence[str],
    name: str,
    *,
    baseline: NocBaseline | Mapping[str, float] | None = None,
    baseline_name: str = "custom",
) -> NocBenchmark:
    """A benchmark from Algorithm 1's result (or a list of candidates).

    The CE baseline defaults to AlexNet's published errors (Laugros et al., 2020, Appendix A); corruptions
    without one (Laugros et al.'s (2021) border/obstruction) need ``baseline`` (e.g. the errors of the study's
    standard model).
    """
    name = _check_name(name)
    names = list(selection.names) if isinstance(selection, Selection) else list(selection)
    if not names:
        raise InvalidArgumentError("selection", names, "at least one corruption")
    for c in names:
        if c not in CANDIDATES:
            from ..checks import suggest
            from ..errors import UnknownCorruptionError

            raise UnknownCorruptionError("corruptions", c, list(CANDIDATES), suggest(c, list(CANDIDATES)))
    if baseline is None:
        base = alexnet_noc_baseline()
    elif isinstance(baseline, NocBaseline):
        base = baseline
    else:
        base = NocBaseline(
            baseline_name, {k: float(v) for k, v in baseline.items()}, None, f"user-given ({baseline_name})"
        )
    missing = [c for c in names if c not in base.errors]
    if missing:
        raise InvalidArgumentError(
            "baseline",
            base.name,
            f"errors for every corruption of the benchmark; missing: {', '.join(missing)}",
            "Pass baseline= with the errors of a reference model (e.g. the study's standard model).",
        )
    for c in names:
        e = base.errors[c]
        if not 0 < e <= 1:
            raise InvalidArgumentError(f"baseline[{c!r}]", e, "an error rate in (0, 1]")
    sel = selection.to_dict() if isinstance(selection, Selection) else {}
    return NocBenchmark(name, tuple(names), base, f"{name} (Algorithm 1)", sel)


def save_benchmark(bench: NocBenchmark, path: str | Path, *, store: OverlapStore | None = None) -> Path:
    """Write a benchmark as JSON (and into a store's ``overlap_benchmarks`` table when given)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = bench.to_dict()
    p.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    if store is not None:
        store.save_benchmark(bench.name, doc)
    return p


def _from_doc(doc: Any, origin: str) -> NocBenchmark:
    if not isinstance(doc, dict) or doc.get("format") != BENCHMARK_FORMAT:
        raise DataError(f'{origin}: not a saved benchmark (expected a JSON object with "format": "{BENCHMARK_FORMAT}")')
    try:
        b = doc["baseline"]
        base = NocBaseline(
            str(b["name"]), {k: float(v) for k, v in b["errors"].items()}, b.get("clean_error"), str(b["source"])
        )
        return NocBenchmark(
            str(doc["name"]), tuple(doc["corruptions"]), base, str(doc.get("title", "")), dict(doc.get("selection", {}))
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise DataError(f"{origin}: malformed saved benchmark ({e!r})") from e


BENCHMARK = "imagenet-noc"
"""The benchmark name of every stored ImageNet-NOC (or saved-benchmark) evaluation; options name the benchmark."""


def stored_options(bench: NocBenchmark) -> dict[str, Any]:
    """The stored evaluation's identity besides model, data and seed: the benchmark's name and corruptions."""
    return {"benchmark": bench.name, "corruptions": list(bench.corruptions)}


def find_benchmark(spec: str | Path, store: str | Path) -> NocBenchmark:
    """:func:`load_benchmark`, looking a saved name up in the overlap study tables of ``store`` only when needed."""
    try:
        return load_benchmark(spec)
    except InvalidArgumentError:
        if not Path(store).is_file():
            raise
    try:
        ost = OverlapStore(store, readonly=True)
    except DataError:
        raise InvalidArgumentError("benchmark", str(spec), "'imagenet-noc', a saved benchmark .json file or a name "
                                   f"saved in the overlap study tables of {str(store)!r} (it holds none)") from None  # fmt: skip
    with ost:
        return load_benchmark(spec, store=ost)


def load_benchmark(spec: str | Path, *, store: OverlapStore | None = None) -> NocBenchmark:
    """``"imagenet-noc"``, a saved benchmark's JSON file, or a name saved in ``store``."""
    s = str(spec)
    if s.lower() in ("imagenet-noc", "noc", "imagenet_noc"):
        return imagenet_noc()
    if s.lower() == BORDER_OBSTRUCTION_NAME:
        return border_obstruction()
    p = Path(s).expanduser()
    if p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"benchmark file {s!r} is not readable JSON: {e}") from e
        bench = _from_doc(doc, s)
    elif store is not None and store.benchmark(s) is not None:
        bench = _from_doc(store.benchmark(s), f"{store.path}:{s}")
    else:
        names = ["imagenet-noc", BORDER_OBSTRUCTION_NAME] + (store.benchmarks() if store is not None else [])
        raise InvalidArgumentError(
            "benchmark", s, f"'imagenet-noc', '{BORDER_OBSTRUCTION_NAME}', a saved benchmark .json file or a saved name ({', '.join(names)})"
        )
    for c in bench.corruptions:
        if c not in CANDIDATES:
            raise DataError(f"benchmark {s!r} names {c!r}, which is not a candidate corruption of this shiftbench")
        if c not in bench.baseline.errors:
            raise DataError(f"benchmark {s!r} has no baseline error for {c!r}")
    return bench


@dataclass
class NocResult(Summary):
    """Errors, CE and mCE of one model on a benchmark (CE as ratios; x100 for the papers' %)."""

    HEADLINE = (Metric("clean_error", "lower", "clean error"), Metric("mce", "lower", "mCE"))

    benchmark: NocBenchmark
    model: str
    data: str
    n_images: int
    clean_error: float | None
    errors: dict[str, float]
    ce: dict[str, float]
    mce: float
    evaluation_id: int
    store_path: Path | None
    new_predictions: int
    notes: list[str] = field(default_factory=list)

    def table(self) -> str:
        # the evaluated corruptions (a subset with --corruptions), in the benchmark's order
        shown = [c for c in self.benchmark.corruptions if c in self.errors] + [
            c for c in self.errors if c not in self.benchmark.corruptions]
        lines = [
            f"{self.benchmark.title or self.benchmark.name} | model {self.model} | {self.data} | {self.n_images} images",
            "corruption".ljust(22)
            + "error %".rjust(9)
            + "CE %".rjust(8)
            + f"{self.benchmark.baseline.name} error %".rjust(18),
        ]
        if self.clean_error is not None:
            be = self.benchmark.baseline.clean_error
            lines.append(
                "clean".ljust(22) + f"{100 * self.clean_error:9.1f}" + "".rjust(8) + (f"{100 * be:18.1f}" if be else "")
            )
        for c in shown:
            base = self.benchmark.baseline.errors.get(c)
            ce = self.ce.get(c)
            lines.append(
                c.removeprefix("noc_").ljust(22)
                + f"{100 * self.errors[c]:9.1f}"
                + (f"{100 * ce:8.1f}" if ce is not None else "".rjust(8))
                + (f"{100 * base:18.1f}" if base is not None else "")
            )
        lines.append("mCE".ljust(22) + "".rjust(9) + f"{100 * self.mce:8.1f}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark.name,
            "model": self.model,
            "data": self.data,
            "n_images": self.n_images,
            "clean_error": self.clean_error,
            "errors": self.errors,
            "ce": self.ce,
            "mce": self.mce,
            "baseline": self.benchmark.baseline.name,
            "baseline_source": self.benchmark.baseline.source,
            "evaluation_id": self.evaluation_id,
            "store": str(self.store_path),
            "notes": self.notes,
        }


class CandidateSource(Source):
    """Clean images of a source, and the same images under each candidate corruption of ImageNet-NOC.

    Conditions are ``("clean", 0)`` and ``(candidate, 0)``: a candidate has no severity, each
    image draws one value from the corruption's whole range (:func:`corrupt_candidate`, seeded
    by the image's key and the seed). Each clean batch is decoded once for all conditions.
    """

    def __init__(self, images: Source, conditions: Sequence[str]) -> None:
        self.images = images
        self.kind, self.identity, self.location = images.kind, images.identity, images.location
        self.classes, self.edition, self.on_the_fly = images.classes, images.edition, True
        self._conditions = [self.condition(c) for c in conditions]

    @staticmethod
    def condition(name: str) -> Condition:
        return CLEAN if name == "clean" else (name, 0)

    def conditions(self) -> list[Condition]:
        return list(self._conditions)

    def items(self, condition: Condition) -> list[Item]:
        return self.images.items(CLEAN)

    def content_digest(self) -> str:
        return self.images.content_digest()  # the clean images, whichever candidates are requested

    def select_classes(self, classes: Sequence[str]) -> None:
        self.images.select_classes(classes)
        self.identity = self.images.identity

    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        conds = [c for c in self._conditions if pending.get(c)]
        needed = set().union(*(pending[c] for c in conds)) if conds else set()
        clean = self.images.batches({CLEAN: needed} if needed else {}, batch_size=batch_size, seed=seed,
                                    release=release, stop=stop)
        for wb in clean:
            if not wb.keys:
                continue
            for c in conds:
                if stop is not None and stop.is_set():
                    return
                sel = [i for i, k in enumerate(wb.keys) if k in pending[c]]
                if not sel:
                    continue
                keys = [wb.keys[i] for i in sel]
                x = wb.images[sel]
                if c != CLEAN:
                    x = corrupt_candidate(x, c[0], seed=seed, keys=keys)
                yield WorkBatch(c, keys, wb.labels[sel], x)
