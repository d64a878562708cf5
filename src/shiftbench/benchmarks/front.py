"""One Python call for every benchmark, the twin of ``shiftbench evaluate``.

:func:`evaluate` (``shiftbench.evaluate``) takes a model (a name such as
``"efficientnet-lite0"``, ``"zoo:resnet50-augmix"``, ``"timm:<arch>"``, a
checkpoint, or any ``torch.nn.Module`` / callable returning logits), a
registered benchmark's name, the common options (data, store, batch size,
device, Ray) and the benchmark's own options by keyword, and returns a
:class:`Result`: the benchmark's typed summary, its records and the report the
command line prints. Both go through :func:`run` and the one evaluation driver
(:mod:`shiftbench.evaluation.driver`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..distributed.predictions import RAY_OPTIONS, ray_predictions
from ..evaluation.driver import run as drive
from ..evaluation.models import DEFAULT_MODEL
from ..evaluation.protocol import Benchmark, Progress, Report, Summary
from ..evaluation.store import DEFAULT_STORE
from . import get_benchmark

__all__ = ["Result", "evaluate", "run", "DRIVER_OPTIONS"]

DRIVER_OPTIONS = ("model", "weights", "device", "store", "batch_size", "rerun", *RAY_OPTIONS)
"""The options the driver takes (every other option but the output ones is a field of the benchmark's Settings)."""

_OUTPUT = ("results_format", "results_file", "progress", "details", "benchmark", "threads", "model_args")


@dataclass
class Result:
    """One evaluation's outcome, the same for the command line and Python.

    Attributes:
        benchmark: the benchmark's name.
        summary: its typed summary (``summary.headline()``: the headline numbers; the benchmark's
            own fields, e.g. ``summary.mce`` for ImageNet-C).
        report: the output the command line prints (JSON, CSV and tables).
        store: the results store (None: a temporary one, gone).
        evaluations: the evaluations' ids in the store.
        status: lines about the run itself (resumed from the store, where the model ran).
    """

    benchmark: str
    summary: Summary
    report: Report
    store: Path | None
    evaluations: list[int] = field(default_factory=list)
    status: list[str] = field(default_factory=list)

    @property
    def records(self) -> Any:
        """Its records (the CSV output's rows): a pandas DataFrame when pandas is installed, else a list of dicts."""
        text = self.report.csv()
        try:
            import pandas as pd
        except ImportError:
            return list(csv.DictReader(io.StringIO(text)))
        return pd.read_csv(io.StringIO(text)) if text.strip() else pd.DataFrame()

    def headline(self) -> dict[str, float | None]:
        """The benchmark's headline numbers (fractions), by name."""
        return self.summary.headline()

    def to_dict(self) -> dict[str, Any]:
        """The JSON output as a dict."""
        return json.loads(self.report.json())

    def to_json(self) -> str:
        """The JSON output (what ``--results-format json`` prints)."""
        return self.report.json()


def run(bench: Benchmark[Any], options: Mapping[str, Any], progress: Progress | None = None,
        executor: Any = None, prefetch: bool | None = None) -> Result:
    """Evaluate with ``evaluate`` options by name: the driver's (:data:`DRIVER_OPTIONS`), the output ones, and the
    benchmark's own (any other is refused, naming the ones it declares)."""
    own = {k: v for k, v in options.items() if k not in DRIVER_OPTIONS and k not in _OUTPUT and v is not None}
    settings = bench.Settings.from_options(own, benchmark=bench.name)
    model = options.get("model", DEFAULT_MODEL)
    ray = {k: options.get(k) for k in RAY_OPTIONS}
    device = options.get("device")
    status: list[str] = []
    with ray_predictions({**ray, "device": device, "model": model if bench.model_by_name else None}) as ray_exec:
        ex = executor if executor is not None else ray_exec
        where = None if ray_exec is None else ray_exec.describe()
        out = drive(bench, settings, model=model, weights=options.get("weights"),
                    device="cpu" if ray_exec is not None else device,
                    store=options.get("store", DEFAULT_STORE), batch_size=options.get("batch_size", 8),
                    rerun=options.get("rerun", False), progress=progress, executor=ex, prefetch=prefetch)
    store = out.evaluations[0].store if out.evaluations else None
    if ray_exec is not None:
        status.append(f"Predicted on {where}: {ray_exec.shards} shard(s); {ray_exec.health()}.")
    if out.written == 0 and store is not None:
        status.append(f"All requested runs were already complete in {store}: scores recomputed from the stored "
                      "predictions.")
    report = bench.render(out.summary, details=bool(options.get("details", True)))
    report.status[:0] = status
    return Result(bench.name, out.summary, report, store, [e.id for e in out.evaluations], status)


def evaluate(
    model: Any = DEFAULT_MODEL,
    benchmark: str | Benchmark[Any] = "imagenet-c",
    *,
    data: Any = None,
    store: str | Path | None = DEFAULT_STORE,
    weights: str | None = None,
    device: str | None = None,
    batch_size: int = 8,
    rerun: bool = False,
    progress: Progress | None = None,
    executor: Any = None,
    prefetch: bool | None = None,
    ray: str | None = None,
    ray_cpus_per_worker: float | None = None,
    ray_gpus_per_worker: float | None = None,
    **settings: Any,
) -> Result:
    """Evaluate a model on a registered benchmark; the Python twin of ``shiftbench evaluate``.

    Args:
        model: a name (``"efficientnet-lite0"``, ``"torchvision:resnet50"``, ``"timm:<arch>"``,
            ``"zoo:<name>"``, a checkpoint path), or any ``torch.nn.Module`` / callable returning
            logits (or a :class:`~shiftbench.evaluation.models.Classifier`).
        benchmark: a registered benchmark (``shiftbench list benchmarks``) or a Benchmark object.
        data: the benchmark's data (None: its default, e.g. the 20 demo images for ImageNet-C).
        store: the results store (interrupted evaluations resume from it); None: a temporary store.
        weights, device, batch_size, rerun: as on the command line.
        progress: receives the progress (start, advance, stop).
        executor: runs the model elsewhere (e.g. a :class:`shiftbench.distributed.RayPredictions`).
        prefetch: decode the next batches in a thread beside the model (None: where it helps).
        ray, ray_cpus_per_worker, ray_gpus_per_worker: run the model on a Ray cluster (as ``--ray``).
        **settings: the benchmark's own options (fields of its ``Settings``), e.g. ``severities="1,3"``;
            any other is refused.

    Returns:
        A :class:`Result`: ``result.summary`` (typed, with ``headline()``), ``result.records``,
        ``result.to_dict()``, ``result.to_json()``.

    Example::

        import shiftbench
        r = shiftbench.evaluate("efficientnet-lite0", benchmark="imagenet-c", corruptions="fog", severities="1")
        print(r.headline())
    """
    bench = benchmark if isinstance(benchmark, Benchmark) else get_benchmark(benchmark)
    options = {"model": model, "weights": weights, "device": device, "store": store, "batch_size": batch_size,
               "rerun": rerun, "ray": ray, "ray_cpus_per_worker": ray_cpus_per_worker,
               "ray_gpus_per_worker": ray_gpus_per_worker, **settings}
    if data is not None:
        options["data"] = data
    return run(bench, options, progress, executor, prefetch)
