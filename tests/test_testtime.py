"""Test-time methods of Hendrycks & Dietterich (Sections 3.4-3.5, Appendix D): ten-crop averaging, CLAHE and
non-local-means preprocessing, as a classifier wrapper and as ``evaluate --tta / --preprocess``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from shiftbench import corrupt
from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError
from shiftbench.evaluation.models import MODEL_SOURCES, register_model_source
from shiftbench.evaluation.testtime import (
    TestTimeClassifier,
    clahe,
    nlm_denoise,
    noise_sigma,
    ten_crops,
    with_test_time,
)
from shiftbench.io import load_image_rgb

from ._eval_toys import image_folder, toy_classifier
from .conftest import photos


def test_ten_crops_are_the_corners_the_centre_and_their_mirrors() -> None:
    x = torch.arange(2 * 3 * 7 * 7, dtype=torch.float32).view(2, 3, 7, 7)
    c = ten_crops(x, resize_to=7)  # no enlargement: crops of 7 from 7 are the image
    assert c.shape == (10, 2, 3, 7, 7) and all(torch.equal(c[i], x) for i in range(5))
    assert all(torch.equal(c[5 + i], x.flip(-1)) for i in range(5))
    y = torch.arange(1 * 1 * 4 * 6, dtype=torch.float32).view(1, 1, 4, 6)
    c = ten_crops(y, resize_to=4)  # a 4 x 6 image: crops of 4 x 6 from 4 x 6
    assert torch.equal(c[0], y)
    z = torch.zeros(1, 3, 224, 224, dtype=torch.uint8)
    z[..., :4, :4] = 255  # the top-left corner survives in the top-left crop only
    c = ten_crops(z)
    assert c.dtype == torch.uint8 and c.shape[-2:] == (224, 224)
    assert int(c[0, 0, 0, 0, 0]) == 255 and int(c[3, 0, 0, 0, 0]) == 0 and int(c[5, 0, 0, 0, -1]) == 255


def test_ten_crop_logits_are_the_log_of_the_mean_softmax() -> None:
    base = toy_classifier()
    x = torch.from_numpy(photos("224", n=2)).permute(0, 3, 1, 2).contiguous()
    tta = TestTimeClassifier(base, tta="ten-crop")
    got = tta.logits(x)
    crops = ten_crops(x)
    probs = torch.stack([torch.softmax(base.logits(crops[i]).double(), 1) for i in range(10)]).mean(0)
    assert torch.allclose(got.double(), torch.log(probs), atol=1e-5)
    assert tta.identity != base.identity and "tta=ten-crop" in tta.identity and tta.checksum == base.checksum
    assert with_test_time(base) is base and with_test_time(base, tta="none") is base
    with pytest.raises(InvalidArgumentError, match="tta"):
        TestTimeClassifier(base, tta="five-crop")
    with pytest.raises(InvalidArgumentError, match="preprocess"):
        TestTimeClassifier(base, preprocess="sharpen")


def test_clahe_raises_local_contrast_of_a_low_contrast_image() -> None:
    x = torch.from_numpy(photos("224", n=1)).permute(0, 3, 1, 2).contiguous()
    flat = corrupt(x, "contrast", 4, seed=0)  # ImageNet-C contrast: a washed-out image
    y = clahe(flat)
    assert y.dtype == torch.uint8 and y.shape == flat.shape
    lum = lambda t: cv2.cvtColor(np.ascontiguousarray(t[0].permute(1, 2, 0).numpy()), cv2.COLOR_RGB2LAB)[..., 0]  # noqa: E731
    assert lum(y).std() > 1.5 * lum(flat).std()
    # the chroma of the image is kept (only L is equalized)
    ab = lambda t: cv2.cvtColor(np.ascontiguousarray(t[0].permute(1, 2, 0).numpy()), cv2.COLOR_RGB2LAB)[..., 1:].astype(int)  # noqa: E731
    assert np.abs(ab(y) - ab(flat)).mean() < 3


def test_nlm_denoise_follows_the_estimated_noise_level() -> None:
    x = torch.from_numpy(photos("224", n=1)).permute(0, 3, 1, 2).contiguous()
    noisy = corrupt(x, "gaussian_noise", 3, seed=0)
    g = lambda t: cv2.cvtColor(np.ascontiguousarray(t[0].permute(1, 2, 0).numpy()), cv2.COLOR_RGB2GRAY)  # noqa: E731
    assert noise_sigma(g(noisy)) > 4 * noise_sigma(g(x))  # Donoho & Johnstone's estimate sees the noise
    rng = np.random.default_rng(0)
    assert noise_sigma(np.full((64, 64), 128.0) + rng.normal(0, 10, (64, 64))) == pytest.approx(10, rel=0.1)
    den = nlm_denoise(noisy)
    mse = lambda a, b: float(((a.double() - b.double()) ** 2).mean())  # noqa: E731
    assert mse(den, x) < 0.5 * mse(noisy, x)  # the noise goes
    assert mse(nlm_denoise(x), x) < 0.2 * mse(den, x)  # a clean image is barely touched


@pytest.mark.parametrize(("option", "value"), [("--tta", "ten-crop"), ("--preprocess", "clahe"), ("--preprocess", "nlm-denoise")])
def test_evaluate_with_a_test_time_method_stores_the_wrapped_predictions(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's numbers change in a known way: the stored top-1 classes are those of the wrapped classifier on the
    same corrupted images, and the run is a model of its own in the store."""
    register_model_source("toyarch", lambda name, weights: toy_classifier("toyarch", seed=2))
    try:
        data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
        store = tmp_path / "s.sqlite"
        common = ["evaluate", "--model", "toyarch:x", "--data", str(data), "--store", str(store), "--corruptions",
                  "gaussian_noise", "--severities", "3", "--no-progress", "--results-format", "json"]
        assert main(common) == 0
        plain = json.loads(capsys.readouterr().out)
        assert main([*common, option, value]) == 0
        wrapped = json.loads(capsys.readouterr().out)
        models = [r["model"] for r in wrapped["rows"] if not r.get("reference")]
        assert any(value in m for m in models), models
        db = sqlite3.connect(store)
        assert db.execute("SELECT COUNT(*) FROM models").fetchone()[0] == 2  # two identities, results never mixed
        db.close()
        # the stored predictions are the wrapped classifier's on the same corrupted images
        clf = with_test_time(toy_classifier("toyarch", seed=2), **{option[2:]: value})
        files = sorted(p for p in data.rglob("*.JPEG"))
        from shiftbench.editions import preprocess as prep

        imgs = torch.from_numpy(np.stack([np.asarray(prep(load_image_rgb(f), "224")) for f in files])).permute(0, 3, 1, 2)
        noisy = corrupt(imgs.contiguous(), "gaussian_noise", 3, seed=0)
        wnids = [f.parent.name for f in files]
        from shiftbench.evaluation.models import imagenet_wnids

        idx = [imagenet_wnids().index(w) for w in wnids]
        err = float(np.mean([int(p) != i for p, i in zip(clf.logits(noisy).argmax(1).tolist(), idx)]))
        row = next(r for r in wrapped["rows"] if value in r["model"])
        assert row["corruptions"]["gaussian_noise"]["errors"]["3"] == pytest.approx(err)
        assert plain["rows"] != wrapped["rows"]
    finally:
        MODEL_SOURCES.unregister("toyarch")


@pytest.mark.parametrize(("option", "value"), [("tta", "ten-crop"), ("preprocess", "clahe")])
def test_test_time_methods_run_on_ray_workers(option: str, value: str, tmp_path: Path) -> None:
    """With --ray a worker loads the model by name and wraps it as the driver did (ModelSpec.test_time): the stored
    rows are those of the run without --ray, and differ from the plain model's."""
    from shiftbench.distributed.executor import ModelSpec
    from shiftbench.distributed.predictions import RayPredictions

    from ._eval_toys import evaluate_c
    from .test_ray_evaluate import InProcessCluster, _rows

    register_model_source("toyarch", lambda name, weights: toy_classifier("toyarch", seed=2))
    try:
        data = image_folder(tmp_path / "data", n_per_class=2, n_classes=2)
        kw = dict(data=data, corruptions="gaussian_noise", severities="3", batch_size=2, baseline="none", **{option: value})
        evaluate_c("toyarch:x", store=tmp_path / "local.sqlite", **kw)
        fake = InProcessCluster(ship=True)  # the spec goes through pickle, as to a Ray worker
        ex = RayPredictions(fake, ModelSpec("toyarch:x"), shard=2)  # type: ignore[arg-type]
        evaluate_c("toyarch:x", store=tmp_path / "ray.sqlite", executor=ex, **kw)
        assert fake.calls >= 1 and _rows(tmp_path / "ray.sqlite") == _rows(tmp_path / "local.sqlite")
        evaluate_c("toyarch:x", store=tmp_path / "plain.sqlite", **{k: v for k, v in kw.items() if k != option})
        assert _rows(tmp_path / "plain.sqlite") != _rows(tmp_path / "local.sqlite")  # the method changed predictions
        assert ModelSpec("toyarch:x", test_time={option: value}).load().identity.endswith(
            f"preprocess={value if option == 'preprocess' else None} tta={value if option == 'tta' else None}")
    finally:
        MODEL_SOURCES.unregister("toyarch")


def test_test_time_methods_apply_to_imagenet_c_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["evaluate", "--benchmark", "imagenet-p", "--tta", "ten-crop", "--store", str(tmp_path / "s.sqlite")])
    assert rc == 2 and "--tta does not apply to imagenet-p" in capsys.readouterr().err
