"""The Ray side of shiftbench: connect, run work items as tasks or actors, rerun lost ones.

The driver (the process that runs ``shiftbench ... --ray``) keeps every piece
of state: it submits work items, receives their results and alone writes
journals, manifests and result stores. Workers only compute and, for
``generate``, write finished files through a temporary name and a rename into
storage every node mounts at the same path.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..errors import ClusterConnectionError, DataError, InvalidArgumentError, MissingDependencyError, ShiftbenchError

__all__ = ["RayExecutor", "ModelSpec", "WorkItem", "PredictionBatch", "work_items", "require_ray", "ALLOWED_ADDRESSES"]

ALLOWED_ADDRESSES = (
    "'' (RAY_ADDRESS, else Ray started on this machine for this run), 'local' (a new Ray on this machine), "
    "'auto' (the cluster started with `ray start` on this machine), HOST:PORT of a running cluster's head "
    "or ray://HOST:PORT (Ray Client)"
)


def require_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`MissingDependencyError` with the install hint."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "Running on a Ray cluster (--ray)", "ray") from None
    return ray


# ----------------------------------------------------------------------------- worker side


@functools.lru_cache(maxsize=1)
def node_versions() -> tuple[tuple[str, str], ...]:
    """Versions of the packages that decide the pixels and predictions, on this process's node."""
    from importlib import metadata

    import numpy
    import PIL
    import scipy
    import torch

    from .. import __version__

    out = {"shiftbench": __version__, "torch": torch.__version__, "numpy": numpy.__version__,
           "scipy": scipy.__version__, "pillow": PIL.__version__}
    try:
        out["opencv"] = metadata.version("opencv-python-headless")
    except metadata.PackageNotFoundError:  # pragma: no cover - another OpenCV wheel
        import cv2

        out["opencv"] = cv2.__version__
    return tuple(sorted(out.items()))


def _set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, n))
    try:
        import cv2

        cv2.setNumThreads(max(1, n))
    except ImportError:  # pragma: no cover
        pass


def _check_versions(expected: tuple[tuple[str, str], ...]) -> None:
    got = node_versions()
    if got != expected:
        mine, theirs = dict(got), dict(expected)
        diff = ", ".join(f"{k} {mine.get(k)} (driver {theirs.get(k)})" for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k))
        raise DataError(
            f"Ray node {socket.gethostname()} runs other package versions than the driver: {diff}. "
            "Results would differ from one machine's; install the same versions on every node."
        )


def run_task(fn: Callable[..., Any], shared: Any, item: Any, expected: tuple[tuple[str, str], ...], threads: int) -> Any:
    """Body of every Ray task: check the node's versions, set the thread count, call ``fn``."""
    _check_versions(expected)
    _set_threads(threads)
    return fn(item) if shared is None else fn(shared, item)


def probe_paths(paths: Sequence[str]) -> tuple[str, list[str]]:
    """(host name, the paths that do not exist on this node)."""
    return socket.gethostname(), [p for p in paths if not os.path.exists(p)]


# ----------------------------------------------------------------------------- evaluation work


@dataclass(frozen=True)
class ModelSpec:
    """A model every worker can load on its own (the model itself never travels).

    Attributes:
        model: a name :func:`~shiftbench.evaluation.models.load_model` accepts (e.g.
            ``"efficientnet-lite0"``, ``"zoo:resnet50-augmix"``, ``"timm:convnext_tiny"``), or a
            module-level function returning a model or a :class:`Classifier` (pickled by reference,
            so it must be importable on every node).
        kwargs: keywords for ``load_model`` (a name) or for the function.
        device: where each worker runs it: "cpu" or "cuda" (a worker sees only the GPU Ray gave it).
        test_time: the test-time methods the driver's classifier applies (``{"tta": "ten-crop",
            "preprocess": "clahe"}``, :func:`~shiftbench.evaluation.testtime.with_test_time`); each worker wraps
            the model it loads the same way. Empty: none.
    """

    model: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    test_time: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        from ..evaluation.models import load_model

        if isinstance(self.model, str) and self.model.strip().lower().startswith("zoo:"):
            from .. import zoo  # noqa: F401 - registers the "zoo:" names in this worker process
        if isinstance(self.model, str):
            clf = load_model(self.model, device=self.device, **self.kwargs)
        else:
            clf = load_model(self.model(**self.kwargs), device=self.device)
        if self.test_time:
            from ..evaluation.testtime import with_test_time

            clf = with_test_time(clf, **self.test_time)
        return clf


@dataclass(frozen=True)
class WorkItem:
    """Images of one condition to predict: ``condition`` is ``("clean", 0)`` or ``(corruption, severity)``;
    ``keys`` are the source's image keys (the store's image ids)."""

    condition: tuple[str, int]
    keys: tuple[str, ...]


def work_items(source: Any, pending: Mapping[tuple[str, int], set[str]], size: int) -> list[WorkItem]:
    """The pending images of each condition as work items of at most ``size`` images: conditions in
    ``pending``'s order, images in the source's order (the same items for the same pending work, so a
    resumed evaluation shards as the first one did)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InvalidArgumentError("size", size, "a positive integer")
    out: list[WorkItem] = []
    for cond, keys in pending.items():
        order = [it.key for it in source.items(cond) if it.key in keys]
        out += [WorkItem(tuple(cond), tuple(order[i : i + size])) for i in range(0, len(order), size)]  # type: ignore[arg-type]
    return out


@dataclass
class PredictionBatch:
    """What a worker returns for one model batch of a :class:`WorkItem`.

    ``labels`` are indices into the source's classes (the driver maps them to the label space, as
    the runner does); ``top5`` the label-space indices of the largest logits, best first;
    ``skipped`` the (key, reason) of unreadable images; ``logits`` the checked logits restricted to
    the label space (a CPU tensor, only when asked for; None for a batch without readable images);
    ``frames`` the frame index of each row where the source's items are sequences (ImageNet-P's
    videos: ``keys`` then repeat a video's key once per frame), else None.
    """

    item: int
    condition: tuple[str, int]
    keys: list[str]
    labels: list[int]
    top5: list[list[int]]
    skipped: list[tuple[str, str]]
    logits: Any = None
    frames: list[int] | None = None


class Predictor:
    """One model copy on one worker (a Ray actor): predicts work items from a source."""

    def __init__(self, spec: ModelSpec, source: Any, space: Any, batch_size: int, seed: int, release: bool,
                 expected: tuple[tuple[str, str], ...], threads: int, logits: bool = False,
                 checksum: str | None = None) -> None:
        _check_versions(expected)
        _set_threads(threads)
        self.clf = spec.load()
        self.source, self.space = source, space
        self.batch_size, self.seed, self.release = batch_size, seed, release
        self.keep_logits, self.checksum = logits, checksum

    def predict(self, index: int, item: WorkItem) -> list[PredictionBatch]:
        import torch

        from ..evaluation.errors import ModelOutputError
        from ..evaluation.models import check_logits

        if self.checksum is not None and self.clf.checksum != self.checksum:
            raise DataError(
                f"Ray node {socket.gethostname()} loaded other weights for {self.clf.name} than the driver "
                f"(checksum {self.clf.checksum[:19]}..., driver {self.checksum[:19]}...). Every node must load the same "
                "checkpoint (random weights, --weights none, differ on each node)."
            )
        out: list[PredictionBatch] = []
        cond = tuple(item.condition)
        for wb in self.source.batches({cond: set(item.keys)}, batch_size=self.batch_size, seed=self.seed,
                                      release=self.release, stop=threading.Event()):
            n = int(wb.images.shape[0])
            top: list[list[int]] = []
            kept = None
            if n:
                with torch.no_grad():
                    logits = self.space.restrict(self.clf.logits(wb.images))
                if logits.shape[1] != len(self.space.classes):
                    raise ModelOutputError(self.clf.name, "output width does not match the class set",
                                           f"{len(self.space.classes)} logits (the dataset's classes, in order)",
                                           f"{logits.shape[1]}", "Pass classes= with the model's class ids.")
                what = "clean images" if cond[0] == "clean" else f"{cond[0]} severity {cond[1]}"
                names = wb.keys if wb.frames is None else [f"{k} frame {f}" for k, f in zip(wb.keys, wb.frames, strict=True)]
                check_logits(self.clf.name, logits, names, what)
                top = torch.topk(logits, k=min(5, logits.shape[1]), dim=1).indices.tolist()
                kept = logits.detach().to("cpu").contiguous() if self.keep_logits else None
            out.append(PredictionBatch(index, cond, list(wb.keys), wb.labels.tolist(), top, list(wb.skipped), kept,
                                       None if wb.frames is None else [int(f) for f in wb.frames]))
        return out


# ----------------------------------------------------------------------------- driver side


def _check_reachable(address: str) -> None:
    """Fail fast (5 s) when nothing listens at HOST:PORT, instead of Ray's long connection retries."""
    hostport = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ClusterConnectionError("--ray", address, ALLOWED_ADDRESSES)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as e:
        raise ClusterConnectionError("--ray", address, ALLOWED_ADDRESSES, f"Nothing answers there ({e}); is the cluster running?") from None


class RayExecutor:
    """Runs shiftbench work on a Ray cluster; the caller (the driver) keeps all state.

    Args:
        address: see :data:`ALLOWED_ADDRESSES`; None or "" uses ``RAY_ADDRESS`` when set, else
            starts Ray on this machine for the duration of the run.
        num_cpus: CPUs each task or model worker declares (its threads).
        num_gpus: GPUs each task or model worker declares (e.g. 1 for a model on CUDA).
        local_cpus: CPUs of a Ray started here (None: all).
        max_in_flight: tasks submitted ahead (None: twice the cluster's task slots).
        retries: how often an item whose worker or node died is run again.

    Raises:
        MissingDependencyError: Ray is not installed (``pip install 'shiftbench[ray]'``).
        ClusterConnectionError: the address is malformed or no cluster answers there.
    """

    def __init__(self, address: str | None = None, *, num_cpus: float = 1, num_gpus: float = 0,
                 local_cpus: int | None = None, max_in_flight: int | None = None, retries: int = 3) -> None:
        ray = require_ray()
        self.ray = ray
        self.num_cpus, self.num_gpus, self.retries = num_cpus, num_gpus, retries
        self._owns = False
        addr = (address or "").strip()
        if not addr and os.environ.get("RAY_ADDRESS"):
            addr = os.environ["RAY_ADDRESS"].strip()
        self.address = addr or "local"
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
            if addr in ("", "local"):
                kwargs.update(address="local", num_cpus=local_cpus, include_dashboard=False)
            elif addr == "auto":
                kwargs["address"] = "auto"
            else:
                _check_reachable(addr)
                kwargs["address"] = addr
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, TimeoutError, ValueError) as e:
                raise ClusterConnectionError("--ray", address, ALLOWED_ADDRESSES, f"Ray could not connect: {e}") from None
            self._owns = True
        self._expected = node_versions()
        res = ray.cluster_resources()
        slots = res.get("CPU", 1) / max(num_cpus, 1e-9)
        if num_gpus:
            slots = min(slots, res.get("GPU", 0) / num_gpus)
            if slots < 1:
                raise ClusterConnectionError("--ray", address, ALLOWED_ADDRESSES,
                                             f"The cluster has {res.get('GPU', 0):g} GPUs; each worker asks for {num_gpus:g}.")
        self.slots = max(1, int(slots))
        self.retried = 0  # work items run again because their worker or node died
        self._final_health: str | None = None
        self._nodes_at_start = {str(n.get("NodeID")): str(n.get("NodeManagerAddress", "")) for n in self.nodes()}
        self.max_in_flight = max_in_flight or 2 * self.slots
        self._task = ray.remote(run_task)
        self._system_errors = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                               ray.exceptions.ObjectLostError, ray.exceptions.RayActorError,
                               ray.exceptions.LocalRayletDiedError, ray.exceptions.RaySystemError)

    # -- information

    def nodes(self) -> list[dict[str, Any]]:
        """The cluster's live nodes (Ray's records)."""
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def describe(self) -> str:
        res = self.ray.cluster_resources()
        gpus = f", {res['GPU']:g} GPUs" if res.get("GPU") else ""
        return f"Ray at {self.address}: {len(self.nodes())} node(s), {res.get('CPU', 0):g} CPUs{gpus}"

    def lost_nodes(self) -> list[str]:
        """The nodes alive when this executor connected that are gone now (``address (node id prefix)``)."""
        alive = {str(n.get("NodeID")) for n in self.nodes()}
        return [f"{addr or '?'} ({nid[:12]})" for nid, addr in sorted(self._nodes_at_start.items()) if nid not in alive]

    def health(self) -> str:
        """One sentence for a run's summary: the nodes lost and the work items (shards) run again.

        After :meth:`close` (the run's summary is written once the executor is closed), the state read when it
        closed."""
        if self._final_health is not None and not self.ray.is_initialized():
            return self._final_health
        try:
            lost = self.lost_nodes()
        except Exception:  # noqa: BLE001 - Ray stopped or unreachable: say what is known
            return f"nodes not readable; {self.retried} shard(s) retried" if self.retried else "nodes not readable"
        parts = [f"{len(lost)} node(s) lost: {', '.join(lost[:8])}{' ...' if len(lost) > 8 else ''}" if lost
                 else "no node lost",
                 f"{self.retried} shard(s) retried after a worker or node died" if self.retried else "no shard retried"]
        return "; ".join(parts)

    def check_paths(self, paths: Sequence[str], what: str) -> None:
        """Check that every node with CPUs sees ``paths`` (shared storage at the same path).

        Raises:
            DataError: naming the node and the path it does not see.
        """
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        probe = self.ray.remote(probe_paths)
        refs = [
            probe.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(list(paths))
            for n in self.nodes()
            if n.get("Resources", {}).get("CPU")
        ]
        for host, missing in self.ray.get(refs):
            if missing:
                raise DataError(
                    f"{what}: node {host} does not see {missing[0]!r}. With --ray every node must see the same "
                    "files at the same path (shared storage such as NFS or a cluster file system); see docs/ray.md."
                )

    # -- running

    def _unwrap(self, e: BaseException) -> BaseException:
        cause = getattr(e, "cause", None)
        return cause if isinstance(cause, ShiftbenchError) else e

    def map_unordered(self, fn: Callable[..., Any], items: Iterable[Any], *, shared: Any = None) -> Iterator[Any]:
        """``fn(item)`` (or ``fn(shared, item)``) for every item as Ray tasks; results as they finish.

        ``fn`` and the items must be picklable (``fn`` importable on every node). ``shared`` is
        put in the object store once. Items whose worker or node dies are run again (up to
        ``retries`` times besides Ray's own retries); an error raised by ``fn`` is raised here.
        """
        for _, res in self._map(fn, items, shared=shared):
            yield res

    def map_ordered(self, fn: Callable[..., Any], items: Iterable[Any], *, shared: Any = None) -> Iterator[Any]:
        """As :meth:`map_unordered`, results in the items' order."""
        buf: dict[int, Any] = {}
        nxt = 0
        for i, res in self._map(fn, items, shared=shared):
            buf[i] = res
            while nxt in buf:
                yield buf.pop(nxt)
                nxt += 1

    def _map(self, fn: Callable[..., Any], items: Iterable[Any], *, shared: Any) -> Iterator[tuple[int, Any]]:
        ray = self.ray
        shared_ref = ray.put(shared) if shared is not None else None
        task = self._task.options(num_cpus=self.num_cpus, num_gpus=self.num_gpus, max_retries=self.retries)
        threads = max(1, int(self.num_cpus))
        it = enumerate(items)
        pending: dict[Any, tuple[int, Any, int]] = {}

        def submit(i: int, item: Any, tries: int) -> None:
            pending[task.remote(fn, shared_ref, item, self._expected, threads)] = (i, item, tries)

        try:
            exhausted = False
            while True:
                while not exhausted and len(pending) < self.max_in_flight:
                    nxt = next(it, None)
                    if nxt is None:
                        exhausted = True
                        break
                    submit(nxt[0], nxt[1], 0)
                if not pending:
                    return
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i, item, tries = pending.pop(ref)
                    try:
                        res = ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        raise self._unwrap(e) from None
                    except self._system_errors as e:
                        if tries >= self.retries:
                            raise DataError(f"Ray: a work item failed {tries + 1} times because its worker or node died ({type(e).__name__}); rerun the command to resume") from None
                        self.retried += 1
                        submit(i, item, tries + 1)
                        continue
                    yield i, res
        finally:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or its node is gone
                    pass

    def predict(self, model: ModelSpec, source: Any, items: Sequence[WorkItem], *, space: Any, batch_size: int,
                seed: int, release: bool, workers: int | None = None, logits: bool = False,
                checksum: str | None = None) -> Iterator[PredictionBatch]:
        """Predict work items on ``workers`` model copies (Ray actors, one per worker, each declaring
        ``num_cpus``/``num_gpus``); yields each item's batches in the items' order.

        ``source`` (a :class:`~shiftbench.evaluation.data.Source`) is pickled to every worker, which
        reads and corrupts its images itself; ``space`` is the driver's
        :class:`~shiftbench.evaluation.models.LabelSpace`. A worker that dies (or its node) is
        dropped and its item run again on a live worker (a new one is started when none is left).
        The caller writes the store. ``logits``: also return each batch's logits; ``checksum``: the
        weights' checksum every worker's model must have (else a DataError).
        """
        ray = self.ray
        if not items:
            return
        n = max(1, min(workers or self.slots, len(items)))
        # Ray neither restarts a model worker nor retries its task: a restarted actor would wait for the CPU or GPU
        # that the surviving workers hold (a deadlock once a node is lost); the item goes to a live worker instead.
        actor_cls = ray.remote(Predictor).options(num_cpus=self.num_cpus, num_gpus=self.num_gpus, max_restarts=0,
                                                  max_task_retries=0)
        threads = max(1, int(self.num_cpus))
        src_ref, space_ref = ray.put(source), ray.put(space)

        def new_actor() -> Any:
            return actor_cls.remote(model, src_ref, space_ref, batch_size, seed, release, self._expected, threads,
                                    logits, checksum)

        actors = {k: new_actor() for k in range(n)}
        free = list(range(n))
        todo = list(enumerate(items))[::-1]  # popped from the end: lowest index first
        tries: dict[int, int] = {}
        pending: dict[Any, tuple[int, int]] = {}  # ref -> (actor slot, item index)
        done: dict[int, list[PredictionBatch]] = {}
        nxt, next_slot = 0, n
        try:
            while todo or pending:
                if todo and not actors:  # every model worker died: start one (it waits for free resources)
                    actors[next_slot] = new_actor()
                    free.append(next_slot)
                    next_slot += 1
                while todo and free:
                    slot = free.pop()
                    i, item = todo.pop()
                    pending[actors[slot].predict.remote(i, item)] = (slot, i)
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    slot, i = pending.pop(ref)
                    try:
                        done[i] = ray.get(ref)
                        free.append(slot)
                    except ray.exceptions.RayTaskError as e:
                        raise self._unwrap(e) from None
                    except self._system_errors as e:
                        tries[i] = tries.get(i, 0) + 1
                        if tries[i] > self.retries:
                            raise DataError(f"Ray: a work item failed {tries[i]} times because its worker or node died ({type(e).__name__}); rerun the command to resume") from None
                        dead = actors.pop(slot, None)
                        if dead is not None:
                            try:
                                ray.kill(dead)
                            except Exception:  # noqa: BLE001 - already gone with its node
                                pass
                        self.retried += 1
                        todo.append((i, items[i]))  # next to run, on a live worker
                while nxt in done:
                    yield from done.pop(nxt)
                    nxt += 1
        finally:
            for a in actors.values():  # ends their running tasks too
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - already gone with its node
                    pass

    def close(self) -> None:
        """Disconnect (and stop Ray when this executor started it here)."""
        if self.ray.is_initialized():
            self._final_health = self.health()  # for the summary written after the run
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
        self._owns = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
