"""`shiftbench report`: one self-contained HTML file from a store holding several benchmarks' evaluations.

The store is the v2 fixture (ImageNet-C, -P, -NOC and -D evaluations of the toy
model) plus a second toy model's ImageNet-C evaluation at all five severities and
an ICONS-50 style hold-out on the shared emoji-styles (a one-epoch small CNN;
where that data is absent, no structural section).
The report is checked against the registry (every benchmark with stored
results has its section and records), the figures against the zoo's published
tables, and the HTML in headless Chromium (skipped where no chromium exists).
"""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from shiftbench.benchmarks import get_benchmark, list_benchmarks  # noqa: E402
from shiftbench.cli import main  # noqa: E402
from shiftbench.report import build_report  # noqa: E402
from shiftbench.zoo.tables import table  # noqa: E402

from ._eval_toys import SAMPLE_DIR, image_folder, toy_classifier  # noqa: E402
from ._eval_toys import evaluate_c as evaluate  # noqa: E402

EMOJI = SAMPLE_DIR.parent / "emoji-styles"
FIXTURE = Path(__file__).parent / "fixtures" / "stores" / "v2_all.sqlite"
PHOTO = SAMPLE_DIR / "n01530575_brambling.JPEG"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-store")
    path = root / "results.sqlite"
    shutil.copy(FIXTURE, path)
    data = image_folder(root / "data", n_per_class=2, n_classes=2)
    evaluate(toy_classifier("toy-b", seed=1), data=data, corruptions="gaussian_noise,contrast,fog",
             severities="1-5", store=path, batch_size=4)
    from ._eval_toys import evaluate_p

    # an ImageNet-P evaluation with AlexNet-normalised mFR / mT5D (edition 224, all ten test perturbations, one
    # video each): 001 Fig. 4's points
    evaluate_p(toy_classifier("toy-b", seed=1), data=data, difficulties="1", store=path, batch_size=16, limit=1)
    if (EMOJI / "emoji-styles-32.npz").is_file():  # a structural hold-out: 000 Fig. 6's section
        assert main(["evaluate", "--benchmark", "icons-50-style", "--data", str(EMOJI), "--store", str(path),
                     "--no-progress", "--recipe", "icons50-wrn-16-4:arch=small_cnn,epochs=1", "--limit", "60",
                     "--seen-test-share", "0.1", "--results-format", "json"]) == 0
    return path


@pytest.fixture(scope="module")
def built(store: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("report-out")
    r = build_report(store, out / "report.html", figures_dir=out / "figures", gallery_image=PHOTO)
    return r, r.html.read_text(encoding="utf-8")


def _sections(store: Path) -> dict[str, list[dict]]:
    out = {}
    for name in list_benchmarks():
        sec = get_benchmark(name).stored(store, model=None, baseline="alexnet", evaluation=None)
        if sec is not None:
            out[name] = sec.value
    return out


def test_every_registered_benchmark_with_results_has_its_section_and_records(store: Path, built) -> None:  # type: ignore[no-untyped-def]
    r, html = built
    secs = _sections(store)
    structural = {"icons-50-style"} if (EMOJI / "emoji-styles-32.npz").is_file() else set()
    assert set(secs) == {"imagenet-c", "imagenet-p", "imagenet-noc", "imagenet-d"} | structural
    assert r.benchmarks == list(secs)
    for name, records in secs.items():
        part = html.split(f'id="bench-{name}"', 1)[1].split("</section>", 1)[0]
        assert get_benchmark(name).title.replace("&", "&amp;") in part
        tbody = part.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
        assert tbody.count("<tr>") == len(records)
        for rec in records:
            assert str(rec.get("label", rec["model"])) in tbody
    comparison = html.split('id="table-comparison"', 1)[1].split("</table>", 1)[0]
    for model in ("toy", "toy-b"):  # a section per model and a row of the comparison (with its weights' digest
        # where the store holds two models of the name: the fixture's "toy" has two)
        assert re.search(rf"<h3>{model}( \[sha256:[0-9a-f]{{12}}\]| \[[0-9a-f]{{19}}\])?</h3>", html)
        assert re.search(rf"<tr><td>{model}( \[[^<]+\])?( <span[^<]+</span>)?</td>", comparison)


def _data_uris(html: str) -> list[str]:
    return re.findall(r'src="(data:[^"]*)"', html)


def test_report_is_self_contained(built) -> None:  # type: ignore[no-untyped-def]
    _, html = built
    outside = re.sub(r'data:[a-z/+]+;base64,[A-Za-z0-9+/=]+', "", html)
    assert "http://" not in outside and "https://" not in outside
    assert not re.search(r"<link\b|@import|url\(", outside)
    srcs = re.findall(r'\bsrc="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/") for s in srcs)


def _non_blank(img: Image.Image) -> bool:
    a = np.asarray(img.convert("L"), dtype=np.float64)
    return a.size > 0 and a.std() > 1.0


def test_every_figure_and_gallery_image_is_a_real_picture(built) -> None:  # type: ignore[no-untyped-def]
    r, html = built
    uris = _data_uris(html)
    figs = [u for u in uris if u.startswith("data:image/png")]
    gallery = [u for u in uris if u.startswith("data:image/jpeg")]
    assert len(figs) == r.n_figures >= 10
    # clean once per gallery row + 19 corruptions x 5 severities
    assert len(gallery) == 19 * 6
    for u in figs + gallery[:6]:
        img = Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1])))
        img.load()
        assert img.width > 50 and img.height > 50 and _non_blank(img)
    # severity 5 of gaussian noise differs from the clean photo
    row = html.split("<td>gaussian_noise</td>", 1)[1].split("</tr>", 1)[0]
    imgs = [np.asarray(Image.open(io.BytesIO(base64.b64decode(u))), np.float64)
            for u in re.findall(r'src="data:image/jpeg;base64,([^"]*)"', row)]
    assert np.abs(imgs[5] - imgs[0]).mean() > 5.0


def test_figures_folder_has_png_and_svg_of_every_figure(built) -> None:  # type: ignore[no-untyped-def]
    r, html = built
    pngs = sorted(p for p in r.figure_files if p.suffix == ".png")
    svgs = sorted(p for p in r.figure_files if p.suffix == ".svg")
    assert len(pngs) == len(svgs) == r.n_figures
    assert {p.stem for p in pngs} == {p.stem for p in svgs}
    for p in pngs:
        assert _non_blank(Image.open(p))
    for p in svgs:
        assert p.read_text(encoding="utf-8").lstrip().startswith("<?xml") and "<svg" in p.read_text(encoding="utf-8")
    assert not list(pngs[0].parent.glob(".*"))  # nothing half-written left behind


def test_imagenet_c_figure_puts_published_and_stored_models_in_one_plane(store: Path) -> None:
    from shiftbench.benchmarks.imagenet_c import report_figures

    rows = _sections(store)["imagenet-c"]
    figs = {f.name: f for f in report_figures(rows)}
    assert {"mce-vs-error", "relative-mce-vs-error", "error-per-severity", "ce-per-corruption",
            "error-per-corruption-severity"} <= set(figs)
    ax = figs["mce-vs-error"].figure.axes[0]
    points = {tuple(np.round(p, 3)) for c in ax.collections for p in c.get_offsets()}
    for pub in table("000:1").rows:  # 000 Table 1: clean error and mCE of every published model
        assert (pub.values["error"], pub.values["mce"]) in points
    for r in rows:
        assert (round(100 * r["clean_error"], 3), round(100 * r["mce"], 3)) in points
    lines = {ln.get_label(): ln for ln in figs["error-per-severity"].figure.axes[0].get_lines()}
    toy_b = next(r for r in rows if r["model"] == "toy-b")
    xs, ys = lines[toy_b["label"]].get_data()
    assert list(xs) == [0, 1, 2, 3, 4, 5]
    expected = [100 * toy_b["clean_error"]] + [
        100 * np.mean([toy_b["corruptions"][c]["errors"][str(s)] for c in ("gaussian_noise", "contrast", "fog")])
        for s in range(1, 6)
    ]
    assert np.allclose(ys, expected)
    panels = {ax.get_title(): ax for ax in figs["error-per-corruption-severity"].figure.axes if ax.get_title()}
    assert set(panels) == {"gaussian_noise", "contrast", "fog"}
    fog = {ln.get_label(): ln.get_data() for ln in panels["fog"].get_lines()}
    assert np.allclose(fog[toy_b["label"]][1], [100 * toy_b["corruptions"]["fog"]["errors"][str(s)] for s in range(1, 6)])
    colour = {ln.get_label(): ln.get_color() for ax in panels.values() for ln in ax.get_lines()}
    for ax in panels.values():  # one colour per model in every panel
        assert all(ln.get_color() == colour[ln.get_label()] for ln in ax.get_lines())
    assert len(set(colour.values())) == len(colour)
    from shiftbench.evaluation.baselines import alexnet_baseline

    assert np.allclose(fog["AlexNet (published)"][1], [100 * alexnet_baseline().errors["fog"][s] for s in range(1, 6)])


def test_imagenet_noc_figure_pairs_models_stored_with_both_benchmarks(store: Path) -> None:
    secs = _sections(store)
    figs = {f.name: f for f in get_benchmark("imagenet-noc").report_figures(
        store, get_benchmark("imagenet-noc").stored(store, model=None, baseline="alexnet", evaluation=None))}
    ax = figs["noc-vs-c-mce"].figure.axes[0]
    points = {tuple(np.round(p, 3)) for c in ax.collections for p in c.get_offsets()}
    c_toy = [r for r in secs["imagenet-c"] if r["model"] == "toy"][-1]
    noc_toy = secs["imagenet-noc"][0]
    # x: ImageNet-C relative mCE, what Laugros et al.'s Table 3 prints as 'mCE.IC'
    assert (round(100 * c_toy["relative_mce"], 3), round(100 * noc_toy["mce"], 3)) in points
    for pub in table("laugros2020:3").rows:
        assert (pub.values["imagenet_c_relative_mce"], pub.values["imagenet_noc_mce"]) in points


@pytest.fixture()
def close_figures() -> Iterator[None]:
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _points(fig) -> set[tuple[float, float]]:  # type: ignore[no-untyped-def]
    return {tuple(np.round(p, 3)) for c in fig.axes[0].collections for p in c.get_offsets()}


def test_imagenet_p_figure_4_puts_the_papers_architectures_and_stored_models_in_one_plane(store: Path, built, close_figures) -> None:  # type: ignore[no-untyped-def]
    secs = _sections(store)
    bench = get_benchmark("imagenet-p")
    figs = {f.name: f for f in bench.report_figures(store, bench.stored(store, model=None, baseline="alexnet", evaluation=None))}
    p_toy = next(r for r in secs["imagenet-p"] if r["model"] == "toy-b")
    assert p_toy["mfr"] is not None and p_toy["mt5d"] is not None
    c_toy = [r for r in secs["imagenet-c"] if r["model"] == p_toy["model"]][-1]  # the latest evaluation wins
    for key in ("mfr", "mt5d"):
        pts = _points(figs[f"{key}-vs-error"].figure)
        for pub in table("001:P").rows:  # e.g. ResNet-50 (23.9, 58.0) from 001 line 385
            assert (pub.values["error"], pub.values[key]) in pts
        assert (round(100 * c_toy["clean_error"], 3), round(100 * p_toy[key], 3)) in pts
        assert "fewer than the 10 test perturbations" not in figs[f"{key}-vs-error"].caption
        assert "no ImageNet-C evaluation" not in figs[f"{key}-vs-error"].caption
    _, html = built
    assert "mFR against clean error (Hendrycks &amp; Dietterich, 2019, Figure 4)" in html
    assert "mT5D against clean error (Hendrycks &amp; Dietterich, 2019, Figure 4)" in html


@pytest.mark.skipif(not (EMOJI / "emoji-styles-32.npz").is_file(), reason="shared emoji-styles data absent")
def test_structural_section_shows_seen_and_held_out_accuracy(store: Path, built, close_figures) -> None:  # type: ignore[no-untyped-def]
    rec = _sections(store)["icons-50-style"][0]
    bench = get_benchmark("icons-50-style")
    (fig,) = bench.report_figures(store, bench.stored(store, model=None, baseline="alexnet", evaluation=None))
    bars = {c.get_label(): [b.get_height() for b in c] for c in fig.figure.axes[0].containers}
    assert bars["seen"] == [pytest.approx(100 * rec["seen_accuracy"])]
    assert bars["held out"] == [pytest.approx(100 * rec["heldout_accuracy"])]
    assert "no held-out accuracy" in fig.caption  # emoji-styles holds out a style the paper never reports
    _, html = built
    assert "ICONS-50 style hold-out: seen and held-out accuracy" in html
    # the comparison table carries the structural headline next to the others
    cmp = html.split('id="table-comparison"', 1)[1].split("</table>", 1)[0]
    assert "icons-50-style heldout_accuracy" in cmp


def test_structural_figure_draws_the_papers_held_out_accuracy_for_the_same_split(close_figures: None) -> None:
    from shiftbench.benchmarks.icons_50_style import holdout_figures

    pub = get_benchmark("cifar-100-subclass").published_heldout
    recs = [{"model": "wrn", "evaluation": 3, "split": "cifar100:k=2", "seen_accuracy": 0.7, "heldout_accuracy": 0.3},
            {"model": "wrn", "evaluation": 4, "split": "cifar100:k=9", "seen_accuracy": 0.6, "heldout_accuracy": None}]
    (fig,) = holdout_figures("CIFAR-100", recs, pub)
    bars = {c.get_label(): [b.get_height() for b in c] for c in fig.figure.axes[0].containers}
    assert bars["held out, published (Hendrycks & Dietterich (2018))"] == [26.78, 0.0]
    assert bars["held out"] == [pytest.approx(30.0), 0.0]
    assert "cifar100:k=2 26.78 %" in fig.caption and "Hendrycks & Dietterich (2018)" in fig.caption


def test_published_held_out_accuracies_are_the_papers_text() -> None:
    from ._eval_toys import PAPER_000

    if not PAPER_000.is_file():
        pytest.skip("paper text absent")
    lines = PAPER_000.read_text(encoding="utf-8").splitlines()
    n = 0
    for name in ("icons-50-style", "icons-50-subtype", "cifar-100-subclass", "imagenet-22k-subclass"):
        for split, (acc, line) in get_benchmark(name).published_heldout.items():
            assert re.search(rf"(?<![\d.]){acc:g}%", lines[line - 1]), (name, split, acc, line)
            n += 1
    assert n == 6


def test_cli_writes_the_report_and_refuses_a_missing_store(store: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.html"
    assert main(["report", "--store", str(store), "--out", str(out), "--no-gallery"]) == 0
    assert f"{len(_sections(store))} benchmark(s)" in capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert "Left out (--no-gallery)." in text and "data:image/jpeg" not in text
    assert main(["report", "--store", str(tmp_path / "none.sqlite"), "--out", str(out)]) == 2
    assert "--store" in capsys.readouterr().err


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


@pytest.mark.skipif(_chromium() is None, reason="no chromium on PATH (tools/ensure-chromium.sh installs it)")
def test_report_renders_in_headless_chromium(built, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r, html = built
    exe = _chromium()
    assert exe is not None
    url = r.html.resolve().as_uri()

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory() as profile:
            return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                                  capture_output=True, text=True, timeout=120)

    dom = run("--virtual-time-budget=3000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for bad in ("Uncaught", "ERROR:CONSOLE", "net::ERR"):
        assert bad not in dom.stderr, dom.stderr[-2000:]
    assert "<figure" in dom.stdout and dom.stdout.count('src="data:image/png') == r.n_figures
    assert dom.stdout.count("<table") >= 2 + len(r.benchmarks)
    shot_path = tmp_path / "shot.png"
    shot = run("--window-size=1280,2000", f"--screenshot={shot_path}")
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert "Uncaught" not in shot.stderr and "ERROR:CONSOLE" not in shot.stderr
    img = Image.open(shot_path).convert("RGB")
    assert img.size == (1280, 2000)
    a = np.asarray(img, dtype=np.int32)
    coloured = (np.abs(a[..., 0] - a[..., 2]) > 40).mean()  # the figures' red stars and bars, not only text
    assert _non_blank(img) and coloured > 0.001


def test_study_store_adds_its_overlap_heatmap_and_says_why_an_unfinished_study_is_missing(store: Path, tmp_path: Path) -> None:
    from shiftbench.overlap.scores import overlap_matrix
    from shiftbench.overlap.store import OverlapStore
    from shiftbench.report.build import study_figures

    acc = {"standard": {"clean": 0.9, "blur": 0.5, "noise": 0.4},
           "blur": {"clean": 0.88, "blur": 0.8, "noise": 0.5},
           "noise": {"clean": 0.85, "blur": 0.55, "noise": 0.75}}
    path = tmp_path / "study.sqlite"
    with OverlapStore(path) as st:
        sid = st.study("toy-study", {})
        for m, row in acc.items():
            for t, a in row.items():
                st.put_accuracy(sid, m, t, round(a * 100), 100)
        unfinished = st.study("unfinished", {})
        st.put_accuracy(unfinished, "standard", "clean", 90, 100)
        st.put_accuracy(unfinished, "standard", "blur", 50, 100)
        st.put_accuracy(unfinished, "blur", "clean", 88, 100)  # blur x blur not stored yet
        empty = st.study("no-corruption-yet", {})
        st.put_accuracy(empty, "standard", "clean", 90, 100)
    figs = {f.name: f for f in study_figures(path)}
    assert set(figs) == {"overlap-toy-study", "overlap-unfinished", "overlap-no-corruption-yet"}
    assert figs["overlap-unfinished"].figure is None and "incomplete" in figs["overlap-unfinished"].caption
    assert figs["overlap-no-corruption-yet"].figure is None
    shown = figs["overlap-toy-study"].figure.axes[0].images[0].get_array()
    assert np.allclose(np.ma.filled(shown, np.nan), overlap_matrix(acc, on_undefined="nan").values, equal_nan=True)
    r = build_report(store, tmp_path / "r.html", figures_dir=tmp_path / "f", study=path, gallery=False)
    html = r.html.read_text(encoding="utf-8")
    assert "Overlapping scores: toy-study" in html and "Not drawn:" in html
    assert (tmp_path / "f" / "overlap-study_overlap-toy-study.png").is_file()


def test_a_registered_benchmark_without_figures_gets_its_table_and_headline_column(store: Path, tmp_path: Path) -> None:
    """The report core names no benchmark: a third-party one shows up from the registry alone."""
    from shiftbench.benchmarks import register_benchmark
    from shiftbench.evaluation.protocol import Benchmark, Section

    own = tmp_path / "own.sqlite"
    shutil.copy(store, own)
    records = [{"model": "toy", "label": "toy #7", "evaluation": 7, "error": 0.25, "errors": {"a": 0.5, "b": 0.0}},
               {"model": "icons-model", "label": "icons-model #8", "evaluation": 8, "error": 0.125,
                "errors": {"a": 0.25, "b": 0.0}}]

    class Icons(Benchmark):
        name = "report-test-icons"
        title = "Icons <held-out> & styles"
        headline = ("error",)

        def plan(self, settings, ctx):  # type: ignore[no-untyped-def]
            raise NotImplementedError("stored results only")

        def score(self, store, evaluation):  # type: ignore[no-untyped-def]
            raise NotImplementedError("stored results only")

        def stored(self, store, *, model, baseline, evaluation):  # type: ignore[no-untyped-def]
            if Path(store) != own:
                return None
            return Section("icons", records, lambda: "", lambda console: None)

    register_benchmark(Icons, replace=True)
    r = build_report(own, tmp_path / "r.html", gallery=False)
    html = r.html.read_text(encoding="utf-8")
    assert "report-test-icons" in r.benchmarks
    part = html.split('id="bench-report-test-icons"', 1)[1].split("</section>", 1)[0]
    assert "Icons &lt;held-out&gt; &amp; styles" in part  # escaped by the template
    head = part.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert "<th>errors.a (%)</th>" in head and "<th>errors.b (%)</th>" in head  # fractions shown in %
    assert 'data-sort="12.5">12.50</td>' in part and "<figure" not in part
    comparison = html.split('id="table-comparison"', 1)[1].split("</table>", 1)[0]
    assert "<th>report-test-icons error (%)</th>" in comparison
    assert "<tr><td>icons-model</td>" in comparison
