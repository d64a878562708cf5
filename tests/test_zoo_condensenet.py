"""CondenseNet-74 (C = G = 4 and 8), the networks of Hendrycks & Dietterich (2018, Section 3.5) whose authors
published ImageNet weights: the architecture against the authors' own (state_dict keys and shapes generated from
the code Hendrycks & Dietterich's evaluation loads, kept as test data), the parameter counts the authors' README
states, and the zoo entries loaded offline from a loopback server in the published checkpoint layout."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from shiftbench.evaluation import load_model
from shiftbench.zoo import entries, register, unregister
from shiftbench.zoo.condensenet import BOTTLENECK, GROWTH, STAGES, condensenet74_c4_g4, condensenet74_c8_g8

from ._zoo_server import FileServer, Served
from .conftest import sample_paths

AUTHORS = Path(__file__).with_name("fixtures") / "authors" / "condensenet_converted_state_dict.json"
BUILD = {"4": condensenet74_c4_g4, "8": condensenet74_c8_g8}


@pytest.mark.parametrize("groups", ["4", "8"])
def test_the_architecture_is_the_authors(groups: str) -> None:
    ref = json.loads(AUTHORS.read_text(encoding="utf-8"))
    assert "29b175315d2e2fa14bece826fc5bbe8c58e9a165" in ref["source"] and "condensenet" + groups in ref["source"]
    net = BUILD[groups]()
    assert [[k, list(v.shape)] for k, v in net.state_dict().items()] == ref["state_dict"][groups]
    n = sum(p.numel() for p in net.parameters())
    assert n == ref["parameters"][groups]
    # the authors' README: "4.8M" parameters for C = G = 4, "2.9M" for C = G = 8
    assert round(n / 1e6, 1) == {"4": 4.8, "8": 2.9}[groups]
    assert (STAGES, GROWTH, BOTTLENECK) == ((4, 6, 8, 10, 8), (8, 16, 32, 64, 128), 4)
    net.eval()
    with torch.no_grad():
        assert net(torch.zeros(2, 3, 224, 224)).shape == (2, 1000)


@pytest.mark.parametrize("name", ["condensenet74-c4-g4", "condensenet74-c8-g8"])
def test_zoo_entries_name_the_published_files(name: str) -> None:
    e = entries()[name]
    g = name[-1]
    assert e.arch == f"shiftbench.zoo.condensenet:condensenet74_c{g}_g{g}"
    assert e.url.startswith("https://www.dropbox.com/s/") and e.url.endswith(f"/converted_condensenet_{g}.pth.tar?dl=1")
    assert e.page == e.url.replace("?dl=1", "?dl=0")  # the link of the authors' README
    assert e.cache_name == f"converted_condensenet_{g}.pth.tar"
    assert e.sha256_prefix is None and e.size_bytes is None  # none published, none invented
    assert (e.state_dict_key, e.strip_prefix) == ("state_dict", "module.")  # torch.save({'state_dict': DataParallel's})
    assert e.licence.startswith("MIT") and "Section 3.5" in e.description
    assert e.preprocessing.size == 224 and e.preprocessing.crop_fraction == 224 / 256


def _photo() -> torch.Tensor:
    img = Image.open(sample_paths()[0]).convert("RGB").resize((224, 224), Image.Resampling.BILINEAR)
    return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)[None]


def test_zoo_loads_the_published_checkpoint_layout_offline(server: FileServer, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint laid out as the authors saved theirs ({'state_dict': {'module.<key>': ...}}, channel selections
    that are not the identity) served from 127.0.0.1: the zoo strips the prefix and loads it strictly, and the
    classifier's logits are the network's."""
    monkeypatch.setenv("SHIFTBENCH_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    net = condensenet74_c4_g4()
    sd = net.state_dict()
    for k, v in sd.items():
        if k.endswith("index"):
            sd[k] = torch.randperm(v.numel()) if not k.startswith("classifier") else torch.randperm(2064)[: v.numel()]
        elif k.endswith("running_var"):
            sd[k] = torch.rand_like(v) + 0.5
    net.load_state_dict(sd)
    buf = io.BytesIO()
    torch.save({"state_dict": {"module." + k: v for k, v in sd.items()}}, buf)
    server.files["/converted_condensenet_4.pth.tar"] = Served(buf.getvalue())
    shipped = entries()["condensenet74-c4-g4"]
    register(dataclasses.replace(shipped, name="test-condensenet4", url=server.url("/converted_condensenet_4.pth.tar")))
    try:
        clf = load_model("zoo:test-condensenet4")
    finally:
        unregister("test-condensenet4")
    assert len(server.log) == 1 and clf.details["weights_file_checksum"].startswith("sha256:")
    x = _photo()
    net.eval()
    with torch.no_grad():
        want = net(clf.transform(x))
    torch.testing.assert_close(clf.logits(x), want, rtol=0, atol=0)
