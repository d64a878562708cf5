"""How many CPUs a job may use now: the CPUs of the process, and the ones other processes leave free.

A thread of torch's OpenMP forward pass on a core that another process keeps busy gets a share of that core and
holds up its team at every barrier: beside one busy process on two cores, two threads ran ``evaluate`` at 0.43x
of one (``perf/eval_threads.py``, docs/performance.md). So ``evaluate --threads auto`` asks :func:`free_cpus`:
the CPUs this process may run on, less the other tasks that want a CPU at this moment, at least one.
(:func:`shiftbench.corrupt`'s batch threads take :func:`available_cpus`: they share one queue of images, so a
thread on a shared core takes fewer images instead of holding the others up; docs/performance-threads.md.)

* The CPUs the process may run on: its affinity mask (what a container or ``taskset`` leaves it), else
  the machine's CPU count (:func:`available_cpus`).
* The other tasks: on Linux the runnable count of ``/proc/loadavg``, the tasks running or waiting to run
  at the instant it is read, less this process's own runnable threads (:func:`own_runnable`: the caller, and
  torch's OpenMP workers, which spin for a while after a parallel region and are runnable then; counted as
  others' work they made a job on an idle machine take one thread) (:func:`other_tasks`). It follows the
  machine from one call to the next (a neighbour that finishes frees its core at once), where the one-minute
  load average would lag for minutes; the load average stands in where the runnable count is not available.
  Other tasks may run on CPUs outside the affinity mask, so they are taken from the machine's CPUs,
  and the result is capped by the process's own.
"""

from __future__ import annotations

import os

__all__ = ["available_cpus", "own_runnable", "other_tasks", "free_cpus"]


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def own_runnable(tasks: str = "/proc/self/task") -> int:
    """This process's threads that run or wait to run now (state ``R`` in ``tasks``), at least 1 (the caller)."""
    try:
        entries = os.listdir(tasks)
    except OSError:
        return 1
    n = 0
    for t in entries:
        try:
            with open(os.path.join(tasks, t, "stat"), "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        end = stat.rfind(b")")  # the state follows the name, which may hold spaces and parentheses
        if stat[end + 2 : end + 3] == b"R":
            n += 1
    return max(1, n)


def other_tasks(loadavg: str = "/proc/loadavg", tasks: str = "/proc/self/task") -> float | None:
    """The tasks of other processes that run or wait to run now: the runnable count of ``loadavg`` less this
    process's runnable threads (Linux; :func:`own_runnable`), else the one-minute load average; None where
    neither is known."""
    try:
        with open(loadavg, "rb") as f:
            runnable = int(f.read().split()[3].split(b"/")[0])
        return float(max(0, runnable - own_runnable(tasks)))
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
