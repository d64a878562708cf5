"""Splitting one CPU batch across threads: images in parallel, never barriers inside one image.

:func:`shiftbench.corrupt` cuts a CPU batch into ranges of images and hands them to
:func:`run_in_threads`. The caller's thread works too and the ranges are taken from one queue,
so a thread that runs on a busy core simply takes fewer ranges (no thread waits for another
until the queue is empty). The compiled kernels release the GIL (``numba.njit(nogil=True)``),
torch operations release it, and Pillow releases it while it resamples or codes; what holds it
is the Python glue between them.

Every image draws from its own generator (seed, image key, corruption, severity), so which
thread corrupts an image, and with which neighbours, does not change a pixel.

torch's own intra-op pool (OpenMP) would fight these threads, and some of its CPU kernels give
other last bits with another thread count (bilinear ``F.interpolate``: up to 3e-5 in float32 at
1 vs 2 threads). So every thread of a call, the caller's included, runs torch operations
single-threaded (``torch.set_num_threads(1)`` in its own thread): the parallelism is over images,
and the caller's setting is restored when the batch is done.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from ..cpus import available_cpus
from ..errors import InvalidArgumentError

__all__ = ["resolve_threads", "split", "run_in_threads"]

_POOL: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid that made it, workers, pool)
_POOL_LOCK = threading.Lock()


def resolve_threads(threads: object, argument: str = "threads") -> int:
    """How many threads a CPU batch may use: ``threads`` (an int >= 1, as given), or for ``None``
    ``torch.get_num_threads()`` capped at :func:`shiftbench.cpus.available_cpus` (torch counts the
    machine's cores, not the ones a container or ``taskset`` leaves the process).

    Unlike the model's ``--threads auto`` (:func:`shiftbench.cpus.free_cpus`), the batch does not leave
    out the CPUs other processes keep busy: its threads take ranges of images from one queue, so a
    thread on a shared core takes fewer of them instead of holding up the others at a barrier. On 2
    cores beside one spinning process, two threads ran the 15 x 5 pass at 1.18x of one thread (pinned
    spinner 1.14x), and on the idle machine at 1.88x, where capping at the free CPUs gave 1.03x and 1.55x
    (``perf/threads.py``, docs/performance-threads.md). torch's OpenMP forward pass, whose threads meet at
    barriers, is the opposite case: 0.43x at two threads beside a busy process (``perf/eval_threads.py``)."""
    if threads is None:
        return max(1, min(torch.get_num_threads(), available_cpus()))
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidArgumentError(argument, threads, "an int >= 1, or None for torch.get_num_threads()")
    return threads


def split(n: int, size: int) -> list[tuple[int, int]]:
    """Ranges ``(a, e)`` of at most ``size`` images covering 0..n-1, in order."""
    size = max(1, size)
    return [(a, min(n, a + size)) for a in range(0, n, size)]


def _submit(fn: Callable[[], None], count: int) -> list[Future[None]]:
    """Start ``fn`` ``count`` times on a shared pool of at least ``count`` threads (grown when a call
    needs more; submitted under the lock, so no call submits to a pool that is being replaced). A
    forked child makes its own pool: the parent's threads do not exist there."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid() or _POOL[1] < count:
            old = _POOL
            _POOL = (os.getpid(), count, ThreadPoolExecutor(max_workers=count, thread_name_prefix="shiftbench-batch"))
            if old is not None and old[0] == os.getpid():
                old[2].shutdown(wait=False)  # its running calls finish; its threads then exit
        return [_POOL[2].submit(fn) for _ in range(count)]


def run_in_threads(fn: Callable[[int, int], None], ranges: Sequence[tuple[int, int]], threads: int) -> None:
    """Call ``fn(a, e)`` once for every range, on up to ``threads`` threads (the caller's included).

    Every thread runs torch operations single-threaded (also with one thread and one range): some
    torch CPU kernels (bilinear resampling, for one) give other last bits with another thread count,
    so this keeps the pixels independent of ``torch.get_num_threads()`` as well as of the split.
    The caller's setting is restored on return.

    ``fn`` must be safe to run concurrently on disjoint ranges. The first exception is raised
    here once every running call has returned; the ranges not started by then are skipped.
    """
    todo = deque(ranges)
    helpers = min(threads, len(todo)) - 1
    caller = torch.get_num_threads()
    if helpers <= 0:
        if caller != 1:
            torch.set_num_threads(1)
        try:
            for a, e in todo:
                fn(a, e)
        finally:
            if caller != 1:
                torch.set_num_threads(caller)
        return
    errors: list[BaseException] = []

    def drain() -> None:
        torch.set_num_threads(1)  # this thread's torch operations stay in this thread
        while not errors:
            try:
                a, e = todo.popleft()  # atomic: each range is taken once
            except IndexError:
                return
            try:
                fn(a, e)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller below
                errors.append(exc)
                return

    futures = _submit(drain, helpers)
    try:
        drain()
    finally:
        for f in futures:
            f.cancel()  # a helper that has not started has nothing left to do (and the pool may be busy)
        for f in futures:
            if not f.cancelled():
                f.exception()  # wait; drain() stores its errors itself
        torch.set_num_threads(caller)  # also what threads started later inherit
    if errors:
        raise errors[0]
