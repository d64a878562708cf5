"""ImageNet-P sequence generators: B images -> B x T x 3 x S x S uint8 frames.

Every random quantity of one image's sequence comes from the generator of
``(seed, image key, "imagenet_p/<perturbation>", level)`` (level = the
difficulty for noise sequences, 1 for temporal ones, whose difficulty only
sets the comparison stride), so a sequence does not depend on the batch, the
chunking or the device. Frames are produced in chunks of consecutive frames
(:func:`perturb_chunks`); state that evolves along a sequence (the running
mean of zoom blur, the running drops of spatter) is carried between chunks.

Which building block makes which frames:

===============  ==========================================================================
perturbation     frames
===============  ==========================================================================
gaussian_noise   frame 0 clean; the ImageNet-C ``gaussian_noise`` functional (float32) with
shot_noise       sigma / photon count of the difficulty, fresh draws from the ImageNet-C
speckle_noise    sampler for every frame
motion_blur      :func:`~shiftbench.corruptions._geometry.motion_blur` (ImageMagick) at the
                 scheduled angle (64 edition: of the source photo, then resized)
zoom_blur        running mean (float32) of the crop and Pillow affine zooms of the canvas
snow             the ImageNet-C ``snow`` functional with one drawn layer, scheduled angles
brightness       the ImageNet-C ``brightness`` functional with the scheduled HSV shift
translate        Pillow affine (NEAREST) of the canvas, torchvision 0.2.1 matrix
rotate, scale,   Pillow affine (BILINEAR) of the canvas, torchvision 0.2.1 matrix
shear
tilt             OpenCV fixed-point ``warpPerspective`` of the canvas with the tilt homography
gaussian_blur    SciPy-exact Gaussian operator (mode nearest, truncate 6 or 7), 8-bit truncation
spatter          the ImageNet-C ``spatter`` water recipe on a liquid layer that runs down
                 (column convolution) from frame to frame
===============  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..checks import check_seed
from ..corruptions import (
    ApplyContext,
    Corruption,
    SampleContext,
    fdiv,
    gaussian_filter2d,
    get_corruption,
    typed_memory_errors,
)
from ..corruptions import imagemagick_motion_blur as im_motion_blur
from ..errors import InvalidArgumentError
from ..rng.seeding import Draws, FastDraws, derive_generator
from ._source import PreparedImages, center_window, prepare, resize_short_size, resized_crop_window
from ._spec import Perturbation, check_difficulty, get_perturbation
from ._warp import affine_matrix_tv021, cv_warp_perspective, pil_affine, pil_resize, tilt_homography

__all__ = ["perturb", "perturb_chunks", "sample_sequence_draws", "sequence_draws_name", "DEFAULT_CHUNK_VALUES"]

DEFAULT_CHUNK_VALUES = 1 << 24
"""Budget of one chunk in values (B x t x 3 x S x S, and per-image canvases): 128 MiB of float64."""


def sequence_draws_name(perturbation: str) -> str:
    """The operation name that seeds a perturbation's draws (distinct from the corruption's)."""
    return f"imagenet_p/{perturbation}"


@dataclass
class _Job:
    spec: Perturbation
    params: Mapping[str, Any]
    prepared: PreparedImages
    difficulty: int
    draws: list[Draws]
    device: torch.device
    chunk: int
    given: list[dict[str, np.ndarray]] | None = None  # per image, replayed draws (sample_sequence_draws)

    @property
    def n(self) -> int:
        return len(self.prepared)

    @property
    def size(self) -> int:
        return self.prepared.size

    @property
    def frames(self) -> int:
        return int(self.params["frames"])

    def crops(self, dtype: torch.dtype) -> torch.Tensor:
        return self.prepared.crops.to(device=self.device, dtype=dtype)

    def ranges(self) -> Iterator[tuple[int, int]]:
        for a in range(0, self.frames, self.chunk):
            yield a, min(self.frames, a + self.chunk)

    def apply_ctx(self, spec: Corruption, x: torch.Tensor) -> ApplyContext:
        """The context of ``spec.apply`` on frames like ``x``, with the backend corrupt() would pick."""
        return ApplyContext(edition=self.prepared.edition, severity=self.difficulty, backend=spec.select_backend(x.device, x.dtype))


def _to_uint8(y: torch.Tensor) -> torch.Tensor:
    """Truncate 0..255 values to uint8, as ``np.uint8`` / ``Tensor.byte()`` do for in-range values."""
    return torch.floor(y).clamp_(0, 255).to(torch.uint8)


def _repeat_frames(x: torch.Tensor, t: int) -> torch.Tensor:
    """B x ... -> (B * t) x ..., image-major."""
    return x.unsqueeze(1).expand(x.shape[0], t, *x.shape[1:]).reshape(x.shape[0] * t, *x.shape[1:])


def _split(y: torch.Tensor, b: int, t: int) -> torch.Tensor:
    return y.reshape(b, t, *y.shape[1:])


# --------------------------------------------------------------------------- noise


_NOISE_KEYS = {"gaussian_noise": "sigma", "shot_noise": "photons", "speckle_noise": "sigma"}


def _noise(job: _Job) -> Iterator[torch.Tensor]:
    cspec = get_corruption(job.spec.name)
    assert cspec.sample is not None
    level = job.params[_NOISE_KEYS[job.spec.name]][job.difficulty - 1]
    s = job.size
    x = job.crops(cspec.dtype)
    clean = job.prepared.crops.to(job.device)
    levels = [np.ascontiguousarray(c.permute(1, 2, 0).numpy()) for c in job.prepared.crops]
    ctxs = [
        SampleContext(params=level, height=s, width=s, edition=job.prepared.edition, severity=job.difficulty,
                      _levels=(lambda a=a: a))
        for a in levels
    ]
    for a, b in job.ranges():
        out = torch.empty((job.n, b - a, 3, s, s), dtype=torch.uint8, device=job.device)
        first = a
        if a == 0:
            out[:, 0] = clean
            first = 1
        t = b - first
        if t > 0:
            if job.given is not None:  # frame f's draws are row f - 1 of each key
                stacked = {k: torch.from_numpy(np.concatenate([g[k][first - 1 : b - 1] for g in job.given])).to(job.device)
                           for k in job.given[0]}
            else:
                per_frame = [cspec.sample(job.draws[i], ctxs[i]) for i in range(job.n) for _ in range(t)]
                stacked = {k: torch.from_numpy(np.stack([np.asarray(d[k]) for d in per_frame])).to(job.device)
                           for k in per_frame[0]}
            y = cspec.apply(_repeat_frames(x, t), level, stacked, job.apply_ctx(cspec, x))
            out[:, first - a :] = _split(_to_uint8(y), job.n, t)
        yield out


# --------------------------------------------------------------------------- blur / weather / digital


def _motion_blur(job: _Job) -> Iterator[torch.Tensor]:
    p = job.params
    s = job.size
    if p.get("canvas", "crop") != "source":
        x = job.crops(torch.float64)
        for a, b in job.ranges():
            t = b - a
            angles = torch.tensor(p["angle"][a:b], dtype=torch.float64).repeat(job.n)
            y = im_motion_blur(_repeat_frames(x, t), float(p["radius"]), float(p["sigma"]), angles)
            yield _split(_to_uint8(y), job.n, t)
        return
    # 64 edition: blur the source photo, Resize(64), CenterCrop(64)
    for a, b in job.ranges():
        out = torch.empty((job.n, b - a, 3, s, s), dtype=torch.uint8, device=job.device)
        for i in range(job.n):
            src = job.prepared.canvas("source", i, job.device)
            h, w = int(src.shape[1]), int(src.shape[2])
            rh, rw = resize_short_size(h, w, s)
            top, left, _, _ = center_window(rh, rw, s, s)
            step = max(1, DEFAULT_CHUNK_VALUES // (3 * h * w))
            for f0 in range(a, b, step):
                f1 = min(b, f0 + step)
                angles = torch.tensor(p["angle"][f0:f1], dtype=torch.float64)
                y = im_motion_blur(src.unsqueeze(0).expand(f1 - f0, -1, -1, -1), float(p["radius"]), float(p["sigma"]), angles)
                y = pil_resize(y, rh, rw)[:, :, top : top + s, left : left + s]
                out[i, f0 - a : f1 - a] = _to_uint8(y)
        yield out


def _snow(job: _Job) -> Iterator[torch.Tensor]:
    cspec = get_corruption("snow")
    p = job.params
    c = (p["loc"], p["scale"], p["zoom"], p["threshold"], p["radius"], p["sigma"], p["blend"])
    layers = torch.from_numpy(np.stack([g["layer"] for g in _layer_draws(job)])).to(job.device)
    x = job.crops(cspec.dtype)
    for a, b in job.ranges():
        t = b - a
        angles = torch.tensor(p["angle"][a:b], dtype=torch.float64, device=job.device).repeat(job.n)
        y = cspec.apply(_repeat_frames(x, t), c, {"layer": _repeat_frames(layers, t), "angle": angles}, job.apply_ctx(cspec, x))
        yield _split(_to_uint8(y), job.n, t)


def _brightness(job: _Job) -> Iterator[torch.Tensor]:
    cspec = get_corruption("brightness")
    x = job.crops(cspec.dtype)
    for a, b in job.ranges():
        frames = [_to_uint8(cspec.apply(x, float(job.params["delta"][f]), {}, job.apply_ctx(cspec, x))) for f in range(a, b)]
        yield torch.stack(frames, dim=1)


def _gaussian_blur(job: _Job) -> Iterator[torch.Tensor]:
    x = fdiv(job.crops(torch.float64), 255.0)
    trunc = float(job.params["truncate"])
    for a, b in job.ranges():
        frames = [
            _to_uint8(255.0 * gaussian_filter2d(x, float(job.params["sigma"][f]), "nearest", trunc)) for f in range(a, b)
        ]
        yield torch.stack(frames, dim=1)


def _layer_draws(job: _Job) -> list[dict[str, np.ndarray]]:
    """Per image, the one random layer of snow and spatter: N(loc, scale) at S x S (float64)."""
    if job.given is not None:
        return job.given
    p, s = job.params, job.size
    return [{"layer": np.asarray(d.normal(size=(s, s), loc=p["loc"], scale=p["scale"]), dtype=np.float64)} for d in job.draws]


def run_down(layer: torch.Tensor, kernel: Sequence[float]) -> torch.Tensor:
    """``np.convolve(column, kernel, mode='same')`` applied to every column of ... x H x W layers.

    Output row ``j`` is ``sum_k kernel[k] * layer[j + (K - 1) // 2 - k]`` (rows
    outside are 0), summed in order of increasing source row.
    """
    k = len(kernel)
    off = (k - 1) // 2
    h = int(layer.shape[-2])
    out = torch.zeros_like(layer)
    first = True
    for m in range(k - 1, -1, -1):  # increasing source row j + off - m
        shift = off - m
        lo, hi = max(0, -shift), min(h, h - shift)  # output rows with a source row inside
        if hi <= lo:
            continue
        term = layer[..., lo + shift : hi + shift, :] * float(kernel[m])
        if first:
            out[..., lo:hi, :] = term
            first = False
        else:
            out[..., lo:hi, :] += term
    return out


def _spatter(job: _Job) -> Iterator[torch.Tensor]:
    cspec = get_corruption("spatter")
    p = job.params
    raw = torch.from_numpy(np.stack([g["layer"] for g in _layer_draws(job)])).to(job.device)
    layer = gaussian_filter2d(raw, float(p["smoothing"]), "nearest", 4.0)
    layer = torch.where(layer < p["threshold"], torch.zeros_like(layer), layer)
    # the layer handed to the functional is already smoothed and thresholded:
    # its own smoothing (sigma 0 = identity) and threshold (0) are switched off
    c = (p["loc"], p["scale"], 0.0, 0.0, p["mask_scale"], 0)
    x = job.crops(cspec.dtype)
    ctx = job.apply_ctx(cspec, x)
    # once the layer has run off (no outline left), the reference divides 0 by 0 and writes a black frame
    ctx.extra["empty_layer"] = "black"
    for a, b in job.ranges():
        frames = []
        for _ in range(a, b):
            frames.append(_to_uint8(cspec.apply(x, c, {"layer": layer}, ctx)))
            layer = run_down(layer, p["kernel"])
        yield torch.stack(frames, dim=1)


# --------------------------------------------------------------------------- geometric


def _canvas_plan(job: _Job, i: int) -> tuple[torch.Tensor, tuple[int, int, int, int], bool]:
    """Canvas of image ``i``, the evaluated output window and whether a 299 squash follows."""
    which = job.params.get("canvas", "base")
    s = job.size
    canvas = job.prepared.canvas("crop" if which == "crop" else "base", i, job.device)
    h, w = int(canvas.shape[1]), int(canvas.shape[2])
    if which == "crop" or job.prepared.preprocessed:
        return canvas, (0, 0, h, w), False
    if job.prepared.edition == "299":
        return canvas, resized_crop_window(h, w), True
    return canvas, center_window(h, w, s, s), False


def _geometric(
    job: _Job, render: Callable[[torch.Tensor, int, int, tuple[int, int, int, int]], torch.Tensor]
) -> Iterator[torch.Tensor]:
    """Frames ``render(canvas, f0, f1, window)`` -> (f1 - f0) x 3 x wh x ww, cropped/squashed to S."""
    s = job.size
    for a, b in job.ranges():
        out = torch.empty((job.n, b - a, 3, s, s), dtype=torch.uint8, device=job.device)
        for i in range(job.n):
            canvas, window, squash = _canvas_plan(job, i)
            step = max(1, DEFAULT_CHUNK_VALUES // (3 * window[2] * window[3] * 4))
            for f0 in range(a, b, step):
                f1 = min(b, f0 + step)
                y = render(canvas, f0, f1, window)
                if squash:
                    y = pil_resize(y, s, s)
                out[i, f0 - a : f1 - a] = _to_uint8(y)
        yield out


def _affine_coeffs(job: _Job, canvas: torch.Tensor, f0: int, f1: int) -> torch.Tensor:
    p = job.params
    h, w = int(canvas.shape[1]), int(canvas.shape[2])
    name = job.spec.name
    rows = []
    for f in range(f0, f1):
        if name == "translate":
            m = affine_matrix_tv021(w, h, 0, (p["shift"][f], 0), 1, 0)
        elif name == "rotate":
            m = affine_matrix_tv021(w, h, p["angle"][f], (0, 0), 1.0, 0)
        elif name == "shear":
            m = affine_matrix_tv021(w, h, 0, (0, 0), 1.0, p["shear"][f])
        else:  # scale, zoom_blur
            m = affine_matrix_tv021(w, h, 0, (0, 0), p["scale"][f], 0)
        rows.append(m)
    return torch.tensor(rows, dtype=torch.float64)


def _affine(job: _Job) -> Iterator[torch.Tensor]:
    bilinear = job.spec.name != "translate"

    def render(canvas: torch.Tensor, f0: int, f1: int, window: tuple[int, int, int, int]) -> torch.Tensor:
        return pil_affine(canvas, _affine_coeffs(job, canvas, f0, f1), window, bilinear=bilinear)

    return _geometric(job, render)


def _tilt(job: _Job) -> Iterator[torch.Tensor]:
    angles = job.params["angle"]

    def render(canvas: torch.Tensor, f0: int, f1: int, window: tuple[int, int, int, int]) -> torch.Tensor:
        h, w = int(canvas.shape[1]), int(canvas.shape[2])
        mats = np.stack([tilt_homography(w, h, angles[f], angles[f]) for f in range(f0, f1)])
        return cv_warp_perspective(canvas, mats, window)

    return _geometric(job, render)


def _zoom_blur(job: _Job) -> Iterator[torch.Tensor]:
    s = job.size
    crops = job.crops(torch.float32)
    scales = job.params["scale"]  # for frames 1..T-1
    acc = fdiv(crops, 255.0)  # float32 running sum, as ToTensor() accumulates it
    canvases = [_canvas_plan(job, i) for i in range(job.n)]
    for a, b in job.ranges():
        out = torch.empty((job.n, b - a, 3, s, s), dtype=torch.uint8, device=job.device)
        first = a
        if a == 0:
            out[:, 0] = job.prepared.crops.to(job.device)
            first = 1
        if b > first:
            zoomed = torch.empty((job.n, b - first, 3, s, s), dtype=torch.float32, device=job.device)
            for i, (canvas, window, _) in enumerate(canvases):
                h, w = int(canvas.shape[1]), int(canvas.shape[2])
                coeffs = torch.tensor(
                    [affine_matrix_tv021(w, h, 0, (0, 0), scales[f - 1], 0) for f in range(first, b)], dtype=torch.float64
                )
                zoomed[i] = pil_affine(canvas, coeffs, window).to(torch.float32)
            for f in range(first, b):
                acc = acc + fdiv(zoomed[:, f - first], 255.0)
                out[:, f - a] = _to_uint8(fdiv(acc, f + 1) * 255.0)
        yield out


_GENERATORS: dict[str, Callable[[_Job], Iterator[torch.Tensor]]] = {
    "gaussian_noise": _noise,
    "shot_noise": _noise,
    "speckle_noise": _noise,
    "motion_blur": _motion_blur,
    "zoom_blur": _zoom_blur,
    "snow": _snow,
    "brightness": _brightness,
    "translate": _affine,
    "rotate": _affine,
    "scale": _affine,
    "shear": _affine,
    "tilt": _tilt,
    "gaussian_blur": _gaussian_blur,
    "spatter": _spatter,
}


def _check_seed(seed: Any) -> int:
    """Seeds as for corrupt(): integers in 0..2**64-1 (the generators take 64 bits; 2**64 would alias 0)."""
    return check_seed(seed)


def perturb_chunks(
    images: Any,
    perturbation: str,
    difficulty: int = 1,
    *,
    seed: int = 0,
    edition: str | int | None = None,
    keys: Sequence[Any] | None = None,
    device: torch.device | str | None = None,
    preprocessed: bool = False,
    chunk_frames: int | None = None,
    draws: Sequence[Mapping[str, Any]] | None = None,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Generate ImageNet-P sequences chunk by chunk (bounded memory).

    Arguments are those of :func:`perturb`, plus ``chunk_frames``: frames per
    chunk (default: as many as fit :data:`DEFAULT_CHUNK_VALUES`).

    Yields:
        ``(first_frame, frames)`` with ``frames`` a B x t x 3 x S x S uint8
        tensor on ``device``; consecutive chunks cover frames 0..T-1 in order.
    """
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    seed = _check_seed(seed)
    with typed_memory_errors(f"the images for {spec.name}"):  # prepare() checks the memory its canvases need first
        prep = prepare(images, edition, preprocessed=preprocessed, keys=keys)
    params = spec.edition_params(prep.edition)
    from ..evaluation.models import parse_device

    dev = parse_device(device)
    frames = int(params["frames"])
    if chunk_frames is None:
        per_frame = max(1, len(prep) * 3 * prep.size * prep.size)
        chunk = max(1, min(frames, DEFAULT_CHUNK_VALUES // per_frame))
    else:
        if isinstance(chunk_frames, bool) or not isinstance(chunk_frames, (int, np.integer)) or chunk_frames < 1:
            raise InvalidArgumentError("chunk_frames", chunk_frames, "a positive integer or None")
        chunk = int(chunk_frames)
    level = spec.generation_level(d)
    name = sequence_draws_name(spec.name)
    gens: list[Draws] = [FastDraws(derive_generator(seed, k, name, level)) for k in prep.keys]
    job = _Job(spec, params, prep, d, gens, dev, chunk)
    if draws is not None:
        job.given = _check_draws(draws, _sample_all(_Job(spec, params, prep.subset(0, 1), d,
                                                         [FastDraws(derive_generator(0, 0, name, level))], dev, chunk))[0], len(prep))
    start = 0
    blocks = _GENERATORS[spec.name](job)
    while True:
        with typed_memory_errors(f"{len(prep)} image(s) of {prep.size}x{prep.size} for {spec.name}"):
            block = next(blocks, None)
        if block is None:
            return
        yield start, block
        start += int(block.shape[1])


_LAYER = ("snow", "spatter")


def _sample_all(job: _Job) -> list[dict[str, np.ndarray]]:
    """Every random draw of each image's sequence, as the generators consume them from the image's stream."""
    if job.spec.name in _NOISE_KEYS:
        cspec = get_corruption(job.spec.name)
        assert cspec.sample is not None
        level = job.params[_NOISE_KEYS[job.spec.name]][job.difficulty - 1]
        s, t = job.size, job.frames - 1
        out = []
        for i in range(job.n):
            a = np.ascontiguousarray(job.prepared.crops[i].permute(1, 2, 0).numpy())
            ctx = SampleContext(params=level, height=s, width=s, edition=job.prepared.edition, severity=job.difficulty,
                                _levels=(lambda a=a: a))
            frames = [cspec.sample(job.draws[i], ctx) for _ in range(t)]
            out.append({k: np.stack([np.asarray(f[k]) for f in frames]) for k in frames[0]})
        return out
    if job.spec.name in _LAYER:
        return _layer_draws(job)
    return [{} for _ in range(job.n)]


def _check_draws(draws: Any, like: Mapping[str, np.ndarray], n: int) -> list[dict[str, np.ndarray]]:
    """Given draws (one mapping per image) checked against the keys, shapes and dtypes sampling gives."""
    if isinstance(draws, (str, bytes, Mapping)) or not isinstance(draws, Sequence):
        raise InvalidArgumentError("draws", type(draws).__name__, f"a list of {n} dicts (one per image, see sample_sequence_draws)")
    if len(draws) != n:
        raise InvalidArgumentError("draws", f"{len(draws)} dicts", f"exactly one dict per image ({n})")
    out = []
    for i, d in enumerate(draws):
        if not isinstance(d, Mapping) or sorted(d) != sorted(like):
            got = sorted(d) if isinstance(d, Mapping) else type(d).__name__
            raise InvalidArgumentError(f"draws[{i}]", got, f"a dict with the keys {sorted(like)} (see sample_sequence_draws)")
        conv = {}
        for k, ref in like.items():
            v = d[k]
            a = v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)
            arg = f"draws[{i}][{k!r}]"
            if a.shape != ref.shape:
                raise InvalidArgumentError(arg, f"shape {a.shape}", f"shape {ref.shape} (what sampling gives for this edition)")
            if ref.dtype.kind == "f":
                if a.dtype.kind not in "fiu" or not np.isfinite(a).all():
                    raise InvalidArgumentError(arg, f"{a.dtype} array", "finite numbers")
            elif a.dtype.kind not in ref.dtype.kind + ("iu" if ref.dtype.kind in "iu" else ""):
                raise InvalidArgumentError(arg, f"{a.dtype} array", f"a {ref.dtype} array")
            conv[k] = np.ascontiguousarray(a.astype(ref.dtype, copy=False))
        out.append(conv)
    return out


def sample_sequence_draws(
    images: Any,
    perturbation: str,
    difficulty: int = 1,
    *,
    seed: int = 0,
    edition: str | int | None = None,
    keys: Sequence[Any] | None = None,
    preprocessed: bool = False,
) -> list[dict[str, np.ndarray]]:
    """The random draws of each image's sequence, one dict per image; :func:`perturb` ``(..., draws=...)`` replays them.

    ==================================  ====================================================================
    perturbation                        draws of one image
    ==================================  ====================================================================
    gaussian, shot, speckle noise       the ImageNet-C sampler's keys, each with a leading axis of T - 1
                                        (row f - 1 makes frame f; frame 0 is the clean crop)
    snow, spatter                       ``layer``: the S x S normal layer (N(loc, scale), before zoom or
                                        smoothing)
    the others                          nothing (``{}``): the frames follow from the schedule alone
    ==================================  ====================================================================

    Arguments are those of :func:`perturb`. Draws given in place of these (e.g. the reference
    scripts' own NumPy draws) make the frames the reference would make from them.
    """
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    seed = _check_seed(seed)
    prep = prepare(images, edition, preprocessed=preprocessed, keys=keys)
    params = spec.edition_params(prep.edition)
    name = sequence_draws_name(spec.name)
    gens: list[Draws] = [FastDraws(derive_generator(seed, k, name, spec.generation_level(d))) for k in prep.keys]
    return _sample_all(_Job(spec, params, prep, d, gens, torch.device("cpu"), 1))


def perturb(
    images: Any,
    perturbation: str,
    difficulty: int = 1,
    *,
    seed: int = 0,
    edition: str | int | None = None,
    keys: Sequence[Any] | None = None,
    device: torch.device | str | None = None,
    preprocessed: bool = False,
    draws: Sequence[Mapping[str, Any]] | None = None,
) -> torch.Tensor:
    """ImageNet-P sequences of one perturbation for a batch of images, in memory.

    Args:
        images: source photos (see :func:`~shiftbench.perturbations.prepare`)
            or a :class:`~shiftbench.perturbations.PreparedImages`.
        perturbation: a name from :func:`~shiftbench.perturbations.list_perturbations`.
        difficulty: 1..3. Noise sequences: stronger noise (separate data);
            temporal sequences: the frames are the same for every difficulty
            (the difficulty is the comparison stride of the metrics).
        seed: experiment seed; with the image key it fixes every random draw.
        edition: ``"224"`` (default), ``"299"``, ``"64"``, ``"64x64"`` (edition 64
            squashed, ImageNet 64x64-P) or ``"32"`` (aliases allowed); ``None`` keeps the
            edition of :class:`PreparedImages`.
        keys: one key per image instead of the crop's pixel digest.
        device: where to compute and return the frames (default CPU).
        preprocessed: the inputs are edition-size crops without context.
        draws: replay given draws instead of sampling them (one dict per image, see
            :func:`sample_sequence_draws`); ``seed`` and ``keys`` then do not matter.

    Returns:
        B x T x 3 x S x S uint8 tensor (T from the perturbation and edition).

    Raises:
        UnknownPerturbationError: unknown name.
        InvalidDifficultyError: difficulty not in 1..3.
        InvalidArgumentError: bad seed, keys, device or edition.
    """
    chunks = [c for _, c in perturb_chunks(
        images, perturbation, difficulty, seed=seed, edition=edition, keys=keys, device=device,
        preprocessed=preprocessed, draws=draws,
    )]
    return torch.cat(chunks, dim=1)
