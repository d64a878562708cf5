"""How many CPUs a job may use now: the one rule for the corruption engine's batch threads and the model's threads.

A thread on a core that another process keeps busy gets a share of that core and holds up the work it was
meant to speed up: beside one busy process on two cores, two threads ran a corruption batch and a model's
forward pass slower than one (``perf/threads.py``, ``perf/eval_threads.py``, ``docs/performance-threads.md``).
So :func:`shiftbench.corrupt` (``threads=None``) and ``evaluate --threads auto`` both ask :func:`free_cpus`:
the CPUs this process may run on, less the other tasks that want a CPU at this moment, at least one.

* The CPUs the process may run on: its affinity mask (what a container or ``taskset`` leaves it), else
  the machine's CPU count (:func:`available_cpus`).
* The other tasks: on Linux the runnable count of ``/proc/loadavg``, the tasks running or waiting to run
  at the instant it is read, less the caller (:func:`other_tasks`). It follows the machine from one call
  to the next (a neighbour that finishes frees its core at once), where the one-minute load average
  would lag for minutes; the load average stands in where the runnable count is not available.
  Other tasks may run on CPUs outside the affinity mask, so they are taken from the machine's CPUs,
  and the result is capped by the process's own.
"""

from __future__ import annotations

import os

__all__ = ["available_cpus", "other_tasks", "free_cpus"]


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def other_tasks(loadavg: str = "/proc/loadavg") -> float | None:
    """The tasks other than the caller that run or wait to run now: the runnable count of ``loadavg``
    (Linux; the caller is one of them), else the one-minute load average; None where neither is known."""
    try:
        with open(loadavg, "rb") as f:
            runnable = int(f.read().split()[3].split(b"/")[0])
        return float(max(0, runnable - 1))
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # Windows
        return None


def free_cpus(others: float | None = None, *, cpus: int | None = None, machine: int | None = None) -> int:
    """The CPUs a job started now can have to itself: ``min(cpus, machine - round(others))``, at least 1.

    Args:
        others: how many other tasks want a CPU (default: :func:`other_tasks` now; unknown: none).
        cpus: the CPUs this process may run on (default: :func:`available_cpus`).
        machine: the machine's CPUs (default: ``os.cpu_count()``, at least ``cpus``).
    """
    mine = available_cpus() if cpus is None else max(1, int(cpus))
    total = max(mine, (os.cpu_count() or mine) if machine is None else int(machine))
    if others is None:
        others = other_tasks()
    if others is None:
        return mine
    return max(1, min(mine, total - round(others)))
