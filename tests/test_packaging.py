"""Packaging metadata: one version, composed extras, the license and citation files, the default test selection."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import shiftbench

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]


def _expand(extra: str) -> set[str]:
    """The requirement names an extra installs, following shiftbench[...] self-references."""
    out: set[str] = set()
    for req in EXTRAS[extra]:
        m = re.fullmatch(r"shiftbench\[([^\]]+)\]", req)
        if m:
            for sub in m.group(1).split(","):
                out |= _expand(sub.strip())
        else:
            out.add(re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower())
    return out


def test_version_has_one_source() -> None:
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "shiftbench.version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", shiftbench.__version__)
    # nowhere else in the sources is a version written out
    assert "version:" not in (REPO / "CITATION.cff").read_text().replace("cff-version:", "")


def test_extras_compose() -> None:
    assert "shiftbench[models]" in EXTRAS["demo"]
    assert _expand("models") < _expand("demo")
    assert _expand("demo") | _expand("video") | _expand("overlap") | _expand("mapping") <= _expand("test")
    for name in ("pytest", "hypothesis", "sybil"):
        assert name in _expand("test")
    # every optional feature is in `all`, and no extra re-lists a package another extra it includes has
    # (style-study is the recipe of one perf/ script, not a feature)
    features = set(EXTRAS) - {"all", "test", "style-study"}
    assert set().union(*(_expand(e) for e in features)) == _expand("all")
    assert "matplotlib" not in EXTRAS["overlap"]


def test_license_and_citation() -> None:
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    assert "Apache License" in (REPO / "LICENSE").read_text() and "Version 2.0" in (REPO / "LICENSE").read_text()
    cff = (REPO / "CITATION.cff").read_text()
    assert cff.startswith("cff-version: 1.2.0") and "license: Apache-2.0" in cff
    # the toolkit plus the five papers it implements (../shared/papers)
    for title in (
        "Benchmarking Neural Network Robustness to Common Corruptions and Perturbations",
        "Benchmarking Neural Network Robustness to Common Corruptions and Surface Variations",
        "Using the Overlapping Score to Improve Corruption Benchmarks",
        "Increasing the Coverage and Balance of Robustness Benchmarks by Using Non-Overlapping Corruptions",
        "ImageNet-D: A new challenging robustness dataset inspired by domain adaptation",
    ):
        assert f'title: "{title}"' in cff, title
    assert PROJECT["urls"]


def test_bare_pytest_excludes_slow() -> None:
    addopts = PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"]
    assert '-m "not slow"' in addopts
