"""``shiftbench reproduce TABLE`` end to end: a zoo entry served from 127.0.0.1 (a tiny checkpoint) evaluated
on the shared photos, published and measured values side by side, resume, offline errors, models not in the zoo."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from shiftbench.cli import main
from shiftbench.evaluation.models import MODEL_SOURCES, register_model_source
from shiftbench.zoo import ZooEntry, register, unregister
from shiftbench.zoo.registry import Preprocessing
from shiftbench.zoo.tables import table

from ._eval_toys import ColourNet, image_folder, toy_classifier
from ._zoo_server import FileServer, Served

PREP = Preprocessing(64, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 255.0, "bilinear", 1.0)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture()
def zoo(server: FileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FileServer]:
    """The zoo's resnet18 re-registered as a tiny colour model served from 127.0.0.1; resnet50 offline."""
    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    register_model_source("toyarch", lambda name, weights: toy_classifier("toyarch", seed=0))
    buf = io.BytesIO()
    torch.save(ColourNet(1000, seed=3).state_dict(), buf)
    server.files["/colournet-r18.pth"] = Served(buf.getvalue())
    register(ZooEntry("resnet18", "toyarch:colour", server.url("/colournet-r18.pth"), PREP), replace=True)
    register(ZooEntry("resnet50", "toyarch:colour", f"http://127.0.0.1:{_closed_port()}/r50.pth", PREP), replace=True)
    try:
        yield server
    finally:
        unregister("resnet18")
        unregister("resnet50")
        MODEL_SOURCES.unregister("toyarch")


def _args(tmp_path: Path, *extra: str) -> list[str]:
    data = tmp_path / "data"
    if not data.is_dir():
        image_folder(data, n_per_class=2, n_classes=2)
    return ["reproduce", "000:1", "--data", str(data), "--store", str(tmp_path / "s.sqlite"), "--corruptions",
            "contrast,fog", "--severities", "2,4", "--no-progress", *extra]


def test_reproduce_puts_measured_next_to_published_and_resumes(
    zoo: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_args(tmp_path, "--models", "resnet18"), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["evaluated"] == ["zoo:resnet18"] and doc["not_in_zoo"] == [] and doc["benchmarks"] == ["imagenet-c"]
    assert len(zoo.log) == 1  # the weights fetched once
    # the measured values are the stored ones in %, next to 000 Table 1's ResNet-18 row
    assert main(["results", "--store", str(tmp_path / "s.sqlite"), "--results-format", "json"]) == 0
    rec = next(r for r in json.loads(capsys.readouterr().out)["rows"] if r["model"] == "zoo:resnet18")
    r18 = next(r for r in doc["rows"] if r["model"] == "zoo:resnet18")
    pub = next(r for r in table("000:1").rows if r.model == "resnet18").values
    assert r18["measured"] == {
        "error": pytest.approx(100 * rec["clean_error"]),
        "contrast": pytest.approx(100 * rec["corruptions"]["contrast"]["ce"]),
        "fog": pytest.approx(100 * rec["corruptions"]["fog"]["ce"]),
    }  # no mCE: two corruptions are no mCE
    for k, v in r18["measured"].items():
        assert r18["difference"][k] == pytest.approx(v - pub[k])
    assert all(r["measured"] == {} for r in doc["rows"] if r["model"] != "zoo:resnet18")
    # a rerun: no download, no evaluation, the same numbers
    assert main([*_args(tmp_path, "--models", "ResNet-18"), "--results-format", "json"]) == 0
    out = capsys.readouterr()
    again = json.loads(out.out)
    assert len(zoo.log) == 1 and "finished before, skipped" in out.err
    assert next(r for r in again["rows"] if r["model"] == "zoo:resnet18")["measured"] == r18["measured"]
    # the table format: published > measured (difference)
    assert main([*_args(tmp_path, "--models", "resnet18")]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("ResNet-18"))
    assert f"{pub['contrast']:.1f}>{r18['measured']['contrast']:.1f} ({r18['difference']['contrast']:+.1f})" in line


def test_offline_model_gives_the_zoo_error_or_is_skipped(
    zoo: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    assert main([*_args(tmp_path, "--models", "resnet18,resnet50")]) == 1
    err = capsys.readouterr().err
    assert "r50.pth" in err and str(tmp_path / "cache") in err
    assert not store.exists()  # fetched before any evaluation
    assert main([*_args(tmp_path, "--models", "resnet18,resnet50", "--skip-missing"), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["evaluated"] == ["zoo:resnet18"] and list(doc["not_fetched"]) == ["resnet50"]
    assert "r50.pth" in doc["not_fetched"]["resnet50"]


def test_models_the_zoo_lacks_are_listed(
    zoo: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from shiftbench.cli import reproduce

    # every row of the ImageNet-P table has its zoo entry now (ResNeXt-50/101 and DenseNet-161 from torchvision)
    _, in_zoo, lacking = reproduce.plan("hendrycks2019:P", None)
    assert lacking == [] and {"resnext50-32x4d", "resnext101-32x8d", "densenet161"} <= set(in_zoo)
    # a zoo without two of them: those rows are listed, not evaluated
    shipped = reproduce.entries()
    monkeypatch.setattr(reproduce, "entries", lambda: {k: v for k, v in shipped.items()
                                                       if k not in ("resnext50-32x4d", "densenet161")})
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=1)
    args = ["reproduce", "hendrycks2019:P", "--models", "ResNeXt-50,densenet161", "--data", str(data),
            "--store", str(tmp_path / "s.sqlite"), "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Not in the zoo (not evaluated): resnext50-32x4d, densenet161." in out
    assert "No model of this table was evaluated." in out and "ResNeXt-101" in out  # the published table still shows


def test_bad_table_models_and_options_are_refused(zoo: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_args(tmp_path, "--models", "resnet19")]) == 2
    assert "rows of hendrycks2018:1" in capsys.readouterr().err
    assert main(["reproduce", "000:9", "--store", str(tmp_path / "s.sqlite")]) == 2
    assert "hendrycks2018:1" in capsys.readouterr().err  # the known tables are listed
    # 001:P runs ImageNet-P: --severities does not apply (evaluate's rule), before any download
    assert main(["reproduce", "001:P", "--severities", "2", "--store", str(tmp_path / "s.sqlite")]) == 2
    assert "--severities does not apply to imagenet-p" in capsys.readouterr().err
    assert zoo.log == []


@pytest.mark.slow  # ImageNet-C's 75 conditions and border / obstruction on one photo: 25 s to 11 minutes on the shared 2-core machine, by load
def test_reproduce_border_and_obstruction_table(server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Laugros, Caplier & Ospici (2021) Table 1 with a tiny model served as the zoo's resnet50: ImageNet-C's two
    set means and border / obstruction CE, measured next to the published values, with the default and a given
    baseline."""
    from shiftbench.overlap.noc import alexnet_noc_baseline
    from shiftbench.zoo.tables import CE_SET1, CE_SET2

    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    register_model_source("toyarch", lambda name, weights: toy_classifier("toyarch", seed=0))
    buf = io.BytesIO()
    torch.save(ColourNet(1000, seed=5).state_dict(), buf)
    server.files["/colournet-r50.pth"] = Served(buf.getvalue())
    register(ZooEntry("resnet50", "toyarch:colour", server.url("/colournet-r50.pth"), PREP), replace=True)
    try:
        data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
        store = tmp_path / "s.sqlite"
        args = ["reproduce", "laugros2021:1", "--models", "Standard", "--data", str(data), "--store", str(store),
                "--limit", "1", "--no-progress", "--results-format", "json"]
        assert main(args) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["benchmarks"] == ["imagenet-c", "border-obstruction"] and doc["evaluated"] == ["zoo:resnet50"]
        row = next(r for r in doc["rows"] if r["model"] == "zoo:resnet50")
        assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
        res = json.loads(capsys.readouterr().out)
        ic = next(r for r in res["rows"] if r["model"] == "zoo:resnet50")
        ce = {c: 100 * v["ce"] for c, v in ic["corruptions"].items()}
        noc = alexnet_noc_baseline().errors
        bo = next(r for r in res["border_obstruction"] if r["model"] == "zoo:resnet50")
        assert row["measured"] == {
            "imagenet_c_mce_set1": pytest.approx(sum(ce[c] for c in CE_SET1) / 8),
            "imagenet_c_mce_set2": pytest.approx(sum(ce[c] for c in CE_SET2) / 7),
            "border": pytest.approx(100 * bo["errors"]["border"] / noc["noc_border"]),
            "obstruction": pytest.approx(100 * bo["errors"]["obstruction"] / noc["noc_obstruction"]),
        }
        pub = next(r for r in table("laugros2021:1").rows if r.model == "resnet50").values
        assert pub == {"imagenet_c_mce_set1": 81.0, "imagenet_c_mce_set2": 73.0, "border": 53.0, "obstruction": 63.0}
        assert row["difference"]["border"] == pytest.approx(row["measured"]["border"] - 53.0)
        # a stored model as the baseline of both benchmarks (here the model itself: every CE is 100)
        assert main([*args, "--baseline", "zoo:resnet50"]) == 0
        again = next(r for r in json.loads(capsys.readouterr().out)["rows"] if r["model"] == "zoo:resnet50")
        assert again["measured"] == {k: pytest.approx(100.0) for k in row["measured"]}
        # border-obstruction alone, with a baseline from a file: the stored predictions, CE divided by its errors
        (tmp_path / "base.json").write_text(json.dumps({"border": 0.5, "obstruction": 0.8}))
        assert main(["evaluate", "--benchmark", "border-obstruction", "--model", "zoo:resnet50", "--data", str(data),
                     "--store", str(store), "--limit", "1", "--baseline", str(tmp_path / "base.json"), "--no-progress",
                     "--results-format", "json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["ce"] == {"border": pytest.approx(bo["errors"]["border"] / 0.5),
                             "obstruction": pytest.approx(bo["errors"]["obstruction"] / 0.8)}
        assert got["errors"] == bo["errors"] and got["baseline"] == "base"
        assert main(["evaluate", "--benchmark", "border-obstruction", "--store", str(store), "--baseline", "zoo:nothing"]) == 2
        assert "stored border-obstruction evaluation" in capsys.readouterr().err
    finally:
        unregister("resnet50")
        MODEL_SOURCES.unregister("toyarch")
