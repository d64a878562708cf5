"""``shiftbench evaluate --ray``: the evaluation loop's model on a Ray cluster, the store on the driver.

:class:`RayPredictions` is an :class:`~shiftbench.evaluation.runner.Executor`: given to
:func:`~shiftbench.evaluation.runner.run_conditions` (through the benchmark engines' ``executor=``
parameter), it splits the pending images of each condition into shards of ``4 x batch size``
images (:func:`~shiftbench.distributed.executor.work_items`), predicts them on one model copy per
Ray worker (:meth:`~shiftbench.distributed.executor.RayExecutor.predict`: each worker reads and
corrupts its images itself) and hands the logits back in a fixed order. The loop on the driver
checks them and writes them through the same sink as without ``--ray``, so the stored rows are the
same; an interrupted run resumes from the store like any other.

:func:`ray_predictions` turns the ``evaluate`` settings (``ray``, ``ray_cpus_per_worker``,
``ray_gpus_per_worker``, ``model``, ``weights``, ``device``) into one, for the benchmark modules.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from typing import Any

import torch

from ..errors import InvalidArgumentError
from ..evaluation.data import WorkBatch
from ..evaluation.models import Classifier, LabelSpace
from ..evaluation.runner import Scored, Work
from .executor import ModelSpec, RayExecutor, work_items

__all__ = ["RAY_OPTIONS", "GivenModel", "RayPredictions", "ray_predictions", "driver_device", "ray_refusals"]

RAY_OPTIONS: tuple[str, ...] = ("ray", "ray_cpus_per_worker", "ray_gpus_per_worker")
"""The ``evaluate`` options of a benchmark whose evaluation runs through ``run_conditions``."""



def ray_refusals(reason: str) -> dict[str, str]:
    """``Benchmark.refusals`` entries for the Ray options of a benchmark that cannot run on Ray (and why)."""
    return {o: reason for o in RAY_OPTIONS}


SHARD_BATCHES = 4
"""Batches per shard (work item): few enough round trips, small enough to spread over the workers."""


class GivenModel:
    """A classifier object sent to every worker (for a model that has no name to load it by)."""

    def __init__(self, clf: Classifier) -> None:
        self.clf = clf

    def __call__(self) -> Classifier:
        return self.clf


class RayPredictions:
    """Runs the evaluation loop's model on a Ray cluster (see the module docstring).

    Args:
        executor: a connected :class:`RayExecutor` (its ``num_cpus``/``num_gpus`` are each model
            worker's resources).
        model: how workers load the model (a name with its ``weights``); None: the driver's
            classifier is sent to them.
        device: where the workers run the model ("cpu", "cuda").
        shard: images (or videos) per work item (default ``4 x batch size`` images, or as many
            videos as hold about that many frames).
        workers: model copies (default: as many as the cluster's resources allow).
    """

    def __init__(self, executor: RayExecutor, model: ModelSpec | None = None, *, device: str = "cpu",
                 shard: int | None = None, workers: int | None = None) -> None:
        if shard is not None and (isinstance(shard, bool) or not isinstance(shard, int) or shard < 1):
            raise InvalidArgumentError("shard", shard, "a positive integer (images per work item)")
        self.executor, self.model, self.device = executor, model, device
        self.shard, self.workers = shard, workers
        self.shards = 0  # work items sent by the last run (for reports and benchmarks)

    def describe(self) -> str:
        return self.executor.describe()

    def health(self) -> str:
        """Nodes lost and shards retried so far (:meth:`RayExecutor.health`; an executor without it: not reported)."""
        read = getattr(self.executor, "health", None)
        return read() if callable(read) else "nodes lost and shards retried not reported"

    def run(self, clf: Classifier, space: LabelSpace, work: Sequence[Work], *, batch_size: int, seed: int,
            release: bool, stop: threading.Event) -> Iterator[Scored]:
        spec = self.model if self.model is not None else ModelSpec(GivenModel(clf), {}, self.device)
        test_time = getattr(clf, "test_time", None)
        if self.model is not None and test_time:  # the workers load the model by name: wrap it as the driver did
            spec = dataclasses.replace(spec, test_time=dict(test_time))
        size = self.shard or SHARD_BATCHES * batch_size
        self.shards = 0
        for wi, w in enumerate(work):
            # folders every node must see: the source's own list (option -> path), else its location
            shared = getattr(w.source, "shared_paths", None)
            if shared is None:
                loc = str(getattr(w.source, "location", ""))
                shared = {"--data": loc} if loc else {}
            for what, path in shared.items():
                if os.path.isabs(str(path)) and os.path.exists(str(path)):
                    self.executor.check_paths([str(path)], what)
            # items of several frames (ImageNet-P's videos): a shard holds about ``size`` frames
            items = [it for cond, keys in w.pending.items()
                     for it in work_items(w.source, {cond: keys}, self.shard or max(1, size // w.frames.get(cond, 1)))]
            self.shards += len(items)
            for b in self.executor.predict(spec, w.source, items, space=space, batch_size=batch_size, seed=seed,
                                           release=release, workers=self.workers, logits=True, checksum=clf.checksum):
                if stop.is_set():
                    return
                wb = WorkBatch((str(b.condition[0]), int(b.condition[1])), list(b.keys),
                               torch.tensor(b.labels, dtype=torch.int64), torch.zeros((0, 3, 1, 1), dtype=torch.uint8),
                               [tuple(s) for s in b.skipped], b.frames)  # type: ignore[misc]
                yield Scored(wi, wb, b.logits)


def driver_device(settings: Mapping[str, Any]) -> str | None:
    """Where the driver loads the model: with ``--ray`` on the CPU (it only identifies it), else ``--device``."""
    return "cpu" if settings.get("ray") is not None else settings.get("device")


@contextmanager
def ray_predictions(settings: Mapping[str, Any]) -> Iterator[RayPredictions | None]:
    """A :class:`RayPredictions` for the ``evaluate`` settings while the block runs, None without ``ray``.

    ``settings["ray"]``: the cluster address (see
    :data:`~shiftbench.distributed.executor.ALLOWED_ADDRESSES`; ``""``: RAY_ADDRESS, else Ray on this
    machine); ``ray_cpus_per_worker`` (default 1) and ``ray_gpus_per_worker`` (default 1 with a CUDA
    ``device``, else 0) are each model worker's resources. A model given by name is loaded by every
    worker (and must have the driver's checksum); any other model is sent to them.

    Raises:
        MissingDependencyError: Ray is not installed (``pip install 'shiftbench[ray]'``).
        ClusterConnectionError: the address is malformed or no cluster answers (``--ray``, exit code 2).
        InvalidArgumentError: worker resources without ``--ray``, or not positive.
    """
    address = settings.get("ray")
    cpus, gpus = settings.get("ray_cpus_per_worker"), settings.get("ray_gpus_per_worker")
    if address is None:
        for name, v in (("--ray-cpus-per-worker", cpus), ("--ray-gpus-per-worker", gpus)):
            if v is not None:
                raise InvalidArgumentError(name, v, "a value only together with --ray")
        yield None
        return
    device = str(settings.get("device") or "cpu")
    if cpus is None:
        cpus = 1
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0:
        raise InvalidArgumentError("--ray-cpus-per-worker", cpus, "a positive number of CPUs")
    if gpus is None:
        gpus = 1 if device.startswith("cuda") else 0
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus < 0:
        raise InvalidArgumentError("--ray-gpus-per-worker", gpus, "a number of GPUs >= 0")
    if device.startswith("cuda") and not gpus:
        raise InvalidArgumentError("--ray-gpus-per-worker", gpus, "a positive number with --device cuda")
    model = settings.get("model")
    spec = None
    if isinstance(model, str):
        weights = settings.get("weights")
        # a worker sees only the GPU Ray gave it: always cuda:0 there
        spec = ModelSpec(model, {} if weights is None else {"weights": str(weights)},
                         "cuda" if device.startswith("cuda") else device)
    # Ray prints a lost node's or worker's message on the driver's stdout, where the results may go
    with redirect_stdout(sys.stderr):
        ex = RayExecutor(str(address), num_cpus=cpus, num_gpus=gpus)
        try:
            yield RayPredictions(ex, spec, device="cuda" if device.startswith("cuda") else device)
        finally:
            ex.close()
