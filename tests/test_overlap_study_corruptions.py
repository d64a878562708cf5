"""Any registered corruption in an overlap study: ImageNet-C at drawn and fixed severities, candidates, user
corruptions, mixtures (seeded per image, uniform over the set), and severity calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from shiftbench import corrupt
from shiftbench.errors import InvalidArgumentError, UnknownCorruptionError
from shiftbench.overlap import corrupt_candidate
from shiftbench.overlap.calibrate import calibrate, calibrate_model
from shiftbench.overlap.study_corruptions import (
    apply_at_value,
    apply_corruption,
    draw_indices,
    imagenet_c_names,
    mixture,
    register_corruption,
    resolve,
    unregister_corruption,
)


def digits(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, 1, 32, 32, generator=g) * 255).to(torch.uint8)


def which_severity(x: torch.Tensor, y: torch.Tensor, name: str, key: str) -> list[int]:
    """Severities s at which corrupt(x, name, s) gives y for this key (the oracle: shiftbench.corrupt itself)."""
    return [s for s in range(1, 6) if torch.equal(corrupt(x, name, s, seed=3, keys=[key]), y)]


@pytest.mark.parametrize("name", ["gaussian_noise", "contrast", "jpeg_compression"])
def test_imagenet_c_at_a_severity_drawn_per_image(name: str) -> None:
    x = digits(40)
    keys = [f"test:{i}" for i in range(40)]
    sc = resolve(name)
    assert (sc.kind, sc.severity) == ("severity", None)
    y = apply_corruption(x, sc, seed=3, keys=keys)
    found = []
    for i in range(40):
        s = which_severity(x[i : i + 1], y[i : i + 1], name, keys[i])
        assert len(s) >= 1, f"image {i} is not {name} at any severity"
        found.append(s[0])
    assert set(found) == {1, 2, 3, 4, 5}  # 40 draws: each severity appears (chance of missing one < 1e-3)
    # the same key gives the same image whatever the batch
    y_rev = apply_corruption(x.flip(0), sc, seed=3, keys=keys[::-1])
    assert torch.equal(y_rev.flip(0), y)
    assert torch.equal(apply_corruption(x[7:8], sc, seed=3, keys=keys[7:8]), y[7:8])
    # another seed draws other severities / pixels
    assert not torch.equal(apply_corruption(x, sc, seed=4, keys=keys), y)


def test_imagenet_c_at_a_fixed_severity_and_candidates_unchanged() -> None:
    x = digits(8)
    keys = list(range(8))
    for s in (1, 5):
        sc = resolve(f"fog@{s}")
        assert (sc.name, sc.severity) == (f"fog@{s}", s)
        assert torch.equal(apply_corruption(x, sc, seed=0, keys=keys), corrupt(x, "fog", s, seed=0, keys=keys))
    # candidates keep the papers' whole-range mode
    assert torch.equal(
        apply_corruption(x, resolve("noc_rain"), seed=0, keys=keys), corrupt_candidate(x, "noc_rain", seed=0, keys=keys)
    )
    assert torch.equal(
        apply_corruption(x, resolve("noc_rain@2"), seed=0, keys=keys), corrupt(x, "noc_rain", 2, seed=0, keys=keys)
    )
    assert resolve("Gaussian-Noise").name == "gaussian_noise"


def test_resolve_errors_name_the_argument() -> None:
    with pytest.raises(UnknownCorruptionError, match="fgo") as e:
        resolve("fgo", where="corruptions.train")
    assert "fog" in str(e.value)
    for bad in ("fog@0", "fog@6", "fog@x"):
        with pytest.raises(InvalidArgumentError, match="corruptions.test"):
            resolve(bad, where="corruptions.test")


def test_mixture_draws_are_uniform_over_the_set() -> None:
    members = imagenet_c_names()
    assert len(members) == 15
    keys = [f"train:0:{i}" for i in range(6000)]
    idx = draw_indices(len(members), 0, keys, "mixture:m_IC")
    counts = np.bincount(idx, minlength=15)
    # chi-square goodness of fit to the uniform distribution, fixed seed: p is far from the 1% rejection level
    p = chisquare(counts).pvalue
    assert p > 0.01, (counts, p)
    # seeded per image: the same key gives the same member, in any order
    again = draw_indices(15, 0, keys[::-1], "mixture:m_IC")[::-1]
    assert np.array_equal(idx, again)
    # and the draws of another seed differ (not the same sequence relabelled)
    assert (draw_indices(15, 1, keys, "mixture:m_IC") != idx).mean() > 0.8


def test_mixture_corrupts_each_image_with_one_member() -> None:
    x = digits(30)
    keys = [f"k{i}" for i in range(30)]
    mix = mixture("m", ["brightness@3", "contrast@5", "noc_border"])
    y = apply_corruption(x, mix, seed=0, keys=keys)
    pick = draw_indices(3, 0, keys, "mixture:m")
    assert set(pick.tolist()) == {0, 1, 2}
    for i in range(30):
        member = mix.members[int(pick[i])]
        alone = apply_corruption(x[i : i + 1], member, seed=0, keys=[keys[i]])
        assert torch.equal(y[i : i + 1], alone), (i, member.name)
    # whole benchmarks by name
    assert [m.name for m in mixture("m_IC", "imagenet-c").members] == imagenet_c_names()
    assert len(mixture("m_INOC", "imagenet-noc").members) == 8
    with pytest.raises(InvalidArgumentError, match="mixtures.m"):
        mixture("m", ["fog"])
    with pytest.raises(InvalidArgumentError, match="mixtures.m"):
        mixture("m", "imagenet-x")


@pytest.fixture
def erase() -> object:
    """A user corruption whose effect is known: image i is erased (all zeros) when its uniform u_i < p."""

    def fn(x: torch.Tensor, values: torch.Tensor, gens: list[np.random.Generator]) -> torch.Tensor:
        u = torch.tensor([g.uniform() for g in gens], dtype=torch.float64)
        keep = (u >= values).to(x.dtype).view(-1, 1, 1, 1)
        return x * keep

    register_corruption("test_erase", fn, (0.0, 1.0), description="erase an image with probability p")
    yield fn
    unregister_corruption("test_erase")


class Oracle(torch.nn.Module):
    """Reads the class from a constant image's gray level (label / 9); an erased image reads as class 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        level = x.mean(dim=(1, 2, 3)) * 9
        return -((level[:, None] - torch.arange(10, dtype=x.dtype)[None]) ** 2)


def test_user_corruption_in_studies_and_its_draws(erase: object) -> None:
    sc = resolve("test_erase")
    assert sc.kind == "user"
    x = torch.full((400, 1, 32, 32), 200, dtype=torch.uint8)
    keys = list(range(400))
    y = apply_corruption(x, sc, seed=0, keys=keys)
    erased = (y.flatten(1).amax(1) == 0).float().mean().item()
    # p is drawn uniformly in [0, 1] and u too: P(u < p) = 1/2
    assert abs(erased - 0.5) < 0.08
    assert torch.equal(apply_corruption(x[:5], sc, seed=0, keys=keys[:5]), y[:5])
    with pytest.raises(InvalidArgumentError, match="name"):
        register_corruption("fog", lambda x, v, g: x, (0, 1))
    with pytest.raises(InvalidArgumentError, match="corruption"):
        resolve("test_erase@2")


def test_calibration_finds_known_endpoints_of_a_function() -> None:
    # R(v) = exp(-v / 20): R = 0.95 at 20 ln(1/0.95) = 1.0259, R = 0.5 at 20 ln 2 = 13.863
    cal = calibrate(lambda v: math.exp(-v / 20), (0, 100), tolerance=1e-3)
    assert cal.endpoints[0.95] == pytest.approx(20 * math.log(1 / 0.95), abs=2e-3)
    assert cal.endpoints[0.5] == pytest.approx(20 * math.log(2), abs=2e-3)
    assert len(cal.evaluations) <= 40
    # an integer range that runs downwards (e.g. quantization levels 9 -> 4): R(v) = (v - 1.7) / 7
    down = calibrate(lambda v: (v - 1.7) / 7, (9, 0), integer=True)
    assert down.endpoints == {0.95: 8.0, 0.5: 5.0}  # 8.35 and 5.2, rounded
    assert all(v == int(v) for v, _, _ in down.evaluations)
    # never reached: None, with a note (003's hue and gray scale stop at R = 0.63 / 0.70)
    flat = calibrate(lambda v: 1 - 0.37 * v, (0, 1))
    assert flat.endpoints[0.5] is None and flat.endpoints[0.95] == pytest.approx(0.05 / 0.37, abs=2e-3)
    assert any("0.5" in n for n in flat.notes)
    with pytest.raises(InvalidArgumentError, match="targets"):
        calibrate(lambda v: v, (0, 1), targets=[1.5])


def test_calibration_with_a_model_whose_robustness_is_known(erase: object, tmp_path: object) -> None:
    n = 2000
    labels = torch.arange(n) % 9 + 1
    x = (labels.view(-1, 1, 1, 1).float() / 9 * 255).round().to(torch.uint8).expand(n, 1, 32, 32).contiguous()
    cal = calibrate_model(Oracle(), x, labels, "test_erase", search=(0.0, 1.0), tolerance=1e-3)
    assert cal.clean_accuracy == 1.0
    # R(p) = share of images with u_i >= p, the same u_i at every p: the endpoints are the 5 % and 50 % quantiles
    assert cal.endpoints[0.95] == pytest.approx(0.05, abs=0.02)
    assert cal.endpoints[0.5] == pytest.approx(0.5, abs=0.04)
    for _v, r, a in cal.evaluations:
        assert r == a  # clean accuracy 1
    from shiftbench.overlap.calibrate import plot_calibration

    png = plot_calibration(cal, tmp_path / "c.png")  # type: ignore[operator]
    assert png.stat().st_size > 1000
    assert cal.to_dict()["format"] == "shiftbench-calibration/1"


def test_apply_at_value_for_a_candidate() -> None:
    x = torch.zeros(4, 1, 32, 32, dtype=torch.uint8)
    keys = list(range(4))
    # border at a fixed thickness: 9 px at 224 -> 9 * 32 / 224 -> 1 px at 32 (rounded); each image its own gray
    y = apply_at_value(x, "noc_border", 46, seed=0, keys=keys)
    y2 = apply_at_value(x, "noc_border", 9, seed=0, keys=keys)
    assert (y != 0).float().mean() > (y2 != 0).float().mean()
    with pytest.raises(InvalidArgumentError, match="corruption"):
        apply_at_value(x, "fog", 1, seed=0, keys=keys)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_apply_at_value_inside_the_range_is_corrupt_with_those_draws(channels: int, dtype: torch.dtype) -> None:
    from shiftbench.corruptions import SampleContext, get_corruption
    from shiftbench.rng.seeding import FastDraws, derive_generator, key_to_int

    x = digits(3, seed=5).expand(-1, channels, -1, -1).contiguous()
    x = x if dtype == torch.uint8 else x.to(dtype) / 255.0
    keys = ["a", "b", "c"]
    reg = get_corruption("noc_gaussian_noise")
    ctx = SampleContext(params=(0.1, 0.1), height=32, width=32, edition="224", severity=0)
    draws = [reg.sample(FastDraws(derive_generator(0, key_to_int(k), "noc_gaussian_noise:value", 0)), ctx) for k in keys]
    want = corrupt(x, "noc_gaussian_noise", 1, seed=0, keys=keys, draws=draws, edition="224")
    got = apply_at_value(x, "noc_gaussian_noise", 0.1, seed=0, keys=keys)
    assert got.dtype == x.dtype and got.shape == x.shape
    assert torch.equal(got, want) if dtype == torch.uint8 else torch.allclose(got, want, atol=1e-6)


def test_apply_at_value_beyond_the_published_range() -> None:
    """Calibration searches beyond 003's range (0.05 -> 0.18 for Gaussian noise): 0 changes nothing, 1.5 is harsher."""
    x = digits(4)
    keys = list(range(4))
    assert torch.equal(apply_at_value(x, "noc_gaussian_noise", 0.0, seed=0, keys=keys), x)
    mild = apply_at_value(x, "noc_gaussian_noise", 0.18, seed=0, keys=keys).float()
    harsh = apply_at_value(x, "noc_gaussian_noise", 1.5, seed=0, keys=keys).float()
    assert (harsh - x.float()).abs().mean() > 2 * (mild - x.float()).abs().mean()


def test_calibration_beyond_the_published_range() -> None:
    """A model whose accuracy is the share of pixels the noise leaves nearly unchanged: a search over 0 -> 1.5 works."""

    class Steady(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # class 1 when the image stayed close to mid-gray
            off = (x - 0.5).abs().flatten(1).mean(1)
            return torch.stack([off, 0.25 - off], 1)

    x = torch.full((40, 1, 32, 32), 128, dtype=torch.uint8)
    cal = calibrate_model(Steady(), x, torch.ones(40, dtype=torch.long), "noc_gaussian_noise", search=(0.0, 1.5))
    assert cal.search == (0.0, 1.5) and cal.evaluations[0][:2] == (0.0, 1.0)
    lo, hi = cal.range
    assert lo is not None and hi is not None and 0.0 < lo < hi < 1.5


def test_mean_overlaps_and_blocks(tmp_path: object) -> None:
    from shiftbench.overlap import OverlapMatrix
    from shiftbench.overlap.analysis import mean_overlaps, overlap_block, plot_overlap_heatmap

    nan = float("nan")
    om = OverlapMatrix(
        ["fog", "contrast", "noc_hue", "noc_border"],
        np.array([[1, 0.6, 0.0, 0.2], [0.6, 1, 0.1, nan], [0.0, 0.1, 1, 0.0], [0.2, nan, 0.0, 1]]),
    )
    mo = mean_overlaps(om)
    assert mo["fog"] == pytest.approx((0.6 + 0.0 + 0.2) / 3)
    assert mo["contrast"] == pytest.approx((0.6 + 0.1) / 2)  # the undefined score is left out
    block = overlap_block(om, ["fog", "contrast"], ["noc_hue", "noc_border"])  # IC x NOC
    assert block.shape == (2, 2) and block[0, 1] == 0.2 and math.isnan(block[1, 1])
    png = plot_overlap_heatmap(om, tmp_path / "b.png", rows=["fog", "contrast"], columns=["noc_hue", "noc_border"])  # type: ignore[operator]
    assert png.stat().st_size > 1000
    png = plot_overlap_heatmap(om, tmp_path / "m.png", means=True)  # type: ignore[operator]
    assert png.stat().st_size > 1000
