"""The model sources against the real torchvision and timm (skipped where they are not installed: they need a
CUDA build of torch). No network: the weights are random tensors placed where the messages say to place a copy,
and downloads go to a closed port of 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from shiftbench.errors import UnknownNameError
from shiftbench.evaluation import model_sources
from shiftbench.evaluation.models import load_model
from shiftbench.zoo.download import download
from shiftbench.zoo.errors import OfflineError

tvm = pytest.importorskip("torchvision.models", reason="needs torchvision (pip install 'shiftbench[torchvision]')")
timm = pytest.importorskip("timm", reason="needs timm (pip install 'shiftbench[timm]')")
if getattr(timm, "__version__", "").endswith("fake"):  # pragma: no cover - the stand-ins of the other tests
    pytest.skip("the stand-in timm is on sys.path", allow_module_level=True)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    saved = list(model_sources._FETCHERS)
    model_sources.register_weights_fetcher(
        lambda url, dest, sha: download(f"http://127.0.0.1:{port}/" + url.split("/", 3)[3], dest, sha256=sha))
    yield tmp_path
    model_sources._FETCHERS[:] = saved


def test_torchvision_real(cache: Path) -> None:
    with pytest.raises(OfflineError) as e:
        load_model("torchvision:resnet18")
    placed = Path(e.value.path)
    assert placed == cache / "torch" / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    torch.manual_seed(0)
    state = tvm.resnet18().state_dict()
    placed.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, placed)
    clf = load_model("torchvision:resnet18")
    assert all(torch.equal(clf.forward.state_dict()[k], v) for k, v in state.items())
    assert clf.logits(torch.zeros(1, 3, 224, 224, dtype=torch.uint8)).shape == (1, 1000)
    assert clf.transform.crop_fraction == pytest.approx(224 / 256)
    with pytest.raises(UnknownNameError) as e2:
        load_model("torchvision:resnet5")
    assert e2.value.suggestions[0] == "torchvision:resnet50" and not any("rcnn" in s for s in e2.value.suggestions)
    v2 = load_model("torchvision:resnet50", weights="none", model_args="num_classes=10")
    assert v2.classes is None and v2.name == "torchvision:resnet50?num_classes=10"


def test_timm_and_hf_hub_real(cache: Path) -> None:
    safetensors = pytest.importorskip("safetensors.torch")
    with pytest.raises(OfflineError) as e:
        load_model("timm:resnet18")  # the default tag
    placed = Path(e.value.path)
    assert placed == cache / "cache" / "models" / "hf-hub" / "timm--resnet18.a1_in1k" / "model.safetensors"
    torch.manual_seed(0)
    state = timm.create_model("resnet18").state_dict()
    placed.parent.mkdir(parents=True, exist_ok=True)
    safetensors.save_file(state, str(placed))
    clf = load_model("timm:resnet18.a1_in1k")
    assert all(torch.equal(clf.forward.state_dict()[k], v) for k, v in state.items())
    assert clf.transform.crop_fraction == pytest.approx(0.95) and clf.transform.interpolation == "bicubic"
    with pytest.raises(UnknownNameError) as e2:
        load_model("timm:resnet18.a1_in")
    assert e2.value.suggestions[0] == "timm:resnet18.a1_in1k"
    # a Hub repository: config.json and weights in shiftbench's cache
    hub = cache / "cache" / "models" / "hf-hub" / "me--tiny"
    hub.mkdir(parents=True)
    (hub / "config.json").write_text(json.dumps({"architecture": "resnet18", "num_classes": 1000,
                                                "pretrained_cfg": {"input_size": [3, 200, 200], "crop_pct": 0.9}}))
    safetensors.save_file(state, str(hub / "model.safetensors"))
    hf = load_model("hf-hub:me/tiny")
    assert hf.checksum == clf.checksum and hf.transform.size == 200
