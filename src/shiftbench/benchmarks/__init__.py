"""The benchmark registry: every benchmark shiftbench evaluates is one module here (or in another package).

A benchmark is a :class:`~shiftbench.evaluation.protocol.Benchmark` subclass
in one module. The built-in ones register themselves below; code registers
more with :func:`register_benchmark`, and installed packages through the
entry-point group ``shiftbench.benchmarks`` (each entry point names a
``Benchmark`` subclass or instance; it is loaded the first time the registry
is read). ``shiftbench evaluate --benchmark <name>``, ``shiftbench results``
and ``shiftbench list benchmarks`` read this registry and nothing else.

Example (a third-party package's ``pyproject.toml``)::

    [project.entry-points."shiftbench.benchmarks"]
    icons-50 = "my_package.icons50:Icons50"
"""

from __future__ import annotations

import difflib
import importlib.metadata
from typing import Any

from ..errors import InvalidArgumentError, UnknownNameError
from ..evaluation.protocol import Benchmark

__all__ = ["ENTRY_POINT_GROUP", "Benchmark", "register_benchmark", "get_benchmark", "list_benchmarks"]

ENTRY_POINT_GROUP = "shiftbench.benchmarks"

_BENCHMARKS: dict[str, Benchmark] = {}
_entry_points_loaded = False

_BUILT_IN = ("imagenet_c", "imagenet_p", "imagenet_noc", "imagenet_d", "imagenet_c_style", "icons_50_style", "icons_50_subtype", "cifar_100_subclass", "imagenet_22k_subclass", "border_obstruction")


def register_benchmark(benchmark: Benchmark | type[Benchmark], *, replace: bool = False) -> Benchmark:
    """Add a benchmark to the registry (an instance or a class with a no-argument constructor); returns it.

    Usable as a class decorator. Raises:
        InvalidArgumentError: not a Benchmark, no name, an option it cannot have, or the name is taken
            (pass ``replace=True`` to replace it).
    """
    bench = benchmark() if isinstance(benchmark, type) else benchmark
    if not isinstance(bench, Benchmark):
        raise InvalidArgumentError("benchmark", benchmark, "a shiftbench.evaluation.protocol.Benchmark subclass")
    name = bench.name
    if not name or name != name.strip().lower() or " " in name:
        raise InvalidArgumentError("benchmark.name", name, "a non-empty lower-case name without spaces")
    from ..evaluation.protocol import BENCHMARK_OPTIONS

    unknown = [o for o in bench.options if o not in BENCHMARK_OPTIONS]
    if unknown:
        raise InvalidArgumentError(
            f"{type(bench).__name__}.options", unknown, f"names among {', '.join(BENCHMARK_OPTIONS)}"
        )
    if name in _BENCHMARKS and not replace and type(_BENCHMARKS[name]) is not type(bench):
        raise InvalidArgumentError("benchmark.name", name, "a name not registered yet", "Pass replace=True.")
    _BENCHMARKS[name] = bench
    return benchmark  # type: ignore[return-value]


def _load() -> None:
    global _entry_points_loaded
    import importlib

    for mod in _BUILT_IN:
        importlib.import_module(f"{__name__}.{mod}")
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        obj: Any = ep.load()
        register_benchmark(obj, replace=True)


def list_benchmarks() -> list[str]:
    """Names of the registered benchmarks (built-in ones first, then in registration order)."""
    _load()
    return list(_BENCHMARKS)


def get_benchmark(name: str) -> Benchmark:
    """The registered benchmark called ``name``.

    Raises:
        UnknownNameError: no such benchmark (with the registered names and close matches).
    """
    _load()
    key = str(name).strip().lower()
    if key not in _BENCHMARKS:
        names = list(_BENCHMARKS)
        raise UnknownNameError("benchmark", name, names, difflib.get_close_matches(key, names, n=3))
    return _BENCHMARKS[key]
