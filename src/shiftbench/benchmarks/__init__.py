"""The benchmark registry: every benchmark shiftbench evaluates is one module here (or in another package).

A benchmark is a :class:`~shiftbench.evaluation.protocol.Benchmark` subclass
in one module. The built-in ones register themselves below; code registers
more with :func:`register_benchmark`, and installed packages through the
entry-point group ``shiftbench.benchmarks`` (each entry point names a
``Benchmark`` subclass or instance; it is loaded the first time the registry
is read). ``shiftbench evaluate --benchmark <name>``, :func:`evaluate`
(``shiftbench.evaluate``), ``shiftbench results`` and ``shiftbench list
benchmarks`` read this registry and nothing else.

Example (a third-party package's ``pyproject.toml``)::

    [project.entry-points."shiftbench.benchmarks"]
    icons-50 = "my_package.icons50:Icons50"
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..evaluation.protocol import Benchmark, Settings, set_runner
from ..registry import Registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "Benchmark",
    "Result",
    "Settings",
    "evaluate",
    "get_benchmark",
    "list_benchmarks",
    "register_benchmark",
    "run",
]

ENTRY_POINT_GROUP = "shiftbench.benchmarks"

_BUILT_IN = ("imagenet_c", "imagenet_p", "imagenet_noc", "imagenet_d", "imagenet_c_style", "icons_50_style",
             "icons_50_subtype", "cifar_100_subclass", "imagenet_22k_subclass", "border_obstruction")


def _check(name: str, benchmark: Any) -> Benchmark[Any]:
    bench = benchmark() if isinstance(benchmark, type) else benchmark
    if not isinstance(bench, Benchmark):
        raise InvalidArgumentError("benchmark", benchmark, "a shiftbench.evaluation.protocol.Benchmark subclass")
    if not (isinstance(bench.Settings, type) and issubclass(bench.Settings, Settings)):
        raise InvalidArgumentError(f"{type(bench).__name__}.Settings", bench.Settings,
                                   "a dataclass subclassing shiftbench.evaluation.protocol.Settings")
    bench.Settings.specs()  # a field without a type or default fails here, not on the command line
    return bench


BENCHMARKS: Registry[Benchmark[Any]] = Registry(
    "benchmark", group=ENTRY_POINT_GROUP, modules=[f"{__name__}.{m}" for m in _BUILT_IN], check=_check
)
"""The registered benchmarks (a :class:`~shiftbench.registry.Registry`)."""


def register_benchmark(benchmark: Any, *, replace: bool = False) -> Any:
    """Add a benchmark to the registry (an instance or a class with a no-argument constructor); returns it.

    Usable as a class decorator. Raises:
        InvalidArgumentError: not a Benchmark, no name, no Settings dataclass, or the name is taken
            (pass ``replace=True`` to replace it).
    """
    bench = benchmark() if isinstance(benchmark, type) else benchmark
    name = getattr(bench, "name", "")
    if not isinstance(name, str) or not name or name != name.strip().lower() or " " in name:
        raise InvalidArgumentError("benchmark.name", name, "a non-empty lower-case name without spaces")
    BENCHMARKS.register(name, bench, replace=replace)
    return benchmark


def list_benchmarks() -> list[str]:
    """Names of the registered benchmarks (built-in ones first, then in registration order)."""
    return BENCHMARKS.names()


def get_benchmark(name: str) -> Benchmark[Any]:
    """The registered benchmark called ``name``.

    Raises:
        UnknownNameError: no such benchmark (with the registered names and close matches).
    """
    return BENCHMARKS.get(name)


def _run(bench: Any, options: Any, progress: Any = None) -> Any:
    from .front import run

    return run(bench, options, progress).report


set_runner(_run)


def __getattr__(name: str) -> Any:
    if name in ("Result", "evaluate", "run"):
        import importlib

        return getattr(importlib.import_module(f"{__name__}.front"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
