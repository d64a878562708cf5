"""Weather corruptions: snow, frost, fog (benchmark) and spatter (extra).

(brightness, also a weather corruption in the papers' taxonomy, lives in
``digital.py`` next to saturate.)

Each corruption computes in the precision the reference uses so that the final
8-bit truncation lands on the same level: fog in float64 on ``x / 255``, frost
in float64 in the 0..255 domain, snow and spatter in float32 on ``x / 255``
(with their random layers in float64 until the reference casts them).

* fog: the diamond-square plasma map is built by the sampler
  (:func:`plasma_fractal`; compiled from raw generator words for the default
  generator, same map) and only blended in ``apply``.
* frost: the texture files ship as package data (``assets/frost``); the sampler
  draws the file index and the crop corner, ``apply`` gathers the crops.
* snow: the snow layer is zoomed (:func:`~._geometry.clipped_zoom`), thresholded,
  stored as 8 bits, motion-blurred (:func:`~._geometry.motion_blur`) and added
  twice (once rotated by 180 degrees) to a brightened image.
* spatter: "water" severities draw an outline texture with OpenCV's integer
  routines (Canny, distance transform, histogram equalisation), computed per
  image on the CPU; "mud" severities are pure tensor code.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from importlib import resources
from typing import Any, NamedTuple

import cv2
import numpy as np
import torch

from ..editions import get_edition
from ..rng.pcg64 import raw_words
from ._bounds import require_shape, require_within
from ._cpu.snow import snow_kernel
from ._geometry import cached_zoom_axis_table, clipped_zoom, motion_blur, motion_blur_taps
from ._ops import (
    as_tensor_matrix,
    dense_gaussian_memory,
    fdiv,
    gaussian_filter2d,
    gaussian_filter2d_memory,
    gaussian_matrix,
)
from ._registry import DEFAULT_BYTES_PER_PIXEL, IMAGE_BY_IMAGE, ApplyContext, SampleContext, register

__all__ = [
    "plasma_fractal",
    "fog_mapsize",
    "FROST_FILES",
    "FROST_SELECTABLE",
    "frost_texture",
    "rgb_to_gray_f32",
    "snow",
    "frost",
    "fog",
    "spatter",
]


# --------------------------------------------------------------------------- fog


def plasma_fractal(draws: Any, mapsize: int, wibbledecay: float) -> np.ndarray:
    """Diamond-square height map on a torus, scaled to [0, 1] (float64, mapsize x mapsize).

    Draw order per octave (``n = mapsize / step`` cells per side): one ``(n, n)``
    uniform array for the square centres, then one for the diamond points on the
    rows ``0::step`` and one for the diamond points on the rows ``step/2::step``.
    Each noise value is ``wibble * U(-wibble, wibble)``; wibble starts at 100 and
    is divided by ``wibbledecay`` after every octave.

    Args:
        draws: a :class:`~shiftbench.rng.seeding.Draws` source.
        mapsize: side of the map, a power of two.
        wibbledecay: per-octave decay of the noise amplitude.

    Returns:
        The normalised map (minimum 0, maximum 1).

    Raises:
        ValueError: if ``mapsize`` is not a power of two >= 2.
    """
    n_side = int(mapsize)
    if n_side < 2 or n_side & (n_side - 1):
        raise ValueError(f"mapsize={mapsize!r} must be a power of two >= 2")
    grid = np.empty((n_side, n_side), dtype=np.float64)
    grid[0, 0] = 0.0
    step = n_side
    wibble = 100.0
    cat = np.concatenate
    while step >= 2:
        half = step // 2
        cells = n_side // step
        # square centres: mean of the four lattice corners around each cell (torus neighbours)
        corners = np.ascontiguousarray(grid[0:n_side:step, 0:n_side:step])
        acc = corners + cat((corners[1:], corners[:1]), axis=0)
        acc = acc + cat((acc[:, 1:], acc[:, :1]), axis=1)
        centres = acc / 4 + wibble * draws.uniform(-wibble, wibble, (cells, cells))
        grid[half:n_side:step, half:n_side:step] = centres
        # diamond points: mean of the two neighbouring centres and the two neighbouring corners
        acc = (centres + cat((centres[-1:], centres[:-1]), axis=0)) + (corners + cat((corners[:, 1:], corners[:, :1]), axis=1))
        grid[0:n_side:step, half:n_side:step] = acc / 4 + wibble * draws.uniform(-wibble, wibble, (cells, cells))
        acc = (centres + cat((centres[:, -1:], centres[:, :-1]), axis=1)) + (corners + cat((corners[1:], corners[:1]), axis=0))
        grid[half:n_side:step, 0:n_side:step] = acc / 4 + wibble * draws.uniform(-wibble, wibble, (cells, cells))
        step //= 2
        wibble /= wibbledecay
    grid -= grid.min()
    return grid / grid.max()


def fog_mapsize(edition: str, height: int, width: int) -> int:
    """Side of the plasma map for an image: the edition's map size, or the next power of two >= max(H, W)."""
    need = max(int(height), int(width))
    return max(get_edition(edition).fog_mapsize, 1 << (need - 1).bit_length())


class FogParams(NamedTuple):
    """A severity of fog: the haze's strength and the plasma map's per-octave decay (wibbledecay)."""

    strength: float
    decay: float


def _sample_fog(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    from ._images import require_memory

    size = fog_mapsize(ctx.edition, ctx.height, ctx.width)
    require_memory(3 * 8 * size * size, f"{ctx.height}x{ctx.width} (HxW; fog draws a {size} x {size} plasma map)")
    generator = getattr(draws, "generator", None)
    if isinstance(generator, np.random.Generator):
        # FastDraws: compiled, on 32-bit uniforms (see _fog_cpu); the window as float32
        from ..rng.ziggurat import halves
        from ._cpu.fog import plasma_map

        words = halves(raw_words(generator.bit_generator, size * size // 2))[: size * size - 1]
        return {"plasma": plasma_map(words, size, float(ctx.params.decay), ctx.height, ctx.width)}
    pmap = plasma_fractal(draws, size, float(ctx.params.decay))
    return {"plasma": np.ascontiguousarray(pmap[: ctx.height, : ctx.width])}


def _fog_memory(h: int, w: int, edition: str, c: Any) -> int:
    """Per-pixel intermediates and the plasma map (the next power of two of the longer side, squared)."""
    return DEFAULT_BYTES_PER_PIXEL * h * w + 3 * 8 * fog_mapsize(edition, h, w) ** 2


@register(
    "fog", family="weather", group="benchmark", sample=_sample_fog, params=FogParams, accepts_levels=True,
    bounds=lambda h, w, edition, params, d: {"plasma": (0.0, 1.0)}, memory=_fog_memory,
)
def fog(x: torch.Tensor, c: FogParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Add a gray plasma-fractal haze of the given strength and renormalise by the image maximum."""
    strength = c.strength
    x = fdiv(x.to(torch.float64), 255.0)
    peak = torch.amax(x, dim=(1, 2, 3), keepdim=True)
    x += (strength * d["plasma"].to(torch.float64))[:, None]
    x *= peak
    x /= peak + strength
    return x.clamp_(0, 1).mul_(255)


@fog.kernel("compiled", torch.uint8, torch.float64)
def _fog_compiled(x: torch.Tensor, c: FogParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    from ._cpu.fog import fog_blend, fog_levels

    xa = np.ascontiguousarray(x.detach().numpy())
    out = ctx.result_array(xa.shape, np.float64)  # uint8: truncated
    plasma = d["plasma"].detach().numpy()
    require_shape("plasma", plasma.shape, (xa.shape[0], xa.shape[2], xa.shape[3]))
    if plasma.dtype not in (np.float32, np.float64):
        plasma = plasma.astype(np.float64)
    (fog_levels if out.dtype == np.uint8 else fog_blend)(xa, np.ascontiguousarray(plasma), float(c.strength), out)
    return torch.from_numpy(out)


# ------------------------------------------------------------------------- frost

FROST_FILES: tuple[str, ...] = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg", "frost6.jpg")
"""The six texture files shipped in ``shiftbench/assets/frost``."""

FROST_SELECTABLE = 5
"""How many of :data:`FROST_FILES` the sampler can pick (index ``integers(5)``: frost6 is never used)."""

_FROST_MARGIN = 1.1


@cache
def _frost_native(index: int) -> np.ndarray:
    """Texture ``index`` as decoded by OpenCV (BGR, alpha dropped), converted to RGB; read-only."""
    data = resources.files("shiftbench").joinpath("assets", "frost", FROST_FILES[index]).read_bytes()
    bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:  # pragma: no cover - corrupted installation
        raise RuntimeError(f"could not decode frost texture {FROST_FILES[index]}")
    rgb = np.ascontiguousarray(bgr[..., ::-1])
    rgb.setflags(write=False)
    return rgb


@cache
def _frost_edition(index: int, scale: float | None) -> np.ndarray:
    """Texture ``index`` resized by the edition's factor (``cv2.resize`` bilinear, fx = fy = scale)."""
    tex = _frost_native(index)
    if scale is None:
        return tex
    # resizing the BGR original and reversing the channels equals resizing the RGB copy
    out = cv2.resize(np.ascontiguousarray(tex), (0, 0), fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _frost_fitted(index: int, scale: float | None, height: int, width: int) -> np.ndarray:
    tex = _frost_edition(index, scale)
    th, tw = tex.shape[:2]
    if th > height and tw > width:
        return tex
    # too small for this image: enlarge (bilinear) so that both sides exceed the image by 10 %
    f = _FROST_MARGIN * max(height / th, width / tw)
    size = (int(math.ceil(tw * f)), int(math.ceil(th * f)))
    out = cv2.resize(np.ascontiguousarray(tex), size, interpolation=cv2.INTER_LINEAR)
    out.setflags(write=False)
    return out


def frost_texture(index: int, edition: str = "224", height: int | None = None, width: int | None = None) -> np.ndarray:
    """The RGB uint8 frost texture that ``frost`` crops from (read-only array).

    Args:
        index: 0..5 into :data:`FROST_FILES` (the sampler only draws 0..4).
        edition: the edition; "64" and "32" shrink the textures by 0.3 and 0.2.
        height, width: the image size; a texture that is not larger than the image
            in both directions is enlarged to 1.1 times the size needed.
    """
    scale = get_edition(edition).frost_scale
    if height is None or width is None:
        return _frost_edition(int(index), scale)
    return _frost_fitted(int(index), scale, int(height), int(width))


_FROST_TENSORS: dict[tuple[int, float | None, tuple[int, ...], str], torch.Tensor] = {}


def _frost_tensor(index: int, edition: str, height: int, width: int, device: torch.device) -> torch.Tensor:
    """:func:`frost_texture` as a C x H x W tensor on ``device``, cached.

    The key holds everything the texture depends on: the file, the edition's scale and the fitted texture's shape
    (an enlarged texture is ``cv2.resize`` of the edition's texture to that shape, so the shape determines it) and
    the device. Never an ``id()``: the fitted arrays live in a bounded cache, and a freed array's id is reused.
    """
    scale = get_edition(edition).frost_scale
    tex = frost_texture(index, edition, height, width)
    key = (int(index), scale, tuple(tex.shape), str(device))
    t = _FROST_TENSORS.get(key)
    if t is None:
        if len(_FROST_TENSORS) > 64:
            _FROST_TENSORS.clear()
        t = torch.from_numpy(np.array(tex)).permute(2, 0, 1).contiguous().to(device)
        _FROST_TENSORS[key] = t
    return t


def _sample_frost(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    index = int(draws.integers(FROST_SELECTABLE))
    tex = frost_texture(index, ctx.edition, ctx.height, ctx.width)
    top = int(draws.integers(0, tex.shape[0] - ctx.height))
    left = int(draws.integers(0, tex.shape[1] - ctx.width))
    return {k: np.asarray(v, dtype=np.int64) for k, v in (("index", index), ("top", top), ("left", left))}


class FrostParams(NamedTuple):
    """A severity of frost: the weights of the image and of the frost texture in the blend."""

    image: float
    frost: float


def _frost_bounds(h: int, w: int, edition: str, params: FrostParams, d: Any) -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {"index": (0, FROST_SELECTABLE - 1)}
    index = np.asarray(d.get("index", 0))
    if index.shape == () and index.dtype.kind in "iu" and 0 <= int(index) < FROST_SELECTABLE:
        th, tw = frost_texture(int(index), edition, h, w).shape[:2]
        out["top"] = (0, max(th - h - 1, 0))
        out["left"] = (0, max(tw - w - 1, 0))
    return out


def _frost_memory(h: int, w: int, edition: str, c: Any) -> int:
    """Per-pixel intermediates and the largest texture fitted to the image (enlarged 1.1 times past an image larger
    than the texture, so it grows with the longer side squared for a long strip), as an array, a tensor and the
    resize's output."""
    scale = get_edition(edition).frost_scale
    worst = 0
    for i in range(FROST_SELECTABLE):
        th, tw = _frost_edition(i, scale).shape[:2]
        if th > h and tw > w:
            area = th * tw
        else:
            f = _FROST_MARGIN * max(h / th, w / tw)
            area = int(math.ceil(tw * f)) * int(math.ceil(th * f))
        worst = max(worst, area)
    return DEFAULT_BYTES_PER_PIXEL * h * w + 3 * 3 * worst


@register(
    "frost", family="weather", group="benchmark", sample=_sample_frost, params=FrostParams, bounds=_frost_bounds,
    accepts_levels=True, chunk_values=IMAGE_BY_IMAGE, memory=_frost_memory,
)
def frost(x: torch.Tensor, c: FrostParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Blend a random crop of a frost texture: clip(image * x + frost * texture, 0, 255) in the 0..255 domain."""
    h, w = int(x.shape[-2]), int(x.shape[-1])
    idx = d["index"].cpu().tolist()
    tops = d["top"].cpu().tolist()
    lefts = d["left"].cpu().tolist()
    if x.dtype == torch.uint8:
        x = x.to(torch.float64)
    layer = torch.empty_like(x)
    for n, (i, t, left) in enumerate(zip(idx, tops, lefts)):
        tex = _frost_tensor(int(i), ctx.edition, h, w, x.device)
        layer[n].copy_(tex[:, t : t + h, left : left + w])
    layer *= c.frost
    layer += x * c.image
    return layer.clamp_(0, 255)


@frost.kernel("compiled", torch.uint8, torch.float64)
def _frost_compiled(x: torch.Tensor, c: FrostParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    from ._cpu.blend import blend_crop

    h, w = int(x.shape[-2]), int(x.shape[-1])
    idx = d["index"].cpu().tolist()
    tops = d["top"].cpu().tolist()
    lefts = d["left"].cpu().tolist()
    xa = np.ascontiguousarray(x.detach().numpy())
    out = ctx.result_array(xa.shape, np.float64)  # uint8: truncated
    for n, (i, t, left) in enumerate(zip(idx, tops, lefts)):
        require_within("index", i, 0, len(FROST_FILES) - 1)
        tex = _frost_tensor(int(i), ctx.edition, h, w, x.device).numpy()
        require_within("top", t, 0, tex.shape[1] - h)
        require_within("left", left, 0, tex.shape[2] - w)
        blend_crop(xa[n], tex, int(t), int(left), float(c.image), float(c.frost), out[n])
    return torch.from_numpy(out)


# -------------------------------------------------------------------------- snow

# OpenCV's RGB -> gray weights for float images, as float32
_GRAY_R, _GRAY_G, _GRAY_B = (float(np.float32(v)) for v in (0.299, 0.587, 0.114))


def rgb_to_gray_f32(x: torch.Tensor) -> torch.Tensor:
    """``cv2.cvtColor(img, COLOR_RGB2GRAY)`` of float32 images: B x 3 x H x W -> B x H x W (float32).

    OpenCV's vector path evaluates ``fma(B, 0.114f, fma(R, 0.299f, G * 0.587f))``
    in float32; each fused multiply-add is emulated exactly by forming the
    product and the sum in float64 and rounding once to float32.
    """
    r, g, b = (x[:, k].to(torch.float64) for k in range(3))
    t = (g * _GRAY_G).to(torch.float32).to(torch.float64)
    t = (r * _GRAY_R + t).to(torch.float32).to(torch.float64)
    return (b * _GRAY_B + t).to(torch.float32)


class SnowParams(NamedTuple):
    """A severity of snow: the snow layer's normal (loc, scale), its zoom, the threshold below which
    it is cleared, the motion blur's radius and sigma, and the weight of the image in the wash-out."""

    loc: float
    scale: float
    zoom: float
    threshold: float
    radius: float
    sigma: float
    blend: float


def _sample_snow(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    c = ctx.params
    layer = draws.normal(size=(ctx.height, ctx.width), loc=c.loc, scale=c.scale)
    angle = draws.uniform(-135, -45)
    return {"layer": np.asarray(layer, dtype=np.float64), "angle": np.asarray(angle, dtype=np.float64)}


@register(
    "snow", family="weather", group="benchmark", sample=_sample_snow, params=SnowParams, dtype=torch.float32,
    bounds=lambda h, w, edition, params, d: {"angle": (-135.0, -45.0)},
)
def snow(x: torch.Tensor, c: SnowParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Zoomed, thresholded, motion-blurred snow flakes over a brightened, washed-out image."""
    return _snow(x, c, d, compiled=False)


@snow.kernel("compiled")
def _snow_compiled(x: torch.Tensor, c: SnowParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """One compiled pass per image for RGB batches; else the tensor path with the compiled motion blur."""
    if int(x.shape[1]) == 3:
        return _snow_cpu(x, c, d, ctx)
    return _snow(x, c, d, compiled=True)


def _snow(x: torch.Tensor, c: SnowParams, d: dict[str, torch.Tensor], *, compiled: bool) -> torch.Tensor:
    x = fdiv(x.to(torch.float32), 255.0)
    layer = clipped_zoom(d["layer"].to(torch.float64), float(c.zoom))
    layer = torch.where(layer < c.threshold, torch.zeros_like(layer), layer)
    # the layer is stored as an 8-bit gray image (truncation) before the motion blur
    layer8 = torch.floor(torch.clamp(layer, 0, 1) * 255)
    flakes = motion_blur(layer8[:, None], float(c.radius), float(c.sigma), d["angle"].to(torch.float64), compiled=compiled)
    flakes = fdiv(flakes.to(torch.float64), 255.0)
    bright = rgb_to_gray_f32(x)[:, None].mul_(1.5).add_(0.5)
    bright = torch.maximum(x, bright).mul_(1 - c.blend)
    x = x * c.blend
    x += bright
    out = x.to(torch.float64)
    out += flakes
    out += torch.flip(flakes, dims=(-2, -1))
    return out.clamp_(0, 1).mul_(255)


def _snow_cpu(x: torch.Tensor, c: SnowParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """The snow steps in one compiled pass per image (CPU, 3-channel images)."""
    from ._geometry import run_threaded

    b, nc, h, w = (int(v) for v in x.shape)
    require_shape("layer", tuple(d["layer"].shape), (b, h, w))
    k, dxs, dys = motion_blur_taps(float(c.radius), float(c.sigma), d["angle"].detach().reshape(-1).to("cpu", torch.float64).numpy())
    zoom = float(c.zoom)
    zr = cached_zoom_axis_table(h, zoom)
    zc = cached_zoom_axis_table(w, zoom)
    xa = np.ascontiguousarray(x.detach().to(torch.float32).numpy())
    layer = np.ascontiguousarray(d["layer"].detach().to(torch.float64).numpy())
    out = ctx.result_array((b, nc, h, w), np.float64)
    run_threaded(b, lambda s, e: snow_kernel(xa, layer, zr, zc, float(c.threshold), k, dxs, dys, float(c.blend), s, e, out))
    return torch.from_numpy(out)


# ----------------------------------------------------------------------- spatter

_EMBOSS = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], dtype=np.float32)
_WATER = tuple(float(np.float32(v / 255.0)) for v in (175, 238, 238))  # pale turquoise (RGB)
_MUD = tuple(float(np.float32(v / 255.0)) for v in (63, 42, 20))  # brown (RGB)


def _water_texture(level: np.ndarray) -> np.ndarray:
    """OpenCV outline texture of one 8-bit liquid layer (H x W uint8 -> H x W float32)."""
    edges = cv2.Canny(level, 50, 150)
    dist = cv2.distanceTransform(255 - edges, cv2.DIST_L2, 5)
    _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
    dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
    dist = cv2.equalizeHist(dist)
    dist = cv2.filter2D(dist, cv2.CV_8U, _EMBOSS)
    return cv2.blur(dist, (3, 3)).astype(np.float32)


def _gaussian_f32(m: torch.Tensor, sigma: float) -> torch.Tensor:
    """SciPy ``gaussian_filter`` (mode 'nearest', truncate 4) of float32 data with float32 output.

    SciPy filters one axis at a time in float64 and stores each pass in the
    float32 output, so each pass is rounded to float32 here as well.
    """
    h, w = int(m.shape[-2]), int(m.shape[-1])
    mh = as_tensor_matrix(gaussian_matrix(h, sigma, "nearest", 4.0), m.device, torch.float64)
    mw = as_tensor_matrix(gaussian_matrix(w, sigma, "nearest", 4.0), m.device, torch.float64)
    t = torch.matmul(mh, m.to(torch.float64)).to(torch.float32)
    return torch.matmul(t.to(torch.float64), mw.transpose(0, 1)).to(torch.float32)


class SpatterParams(NamedTuple):
    """A severity of spatter: the liquid layer's normal (loc, scale), its Gaussian's sigma, the
    threshold below which it is cleared, the strength (water: the outline's intensity; mud: the
    sigma of the mask's blur) and which liquid (0: water, 1: mud)."""

    loc: float
    scale: float
    sigma: float
    threshold: float
    strength: float
    mud: int


def _sample_spatter(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    c = ctx.params
    layer = draws.normal(size=(ctx.height, ctx.width), loc=c.loc, scale=c.scale)
    return {"layer": np.asarray(layer, dtype=np.float64)}


def _spatter_memory(h: int, w: int, edition: str, c: Any) -> int:
    """Per-pixel intermediates, the liquid layer's smoothing and, for mud, the mask's dense Gaussian operators."""
    mud = dense_gaussian_memory(h, w) if int(c.mud) else 0
    return DEFAULT_BYTES_PER_PIXEL * h * w + gaussian_filter2d_memory(h, w, float(c.sigma), "nearest", 4.0) + mud


@register("spatter", family="weather", group="extra", sample=_sample_spatter, params=SpatterParams, dtype=torch.float32,
          memory=_spatter_memory)
def spatter(x: torch.Tensor, c: SpatterParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Water drops (severities 1-3 of the reference tables) or mud splashes (4-5) over the image."""
    x = fdiv(x.to(torch.float32), 255.0)
    layer = gaussian_filter2d(d["layer"].to(torch.float64), float(c.sigma), mode="nearest", truncate=4.0)
    layer = torch.where(layer < c.threshold, torch.zeros_like(layer), layer)
    if int(c.mud) == 0:
        # 8-bit layer: truncation, wrapping modulo 256 like a C cast of values above 255
        level = torch.remainder(torch.floor(layer * 255), 256).to(torch.uint8)
        level_np = level.cpu().numpy()
        tex = np.stack([_water_texture(a) for a in level_np]) if len(level_np) else np.zeros(level_np.shape, np.float32)
        m = level.to(torch.float32) * torch.from_numpy(tex).to(x.device)
        peak = torch.amax(m, dim=(1, 2), keepdim=True)
        # an empty liquid layer has no outline: add no water (the reference divides by zero). With
        # ctx.extra["empty_layer"] == "black" the image is black instead, as the reference's 0 / 0 = NaN
        # becomes 0 in np.uint8 (ImageNet-P's spatter sequences, whose layer runs off the image)
        m = torch.where(peak > 0, m / torch.where(peak > 0, peak, torch.ones_like(peak)), torch.zeros_like(m))
        m = m * float(np.float32(c.strength))
        color = torch.tensor(_WATER, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
        x += m[:, None] * color
        x = x.clamp_(0, 1).mul_(255)
        if ctx.extra.get("empty_layer") == "black":
            x = torch.where(peak[:, None] > 0, x, torch.zeros_like(x))
        return x
    mask = (layer > c.threshold).to(torch.float32)
    mask = _gaussian_f32(mask, float(c.strength))
    mask = torch.where(mask < 0.8, torch.zeros_like(mask), mask)[:, None]
    color = torch.tensor(_MUD, dtype=torch.float32, device=x.device).view(1, 3, 1, 1) * mask
    x *= 1 - mask
    x += color
    return x.clamp_(0, 1).mul_(255)
