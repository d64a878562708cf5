"""ImageNet-P registry: names, groups, frame counts, schedules (against the reference expressions), errors."""

from __future__ import annotations

import pytest

from shiftbench import perturbations as P
from shiftbench.errors import InvalidArgumentError, UnknownNameError

TEST_10 = [
    "gaussian_noise", "shot_noise", "motion_blur", "zoom_blur", "snow",
    "brightness", "translate", "rotate", "tilt", "scale",
]
VALIDATION_4 = ["speckle_noise", "gaussian_blur", "spatter", "shear"]


def test_groups_and_order() -> None:
    assert P.list_perturbations("test") == TEST_10
    assert list(P.TEST_PERTURBATIONS) == TEST_10
    assert P.list_perturbations("validation") == VALIDATION_4
    assert P.list_perturbations() == TEST_10 + VALIDATION_4
    assert P.list_perturbations("noise") == ["gaussian_noise", "shot_noise", "speckle_noise"]
    assert P.list_perturbations("*blur*", split="test") == ["motion_blur", "zoom_blur"]
    assert P.list_perturbations(["Shear", "rotate"]) == ["rotate", "shear"]
    assert P.list_perturbations(kind="noise", split="validation") == ["speckle_noise"]
    for name in P.list_perturbations():
        spec = P.get_perturbation(name)
        assert spec.editions == ("224", "299", "64", "32")
        assert spec.noise == ("noise" in name)


@pytest.mark.parametrize(
    ("edition", "name", "frames"),
    [
        ("224", "translate", 41), ("224", "rotate", 31), ("224", "gaussian_noise", 31),
        ("299", "translate", 41), ("64", "translate", 31), ("tiny", "motion_blur", 31),
        ("32", "motion_blur", 21), ("cifar", "translate", 16), ("32", "scale", 31),
    ],
)
def test_frame_counts(edition: str, name: str, frames: int) -> None:
    assert P.get_perturbation(name).frames(edition) == frames


def test_comparisons_per_video() -> None:
    g = P.get_perturbation("gaussian_noise")
    r = P.get_perturbation("rotate")
    assert [g.comparisons("224", d) for d in (1, 2, 3)] == [30, 30, 30]
    assert [r.comparisons("224", d) for d in (1, 2, 3)] == [30, 29, 28]
    assert g.generation_level(3) == 3 and r.generation_level(3) == 1


def _sched(edition: str, name: str, key: str) -> list[float]:
    return list(P.get_perturbation(name).edition_params(edition)[key])


def test_schedules_follow_reference_expressions() -> None:
    rng31, rng41 = range(31), range(41)
    # 224 (make_imagenet_p.py)
    assert _sched("224", "motion_blur", "angle") == [(i - 30) * 4 for i in rng31]
    assert _sched("224", "zoom_blur", "scale") == [1 + 0.004 * i for i in range(1, 31)]
    assert _sched("224", "snow", "angle") == [i * 4 - 150 for i in rng31]
    assert _sched("224", "brightness", "delta") == [(i - 15) * 2 / 100.0 for i in rng31]
    assert _sched("224", "translate", "shift") == [i - 20 for i in rng41]
    assert _sched("224", "rotate", "angle") == [i - 15 for i in rng31]
    assert _sched("224", "tilt", "angle") == [i - 15 for i in rng31]
    assert _sched("224", "scale", "scale") == [(i * 2.5 + 40) / 100.0 for i in rng31]
    assert _sched("224", "gaussian_blur", "sigma") == [0.25 + 0.035 * i for i in rng31]
    assert _sched("224", "shear", "shear") == [i - 15 for i in rng31]
    assert _sched("224", "gaussian_noise", "sigma") == [0.03, 0.05, 0.08]
    assert _sched("224", "shot_noise", "photons") == [300, 120, 60]
    assert _sched("224", "speckle_noise", "sigma") == [0.05, 0.10, 0.15]
    # 299
    assert _sched("299", "gaussian_noise", "sigma") == [0.035, 0.055, 0.085]
    assert _sched("299", "shot_noise", "photons") == [250, 100, 50]
    assert _sched("299", "gaussian_blur", "sigma") == [0.35 + 0.035 * i for i in rng31]
    assert P.get_perturbation("motion_blur").edition_params("299")["radius"] == 13
    # 64 (Tiny-ImageNet-P)
    assert _sched("64", "motion_blur", "angle") == [(i - 30) * 5 for i in rng31]
    assert _sched("64", "translate", "shift") == [i - 15 for i in rng31]
    assert _sched("64", "gaussian_blur", "sigma") == [0.35 + 0.014 * i for i in rng31]
    assert _sched("64", "shot_noise", "photons") == [500, 250, 125]
    # 32 (CIFAR-P)
    assert _sched("32", "motion_blur", "angle") == [(i - 20) * 9 for i in range(21)]
    assert _sched("32", "translate", "shift") == [i - 7 for i in range(16)]
    assert _sched("32", "tilt", "angle") == [0.75 * (i - 15) for i in rng31]
    assert _sched("32", "scale", "scale") == [(i * 2 + 70) / 100.0 for i in rng31]
    assert _sched("32", "brightness", "delta") == [(i - 15) * 1.5 / 100.0 for i in rng31]
    assert _sched("32", "gaussian_blur", "sigma") == [0.3 + 0.015 * i for i in rng31]
    assert _sched("32", "gaussian_noise", "sigma") == [0.02, 0.04, 0.06]
    assert _sched("32", "shot_noise", "photons") == [700, 400, 200]
    assert _sched("32", "speckle_noise", "sigma") == [0.05, 0.07, 0.1]


def test_alexnet_baseline_is_package_data() -> None:
    b = P.alexnet_p_baseline()
    assert b.edition == "224" and b.difficulty == 1 and "Appendix E" in b.source
    assert b.fp["gaussian_noise"] == pytest.approx(0.2365)
    assert b.fp["scale"] == pytest.approx(0.2353)
    assert b.ut5d["tilt"] == pytest.approx(1.75)
    assert set(b.fp) == set(P.list_perturbations()) == set(b.ut5d)


def test_unknown_perturbation_names_choices_and_suggestion() -> None:
    with pytest.raises(P.UnknownPerturbationError) as exc:
        P.get_perturbation("rotation")
    err = exc.value
    assert isinstance(err, UnknownNameError) and isinstance(err, KeyError)
    assert err.argument == "perturbation" and err.value == "rotation"
    assert "rotate" in err.suggestions and "rotate" in str(err)
    with pytest.raises(P.UnknownPerturbationError):
        P.list_perturbations("gausian_noise")
    assert P.list_perturbations("nothing*") == []


@pytest.mark.parametrize("bad", [0, 4, -1, 1.0, "1", True, None])
def test_difficulty_outside_1_to_3(bad: object) -> None:
    with pytest.raises(P.InvalidDifficultyError) as exc:
        P.check_difficulty(bad)
    assert exc.value.argument == "difficulty" and "1..3" in str(exc.value)
    with pytest.raises(P.InvalidDifficultyError):
        P.perturb(pytest.importorskip("numpy").zeros((32, 32, 3), "uint8"), "rotate", bad, edition="32")  # type: ignore[arg-type]


def test_bad_split_kind_edition() -> None:
    with pytest.raises(InvalidArgumentError, match="split"):
        P.list_perturbations(split="train")
    with pytest.raises(InvalidArgumentError, match="kind"):
        P.list_perturbations(kind="geometric")
    with pytest.raises(UnknownNameError, match="edition"):
        P.get_perturbation("rotate").frames("128")
