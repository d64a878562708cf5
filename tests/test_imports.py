"""Every public name of every package imports in a fresh interpreter.

Package-level lazy attributes (a module ``__getattr__``) only misbehave on first use: once the
submodule behind them is loaded, the package has the attribute and ``__getattr__`` is no longer
asked. So no check may run where shiftbench is already imported, as it is in this test process.

Each check runs in a process of its own in which no shiftbench module has ever been imported:
one subprocess imports the third-party libraries shiftbench builds on (torch alone takes seconds),
makes sure ``sys.modules`` holds nothing of shiftbench, and forks a child per check. The packages,
their ``__all__`` and the names and submodules a plain ``import`` leaves unbound (the lazy ones)
are found the same way, each package in a child of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Reads {"preload": [...], "cases": {id: code}} on stdin, runs each code in a forked child of a
# process that has imported only the preloaded third-party modules (one child per CPU at a time), prints
# {id: [exit, stdout, err]}.
_FORK_RUNNER = r"""
import importlib, io, json, os, sys, tempfile, traceback
job = json.load(sys.stdin)
for name in job["preload"]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
loaded = sorted(m for m in sys.modules if m == "shiftbench" or m.startswith("shiftbench."))
if loaded:
    sys.exit(f"shiftbench modules already imported before the checks: {loaded}")
results = {}
running = {}  # pid -> (case, out, err): up to one child per CPU at a time


def reap():
    pid, wait = os.wait()
    case, out, err = running.pop(pid)
    out.seek(0)
    err.seek(0)
    results[case] = [os.waitstatus_to_exitcode(wait), out.read(), err.read()]
    out.close()
    err.close()


for case, code in job["cases"].items():
    while len(running) >= job["jobs"]:
        reap()
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            sys.stdout = io.StringIO()
            exec(compile(code, f"<{case}>", "exec"), {"__name__": "__main__"})
            out.write(sys.stdout.getvalue())
        except BaseException:
            err.write(traceback.format_exc())
            status = 1
        out.flush()
        err.flush()
        os._exit(status)
    running[pid] = (case, out, err)
while running:
    reap()
results = {case: results[case] for case in job["cases"]}  # in the order given, not the order the children ended
print(json.dumps(results))
"""

# Third-party modules loaded before the fork (never shiftbench itself).
_PRELOAD = ["torch", "numpy", "scipy", "scipy.ndimage", "PIL.Image", "cv2", "numba", "click", "rich.console"]


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _fresh(cases: dict[str, str]) -> dict[str, tuple[int, str, str]]:
    """Run each code in its own process in which shiftbench was never imported."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-c", _FORK_RUNNER],
        input=json.dumps({"preload": _PRELOAD, "cases": cases, "jobs": _cpus()}),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the fresh-interpreter runner failed:\n{done.stderr}")
    return {case: (int(r[0]), str(r[1]), str(r[2])) for case, r in json.loads(done.stdout).items()}


_LIST_PACKAGES = """
import json, pkgutil, shiftbench
names = ["shiftbench"] + [m.name for m in pkgutil.walk_packages(shiftbench.__path__, "shiftbench.") if m.ispkg]
print(json.dumps(sorted(names)))
"""

_DESCRIBE = """
import importlib, json, pkgutil
pkg = importlib.import_module({package!r})
names = list(getattr(pkg, "__all__", []))
subs = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
print(json.dumps({{"all": names, "lazy": [n for n in names if n not in vars(pkg)],
                  "lazy_subs": [s for s in subs if s not in vars(pkg)]}}))
"""


@cache
def _packages() -> dict[str, dict[str, list[str]]]:
    """Per package: ``__all__``, the lazy ones among them, and the submodules the import leaves unloaded."""
    status, out, err = _fresh({"list": _LIST_PACKAGES})["list"]
    if status != 0:
        raise RuntimeError(f"could not list shiftbench's packages:\n{err}")
    names: list[str] = json.loads(out)
    described = _fresh({name: _DESCRIBE.format(package=name) for name in names})
    found = {}
    for name, (status, out, err) in described.items():
        if status != 0:
            raise RuntimeError(f"could not import {name}:\n{err}")
        found[name] = json.loads(out)
    return found


def _from_import_cases() -> list[tuple[str, str]]:
    """Each lazy public name and each submodule a plain import leaves unloaded: ``from package import name``."""
    return [(p, n) for p, info in _packages().items() for n in info["lazy"] + info["lazy_subs"]]


def _attribute_cases() -> list[tuple[str, str]]:
    """Each lazy public name: ``package.name`` (submodules are attributes only once imported, as in any package)."""
    return [(p, n) for p, info in _packages().items() for n in info["lazy"]]


def _star_code(package: str) -> str:
    names = _packages()[package]["all"]
    return f"from {package} import *\nmissing = [n for n in {names!r} if n not in globals()]\nassert not missing, missing\n"


@cache
def _results() -> dict[str, tuple[int, str, str]]:
    cases = {f"star {p}": _star_code(p) for p in _packages()}
    cases.update({f"from {p}:{n}": f"from {p} import {n}\nassert {n} is not None\n" for p, n in _from_import_cases()})
    cases.update(
        {
            f"attr {p}:{n}": f"import importlib\nassert getattr(importlib.import_module({p!r}), {n!r}) is not None\n"
            for p, n in _attribute_cases()
        }
    )
    cases["unknown"] = (
        "import shiftbench.overlap as o, shiftbench.perturbations as p\n"
        "assert not hasattr(o, 'no_such_name') and not hasattr(p, 'no_such_name')\n"
    )
    return _fresh(cases)


def _check(case: str, what: str) -> None:
    status, _, err = _results()[case]
    tail = "\n".join(err.strip().splitlines()[-12:])
    assert status == 0, f"{what} failed in a fresh interpreter (exit {status}):\n{tail}"


def test_discovery_sees_every_package_and_the_lazy_names() -> None:
    packages = _packages()
    for expected in ("shiftbench", "shiftbench.overlap", "shiftbench.perturbations", "shiftbench.evaluation"):
        assert expected in packages
    # the harness (training) and evaluate_p (store) are loaded on first use, by design
    assert {"load_config", "run_study"} <= set(packages["shiftbench.overlap"]["lazy"])
    assert "harness" in packages["shiftbench.overlap"]["lazy_subs"]
    assert "p_plan" in packages["shiftbench.perturbations"]["lazy"]


def test_runner_reports_a_failing_check() -> None:
    # the fork runner must not turn a failure into a pass
    results = _fresh({"bad": "import shiftbench\nraise RecursionError('x')\n", "good": "import shiftbench\n"})
    assert results["bad"][0] != 0 and "RecursionError" in results["bad"][2]
    assert results["good"][0] == 0


@pytest.mark.parametrize("package", sorted(_packages()))
def test_star_import_binds_every_public_name(package: str) -> None:
    _check(f"star {package}", f"from {package} import *")


@pytest.mark.parametrize(("package", "name"), _from_import_cases(), ids=[f"{p}:{n}" for p, n in _from_import_cases()])
def test_lazy_name_from_import(package: str, name: str) -> None:
    _check(f"from {package}:{name}", f"from {package} import {name}")


@pytest.mark.parametrize(("package", "name"), _attribute_cases(), ids=[f"{p}:{n}" for p, n in _attribute_cases()])
def test_lazy_name_attribute(package: str, name: str) -> None:
    _check(f"attr {package}:{name}", f"{package}.{name}")


def test_unknown_attribute_is_an_attribute_error() -> None:
    # the lazy __getattr__ must still say "no such attribute" for anything else (hasattr relies on it)
    _check("unknown", "hasattr on an unknown name")
