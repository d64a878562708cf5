"""The package's architecture: layers checked by import-linter, and no private name crossing a module or package.

The layers (lowest first) and the contracts are in ``.importlinter`` at the repository root:
foundations < random numbers (``shiftbench.rng``) < engine (corruptions with their registry, image
batches and compiled kernels, api, editions, style) < evaluation core (``shiftbench.evaluation``,
which names no benchmark) < benchmark engines (perturbations, domains, overlap, structural,
training, zoo) < ``shiftbench.benchmarks`` < ``shiftbench.report`` < ``shiftbench.cli``; inside
``shiftbench.corruptions``, operations < shared primitives < compiled kernels (``_cpu``) < tables.
"""

from __future__ import annotations

import ast
import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "shiftbench"

# The private modules of shiftbench.corruptions (_registry, _images, _cpu ...) belong to the corruption
# engine: its packages share them; every other package goes through a public module
# (shiftbench.corruptions, .rng, .checks, .params, .progress, .io).
ENGINE_PACKAGES = ("shiftbench", "shiftbench.corruptions", "shiftbench.style")


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package it lives in)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        mod = ".".join(parts[:-1])
        return mod, mod
    mod = ".".join(parts)
    return mod, mod.rsplit(".", 1)[0]


def _inside(pkg: str, owner: str) -> bool:
    return pkg == owner or pkg.startswith(owner + ".")


def _engine(pkg: str) -> bool:
    return pkg == "shiftbench" or any(_inside(pkg, e) for e in ENGINE_PACKAGES[1:])


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def private_imports() -> list[str]:
    """Every import of a ``_``-name from another module, or of a private module from outside its package."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mod, pkg = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                pairs = [(target, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(a.name.rsplit(".", 1)[0], a.name.rsplit(".", 1)[-1]) for a in node.names if "." in a.name]
            else:
                continue
            for target, name in pairs:
                if target != "shiftbench" and not target.startswith("shiftbench."):
                    continue
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {target}.{name}"
                parts = target.split(".")
                for i, comp in enumerate(parts):
                    if comp.startswith("_") and not comp.startswith("__"):
                        owner = ".".join(parts[:i])
                        allowed = _engine(pkg) if _engine(owner) else _inside(pkg, owner)
                        if not allowed:
                            found.append(f"{where} (private module of {owner}, imported from {pkg})")
                        break
                if name.startswith("_") and not name.startswith("__"):
                    submodule = _is_module(f"{target}.{name}")
                    if not submodule:
                        found.append(f"{where} (private name of {target}, imported by {mod})")
                    elif not (_engine(pkg) if _engine(target) else _inside(pkg, target)):
                        found.append(f"{where} (private module of {target}, imported from {pkg})")
    return found


def test_no_private_name_crosses_a_module_or_package() -> None:
    found = private_imports()
    assert not found, "private names imported across modules or packages:\n" + "\n".join(found)


def test_the_private_import_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "shiftbench"
    (pkg / "evaluation").mkdir(parents=True)
    (pkg / "overlap").mkdir()
    for f in ("__init__.py", "_registry.py", "evaluation/__init__.py", "overlap/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "evaluation" / "data.py").write_text("def _spread(): ...\n")
    (pkg / "overlap" / "noc.py").write_text(
        "from ..evaluation.data import _spread\nfrom .._registry import get_corruption\nfrom . import noc\n"
    )
    (pkg / "api.py").write_text("from ._registry import get_corruption\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = private_imports()
    assert len(found) == 2 and "overlap/noc.py:1" in found[0] and "overlap/noc.py:2" in found[1]


def _lint_imports(src: Path = ROOT / "src") -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: pip install -e '.[test]' (import-linter)")
    env = {"PYTHONPATH": str(src), "PATH": str(Path(sys.executable).parent), "LC_ALL": "C.UTF-8"}
    return subprocess.run(
        [exe, "--config", str(ROOT / ".importlinter"), "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_layer_and_cycle_contracts_hold() -> None:
    r = _lint_imports()
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in r.stdout


def test_planted_violations_break_the_contracts(tmp_path: Path) -> None:
    """A copy of the package's modules with three imports planted, each against one contract: the
    random numbers importing the engine, a compiled kernel importing a corruption module, the
    engine importing the evaluation core."""
    copy = tmp_path / "src" / "shiftbench"
    for path in PACKAGE.rglob("*.py"):
        dest = copy / path.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text())
    (copy / "rng" / "planted.py").write_text("from ..corruptions import get_corruption\n")
    (copy / "corruptions" / "_cpu" / "planted.py").write_text("from .. import blur\n")
    (copy / "corruptions" / "planted.py").write_text("from ..evaluation import metrics\n")
    r = _lint_imports(tmp_path / "src")
    assert r.returncode != 0
    out = " ".join(r.stdout.split())
    assert "Contracts: 1 kept, 3 broken." in out, r.stdout[-4000:]
    for contract in (
        "shiftbench.rng imports nothing of shiftbench but shiftbench.errors BROKEN",
        "(_cpu) < tables BROKEN",
        "report < cli BROKEN",
    ):
        assert contract in out, (contract, r.stdout[-4000:])


def test_every_subpackage_has_a_layer() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    layers = cfg["importlinter:contract:layers"]["layers"]
    named = {m.strip() for line in layers.splitlines() for m in line.split(":") if m.strip()}
    subpackages = {f"shiftbench.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    missing = sorted(p for p in subpackages if p not in named and not any(n.startswith(p + ".") for n in named))
    assert not missing, f"place these packages in a layer of .importlinter: {missing}"


def _engine_names(root: Path = ROOT) -> list[str]:
    """The modules and packages of the two lowest layers of ``.importlinter`` (the engine and its foundations)."""
    cfg = configparser.ConfigParser()
    cfg.read(root / ".importlinter")
    lines = [ln for ln in cfg["importlinter:contract:layers"]["layers"].splitlines() if ln.strip()]
    return [m.strip() for line in lines[-2:] for m in line.split(":") if m.strip()]


def engine_import_cycles(package: Path | None = None, engine: list[str] | None = None) -> list[list[str]]:
    """Cycles of imports between the engine's modules, imports inside functions included (an AST walk).

    import-linter's acyclic contract takes sibling packages as units; here each module is one
    (importing a module's own parent package is no edge: Python loads it anyway).
    """
    pkg_root = package or PACKAGE
    names = engine if engine is not None else _engine_names()

    def in_engine(mod: str) -> bool:
        return any(mod == n or mod.startswith(n + ".") for n in names)

    def exists(mod: str) -> bool:
        rel = Path(*mod.split(".")[1:]) if "." in mod else Path()
        return (pkg_root / rel).with_suffix(".py").is_file() or (pkg_root / rel / "__init__.py").is_file()

    def resolve(mod: str) -> str:
        while "." in mod and not exists(mod):
            mod = mod.rsplit(".", 1)[0]
        return mod

    edges: dict[str, set[str]] = {}
    for path in sorted(pkg_root.rglob("*.py")):
        parts = list(path.relative_to(pkg_root.parent).with_suffix("").parts)
        mod, pkg = (".".join(parts[:-1]),) * 2 if parts[-1] == "__init__" else (".".join(parts), ".".join(parts[:-1]))
        if not in_engine(mod):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
                targets = [resolve(f"{target}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names]
            else:
                continue
            for t in targets:
                if in_engine(t) and t != mod and not mod.startswith(t + "."):
                    edges.setdefault(mod, set()).add(t)
    # strongly connected components (Tarjan)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def test_engine_modules_import_each_other_in_no_cycle() -> None:
    cycles = engine_import_cycles()
    assert not cycles, f"engine modules importing each other (lazy imports included): {cycles}"


def test_the_engine_cycle_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "shiftbench"
    (pkg / "corruptions").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "corruptions" / "__init__.py").write_text("from .blur import blur\n")  # the parent package: no edge
    (pkg / "corruptions" / "blur.py").write_text("def blur():\n    from ..api import corrupt\n")  # lazy
    (pkg / "api.py").write_text("from .corruptions.blur import blur\nfrom . import seeding\n")
    (pkg / "seeding.py").write_text("import numpy\n")
    engine = ["shiftbench.corruptions", "shiftbench.api", "shiftbench.seeding"]
    assert engine_import_cycles(pkg, engine) == [["shiftbench.api", "shiftbench.corruptions.blur"]]
    (pkg / "corruptions" / "blur.py").write_text("def blur():\n    pass\n")
    assert engine_import_cycles(pkg, engine) == []
