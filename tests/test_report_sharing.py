"""A report worth sharing: percent units, 95 % intervals (Wilson on errors, bootstrap over images on mCE) in the
tables and as error bars, models identified by their weights (two models of one name are two labelled rows),
data by name and digest (no local path anywhere in the file), a visible note for evaluations on fewer images
than the benchmark's full set; checked in the HTML and in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from shiftbench.evaluation.baselines import alexnet_baseline
from shiftbench.report import build_report
from shiftbench.report.intervals import bootstrap_mce, scrub_paths, wilson

from ._eval_toys import evaluate_c as evaluate
from ._eval_toys import image_folder, toy_classifier


def test_wilson_interval_values() -> None:
    # worked values of the Wilson score interval at 95 %
    lo, hi = wilson(0, 10)  # type: ignore[misc]
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(5, 10)  # type: ignore[misc]
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    lo, hi = wilson(2390, 10000)  # type: ignore[misc]
    assert hi - lo == pytest.approx(2 * 1.96 * (0.239 * 0.761 / 10000) ** 0.5, rel=0.01)
    assert wilson(0, 0) is None


def test_bootstrap_mce_interval_holds_the_estimate_and_narrows_with_more_images() -> None:
    base = alexnet_baseline()
    rng = np.random.default_rng(1)

    def draw(n: int) -> tuple[dict[tuple[str, int], np.ndarray], np.ndarray, float, float]:
        wrong = {(c, s): (rng.random(n) < 0.3 + 0.08 * s).astype(np.int8) for c in base.errors for s in range(1, 6)}
        clean = (rng.random(n) < 0.25).astype(np.int8)
        mce = np.mean([sum(wrong[(c, s)].mean() for s in range(1, 6)) / sum(base.errors[c].values())
                       for c in base.errors])
        rel = np.mean([sum(wrong[(c, s)].mean() - clean.mean() for s in range(1, 6))
                       / sum(base.errors[c][s] - base.clean_error for s in range(1, 6)) for c in base.errors])
        return wrong, clean, float(mce), float(rel)

    widths = []
    for n in (40, 1000):
        wrong, clean, mce, rel = draw(n)
        ci = bootstrap_mce(wrong, clean, base.errors, base.clean_error, resamples=400)
        assert ci["mce"][0] < mce < ci["mce"][1] and ci["relative_mce"][0] < rel < ci["relative_mce"][1]
        widths.append(ci["mce"][1] - ci["mce"][0])
    assert widths[1] < widths[0] / 3  # about 1/sqrt(25)
    # a corruption missing a severity: no mCE interval claimed
    wrong, clean, _, _ = draw(10)
    del wrong[("fog", 3)]
    assert "mce" not in bootstrap_mce(wrong, clean, {"fog": base.errors["fog"]}, base.clean_error)


def test_local_paths_become_names_with_a_digest() -> None:
    got = scrub_paths({"data": "/home/me/imagenet/val", "note": "Model m on /home/me/imagenet/val; see "
                       "https://download.pytorch.org/models/resnet50-19c8e357.pth", "n": 3,
                       "files": ["~/cache/w.pth"]})
    assert got["data"].startswith("val (data sha256:") and "/home" not in str(got)
    assert "https://download.pytorch.org/models/resnet50-19c8e357.pth" in got["note"] and got["n"] == 3
    assert got["files"][0].startswith("w.pth (data sha256:")
    assert scrub_paths("/a/b/val", {"/a/b/val": "val (data sha256:x)"}) == "val (data sha256:x)"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    root = tmp_path_factory.mktemp("sharing")
    store = root / "results.sqlite"
    data = image_folder(root / "data", n_per_class=1, n_classes=3)
    # two models of one name with different weights, every benchmark corruption at every severity (an mCE
    # against AlexNet's published errors)
    for seed in (0, 1):
        evaluate(toy_classifier("twin", seed=seed), data=data, corruptions="benchmark", severities="1-5",
                 store=store, batch_size=16)
    out = build_report(store, root / "report.html", gallery=False)
    return out.html, out.html.read_text(encoding="utf-8"), root


def test_report_units_intervals_identities_and_no_local_path(report: tuple[Path, str, Path]) -> None:
    _, html, root = report
    assert str(root) not in html and "/tmp/" not in html and str(Path.home()) not in html
    assert not re.search(r"(?<![\w:/.])/(?:home|root|tmp|work|Users|data)/", html)
    comparison = html[html.index('id="table-comparison"'):html.index("</table>", html.index('id="table-comparison"'))]
    assert "imagenet-c clean_error (%)" in comparison and "imagenet-c mce (%)" in comparison
    rows = re.findall(r"<tr><td>(twin \[sha256:[0-9a-f]{12}\])", comparison)
    assert len(rows) == 2 and rows[0] != rows[1]  # two rows, labelled by their weights
    cells = re.findall(r"<td[^>]*>(\d+\.\d\d) \[(\d+\.\d), (\d+\.\d)\]</td>", comparison)
    assert len(cells) >= 2 * 3  # clean error (Wilson), mCE and relative mCE (bootstrap) of both models
    for v, lo, hi in cells:
        assert float(lo) <= float(v) + 0.05 and float(v) - 0.05 <= float(hi)
    assert 'id="small-sample"' in html and "3 of 50,000 images" in html
    section = html[html.index('id="bench-imagenet-c"'):]
    assert ("Paper: Hendrycks &amp; Dietterich (2019). Benchmarking Neural Network Robustness to Common Corruptions and "
            "Perturbations. ICLR.") in section[: section.index("</table>")]  # each benchmark names its paper
    assert "data sha256:" in html  # the data by name and digest
    assert "Error bars: 95 % intervals" in html


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if p := shutil.which(name):
            return p
    return None


@pytest.mark.skipif(_chromium() is None, reason="no chromium on PATH (tools/ensure-chromium.sh installs it)")
def test_report_in_headless_chromium(report: tuple[Path, str, Path]) -> None:
    path, _, root = report
    exe = _chromium()
    assert exe is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", "--disable-sync", "--enable-logging=stderr", "--v=0"]
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run([exe, *flags, f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom",
                              path.resolve().as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    for bad in ("Uncaught", "ERROR:CONSOLE", "net::ERR"):
        assert bad not in run.stderr, run.stderr[-2000:]
    dom = run.stdout
    assert str(root) not in dom
    table = dom[dom.index('id="table-comparison"'):]
    table = table[:table.index("</table>")]
    assert len(re.findall(r"<td>twin \[sha256:[0-9a-f]{12}\]", table)) == 2
    assert re.search(r"\d+\.\d\d \[\d+\.\d, \d+\.\d\]", table) and "(%)" in table
    assert "Fewer images than the benchmark" in dom
