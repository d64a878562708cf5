"""The candidate corruptions of the overlap study (namespace ``"noc"``, group ``"candidate"``).

Sources (see ``docs/overlap.md``):

* the 23 corruptions of Appendix A (Figures 5 and 6) of *Increasing the coverage and
  balance of robustness benchmarks by using non-overlapping corruptions* (Laugros,
  Caplier & Ospici, ICLR 2021 submission), with their severity ranges and the
  error rates of torchvision's pretrained AlexNet;
* ``border`` and ``obstruction`` as *Using the overlapping score to improve corruption
  benchmarks* (Laugros, Caplier & Ospici, ICIP 2021) describes them: a value
  drawn uniformly from [0, 1], thickness 10..45 px and square side 50..120 px.

Every candidate is written from the papers' one-line descriptions; where a description
leaves a choice open, the choice is stated in :data:`CANDIDATES` (``reading``).

Severity. The papers draw *one value uniformly from the whole range for each image*
(the lower bound gives a robustness score of 0.95 for their standard ResNet-18, the
upper bound 0.5). That is :func:`shiftbench.overlap.sampling.corrupt_candidate`, the mode
every part of :mod:`shiftbench.overlap` uses. Through :func:`shiftbench.corrupt` a candidate also
accepts severities 1..5: severity ``s`` draws from the ``s``-th fifth of the range
(mild to harsh), so mixing the five severities with equal weight is the papers'
distribution again.

Sizes. The ranges are for 224 x 224 images. Lengths in pixels (square sides, border
thickness, translations, crops, the 7 px radius of rain drops and circles, the 7 x 7
rhombus, the length of artifact lines) are scaled by ``min(H, W) / 224``; counts and
intensities are not. Images are in [0, 1] before any normalisation (the engine hands
``apply`` 0..255 values; each function divides by 255 first).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..editions import EDITIONS
from ._ops import hsv_to_rgb, rgb_to_hsv
from ._registry import ApplyContext, ApplyFn, Corruption, SampleContext, SampleFn, list_corruptions, register

__all__ = [
    "CandidateSpec",
    "CANDIDATES",
    "PAPER_CANDIDATES",
    "candidate_names",
    "NAMESPACE",
    "NOC_SOURCE",
    "OVERLAP_SOURCE",
]

NAMESPACE = "noc"
"""The registry namespace of the candidates: ``list_corruptions(namespace="noc")``."""
REFERENCE_SIZE = 224


NOC_SOURCE = "Laugros et al., 2020, Appendix A"
"""Where the 23 candidates come from: *Increasing the coverage and balance of robustness benchmarks by
using non-overlapping corruptions* (Laugros, Caplier & Ospici, ICLR 2021 submission)."""

OVERLAP_SOURCE = "Laugros et al., 2021, Section 4.3"
"""Where border and obstruction come from: *Using the overlapping score to improve corruption
benchmarks* (Laugros, Caplier & Ospici, ICIP 2021)."""


@dataclass(frozen=True)
class CandidateSpec:
    """One candidate corruption.

    Attributes:
        name: registry name (``noc_`` prefix for the 23 of Laugros et al., 2020; ``border`` and
            ``obstruction`` for the versions of Laugros et al., 2021).
        paper_name: the name in the paper's figures.
        family: registry family.
        mild, harsh: the severity range, from the mild end to the harsh end.
        integer: the value is an integer (drawn uniformly among the integers of the range).
        unit: what the value is.
        alexnet_error: error of torchvision's AlexNet on the ImageNet validation set with
            this corruption (Laugros et al., 2020, Figures 5-6); None where the paper gives none.
        reading: how shiftbench reads the paper's description where it leaves a choice.
        source: :data:`NOC_SOURCE` or :data:`OVERLAP_SOURCE`.
    """

    name: str
    paper_name: str
    family: str
    mild: float
    harsh: float
    integer: bool
    unit: str
    alexnet_error: float | None
    reading: str
    source: str = NOC_SOURCE

    @property
    def range(self) -> tuple[float, float]:
        """``(low, high)`` as the paper prints it."""
        return (min(self.mild, self.harsh), max(self.mild, self.harsh))

    def continuous_range(self) -> tuple[float, float]:
        """The range in which a continuous value is drawn (mild end first).

        Integer ranges ``a..b`` become ``[a, b + 1)`` so that flooring the drawn value
        gives each integer the same probability.
        """
        if not self.integer:
            return (float(self.mild), float(self.harsh))
        lo, hi = self.range
        return (float(lo), float(hi) + 1.0) if self.mild <= self.harsh else (float(hi) + 1.0, float(lo))

    def severity_table(self) -> tuple[tuple[float, float], ...]:
        """Severities 1..5: the five consecutive fifths of the range, mild to harsh."""
        a, b = self.continuous_range()
        return tuple((a + (b - a) * s / 5.0, a + (b - a) * (s + 1) / 5.0) for s in range(5))


def _spec(*args: Any, **kw: Any) -> CandidateSpec:
    return CandidateSpec(*args, **kw)


_SPECS: list[CandidateSpec] = [
    _spec(
        "noc_quantization",
        "Quantization",
        "digital",
        9,
        4,
        True,
        "number of levels",
        0.592,
        "each channel value x becomes round(x (n - 1)) / (n - 1)",
    ),
    _spec(
        "noc_gaussian_noise",
        "Gaussian Noise",
        "noise",
        0.05,
        0.18,
        False,
        "standard deviation",
        0.620,
        "independent N(0, sd^2) per pixel and channel, clipped to [0, 1]",
    ),
    _spec(
        "noc_salt_pepper",
        "Salt Pepper Noise",
        "noise",
        0.003,
        0.032,
        False,
        "probability per pixel",
        0.649,
        "each pixel (all channels) becomes 0 or 1 with equal odds",
    ),
    _spec(
        "noc_blur",
        "Blur",
        "blur",
        0.4,
        0.95,
        False,
        "interpolation factor",
        0.570,
        "t * B(x) + (1 - t) * x, B = five passes of a normalised 3 x 3 box filter (edges replicated)",
    ),
    _spec(
        "noc_thumbnail_resize",
        "Thumbnail Resize",
        "blur",
        1.1,
        3.25,
        False,
        "reduction factor",
        0.574,
        "bilinear down to (H / f, W / f), then bilinear back (no antialiasing)",
    ),
    _spec(
        "noc_pixelate",
        "Pixelate",
        "digital",
        2,
        4,
        True,
        "filter size",
        0.760,
        "mean of each k x k block (stride k, partial blocks at the edges), spread over the block",
    ),
    _spec(
        "noc_artifacts",
        "Artifacts",
        "occlusion",
        15,
        170,
        True,
        "number of artifacts",
        0.746,
        "horizontal dotted lines of 21 px (every other pixel set), uniform random position and gray value",
    ),
    _spec(
        "noc_vertical_artifacts",
        "Vertical Artifacts",
        "occlusion",
        15,
        180,
        True,
        "number of artifacts",
        0.758,
        "as noc_artifacts, rotated by 90 degrees",
    ),
    _spec(
        "noc_rhombus",
        "Rhombus",
        "occlusion",
        9,
        76,
        True,
        "number of rhombi",
        0.728,
        "7 x 7 diamonds (abs(dy) + abs(dx) <= 3) at uniform positions, each filled with one uniform gray value",
    ),
    _spec(
        "noc_rain",
        "Rain",
        "weather",
        12,
        120,
        True,
        "number of drops",
        0.748,
        "discs of radius 7 at uniform positions; inside, x becomes (x + 1) / 2",
    ),
    _spec(
        "noc_circles",
        "Circles",
        "occlusion",
        7,
        50,
        True,
        "number of circles",
        0.720,
        "discs of radius 7 at uniform positions, each filled with one uniform gray value",
    ),
    _spec(
        "noc_obstruction",
        "Obstruction",
        "occlusion",
        47,
        125,
        True,
        "side of the square (px)",
        0.597,
        "one square inside the image at a uniform position, filled with one uniform gray value",
    ),
    _spec(
        "noc_border",
        "Border",
        "occlusion",
        9,
        46,
        True,
        "thickness (px)",
        0.670,
        "the outer band of that thickness on all four sides, filled with one uniform gray value",
    ),
    _spec(
        "noc_translation",
        "Translation",
        "geometric",
        15,
        62,
        True,
        "pixels (both axes)",
        0.603,
        "shift by d px horizontally and d px vertically, each direction random; uncovered pixels are 0",
    ),
    _spec(
        "noc_shear",
        "Shear",
        "geometric",
        0.0,
        0.39,
        False,
        "shear factor",
        0.657,
        "horizontal shear x' = x + k (y - centre), sign random; the paper gives only the bound 0.39, "
        "so the range is taken as 0..0.39; uncovered pixels are 0",
    ),
    _spec(
        "noc_elastic",
        "Elastic",
        "geometric",
        44,
        110,
        True,
        "cropped pixels",
        0.541,
        "crop n px from the height or the width (axis and split between the two sides random), bilinear resize back",
    ),
    _spec(
        "noc_rotation",
        "Rotation",
        "geometric",
        7,
        50,
        False,
        "degrees",
        0.711,
        "rotation about the centre, direction random, bilinear; uncovered pixels are 0",
    ),
    _spec(
        "noc_backlight",
        "Backlight",
        "color",
        0.11,
        0.44,
        False,
        "value added or subtracted",
        0.591,
        "a straight line of uniform angle through a uniform point splits the image; +v on one side, -v on "
        "the other, clipped",
    ),
    _spec(
        "noc_brightness",
        "Brightness",
        "color",
        0.16,
        0.51,
        False,
        "value added or subtracted",
        0.577,
        "x + v or x - v (sign random), clipped",
    ),
    _spec(
        "noc_contrast",
        "Contrast",
        "color",
        0.33,
        0.74,
        False,
        "contrast reduction factor",
        0.576,
        "m + (1 - c) (x - m) with m the image's mean gray value",
    ),
    _spec(
        "noc_color_distortion",
        "Color Distortion",
        "color",
        0.09,
        0.40,
        False,
        "value added",
        0.606,
        "v added to one RGB channel chosen uniformly, clipped",
    ),
    _spec(
        "noc_gray_scale",
        "Gray Scale",
        "color",
        0.49,
        1.0,
        False,
        "interpolation factor",
        0.580,
        "t * gray(x) + (1 - t) * x, gray = 0.299 R + 0.587 G + 0.114 B",
    ),
    _spec(
        "noc_hue",
        "Hue",
        "color",
        0.05,
        0.5,
        False,
        "cyclic shift of H",
        0.684,
        "H of HSV shifted by v modulo 1 (direction +)",
    ),
    _spec(
        "border",
        "Border (Laugros et al., 2021)",
        "occlusion",
        10,
        45,
        True,
        "thickness (px)",
        None,
        "the outer band filled with one value drawn uniformly from [0, 1]",
        OVERLAP_SOURCE,
    ),
    _spec(
        "obstruction",
        "Obstruction (Laugros et al., 2021)",
        "occlusion",
        50,
        120,
        True,
        "side of the square (px)",
        None,
        "a square at a random position filled with one value drawn uniformly from [0, 1]",
        OVERLAP_SOURCE,
    ),
]

CANDIDATES: dict[str, CandidateSpec] = {s.name: s for s in _SPECS}
"""Every candidate corruption by registry name."""

PAPER_CANDIDATES: tuple[str, ...] = tuple(s.name for s in _SPECS if s.source == NOC_SOURCE)
"""The 23 candidates of Laugros et al., 2020 (Figure 2 / Appendix A), in the paper's order."""


def candidate_names(*, paper_only: bool = False) -> list[str]:
    """Names of the registered candidates (the 23 of Laugros et al., 2020, then border and obstruction of
    Laugros et al., 2021)."""
    names = list_corruptions(namespace=NAMESPACE)
    return [n for n in names if n in PAPER_CANDIDATES] if paper_only else names


# ----------------------------------------------------------------------------------------------
# helpers


def _value(draws: Any, ctx: SampleContext, spec: CandidateSpec) -> float:
    a, b = ctx.params
    v = float(draws.uniform(0.0, 1.0)) * (b - a) + a
    if spec.integer:
        lo, hi = spec.range
        v = float(min(max(math.floor(v), lo), hi))
    return v


def _scale(h: int, w: int) -> float:
    return min(h, w) / REFERENCE_SIZE


def _px(length: float, h: int, w: int) -> int:
    return max(1, int(round(length * _scale(h, w))))


def _f(v: float) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _grid(h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    yy = torch.arange(h, device=device, dtype=torch.float32).view(1, 1, h, 1)
    xx = torch.arange(w, device=device, dtype=torch.float32).view(1, 1, 1, w)
    return yy, xx


def _fill(x: torch.Tensor, mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """x where mask is False, value (B x 1 x H x W) where it is True."""
    return torch.where(mask, value.to(x.dtype).expand_as(x), x)


def _offsets(kind: str, r: int, device: torch.device) -> torch.Tensor:
    """(P, 2) pixel offsets (dy, dx) covered by one shape of half-size r."""
    rng = torch.arange(-r, r + 1, device=device)
    dy, dx = torch.meshgrid(rng, rng, indexing="ij")
    if kind == "disc":
        keep = dy * dy + dx * dx <= r * r
    elif kind == "rhombus":
        keep = dy.abs() + dx.abs() <= r
    else:  # dotted line of half length r, every other pixel: "hline" or "vline"
        along, across = (dx, dy) if kind == "hline" else (dy, dx)
        keep = (across == 0) & (torch.remainder(along + r, 2) == 0)
    return torch.stack([dy[keep], dx[keep]], dim=1)


def _shapes(
    x: torch.Tensor, d: dict[str, torch.Tensor], kind: str, radius_px: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask (B x 1 x H x W) and fill values of K shapes per image (``on`` marks the used ones).

    Later shapes are drawn over earlier ones: each pixel takes the value of the last
    shape that covers it (a deterministic scatter-max of shape indices).
    """
    b, _, h, w = x.shape
    r = max(1, int(round(radius_px * _scale(h, w))))
    off = _offsets(kind, r, x.device)  # P x 2
    cy = d["cy"].to(device=x.device, dtype=torch.long)
    cx = d["cx"].to(device=x.device, dtype=torch.long)
    on = d["on"].to(device=x.device, dtype=torch.bool)
    k = cy.shape[1]
    py = cy[:, :, None] + off[None, None, :, 0]
    px = cx[:, :, None] + off[None, None, :, 1]
    valid = on[:, :, None] & (py >= 0) & (py < h) & (px >= 0) & (px < w)
    flat = torch.where(valid, py * w + px, torch.zeros_like(py)).reshape(b, k * off.shape[0])
    kidx = torch.arange(k, device=x.device).view(1, k, 1).expand_as(py)
    kidx = torch.where(valid, kidx, torch.full_like(kidx, -1)).reshape(b, k * off.shape[0])
    last = torch.full((b, h * w), -1, dtype=torch.long, device=x.device)
    last = last.scatter_reduce(1, flat, kidx, reduce="amax", include_self=True)
    mask = (last >= 0).view(b, 1, h, w)
    if "val" not in d:
        return mask, torch.zeros((b, 1, h, w), dtype=torch.float32, device=x.device)
    val = d["val"].to(device=x.device, dtype=torch.float32)
    fill = torch.gather(val, 1, last.clamp(min=0)).view(b, 1, h, w)
    return mask, fill


def _sample_shapes(spec: CandidateSpec, with_value: bool) -> SampleFn:
    kmax = int(spec.range[1])

    def sample(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
        n = int(_value(draws, ctx, spec))
        out = {
            "cy": draws.integers(0, ctx.height, size=kmax).astype(np.int32),
            "cx": draws.integers(0, ctx.width, size=kmax).astype(np.int32),
            "on": np.arange(kmax) < n,
        }
        if with_value:
            out["val"] = draws.uniform(0.0, 1.0, size=kmax)
        return out

    return sample


def _sample_scalar(spec: CandidateSpec, *, sign: bool = False) -> SampleFn:
    def sample(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
        v = _value(draws, ctx, spec)
        out = {"v": _f(v)}
        if sign:
            out["sign"] = _f(1.0 if draws.uniform(0.0, 1.0) < 0.5 else -1.0)
        return out

    return sample


def _per_image(d: dict[str, torch.Tensor], key: str, x: torch.Tensor) -> torch.Tensor:
    return d[key].to(device=x.device, dtype=torch.float32).view(-1, 1, 1, 1)


def _warp(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Bilinear resampling with per-image affine maps (output -> input, normalised coords), zeros outside."""
    if x.shape[0] == 0:  # affine_grid refuses an empty batch
        return x.to(torch.float32).clone()
    grid = F.affine_grid(theta.to(torch.float32), list(x.shape), align_corners=False)
    return F.grid_sample(x.to(torch.float32), grid, mode="bilinear", padding_mode="zeros", align_corners=False)


Bounds = dict[str, tuple[Any, Any]]


def _bounds(spec: CandidateSpec, extra: Any = None) -> Any:
    """The draw bounds of a candidate: its value ``v`` anywhere in the candidate's whole range (replays
    of full-range draws, :func:`~shiftbench.overlap.corrupt_candidate`, use any value in it at any
    severity), a ``sign`` of -1 or 1, and ``extra(h, w)``'s ranges of its other draws."""
    lo, hi = spec.range

    def bounds(h: int, w: int, edition: str, params: Any, d: Any) -> Bounds:
        out: Bounds = {"v": (float(lo), float(hi)), "sign": (-1.0, 1.0)}
        if extra is not None:
            out.update(extra(h, w))
        return out

    return bounds


def _reg(spec: CandidateSpec, sample: Any, bounds: Any = None) -> Callable[[ApplyFn], Corruption]:
    table = {ed: spec.severity_table() for ed in EDITIONS}
    return register(
        spec.name,
        family=spec.family,
        group="candidate",
        namespace=NAMESPACE,
        sample=sample,
        dtype=torch.float32,
        description=f"{spec.paper_name} ({spec.source}): {spec.reading}",
        params=table,
        bounds=_bounds(spec, bounds),
    )


S = CANDIDATES

# ----------------------------------------------------------------------------------------------
# the corruptions (x: B x 3 x H x W in 0..255, float32; each returns 0..255)


@_reg(S["noc_quantization"], _sample_scalar(S["noc_quantization"]))
def noc_quantization(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Quantize each channel to n levels."""
    n1 = _per_image(d, "v", x) - 1.0
    return torch.round(x / 255.0 * n1) / n1 * 255.0


def _sample_gauss(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    v = _value(draws, ctx, S["noc_gaussian_noise"])
    return {"v": _f(v), "z": draws.standard_normal32((ctx.height, ctx.width, 3))}


@_reg(S["noc_gaussian_noise"], _sample_gauss)
def noc_gaussian_noise(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Additive zero-mean Gaussian noise."""
    z = d["z"].permute(0, 3, 1, 2).to(x.dtype)
    return torch.clamp(x / 255.0 + _per_image(d, "v", x) * z, 0, 1) * 255.0


def _sample_sp(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    v = _value(draws, ctx, S["noc_salt_pepper"])
    u = draws.random((ctx.height, ctx.width))
    salt = draws.random((ctx.height, ctx.width)) < 0.5
    return {"hit": u < v, "salt": salt}


@_reg(S["noc_salt_pepper"], _sample_sp)
def noc_salt_pepper(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Salt-and-pepper noise on whole pixels."""
    hit = d["hit"].to(torch.bool).unsqueeze(1)
    salt = d["salt"].to(torch.bool).unsqueeze(1)
    return _fill(x, hit, salt.to(x.dtype) * 255.0)


@_reg(S["noc_blur"], _sample_scalar(S["noc_blur"]))
def noc_blur(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Blend with five passes of a 3 x 3 box filter."""
    y = x
    c = x.shape[1]
    k = torch.full((c, 1, 3, 3), 1.0 / 9.0, dtype=x.dtype, device=x.device)
    for _ in range(5):
        y = F.conv2d(F.pad(y, (1, 1, 1, 1), mode="replicate"), k, groups=c)
    t = _per_image(d, "v", x)
    return t * y + (1 - t) * x


@_reg(S["noc_thumbnail_resize"], _sample_scalar(S["noc_thumbnail_resize"]))
def noc_thumbnail_resize(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Bilinear down-scaling by f and back."""
    h, w = x.shape[-2:]
    out = torch.empty_like(x)
    for i, f in enumerate(d["v"].tolist()):
        small = F.interpolate(
            x[i : i + 1], size=(max(1, int(h / f)), max(1, int(w / f))), mode="bilinear", align_corners=False
        )
        out[i : i + 1] = F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)
    return out.clamp(0, 255)


@_reg(S["noc_pixelate"], _sample_scalar(S["noc_pixelate"]))
def noc_pixelate(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Replace each k x k block by its mean."""
    h, w = x.shape[-2:]
    out = torch.empty_like(x)
    for i, kf in enumerate(d["v"].tolist()):
        k = max(1, int(round(kf)))
        m = F.avg_pool2d(x[i : i + 1], k, stride=k, ceil_mode=True, count_include_pad=False)
        out[i : i + 1] = m.repeat_interleave(k, dim=-2).repeat_interleave(k, dim=-1)[..., :h, :w]
    return out


def _reg_shapes(name: str, kind: str, radius: float, mode: str) -> ApplyFn:
    spec = S[name]

    def apply(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
        mask, fill = _shapes(x, d, kind, radius)
        if mode == "rain":
            return torch.where(mask, (x + 255.0) / 2.0, x)
        return _fill(x, mask, fill * 255.0)

    apply.__doc__ = spec.reading
    apply.__name__ = name
    _reg(
        spec,
        _sample_shapes(spec, with_value=mode != "rain"),
        lambda h, w: {"cy": (0, h - 1), "cx": (0, w - 1), "val": (0.0, 1.0)},
    )(apply)
    return apply


noc_artifacts = _reg_shapes("noc_artifacts", "hline", 10, "fill")
noc_vertical_artifacts = _reg_shapes("noc_vertical_artifacts", "vline", 10, "fill")
noc_rhombus = _reg_shapes("noc_rhombus", "rhombus", 3, "fill")
noc_rain = _reg_shapes("noc_rain", "disc", 7, "rain")
noc_circles = _reg_shapes("noc_circles", "disc", 7, "fill")


def _sample_square(spec: CandidateSpec) -> SampleFn:
    def sample(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
        side = min(_px(_value(draws, ctx, spec), ctx.height, ctx.width), ctx.height, ctx.width)
        top = int(draws.integers(0, ctx.height - side + 1))
        left = int(draws.integers(0, ctx.width - side + 1))
        val = float(draws.uniform(0.0, 1.0))
        return {"box": np.array([top, left, side], dtype=np.int64), "val": _f(val)}

    return sample


def _apply_square(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    h, w = x.shape[-2:]
    yy, xx = _grid(h, w, x.device)
    box = d["box"].to(x.device).view(-1, 3, 1, 1).to(torch.float32)
    top, left, side = box[:, 0:1], box[:, 1:2], box[:, 2:3]
    mask = (yy >= top) & (yy < top + side) & (xx >= left) & (xx < left + side)
    return _fill(x, mask, _per_image(d, "val", x) * 255.0)


def _sample_band(spec: CandidateSpec) -> SampleFn:
    def sample(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
        t = min(_px(_value(draws, ctx, spec), ctx.height, ctx.width), (min(ctx.height, ctx.width) + 1) // 2)
        return {"t": _f(t), "val": _f(float(draws.uniform(0.0, 1.0)))}

    return sample


def _apply_band(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    h, w = x.shape[-2:]
    yy, xx = _grid(h, w, x.device)
    t = _per_image(d, "t", x)
    mask = (yy < t) | (yy >= h - t) | (xx < t) | (xx >= w - t)
    return _fill(x, mask, _per_image(d, "val", x) * 255.0)


for _name in ("noc_obstruction", "obstruction"):
    _reg(
        S[_name],
        _sample_square(S[_name]),
        lambda h, w: {"box": (np.array([0, 0, 0]), np.array([h, w, min(h, w)])), "val": (0.0, 1.0)},
    )(_apply_square)
for _name in ("noc_border", "border"):
    _reg(S[_name], _sample_band(S[_name]), lambda h, w: {"t": (0.0, float((min(h, w) + 1) // 2)), "val": (0.0, 1.0)})(
        _apply_band
    )


def _sample_translation(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    v = _px(_value(draws, ctx, S["noc_translation"]), ctx.height, ctx.width)
    sy = 1 if draws.uniform(0.0, 1.0) < 0.5 else -1
    sx = 1 if draws.uniform(0.0, 1.0) < 0.5 else -1
    return {"shift": np.array([sy * v, sx * v], dtype=np.int64)}


@_reg(S["noc_translation"], _sample_translation, lambda h, w: {"shift": (np.array([-h, -w]), np.array([h, w]))})
def noc_translation(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Shift by whole pixels on both axes; uncovered pixels are 0."""
    h, w = x.shape[-2:]
    out = torch.zeros_like(x)
    for i, (dy, dx) in enumerate(d["shift"].tolist()):
        dy, dx = max(-h, min(h, dy)), max(-w, min(w, dx))
        src = x[i, :, max(0, -dy) : h - max(0, dy), max(0, -dx) : w - max(0, dx)]
        out[i, :, max(0, dy) : max(0, dy) + src.shape[-2], max(0, dx) : max(0, dx) + src.shape[-1]] = src
    return out


@_reg(S["noc_shear"], _sample_scalar(S["noc_shear"], sign=True))
def noc_shear(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Horizontal shear about the centre."""
    h, w = x.shape[-2:]
    k = (d["v"] * d["sign"]).to(torch.float32)
    theta = torch.zeros(x.shape[0], 2, 3, device=x.device)
    theta[:, 0, 0] = 1.0
    theta[:, 1, 1] = 1.0
    theta[:, 0, 1] = (k * h / w).to(x.device)  # normalised coordinates: x_n += k * y_px / (w / 2) = k (h / w) y_n
    return _warp(x, theta).clamp(0, 255)


def _sample_elastic(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    n = _value(draws, ctx, S["noc_elastic"]) * _scale(ctx.height, ctx.width)
    axis = int(draws.integers(0, 2))
    side = ctx.height if axis == 0 else ctx.width
    n = min(n, side - 1.0)
    first = float(draws.uniform(0.0, 1.0)) * n
    return {"crop": np.array([axis, first, n], dtype=np.float64)}


@_reg(S["noc_elastic"], _sample_elastic, lambda h, w: {"crop": (np.zeros(3), np.array([1.0, max(h, w), max(h, w)]))})
def noc_elastic(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Crop n px from one axis and stretch back (bilinear)."""
    h, w = x.shape[-2:]
    c = d["crop"].to(torch.float32).cpu()
    theta = torch.zeros(x.shape[0], 2, 3)
    theta[:, 0, 0] = 1.0
    theta[:, 1, 1] = 1.0
    for i, (axis, first, n) in enumerate(c.tolist()):
        size = h if int(axis) == 0 else w
        keep = size - n
        row = 1 if int(axis) == 0 else 0  # theta row 1 maps y, row 0 maps x
        theta[i, row, row] = keep / size
        theta[i, row, 2] = (2 * first + keep) / size - 1.0  # centre of the kept window, normalised
    return _warp(x, theta.to(x.device)).clamp(0, 255)


@_reg(S["noc_rotation"], _sample_scalar(S["noc_rotation"], sign=True))
def noc_rotation(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Rotation about the centre."""
    h, w = x.shape[-2:]
    a = (d["v"] * d["sign"]).to(torch.float64) * math.pi / 180.0
    cos, sin = torch.cos(a), torch.sin(a)
    theta = torch.zeros(x.shape[0], 2, 3, dtype=torch.float64, device=a.device)
    # pixel-space rotation expressed in normalised coordinates (aspect ratio kept)
    theta[:, 0, 0] = cos
    theta[:, 0, 1] = -sin * h / w
    theta[:, 1, 0] = sin * w / h
    theta[:, 1, 1] = cos
    return _warp(x, theta.to(x.device)).clamp(0, 255)


def _sample_backlight(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    v = _value(draws, ctx, S["noc_backlight"])
    angle = float(draws.uniform(0.0, 2 * math.pi))
    py = float(draws.uniform(0.0, ctx.height))
    px = float(draws.uniform(0.0, ctx.width))
    return {"v": _f(v), "line": np.array([math.cos(angle), math.sin(angle), py, px])}


@_reg(
    S["noc_backlight"],
    _sample_backlight,
    lambda h, w: {"line": (np.array([-1.0, -1.0, 0.0, 0.0]), np.array([1.0, 1.0, h, w]))},
)
def noc_backlight(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """+v on one side of a line, -v on the other."""
    h, w = x.shape[-2:]
    yy, xx = _grid(h, w, x.device)
    ln = d["line"].to(device=x.device, dtype=torch.float32).view(-1, 4, 1, 1)
    side = (xx + 0.5 - ln[:, 3:4]) * ln[:, 0:1] + (yy + 0.5 - ln[:, 2:3]) * ln[:, 1:2]
    sign = torch.where(side >= 0, 1.0, -1.0)
    return torch.clamp(x / 255.0 + sign * _per_image(d, "v", x), 0, 1) * 255.0


@_reg(S["noc_brightness"], _sample_scalar(S["noc_brightness"], sign=True))
def noc_brightness(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Add or subtract one value."""
    return torch.clamp(x / 255.0 + _per_image(d, "v", x) * _per_image(d, "sign", x), 0, 1) * 255.0


def _gray(x: torch.Tensor) -> torch.Tensor:
    return 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]


@_reg(S["noc_contrast"], _sample_scalar(S["noc_contrast"]))
def noc_contrast(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Shrink towards the mean gray value."""
    m = _gray(x.to(torch.float64)).mean(dim=(-2, -1), keepdim=True).to(x.dtype)
    return torch.clamp(m + (1 - _per_image(d, "v", x)) * (x - m), 0, 255)


def _sample_color(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    v = _value(draws, ctx, S["noc_color_distortion"])
    return {"v": _f(v), "channel": np.asarray(int(draws.integers(0, 3)), dtype=np.int64)}


@_reg(S["noc_color_distortion"], _sample_color, lambda h, w: {"channel": (0, 2)})
def noc_color_distortion(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Add one value to one RGB channel."""
    onehot = F.one_hot(d["channel"].to(x.device).long(), 3).to(x.dtype).view(-1, 3, 1, 1)
    return torch.clamp(x / 255.0 + onehot * _per_image(d, "v", x), 0, 1) * 255.0


@_reg(S["noc_gray_scale"], _sample_scalar(S["noc_gray_scale"]))
def noc_gray_scale(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Blend with the gray-scale image."""
    t = _per_image(d, "v", x)
    return torch.clamp(t * _gray(x) + (1 - t) * x, 0, 255)


@_reg(S["noc_hue"], _sample_scalar(S["noc_hue"]))
def noc_hue(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Cyclic shift of the HSV hue."""
    hsv = rgb_to_hsv(x / 255.0)
    h = torch.remainder(hsv[:, 0:1] + _per_image(d, "v", x), 1.0)
    rgb = hsv_to_rgb(torch.cat([h, hsv[:, 1:]], dim=1))
    return torch.clamp(rgb, 0, 1) * 255.0
