"""The candidate corruptions: registry group, seeding, batching, dtypes, ranges and the papers' ranges.

The candidates live in the registry namespace ``"noc"``; ``list_corruptions()`` lists the
default namespace (the 19 ImageNet-C corruptions) only.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shiftbench
from shiftbench.errors import InvalidArgumentError, UnknownCorruptionError, UnknownNameError
from shiftbench.overlap import CANDIDATES, PAPER_CANDIDATES, candidate_names, corrupt_candidate
from shiftbench.overlap.sampling import candidate_draws

NAMES = candidate_names()


def photos(n: int = 3, size: int = 64) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    base = torch.rand(n, 3, 8, 8, generator=g)
    x = torch.nn.functional.interpolate(base, size=(size, size), mode="bilinear", align_corners=False)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8)


def test_candidates_live_in_their_own_namespace() -> None:
    from shiftbench.corruptions._registry import list_namespaces

    assert len(shiftbench.list_corruptions()) == 19
    assert len(shiftbench.list_corruptions(namespace="imagenet_c")) == 19
    assert list_namespaces() == ["imagenet_c", "noc", "style"]
    assert len(NAMES) == 25 and len(PAPER_CANDIDATES) == 23
    assert shiftbench.list_corruptions(namespace="noc") == NAMES
    style = shiftbench.list_corruptions(namespace="style")
    assert shiftbench.list_corruptions(namespace="all") == shiftbench.list_corruptions() + NAMES + style
    # naming the namespace's group (as `shiftbench list corruptions --group candidate` does) lists it too
    assert shiftbench.list_corruptions("candidate") == NAMES
    assert shiftbench.list_corruptions("*noise", group="candidate") == ["noc_gaussian_noise"]
    assert shiftbench.list_corruptions("*noise", namespace="noc") == ["noc_gaussian_noise"]
    assert shiftbench.list_corruptions("noc_hue") == ["noc_hue"]
    assert shiftbench.get_corruption("noc_hue").group == "candidate"
    assert shiftbench.get_corruption("noc_hue").namespace == "noc"
    assert shiftbench.get_corruption("fog").namespace == "imagenet_c"
    assert set(NAMES) == set(CANDIDATES)
    with pytest.raises(UnknownNameError, match="noc"):
        shiftbench.list_corruptions(namespace="nco")


def test_papers_ranges_and_alexnet_errors() -> None:
    s = CANDIDATES
    assert s["noc_obstruction"].range == (47, 125) and s["obstruction"].range == (50, 120)
    assert s["noc_border"].range == (9, 46) and s["border"].range == (10, 45)
    assert s["noc_hue"].range == (0.05, 0.5) and s["noc_quantization"].range == (4, 9)
    assert s["noc_quantization"].mild == 9  # fewer levels is harsher
    assert sum(1 for c in s.values() if c.alexnet_error is not None) == 23
    assert s["noc_rain"].alexnet_error == 0.748


@pytest.mark.parametrize("name", NAMES)
def test_full_range_driver(name: str) -> None:
    """The overlap study's mode (one value from the whole range per image). The engine's contract
    (tests/test_contracts.py) covers each candidate at severities 1..5, with every backend."""
    x = photos()
    out = corrupt_candidate(x, name, seed=3)
    assert out.shape == x.shape and out.dtype == torch.uint8
    assert torch.equal(out, corrupt_candidate(x, name, seed=3))
    for i in range(len(x)):  # an image's corruption does not depend on its batch
        assert torch.equal(corrupt_candidate(x[i], name, seed=3), out[i])
    assert not torch.equal(corrupt_candidate(x, name, seed=4), out)
    assert not torch.equal(out, x)
    of = corrupt_candidate(x.to(torch.float32) / 255.0, name, seed=3)
    assert of.dtype == torch.float32 and float(of.min()) >= 0.0 and float(of.max()) <= 1.0
    # keys replace the pixel digest
    k1 = corrupt_candidate(x, name, seed=3, keys=["a", "b", "c"])
    assert torch.equal(k1[0], corrupt_candidate(x[:1], name, seed=3, keys=["a"])[0])


@pytest.mark.parametrize("name", ["noc_gaussian_noise", "noc_rotation", "noc_obstruction", "noc_brightness"])
def test_severity_fifths_are_monotone(name: str) -> None:
    x = photos(4)
    d = [float((shiftbench.corrupt(x, name, s, seed=1).float() - x.float()).abs().mean()) for s in (1, 3, 5)]
    assert d[0] < d[1] < d[2], d


def test_full_range_draws_are_uniform_over_the_range() -> None:
    x = photos(1)
    vals = []
    for k in range(400):
        vals.append(float(candidate_draws(x, "noc_hue", seed=0, keys=[k])[0]["v"]))
    v = np.array(vals)
    assert 0.05 <= v.min() < 0.08 and 0.47 < v.max() <= 0.5
    assert abs(v.mean() - 0.275) < 0.02
    ints = [int(candidate_draws(x, "noc_quantization", seed=0, keys=[k])[0]["v"]) for k in range(300)]
    assert set(ints) == {4, 5, 6, 7, 8, 9}


def test_pixel_lengths_scale_with_image_size() -> None:
    for size in (64, 224):
        x = torch.zeros(1, 3, size, size, dtype=torch.uint8)
        d = candidate_draws(x, "noc_obstruction", seed=0, keys=[0])[0]
        side = int(d["box"][2])
        assert 47 * size / 224 - 1 <= side <= 125 * size / 224 + 1


def test_images_are_corrupted_in_0_1_before_normalisation() -> None:
    # brightness adds v in [0.16, 0.51] to [0, 1] pixels: a mid-gray image moves by that much
    x = torch.full((1, 3, 32, 32), 0.5)
    y = corrupt_candidate(x, "noc_brightness", seed=0)
    shift = float((y - x).abs().mean())
    assert 0.16 - 1e-6 <= shift <= 0.51 + 1e-6


def test_bad_inputs() -> None:
    x = photos(1)
    with pytest.raises(InvalidArgumentError, match="candidate"):
        corrupt_candidate(x, "fog")
    with pytest.raises(UnknownCorruptionError, match="noc_hue"):
        corrupt_candidate(x, "noc_hu")
    with pytest.raises(InvalidArgumentError, match="seed"):
        corrupt_candidate(x, "noc_hue", seed=-1)
    with pytest.raises(InvalidArgumentError, match="keys"):
        corrupt_candidate(x, "noc_hue", keys=[1, 2])
