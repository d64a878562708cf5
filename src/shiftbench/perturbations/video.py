"""ImageNet-P on disk: H.264 MP4 trees and CIFAR-P ``.npy`` arrays, written and read.

Released layouts (shared spec, section 5):

* ImageNet-P / Tiny-ImageNet-P: ``<root>/<perturbation>[_<d>]/<wnid>/<file>.mp4``,
  H.264, 1 frame per second, one video per validation image; the ``_2`` and
  ``_3`` folders exist only for the noise perturbations (temporal
  difficulties reuse the difficulty-1 videos with a larger stride).
* CIFAR-10-P / CIFAR-100-P: ``<perturbation>.npy``, uint8 (N, T, 32, 32, 3).
  The reference code fixes no name for noise difficulties 2 and 3; shiftbench
  writes and reads ``<perturbation>_<d>.npy`` for them.

Writing MP4 needs PyAV (the ``video`` extra: its wheels bundle FFmpeg with
libx264); the settings follow the reference generator: x264, preset
``veryslow``, ``-tune grain`` (CRF 23) for noise sequences and CRF 20 for the
others, 4:4:4 chroma (what FFmpeg picks for RGB input). Reading uses OpenCV's
``VideoCapture`` (a core dependency; the reference evaluation decodes the same
way), BGR converted to RGB.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from ..errors import DataError, InvalidArgumentError, MissingDependencyError
from ._errors import CorruptVideoError, InvalidDifficultyError, VideoShapeError
from ._source import prepare
from ._spec import Perturbation, check_difficulty, get_perturbation, resolve_p_edition
from .sequences import perturb_chunks

__all__ = [
    "encode_video",
    "video_settings",
    "write_video",
    "read_video",
    "folder_name",
    "video_path",
    "save_imagenet_p",
    "ReleasedVideo",
    "ImageNetPVideos",
    "open_imagenet_p",
    "save_cifar_p",
    "cifar_p_path",
    "read_cifar_p",
]

_SIZES = {"224": 224, "299": 299, "64": 64, "32": 32}


def require_av() -> Any:
    try:
        import av
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("av", "Writing ImageNet-P videos (H.264 MP4)", extra="video") from exc
    return av


def _frames_thwc(frames: Any, argument: str = "frames") -> np.ndarray:
    """T x 3 x H x W or T x H x W x 3 uint8 (tensor or array) -> T x H x W x 3 uint8 array."""
    a = frames.detach().cpu().numpy() if isinstance(frames, torch.Tensor) else np.asarray(frames)
    if a.dtype != np.uint8:
        raise InvalidArgumentError(argument, f"dtype {a.dtype}", "uint8 frames")
    if a.ndim != 4:
        raise InvalidArgumentError(argument, tuple(a.shape), "T x 3 x H x W or T x H x W x 3 frames")
    if a.shape[-1] != 3 and a.shape[1] == 3:
        a = a.transpose(0, 2, 3, 1)
    if a.shape[-1] != 3 or a.shape[0] < 1:
        raise InvalidArgumentError(argument, tuple(a.shape), "T x 3 x H x W or T x H x W x 3 frames (T >= 1)")
    return np.ascontiguousarray(a)


def write_video(path: str | Path, frames: Any, *, noise: bool = False, preset: str = "veryslow") -> Path:
    """Encode frames as an H.264 MP4 the way the reference generator did.

    Args:
        path: output file (parent folders are created). The file is written to
            a temporary name first and renamed, so an interrupted run leaves no
            truncated video behind.
        frames: T x 3 x H x W or T x H x W x 3 uint8 frames (tensor or array).
        noise: ``-tune grain`` at x264's default CRF 23 (the noise sequences);
            otherwise CRF 20.
        preset: x264 preset (the reference used ``veryslow``; faster presets
            change the compressed pixels slightly).

    Returns:
        The written path.

    Raises:
        MissingDependencyError: PyAV is not installed (``pip install 'shiftbench[video]'``).
    """
    data = encode_video(frames, noise=noise, preset=preset)
    out_path = Path(path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(suffix=".mp4", dir=str(out_path.parent), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp_name, out_path)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return out_path


def video_settings(noise: bool, preset: str = "veryslow") -> dict[str, Any]:
    """The encoder settings of one video (as the reference generator's ffmpeg call): for manifests."""
    return {"codec": "libx264", "fps": 1, "pix_fmt": "yuv444p", "preset": preset,
            **({"tune": "grain"} if noise else {"crf": 20})}


def encode_video(frames: Any, *, noise: bool = False, preset: str = "veryslow") -> bytes:
    """The MP4 file :func:`write_video` writes, as bytes (same settings; the same frames give the same bytes)."""
    av = require_av()
    arr = _frames_thwc(frames)
    _, h, w, _ = arr.shape
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=1)
        stream.width = int(w)
        stream.height = int(h)
        stream.pix_fmt = "yuv444p"
        opts = {"preset": preset}
        if noise:
            opts["tune"] = "grain"
        else:
            opts["crf"] = "20"
        stream.options = opts
        for f in arr:
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()


def read_video(
    path: str | Path, *, frames: int | None = None, size: tuple[int, int] | None = None, min_side: int | None = None
) -> np.ndarray:
    """Decode an MP4 with OpenCV into T x H x W x 3 uint8 RGB frames.

    Args:
        path: the video file.
        frames: expected frame count (checked when given).
        size: expected (height, width) (checked when given).
        min_side: expected shorter side, for videos whose aspect ratio may vary.

    Raises:
        CorruptVideoError: the file is missing, cannot be opened or holds no frame.
        VideoShapeError: frame count or size differ from the expectation.
    """
    p = str(path)
    if not os.path.isfile(p):
        raise CorruptVideoError(p, "no such file")
    cap = cv2.VideoCapture(p)
    try:
        if not cap.isOpened():
            raise CorruptVideoError(p, "OpenCV cannot open it as a video")
        out: list[np.ndarray] = []
        while True:
            ok, frame = cap.read()
            if not ok or frame is None:
                break
            if frame.ndim != 3 or frame.shape[2] != 3:
                raise CorruptVideoError(p, f"decoded frame of shape {frame.shape}")
            out.append(frame[..., ::-1])
    finally:
        cap.release()
    if not out:
        raise CorruptVideoError(p, "no decodable frame")
    shapes = {f.shape for f in out}
    if len(shapes) != 1:
        raise CorruptVideoError(p, f"frames of different sizes {sorted(shapes)}")
    video = np.ascontiguousarray(np.stack(out))
    if frames is not None and video.shape[0] != frames:
        raise VideoShapeError(p, "frames", frames, int(video.shape[0]), "A truncated or foreign video?")
    got_size = (int(video.shape[1]), int(video.shape[2]))
    if size is not None and got_size != tuple(size):
        raise VideoShapeError(p, "size", tuple(size), got_size, "Is it from another edition?")
    if min_side is not None and min(got_size) != min_side:
        raise VideoShapeError(p, "shorter side", min_side, min(got_size), "Is it from another edition?")
    return video


def folder_name(perturbation: str, difficulty: int = 1) -> str:
    """Folder of the released layout: ``<p>`` or, for noise difficulties 2 and 3, ``<p>_<d>``."""
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    return spec.name if d == 1 or not spec.noise else f"{spec.name}_{d}"


def video_path(root: str | Path, perturbation: str, difficulty: int, wnid: str, name: str) -> Path:
    """``<root>/<p>[_<d>]/<wnid>/<name without extension>.mp4``."""
    stem = Path(name).name
    for ext in (".JPEG", ".jpeg", ".jpg", ".JPG", ".png", ".PNG", ".mp4"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    return Path(root) / folder_name(perturbation, difficulty) / wnid / f"{stem}.mp4"


def save_imagenet_p(
    root: str | Path,
    images: Any,
    perturbation: str,
    difficulty: int = 1,
    *,
    names: Sequence[str],
    wnids: Sequence[str],
    seed: int = 0,
    edition: str | int | None = None,
    keys: Sequence[Any] | None = None,
    device: torch.device | str | None = None,
    preset: str = "veryslow",
    overwrite: bool = False,
) -> list[Path]:
    """Generate sequences and write them as MP4 in the released layout.

    Args:
        root: dataset root (e.g. ``ImageNet-P``).
        images: source photos (see :func:`~shiftbench.perturbations.prepare`).
        perturbation: perturbation name.
        difficulty: 1..3. Temporal perturbations have one set of videos;
            asking for difficulty 2 or 3 of them is refused (their difficulty
            is a comparison stride, not separate data).
        names: file name (or stem) of each image, e.g. ``ILSVRC2012_val_00000001.JPEG``.
        wnids: class folder of each image.
        seed, edition, keys, device: as in :func:`~shiftbench.perturbations.perturb`.
        preset: x264 preset.
        overwrite: rewrite videos that already exist (default: keep them, so an
            interrupted run resumes).

    Returns:
        The paths of the videos, one per image.
    """
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    if d > 1 and not spec.noise:
        raise InvalidDifficultyError(
            "difficulty", difficulty, f"1 for {spec.name}: temporal difficulties reuse the difficulty-1 videos"
        )
    require_av()
    prep = prepare(images, edition, keys=keys)
    n = len(prep)
    if len(names) != n or len(wnids) != n:
        raise InvalidArgumentError("names", f"{len(names)} names and {len(wnids)} wnids", f"one of each per image ({n})")
    paths = [video_path(root, spec.name, d, str(w), str(nm)) for w, nm in zip(wnids, names)]
    todo = [i for i, p in enumerate(paths) if overwrite or not p.exists()]
    for i in todo:
        sub = prep.subset(i, i + 1)
        frames = torch.cat([c for _, c in perturb_chunks(sub, spec.name, d, seed=seed, device=device)], dim=1)[0]
        write_video(paths[i], frames, noise=spec.noise, preset=preset)
    return paths


@dataclass(frozen=True)
class ReleasedVideo:
    """One video of a released tree: its path, class folder and label index."""

    path: Path
    wnid: str
    label: int


class ImageNetPVideos:
    """The videos of one perturbation and difficulty in a released ImageNet-P / Tiny-ImageNet-P tree.

    Iterating yields ``(video, frames)`` with ``frames`` a T x H x W x 3 uint8
    array, checked against the frame count and size the perturbation implies
    (Tiny-ImageNet-P motion blur: shorter side 64, as the reference resized
    without a crop).

    Args:
        root: dataset root holding ``<perturbation>[_<d>]`` folders.
        perturbation: perturbation name.
        difficulty: 1..3 (temporal perturbations read the difficulty-1 folder).
        edition: ``"224"``, ``"299"`` or ``"64"``.
        classes: class list defining the labels (default: the sorted wnid folders found).

    Raises:
        DataError: the folder is missing or holds no video.
    """

    def __init__(
        self,
        root: str | Path,
        perturbation: str,
        difficulty: int = 1,
        *,
        edition: str | int = "224",
        classes: Sequence[str] | None = None,
    ) -> None:
        self.spec: Perturbation = get_perturbation(perturbation)
        self.difficulty = check_difficulty(difficulty)
        self.edition = resolve_p_edition(edition)
        if self.edition == "32":
            raise InvalidArgumentError("edition", edition, "224, 299 or 64 (CIFAR-P is stored as .npy: read_cifar_p)")
        self.frames = self.spec.frames(self.edition)
        self.folder = Path(root) / folder_name(self.spec.name, self.difficulty)
        if not self.folder.is_dir():
            raise DataError(f"{self.folder} does not exist: expected <root>/{self.folder.name}/<wnid>/<file>.mp4")
        found = sorted(p.name for p in self.folder.iterdir() if p.is_dir())
        self.classes = list(classes) if classes is not None else found
        index = {c: i for i, c in enumerate(self.classes)}
        videos: list[ReleasedVideo] = []
        for wnid in found:
            if wnid not in index:
                raise DataError(f"class folder {wnid!r} in {self.folder} is not in the class list")
            for f in sorted((self.folder / wnid).glob("*.mp4")):
                videos.append(ReleasedVideo(f, wnid, index[wnid]))
        if not videos:
            raise DataError(f"{self.folder} holds no .mp4 video")
        self.videos = videos

    def __len__(self) -> int:
        return len(self.videos)

    def read(self, video: ReleasedVideo) -> np.ndarray:
        """Decode and check one video (T x H x W x 3 uint8)."""
        s = _SIZES[self.edition]
        if self.edition == "64" and self.spec.name == "motion_blur":
            return read_video(video.path, frames=self.frames, min_side=s)
        return read_video(video.path, frames=self.frames, size=(s, s))

    def __iter__(self) -> Iterator[tuple[ReleasedVideo, np.ndarray]]:
        for v in self.videos:
            yield v, self.read(v)


def open_imagenet_p(
    root: str | Path, perturbation: str, difficulty: int = 1, *, edition: str | int = "224"
) -> ImageNetPVideos:
    """Shortcut for :class:`ImageNetPVideos`."""
    return ImageNetPVideos(root, perturbation, difficulty, edition=edition)


def cifar_p_path(root: str | Path, perturbation: str, difficulty: int = 1) -> Path:
    """``<root>/<p>.npy``, or ``<root>/<p>_<d>.npy`` for noise difficulties 2 and 3."""
    return Path(root) / f"{folder_name(perturbation, difficulty)}.npy"


def save_cifar_p(path: str | Path, sequences: Any) -> Path:
    """Write CIFAR-P sequences as ``.npy``: uint8 (N, T, 32, 32, 3).

    Args:
        path: output file.
        sequences: N x T x 3 x 32 x 32 (as :func:`perturb` returns) or
            N x T x 32 x 32 x 3 uint8 frames.
    """
    a = sequences.detach().cpu().numpy() if isinstance(sequences, torch.Tensor) else np.asarray(sequences)
    if a.dtype != np.uint8 or a.ndim != 5:
        raise InvalidArgumentError("sequences", f"{a.dtype} array of shape {a.shape}", "uint8 N x T x 3 x H x W or N x T x H x W x 3")
    if a.shape[-1] != 3 and a.shape[2] == 3:
        a = a.transpose(0, 1, 3, 4, 2)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, np.ascontiguousarray(a))
    return out


def read_cifar_p(path: str | Path, perturbation: str, difficulty: int = 1, *, mmap: bool = True) -> np.ndarray:
    """Load CIFAR-10-P / CIFAR-100-P sequences: uint8 (N, T, 32, 32, 3).

    Args:
        path: the ``.npy`` file, or the folder holding ``<perturbation>.npy``.
        perturbation: perturbation name (fixes T).
        difficulty: 1..3. A folder is searched for ``<p>_<d>.npy`` for noise
            difficulties 2 and 3 (a naming the released data does not fix).
        mmap: memory-map the file instead of reading it.

    Raises:
        CorruptVideoError: the file is not a readable ``.npy``.
        VideoShapeError: dtype, frame count or frame size differ from CIFAR-P.
    """
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    p = Path(path)
    f = cifar_p_path(p, spec.name, d) if p.is_dir() else p
    if not f.is_file():
        raise CorruptVideoError(str(f), "no such file")
    try:
        a = np.load(f, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptVideoError(str(f), f"not a readable .npy array: {exc}") from exc
    t = spec.frames("32")
    if a.ndim != 5 or a.dtype != np.uint8:
        raise VideoShapeError(str(f), "array", f"uint8 (N, {t}, 32, 32, 3)", f"{a.dtype} {tuple(a.shape)}")
    if a.shape[1] != t:
        raise VideoShapeError(str(f), "frames", t, int(a.shape[1]))
    if tuple(a.shape[2:]) != (32, 32, 3):
        raise VideoShapeError(str(f), "size", (32, 32, 3), tuple(int(s) for s in a.shape[2:]))
    return a
