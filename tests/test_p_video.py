"""ImageNet-P on disk: MP4 in the released layout, CIFAR-P .npy, and the errors of the readers."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench import perturbations as P
from shiftbench.errors import DataError, MissingDependencyError
from shiftbench.perturbations import video as V

from .conftest import sample_paths

av = pytest.importorskip("av")


def _clip(t: int = 31, s: int = 64) -> np.ndarray:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (s, s, 3), dtype=np.uint8)
    return np.stack([np.roll(base, i, axis=1) for i in range(t)])


def test_codec_is_h264_444(tmp_path: Path) -> None:
    path = V.write_video(tmp_path / "a.mp4", _clip(5), preset="ultrafast")
    with av.open(str(path)) as c:
        ctx = c.streams.video[0].codec_context
        assert ctx.name == "h264" and ctx.pix_fmt == "yuv444p"
        assert c.streams.video[0].frames == 5


def test_mp4_round_trip_is_close(tmp_path: Path) -> None:
    clip = _clip(31)
    path = V.write_video(tmp_path / "x" / "b.mp4", torch.from_numpy(clip).permute(0, 3, 1, 2), preset="veryfast")
    back = V.read_video(path, frames=31, size=(64, 64))
    assert back.shape == clip.shape and back.dtype == np.uint8
    assert np.abs(back.astype(int) - clip.astype(int)).mean() < 8  # lossy H.264 at CRF 20 on random texture


def test_released_layout_and_reader(tmp_path: Path) -> None:
    photos = [sample_paths()[0], sample_paths()[10]]
    names = ["ILSVRC2012_val_00000001.JPEG", "ILSVRC2012_val_00000002.JPEG"]
    wnids = ["n01440764", "n01530575"]
    paths = V.save_imagenet_p(tmp_path, photos, "gaussian_noise", 2, names=names, wnids=wnids, edition="64", preset="ultrafast")
    assert paths[0] == tmp_path / "gaussian_noise_2" / "n01440764" / "ILSVRC2012_val_00000001.mp4"
    videos = V.open_imagenet_p(tmp_path, "gaussian_noise", 2, edition="64")
    got = list(videos)
    assert [v.label for v, _ in got] == [0, 1] and got[0][1].shape == (31, 64, 64, 3)
    # temporal perturbations have one folder; difficulty 2 reads it with a larger stride
    V.save_imagenet_p(tmp_path, photos[:1], "rotate", names=names[:1], wnids=wnids[:1], edition="64", preset="ultrafast")
    assert V.folder_name("rotate", 3) == "rotate" and V.folder_name("shot_noise", 3) == "shot_noise_3"
    assert len(V.open_imagenet_p(tmp_path, "rotate", 3, edition="64")) == 1
    with pytest.raises(P.InvalidDifficultyError, match="temporal"):
        V.save_imagenet_p(tmp_path, photos[:1], "rotate", 2, names=names[:1], wnids=wnids[:1], edition="64")
    with pytest.raises(DataError, match="does not exist"):
        V.open_imagenet_p(tmp_path, "tilt", edition="64")


def test_frame_count_size_and_corrupt_errors(tmp_path: Path) -> None:
    short = V.write_video(tmp_path / "rotate" / "n0" / "short.mp4", _clip(20), preset="ultrafast")
    with pytest.raises(P.VideoShapeError) as exc:
        V.read_video(short, frames=31)
    assert exc.value.what == "frames" and exc.value.expected == 31 and exc.value.got == 20
    with pytest.raises(P.VideoShapeError, match="size"):
        V.read_video(short, size=(224, 224))
    videos = V.open_imagenet_p(tmp_path, "rotate", edition="64")
    with pytest.raises(P.VideoShapeError, match="frames"):
        list(videos)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video" * 50)
    with pytest.raises(P.CorruptVideoError, match="unreadable"):
        V.read_video(bad)
    with pytest.raises(P.CorruptVideoError, match="no such file"):
        V.read_video(tmp_path / "missing.mp4")
    truncated = tmp_path / "trunc.mp4"
    truncated.write_bytes(short.read_bytes()[:200])
    with pytest.raises((P.CorruptVideoError, P.VideoShapeError)):
        V.read_video(truncated, frames=20)


def test_cifar_p_npy(tmp_path: Path) -> None:
    seq = P.perturb(sample_paths()[0], "translate", edition="32")
    path = V.save_cifar_p(V.cifar_p_path(tmp_path, "translate"), seq)
    assert path.name == "translate.npy"
    arr = V.read_cifar_p(tmp_path, "translate")
    assert arr.shape == (1, 16, 32, 32, 3) and np.array_equal(arr[0], seq[0].permute(0, 2, 3, 1).numpy())
    np.save(tmp_path / "rotate.npy", np.zeros((2, 30, 32, 32, 3), np.uint8))
    with pytest.raises(P.VideoShapeError, match="frames"):
        V.read_cifar_p(tmp_path, "rotate")
    np.save(tmp_path / "tilt.npy", np.zeros((2, 31, 64, 64, 3), np.uint8))
    with pytest.raises(P.VideoShapeError, match="size"):
        V.read_cifar_p(tmp_path, "tilt")
    (tmp_path / "scale.npy").write_bytes(b"junk")
    with pytest.raises(P.CorruptVideoError):
        V.read_cifar_p(tmp_path, "scale")
    assert V.cifar_p_path(tmp_path, "shot_noise", 3).name == "shot_noise_3.npy"


def test_missing_pyav_gives_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = builtins.__import__

    def fake(name: str, *args: object, **kwargs: object) -> object:
        if name == "av":
            raise ImportError("no av")
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(MissingDependencyError, match=r"shiftbench\[video\]"):
        V.write_video(tmp_path / "c.mp4", _clip(2))
