"""How many threads the model's forward pass gets (``--threads``): measured, not torch's default.

torch runs a forward pass on as many threads as the machine has cores. On a shared machine that is the wrong
default: with other jobs on the cores, two threads ran ``evaluate`` slower than one (``perf/eval_threads.py``,
``docs/performance.md``), because each thread waits for a core another process holds. ``auto`` therefore takes the
cores that are free by the one-minute load average, at least one: all of them on an idle machine, one when the
others are busy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["apply_model_threads", "auto_threads", "available_cpus", "model_threads", "resolve_model_threads"]


def available_cpus() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def auto_threads(load: float | None = None, cpus: int | None = None) -> int:
    """The cores not busy with other work: ``cpus - round(load)``, between 1 and ``cpus``.

    Args:
        load: the one-minute load average (default: the machine's now).
        cpus: the CPUs this process may use (default: :func:`available_cpus`).
    """
    n = available_cpus() if cpus is None else cpus
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - Windows
            return n
    return max(1, min(n, n - round(load)))


def resolve_model_threads(value: Any, argument: str = "--threads") -> int:
    """``"auto"`` / None -> :func:`auto_threads`; an integer >= 1 as given.

    Raises:
        InvalidArgumentError: anything else.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return auto_threads()
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1 or (isinstance(value, float) and not value.is_integer()):
        raise InvalidArgumentError(argument, value, "'auto' or an integer >= 1 (threads for the model)")
    return n


def apply_model_threads(value: Any, argument: str = "--threads") -> int:
    """Set torch's intra-op threads for this process from ``value`` (see :func:`resolve_model_threads`)."""
    import torch

    n = resolve_model_threads(value, argument)
    torch.set_num_threads(n)
    return n


@contextlib.contextmanager
def model_threads(value: Any, argument: str = "--threads") -> Iterator[int]:
    """Run the block with torch's intra-op threads set from ``value``; the previous setting comes back after."""
    import torch

    before = torch.get_num_threads()
    n = apply_model_threads(value, argument)
    try:
        yield n
    finally:
        torch.set_num_threads(before)
