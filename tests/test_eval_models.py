"""Models: the built-in EfficientNet-Lite0, checkpoints, optional extras, class lists and label spaces."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from shiftbench.errors import InvalidArgumentError, MissingDependencyError
from shiftbench.evaluation.models import (
    IMAGENET_TRANSFORM,
    Classifier,
    InputTransform,
    imagenet_wnids,
    load_model,
    read_class_list,
    resolve_label_space,
)

from ._eval_toys import RAW, SAMPLE_DIR, ColourNet

WNIDS = imagenet_wnids()


def test_wnid_list_is_the_sorted_imagenet_1k_list() -> None:
    assert len(WNIDS) == 1000 == len(set(WNIDS))
    assert list(WNIDS) == sorted(WNIDS)
    assert WNIDS[0] == "n01440764" and WNIDS[10] == "n01530575" and WNIDS[999] == "n15075141"
    # The shared sample set holds the class at every tenth position of the sorted list.
    names = sorted(p.name.split("_")[0] for p in SAMPLE_DIR.glob("*.JPEG"))
    if names:
        assert names == [WNIDS[i] for i in range(0, 1000, 10)]


def test_default_model_is_efficientnet_lite0_with_its_own_preprocessing() -> None:
    m = load_model()
    assert m.name == "efficientnet-lite0" and m.classes == WNIDS
    assert m.checksum.startswith("sha256:") and m.checksum == load_model("lite0").checksum
    assert isinstance(m.transform, InputTransform)
    x = torch.tensor([0, 127, 255], dtype=torch.uint8).view(1, 3, 1, 1).expand(1, 3, 224, 224)
    y = m.transform(x)
    assert y[0, :, 0, 0].tolist() == [-127 / 128, 0.0, 1.0]
    assert m.transform.interpolation == "bicubic" and m.transform.crop_fraction == pytest.approx(224 / 256)
    assert m.logits(torch.zeros(2, 3, 224, 224, dtype=torch.uint8)).shape == (2, 1000)


def test_transform_resizes_other_sizes() -> None:
    x = torch.full((1, 3, 64, 64), 200, dtype=torch.uint8)
    y = IMAGENET_TRANSFORM(x)
    assert y.shape == (1, 3, 224, 224)
    assert y[0, 0, 100, 100].item() == pytest.approx((200 / 255 - 0.485) / 0.229, abs=1e-4)


def test_local_checkpoints_load_with_weights_only(tmp_path: Path) -> None:
    net = ColourNet(10, seed=3)
    torch.save(net.state_dict(), tmp_path / "w.pth")
    torch.save({"state_dict": {f"module.{k}": v for k, v in net.state_dict().items()}}, tmp_path / "wrapped.pth")
    for path in ("w.pth", "wrapped.pth"):
        fresh = ColourNet(10, seed=4)
        clf = load_model(fresh, weights=tmp_path / path, transform=RAW, name="ten")
        assert torch.equal(fresh.weight, net.weight) and clf.checksum == Classifier(net, name="x").checksum
    torch.save(net, tmp_path / "pickled_module.pth")  # a whole pickled module is refused by weights_only=True
    with pytest.raises(InvalidArgumentError, match=r"weights=.*weights_only=True.*state_dict"):
        load_model(ColourNet(10), weights=tmp_path / "pickled_module.pth")
    torch.save({"weight": torch.zeros(3)}, tmp_path / "other.pth")
    with pytest.raises(InvalidArgumentError, match="size mismatch for weight"):
        load_model(ColourNet(10), weights=tmp_path / "other.pth")
    torch.save({"weight": net.weight.detach()}, tmp_path / "partial.pth")
    with pytest.raises(InvalidArgumentError, match=r"Missing keys: \['bias'\]"):
        load_model(ColourNet(10), weights=tmp_path / "partial.pth")
    with pytest.raises(InvalidArgumentError, match="--weights"):
        load_model(str(tmp_path / "w.pth"))


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None, reason="torchvision is installed")
def test_torchvision_names_without_the_extra_say_how_to_install() -> None:
    with pytest.raises(MissingDependencyError, match=r"shiftbench\[torchvision\]"):
        load_model("torchvision:resnet50")
    with pytest.raises(MissingDependencyError, match="torchvision"):
        load_model("resnet50")


@pytest.mark.skipif(importlib.util.find_spec("timm") is not None, reason="timm is installed")
def test_timm_names_without_the_extra_say_how_to_install() -> None:
    with pytest.raises(MissingDependencyError, match=r"shiftbench\[timm\]"):
        load_model("timm:convnext_tiny")


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="needs torchvision")
def test_torchvision_architecture_without_weights() -> None:  # pragma: no cover - optional extra
    clf = load_model("torchvision:resnet18", weights="none")
    assert clf.logits(torch.zeros(1, 3, 224, 224, dtype=torch.uint8)).shape == (1, 1000)


def test_callables_and_devices() -> None:
    clf = load_model(lambda x: torch.zeros(x.shape[0], 5), transform=RAW, name="zeros")
    assert clf.checksum.startswith("callable:") and clf.classes is None
    assert clf.logits(torch.zeros(3, 3, 32, 32, dtype=torch.uint8)).shape == (3, 5)
    with pytest.raises(InvalidArgumentError, match="device='tpu'"):
        load_model(ColourNet(), device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgumentError, match="no CUDA device"):
            load_model(ColourNet(), device="cuda")
    with pytest.raises(InvalidArgumentError, match="model="):
        load_model(42)  # type: ignore[arg-type]


def test_label_spaces() -> None:
    data = [WNIDS[5], WNIDS[7]]
    full = resolve_label_space(WNIDS, data, "auto")
    assert full.mode == "model" and full.logit_index is None and len(full.classes) == 1000
    sub = resolve_label_space(WNIDS, data, "data")
    assert sub.classes == tuple(data) and sub.logit_index == (5, 7)
    logits = torch.arange(1000.0).view(1, -1)
    assert sub.restrict(logits).tolist() == [[5.0, 7.0]]
    ident = resolve_label_space(None, ["a", "b"], "auto")
    assert ident.mode == "identity"
    with pytest.raises(InvalidArgumentError, match="dataset classes n99999999"):
        resolve_label_space(WNIDS, ["n99999999"], "auto")
    with pytest.raises(InvalidArgumentError, match="classes='everything'"):
        resolve_label_space(WNIDS, data, "everything")


def test_class_list_files(tmp_path: Path) -> None:
    f = tmp_path / "tiny.txt"
    f.write_text("# Tiny-ImageNet classes\nn01443537\n\nn01629819\n")
    assert read_class_list(f) == ("n01443537", "n01629819")
    f.write_text("n01443537\nn01443537\n")
    with pytest.raises(InvalidArgumentError, match="Listed twice"):
        read_class_list(f)
    with pytest.raises(InvalidArgumentError, match="classes="):
        read_class_list(tmp_path / "missing.txt")
