"""How many threads the model's forward pass gets (``--threads``): measured, not torch's default.

torch runs a forward pass on as many threads as the machine has cores. On a shared machine that is the wrong
default: with other jobs on the cores, two threads ran ``evaluate`` slower than one (``perf/eval_threads.py``,
``docs/performance.md``), because each thread waits for a core another process holds. ``auto`` therefore takes the
CPUs that other tasks leave free, at least one (:func:`shiftbench.cpus.free_cpus`, the rule ``generate``'s worker
count follows too): all of them on an idle machine, one when the others are busy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..cpus import free_cpus
from ..errors import InvalidArgumentError

__all__ = ["apply_model_threads", "model_threads", "resolve_model_threads"]


def resolve_model_threads(value: Any, argument: str = "--threads") -> int:
    """``"auto"`` / None -> :func:`shiftbench.cpus.free_cpus`; an integer >= 1 as given.

    Raises:
        InvalidArgumentError: anything else.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return free_cpus()
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
