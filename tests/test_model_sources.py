"""Model sources as users name them: torchvision:ARCH[:WEIGHTS], timm:NAME[.TAG], hf-hub:ORG/NAME, module:factory,
file.py:factory, model arguments and checkpoints; weights looked up in the caches, fetched from 127.0.0.1, and
offline a single line naming the URL and the path to place a copy at (exit 1, no traceback).

torchvision and timm are the stand-ins of tests/_fake_libs.py (same entry points); the weights are served by the
local file server of tests/_zoo_server.py.
"""

from __future__ import annotations

import importlib
import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError, UnknownNameError
from shiftbench.evaluation.errors import WeightsUnavailableError
from shiftbench.evaluation.model_sources import (
    family_suggest,
    format_model_spec,
    parse_model_args,
    split_model_spec,
)
from shiftbench.evaluation.models import load_model, module_checksum
from shiftbench.zoo.errors import DownloadError

from . import _fake_libs as fake
from ._eval_toys import image_folder
from ._zoo_server import FileServer, Served


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _blob(state: dict[str, torch.Tensor]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: str) -> Path:
    root = tmp_path / "libs"
    fake.install(root, fake.TORCHVISION, base)
    fake.install(root, fake.TIMM, base)
    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_ENDPOINT", base + "/hf")
    monkeypatch.syspath_prepend(str(root))
    fake.drop(("torchvision", "timm"))
    importlib.invalidate_caches()
    return root


@pytest.fixture()
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FileServer) -> Iterator[FileServer]:
    """The stand-in libraries, their weights served from 127.0.0.1."""
    _install(tmp_path, monkeypatch, server.url("/w"))
    for arch, seed in (("resnet18", 1), ("resnet50", 2)):
        server.files[f"/w/{arch}-v1.pth"] = Served(_blob(fake.tiny_state(seed)))
        server.files[f"/w/{arch}-v2.pth"] = Served(_blob(fake.tiny_state(seed + 10)))
    server.files["/w/resnet18-tv.pth"] = Served(_blob(fake.tiny_state(3)))
    server.files["/w/hf/timm/resnet18.a1_in1k/resolve/main/pytorch_model.bin"] = Served(_blob(fake.tiny_state(4)))
    server.files["/w/hf/org/tiny-net/resolve/main/config.json"] = Served(json.dumps(
        {"architecture": "resnet18", "num_classes": 1000, "model_args": {"width": 6},
         "pretrained_cfg": {"input_size": [3, 192, 192], "crop_pct": 0.9, "interpolation": "bilinear"}}).encode())
    server.files["/w/hf/org/tiny-net/resolve/main/pytorch_model.bin"] = Served(_blob(fake.tiny_state(6, width=6)))
    yield server
    fake.drop(("torchvision", "timm"))


@pytest.fixture()
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stand-in libraries with every URL on a closed port of 127.0.0.1 (a machine without network)."""
    base = f"http://127.0.0.1:{_closed_port()}/w"
    _install(tmp_path, monkeypatch, base)
    yield base
    fake.drop(("torchvision", "timm"))


def _same_weights(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> bool:
    got = module.state_dict()
    return set(got) == set(state) and all(torch.equal(got[k], state[k]) for k in state)


# ------------------------------------------------------------------------------------------- arguments


def test_model_arguments_parse_as_python_literals() -> None:
    assert parse_model_args("depth=18,pretrained=false,drop_rate=0.1,name=big,sizes=[1, 2],x=none") == {
        "depth": 18, "pretrained": False, "drop_rate": 0.1, "name": "big", "sizes": [1, 2], "x": None}
    assert parse_model_args("") == {} and parse_model_args(None) == {}
    for bad in ("depth", "=3", "a=1,a=2", "1x=2"):
        with pytest.raises(InvalidArgumentError) as e:
            parse_model_args(bad, "--model-args")
        assert e.value.argument == "--model-args"
    spec = format_model_spec("timm:resnet18", {"width": 8, "drop_rate": 0.1, "name": "a b"})
    assert spec == "timm:resnet18?drop_rate=0.1,name=a b,width=8"
    assert split_model_spec(spec) == ("timm:resnet18", {"drop_rate": 0.1, "name": "a b", "width": 8})


def test_did_you_mean_stays_in_the_family() -> None:
    names = ["fasterrcnn_resnet50_fpn", "resnet18", "resnet50", "resnet101", "resnext50_32x4d", "densenet161"]
    assert family_suggest("resnet5", names)[0] == "resnet50"
    assert "fasterrcnn_resnet50_fpn" not in family_suggest("resnet5", names)
    assert family_suggest("densnet161", names)[0] == "densenet161"


# ------------------------------------------------------------------------------------------ torchvision


def test_torchvision_default_weights_are_fetched_once_then_read_from_torch_hubs_cache(
    online: FileServer, tmp_path: Path
) -> None:
    clf = load_model("torchvision:resnet18")
    assert _same_weights(clf.forward, fake.tiny_state(11))  # DEFAULT = IMAGENET1K_V2
    cached = tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-v2.pth"
    assert cached.is_file() and clf.details["weights_url"].endswith("/resnet18-v2.pth")
    assert clf.name == "torchvision:resnet18" and clf.checksum == module_checksum(clf.forward)
    assert clf.classes is not None and len(clf.classes) == 1000
    assert clf.transform.size == 224 and clf.transform.crop_fraction == pytest.approx(224 / 232)
    n = len(online.log)
    load_model("torchvision:resnet18")
    assert len(online.log) == n  # from the cache, no request


def test_torchvision_weights_enum_member_picks_the_file(online: FileServer) -> None:
    v1 = load_model("torchvision:resnet18:IMAGENET1K_V1")
    assert _same_weights(v1.forward, fake.tiny_state(1)) and v1.name == "torchvision:resnet18:IMAGENET1K_V1"
    v2 = load_model("torchvision:resnet18:IMAGENET1K_V2")
    assert v2.checksum != v1.checksum  # same name stem, different weights: different identity
    with pytest.raises(UnknownNameError) as e:
        load_model("torchvision:resnet18:IMAGENET1K_V3")
    assert "torchvision:resnet18:IMAGENET1K_V1" in str(e.value) and "IMAGENET1K_V2" in e.value.suggestions[0]


def test_torchvision_did_you_mean_suggests_classifiers_of_the_family(online: FileServer) -> None:
    with pytest.raises(UnknownNameError) as e:
        load_model("torchvision:resnet5")
    assert e.value.suggestions[0] == "torchvision:resnet50"
    assert not any("rcnn" in s for s in e.value.suggestions) and "rcnn" not in str(e.value)


def test_torchvision_checkpoint_and_model_arguments(online: FileServer, tmp_path: Path) -> None:
    ckpt = tmp_path / "mine.pth"
    torch.save(fake.tiny_state(7, width=8), ckpt)
    n = len(online.log)
    clf = load_model("torchvision:resnet18", weights=str(ckpt), model_args="width=8")
    assert len(online.log) == n  # a checkpoint: no pretrained download
    assert _same_weights(clf.forward, fake.tiny_state(7, width=8))
    assert clf.name == "torchvision:resnet18?width=8" and clf.details["model_args"] == {"width": 8}
    assert clf.details["weights_file_checksum"].startswith("sha256:")


def test_a_cached_pickle_with_code_is_refused(online: FileServer, tmp_path: Path) -> None:
    cached = tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-v2.pth"
    cached.parent.mkdir(parents=True)
    torch.save({"fc.weight": torch.zeros(1), "f": InvalidArgumentError("a", 1, "b")}, cached)
    with pytest.raises(InvalidArgumentError, match="weights_only=True"):
        load_model("torchvision:resnet18")


# ------------------------------------------------------------------------------------------------ timm


def test_timm_tagged_weights_come_from_the_hub_url_into_shiftbenchs_cache(online: FileServer, tmp_path: Path) -> None:
    clf = load_model("timm:resnet18.a1_in1k")
    assert _same_weights(clf.forward, fake.tiny_state(4))
    # no model.safetensors in that repository: the 404 leads to pytorch_model.bin
    assert (tmp_path / "cache" / "models" / "hf-hub" / "timm--resnet18.a1_in1k" / "pytorch_model.bin").is_file()
    assert clf.name == "timm:resnet18.a1_in1k" and clf.transform.size == 160
    assert clf.transform.crop_fraction == pytest.approx(0.95) and clf.transform.interpolation == "bicubic"
    # no tag: timm's default tag of the architecture (the same file, from the cache)
    n = len(online.log)
    assert load_model("timm:resnet18").checksum == clf.checksum and len(online.log) == n


def test_timm_url_entries_and_arguments(online: FileServer, tmp_path: Path) -> None:
    clf = load_model("timm:resnet18.tv_in1k")
    assert _same_weights(clf.forward, fake.tiny_state(3))
    assert (tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-tv.pth").is_file()
    rnd = load_model("timm:resnet18", weights="none", model_args={"width": 5})
    assert rnd.forward.conv.out_channels == 5 and rnd.details["weights"] == "random initialisation"


def test_timm_unknown_names_and_tags(online: FileServer) -> None:
    with pytest.raises(UnknownNameError) as e:
        load_model("timm:resnt18")
    assert e.value.suggestions[0] == "timm:resnet18"
    with pytest.raises(UnknownNameError) as e:
        load_model("timm:resnet18.a1_in1")
    assert e.value.suggestions[0] == "timm:resnet18.a1_in1k"


def test_hf_hub_models_build_from_their_config(online: FileServer, tmp_path: Path) -> None:
    clf = load_model("hf-hub:org/tiny-net")
    assert _same_weights(clf.forward, fake.tiny_state(6, width=6))  # config's model_args: width=6
    assert clf.transform.size == 192 and clf.transform.interpolation == "bilinear"
    assert clf.name == "hf-hub:org/tiny-net"
    with pytest.raises(InvalidArgumentError):
        load_model("hf-hub:not a repo")


# --------------------------------------------------------------------------------------------- factories


FACTORIES = '''
import urllib.request
import torch


class Net(torch.nn.Module):
    def __init__(self, width=4, classes=1000):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, width, 3)
        self.fc = torch.nn.Linear(width, classes)

    def forward(self, x):
        return self.fc(self.conv(x).mean(dim=(2, 3)))


def tiny(width=4, classes=1000):
    torch.manual_seed(width)
    return Net(width, classes)


def downloads():
    urllib.request.urlopen("http://127.0.0.1:{port}/weights.pth", timeout=5)
'''


@pytest.fixture()
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pkg" / "my_models.py"
    path.parent.mkdir()
    path.write_text(FACTORIES.replace("{port}", str(_closed_port())), encoding="utf-8")
    monkeypatch.syspath_prepend(str(path.parent))
    return path


def test_module_and_file_factories_with_arguments_and_checkpoints(factories: Path, tmp_path: Path) -> None:
    a = load_model("my_models:tiny")
    b = load_model(f"{factories}:tiny", model_args="width=8")
    assert a.name == "my_models:tiny" and b.name == f"{factories}:tiny?width=8"
    assert a.forward.conv.out_channels == 4 and b.forward.conv.out_channels == 8
    assert a.classes is not None and len(a.classes) == 1000  # a 1000-way last layer: the ImageNet classes
    assert load_model("my_models:tiny", model_args="classes=10").classes is None
    state = {k: v + 1 for k, v in a.forward.state_dict().items()}
    ckpt = tmp_path / "a.pth"
    torch.save(state, ckpt)
    c = load_model("my_models:tiny", weights=str(ckpt))
    assert _same_weights(c.forward, state) and c.checksum != a.checksum
    logits = c.logits(torch.zeros(2, 3, 32, 32, dtype=torch.uint8))
    assert logits.shape == (2, 1000)


def test_a_mistyped_source_prefix_is_suggested() -> None:
    with pytest.raises(UnknownNameError) as e:
        load_model("torchvison:resnet50")
    assert e.value.suggestions == ["torchvision:resnet50"]


def test_factory_mistakes_name_what_is_allowed(factories: Path) -> None:
    with pytest.raises(UnknownNameError) as e:
        load_model("my_models:tinny")
    assert e.value.suggestions[0] == "my_models:tiny"
    with pytest.raises(InvalidArgumentError, match="No module named 'no_such_module'"):
        load_model("no_such_module:make")
    with pytest.raises(InvalidArgumentError) as e:
        load_model("my_models:tiny", model_args="depth=3")
    assert e.value.argument == "model_args" and "depth" in str(e.value)


def test_a_factory_that_cannot_download_fails_in_one_line(factories: Path) -> None:
    with pytest.raises(WeightsUnavailableError, match="my_models:downloads: .*could not be fetched"):
        load_model("my_models:downloads")


# ------------------------------------------------------------------------------------ offline, one line


def test_offline_weights_name_the_url_and_the_cache_path(offline: str, tmp_path: Path) -> None:
    with pytest.raises(DownloadError) as e:
        load_model("torchvision:resnet18")
    assert e.value.url == f"{offline}/resnet18-v2.pth"
    assert e.value.path == str(tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-v2.pth")
    with pytest.raises(DownloadError) as e:
        load_model("timm:resnet18.a1_in1k")
    assert e.value.url == f"{offline}/hf/timm/resnet18.a1_in1k/resolve/main/model.safetensors"
    assert e.value.path == str(tmp_path / "cache" / "models" / "hf-hub" / "timm--resnet18.a1_in1k" / "model.safetensors")
    # a copy placed at the path named is used without any network
    with pytest.raises(DownloadError) as e:
        load_model("torchvision:resnet50:IMAGENET1K_V1")
    Path(e.value.path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(fake.tiny_state(2), e.value.path)
    assert _same_weights(load_model("torchvision:resnet50:IMAGENET1K_V1").forward, fake.tiny_state(2))


CLI_OFFLINE = [
    ("torchvision:resnet18", "resnet18-v2.pth"),
    ("torchvision:resnet50:IMAGENET1K_V1", "resnet50-v1.pth"),
    ("timm:resnet50.a1_in1k", "timm--resnet50.a1_in1k"),
    ("timm:resnet18.tv_in1k", "resnet18-tv.pth"),
    ("hf-hub:org/tiny-net", "org--tiny-net"),
    ("my_models:downloads", "my_models:downloads"),
    ("zoo:resnet50", "resnet50-19c8e357.pth"),
]


@pytest.mark.parametrize(("model", "named"), CLI_OFFLINE, ids=[m for m, _ in CLI_OFFLINE])
def test_evaluate_offline_is_one_line_exit_1_no_traceback(
    offline: str, factories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest,
    model: str, named: str,
) -> None:
    if model.startswith("zoo:"):  # ResNet-50's zoo entry with its file on the closed port
        import dataclasses

        from shiftbench import zoo

        entry = dataclasses.replace(zoo.get("resnet50"), name="offline-resnet50", url=f"{offline}/resnet50-19c8e357.pth")
        zoo.register(entry, replace=True)
        request.addfinalizer(lambda: zoo.unregister("offline-resnet50"))
        model = "zoo:offline-resnet50"
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=1)
    code = main(["evaluate", "--model", model, "--data", str(data), "--corruptions", "contrast", "--severities", "1",
                 "--limit", "1", "--store", str(tmp_path / "s.sqlite"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert named in lines[0]
    if not model.startswith("my_models"):
        assert offline in lines[0] and "place it at" in lines[0]


def test_evaluate_model_args_reach_the_factory_and_the_store(
    factories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=1)
    store = tmp_path / "s.sqlite"
    args = ["evaluate", "--model", "my_models:tiny", "--model-args", "width=6", "--data", str(data), "--corruptions",
            "contrast", "--severities", "1", "--limit", "1", "--store", str(store), "--no-progress",
            "--results-format", "json"]
    assert main(args) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert "my_models:tiny?width=6" in json.dumps(doc)
    assert main([*args[:4], "width=oops", *args[5:]]) == 2  # a string reaches the factory, which refuses it
    assert "model_args" in capsys.readouterr().err
    assert main([*args[:4], "=6", *args[5:]]) == 2
    assert "--model-args" in capsys.readouterr().err
