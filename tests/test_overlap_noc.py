"""ImageNet-NOC as a named benchmark, saved user benchmarks and their evaluation."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from shiftbench.cli import main
from shiftbench.errors import DataError, InvalidArgumentError, UnknownCorruptionError
from shiftbench.overlap import (
    IMAGENET_NOC,
    OverlapMatrix,
    alexnet_noc_baseline,
    benchmark_from_selection,
    imagenet_noc,
    load_benchmark,
    save_benchmark,
    select_benchmark,
)

from ._eval_toys import evaluate_noc, toy_classifier

# The demo images ship in the foolbox wheel; shiftbench reads its data files and never imports it.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("foolbox") is None, reason="the demo images ship in the foolbox wheel"
)


def test_imagenet_noc_definition() -> None:
    b = imagenet_noc()
    assert b.corruptions == IMAGENET_NOC
    assert [c.removeprefix("noc_") for c in IMAGENET_NOC] == [
        "quantization",
        "blur",
        "vertical_artifacts",
        "rain",
        "border",
        "shear",
        "brightness",
        "hue",
    ]
    assert b.baseline.errors["noc_hue"] == 0.684 and b.baseline.clean_error == 0.435
    assert "Appendix A" in b.baseline.source


def test_evaluate_noc_api_resumes(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    clf = toy_classifier()
    r1 = evaluate_noc(clf, store=store, limit=3, batch_size=2)
    assert set(r1.ce) == set(IMAGENET_NOC) and r1.n_images == 3
    assert r1.new_predictions == 3 * 9
    for c in IMAGENET_NOC:
        assert r1.ce[c] == pytest.approx(r1.errors[c] / alexnet_noc_baseline().errors[c])
    assert r1.mce == pytest.approx(np.mean(list(r1.ce.values())))
    r2 = evaluate_noc(clf, store=store, limit=3, batch_size=2)
    assert r2.new_predictions == 0 and r2.errors == r1.errors
    assert "mCE" in r1.table()


def test_saved_benchmark_round_trip_and_evaluation(tmp_path: Path) -> None:
    names = ["noc_hue", "noc_rain", "border", "noc_blur"]
    om = OverlapMatrix(names, np.array([[1, 0, 0, 0.5], [0, 1, 0.1, 0], [0, 0.1, 1, 0], [0.5, 0, 0, 1.0]]))
    sel = select_benchmark(om, 0.1)
    assert sel.names == ("noc_hue", "noc_rain", "border")
    with pytest.raises(InvalidArgumentError, match="border"):
        benchmark_from_selection(sel, "mine")  # 002's border has no published AlexNet error
    bench = benchmark_from_selection(sel, "mine", baseline={"noc_hue": 0.6, "noc_rain": 0.7, "border": 0.5})
    p = save_benchmark(bench, tmp_path / "mine.json")
    again = load_benchmark(p)
    assert again.corruptions == bench.corruptions and again.baseline.errors == bench.baseline.errors
    assert again.selection["threshold"] == 0.1
    r = evaluate_noc(toy_classifier(), benchmark=p, store=tmp_path / "r.sqlite", limit=2)
    assert set(r.ce) == set(sel.names)


def test_bad_benchmarks(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="benchmark"):
        load_benchmark("no-such-benchmark")
    f = tmp_path / "x.json"
    f.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(DataError, match="not a saved benchmark"):
        load_benchmark(f)
    with pytest.raises(UnknownCorruptionError):
        benchmark_from_selection(["noc_hue", "fog"], "x")
    with pytest.raises(InvalidArgumentError, match="corruptions"):
        evaluate_noc(toy_classifier(), corruptions=["fog"], store=tmp_path / "r.sqlite", limit=1)


@pytest.mark.slow
def test_cli_evaluate_imagenet_noc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("efficientnet_lite_pytorch")
    out = tmp_path / "noc.json"
    rc = main(
        [
            "evaluate",
            "--benchmark",
            "imagenet-noc",
            "--limit",
            "2",
            "--corruptions",
            "hue,rain",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--results-format",
            "json",
            "--results-file",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert set(doc["ce"]) == {"noc_hue", "noc_rain"} and doc["baseline"] == "AlexNet"


def test_cli_evaluate_imagenet_noc_refuses_imagenet_c_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = str(tmp_path / "s.sqlite")
    assert main(["evaluate", "--benchmark", "imagenet-noc", "--severities", "3", "--store", s]) != 0
    assert "severity" in capsys.readouterr().err
    assert main(["evaluate", "--benchmark", "imagenet-noc", "--edition", "32", "--store", s]) != 0
    assert "224" in capsys.readouterr().err
    assert main(["evaluate", "--benchmark", "imagenet-noc", "--baseline", "none", "--store", s]) != 0
    assert "AlexNet" in capsys.readouterr().err


def test_cli_select_on_a_matrix_file_and_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = tmp_path / "m.csv"
    m.write_text("noc_hue,noc_rain,noc_blur\n1,0,0.4\n0,1,0.05\n0.4,0.05,1\n")
    rc = main(
        [
            "select",
            "--matrix",
            str(m),
            "--thresholds",
            "0.1",
            "--save",
            "tiny",
            "--save-file",
            str(tmp_path / "tiny.json"),
        ]
    )
    assert rc == 0
    assert "hue, rain" in capsys.readouterr().out  # {hue, rain} and {rain, blur} qualify; hue-rain overlaps less
    assert load_benchmark(tmp_path / "tiny.json").corruptions == ("noc_hue", "noc_rain")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,0.3\n0.2,1\n")
    assert main(["select", "--matrix", str(bad)]) != 0
    assert "symmetric" in capsys.readouterr().err
    assert main(["select", "--matrix", str(m), "--thresholds", "1.5"]) != 0
    assert "threshold" in capsys.readouterr().err
    nonsq = tmp_path / "ns.csv"
    nonsq.write_text("a,b,c\n1,0,0\n0,1,0\n")
    assert main(["select", "--matrix", str(nonsq)]) != 0
    assert "square" in capsys.readouterr().err


def test_matrix_csv_with_row_names_as_pandas_writes_it(tmp_path: Path) -> None:
    from shiftbench.errors import InvalidArgumentError
    from shiftbench.overlap.cli import read_overlap_matrix

    plain = tmp_path / "plain.csv"
    plain.write_text("a,b,c\n1,0.2,0\n0.2,1,0.1\n0,0.1,1\n")
    corner = tmp_path / "corner.csv"
    corner.write_text(",a,b,c\na,1,0.2,0\nb,0.2,1,0.1\nc,0,0.1,1\n")
    named = tmp_path / "named.csv"
    named.write_text("a,b,c\na,1,0.2,0\nb,0.2,1,0.1\nc,0,0.1,1\n")
    ref = read_overlap_matrix(plain)
    for p in (corner, named):
        m = read_overlap_matrix(p)
        assert list(m.names) == list(ref.names) == ["a", "b", "c"]
        assert np.array_equal(m.values, ref.values)
    swapped = tmp_path / "swapped.csv"
    swapped.write_text(",a,b\nb,1,0.2\na,0.2,1\n")
    with pytest.raises(InvalidArgumentError, match="row names"):
        read_overlap_matrix(swapped)
