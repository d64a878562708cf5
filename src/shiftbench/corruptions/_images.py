"""Conversion between user images (tensors, arrays, PIL) and the internal batch.

Corruptions see a float tensor ``X`` of shape b x 3 x H x W holding values in
0..255, i.e. what the reference code sees after ``np.array(pil_image)`` (exact
integers for 8-bit inputs). :class:`Batch` keeps the user's pixels as they came
(no full-batch float copy) and hands out such chunks on demand, so work proceeds
in cache-sized pieces. Grayscale inputs are replicated to three channels and
turned back into one channel (ITU-R 601 luma) on output; the alpha channel of
RGBA inputs is carried through unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from PIL import Image

from ..errors import ImageRangeError, ImageShapeError, ImageTypeError, InvalidArgumentError

MIN_SIDE = 32

_PIL_16 = ("I;16", "I;16B", "I;16L", "I;16N")
_PIL_CONVERT = {"P": "RGB", "PA": "RGBA", "CMYK": "RGB", "1": "L", "La": "LA", "RGBa": "RGBA", "RGBX": "RGB"}
PIL_MODES = ("L", "LA", "RGB", "RGBA", "F", "I", *_PIL_16, *_PIL_CONVERT)
PIL_CONVERTED = dict(_PIL_CONVERT)
"""PIL modes converted on input, and the mode they come back as (palette and CMYK as RGB, ...)."""
"""PIL modes :func:`~shiftbench.corrupt` accepts. 8-bit modes come back in their own mode; 16-bit ('I;16...',
'I') and float ('F', values in [0, 1]) grayscale are corrupted as float images and come back in their mode
(16-bit values scaled by 65535); 'P' and 'CMYK' come back as 'RGB', 'PA' as 'RGBA', '1' as 'L'."""
_FLOAT_TOL = 1e-6


@dataclass
class Batch:
    """User images in their own dtype (B x C x H x W, C in 1/3/4) plus what restores their form."""

    raw: torch.Tensor  # B x C x H x W, uint8 (0..255) or float (0..1)
    kind: str  # "tensor" | "numpy" | "pil"
    batched: bool
    channels: int  # 1, 2 (gray + alpha), 3 or 4 in the user's image
    dtype: Any  # torch or numpy dtype of the input
    pil_mode: str | None = None
    squeeze_channel: bool = False  # 2-D input (no channel axis)
    # host copy of images [start, start + len) as 3 x H x W uint8 keys (one transfer per chunk on accelerators)
    _host: tuple[int, np.ndarray] | None = field(default=None, repr=False)

    @property
    def float_input(self) -> bool:
        return self.raw.dtype != torch.uint8

    @property
    def n(self) -> int:
        return int(self.raw.shape[0])

    @property
    def size(self) -> tuple[int, int]:
        return int(self.raw.shape[-2]), int(self.raw.shape[-1])

    def rgb(self, a: int, b: int, dtype: torch.dtype, device: torch.device | None = None) -> torch.Tensor:
        """Images a..b-1 as ``dtype`` b x 3 x H x W in 0..255.

        ``torch.uint8`` asks for 8-bit levels (float inputs rounded), for the
        corruptions that work on 8-bit images as the reference does (Pillow).
        """
        r = self.raw if a == 0 and b == self.n else self.raw[a:b]  # (slicing a tensor costs microseconds)
        if device is not None:
            r = r.to(device)
        c = int(r.shape[1])
        if c != 3:
            r = r[:, :1].expand(-1, 3, -1, -1) if c in (1, 2) else r[:, :3]
        if dtype == torch.uint8:
            if self.float_input:
                return torch.round(r.to(torch.float32) * 255.0).clamp_(0, 255).to(torch.uint8)
            return r
        if self.float_input:
            return r.to(dtype) * 255.0
        return r.to(dtype)

    def canonical_uint8(self, i: int) -> np.ndarray:
        """Image i as 3 x H x W uint8 (rounded for float inputs): the pixel key for seeding."""
        if self._host is not None and 0 <= i - self._host[0] < len(self._host[1]):
            return self._host[1][i - self._host[0]]
        return self._canonical(i, i + 1)[0]

    def _canonical(self, a: int, b: int) -> np.ndarray:
        r = self.raw[a:b]
        r = r[:, :1].expand(-1, 3, -1, -1) if r.shape[1] in (1, 2) else r[:, :3]
        if self.float_input:
            r = torch.round(r.to(torch.float32) * 255.0).clamp(0, 255).to(torch.uint8)
        return r.contiguous().cpu().numpy()

    def prefetch_host(self, a: int, b: int) -> None:
        """Copy the 8-bit keys of images a..b-1 to the host in one transfer (accelerator batches)."""
        self._host = (a, self._canonical(a, b))

    def levels_hwc(self, i: int) -> np.ndarray:
        """Image i as H x W x 3 uint8 levels (rounded for float inputs)."""
        return hwc_uint8(self.canonical_uint8(i))

    def alpha(self, a: int, b: int) -> torch.Tensor | None:
        c = int(self.raw.shape[1])
        if c == 4:
            return self.raw[a:b, 3:4]
        if c == 2:
            return self.raw[a:b, 1:2]
        return None


def hwc_uint8(chw: np.ndarray) -> np.ndarray:
    """3 x H x W uint8 -> contiguous H x W x 3 uint8.

    OpenCV's channel merge interleaves with SIMD; a NumPy transpose copy of uint8
    is ~30x slower (0.2 ms per 224 image), which showed in every Pillow round trip.
    """
    a = np.asarray(chw)
    if a.dtype == np.uint8 and a.ndim == 3 and a.shape[0] == 3:
        import cv2

        a = np.ascontiguousarray(a)
        return np.asarray(cv2.merge([a[0], a[1], a[2]])).reshape(a.shape[1], a.shape[2], 3)
    return np.ascontiguousarray(a.transpose(1, 2, 0))


def _proc_kib(path: str, field: str) -> int | None:
    """A ``field: N kB`` line of a /proc file, in bytes (None: not there)."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory() -> int | None:
    """Bytes this process can still allocate: the kernel's MemAvailable, capped by what an address-space limit
    (``ulimit -v``) leaves beside the address space already mapped; None where neither is known."""
    import resource

    avail = _proc_kib("/proc/meminfo", "MemAvailable")
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            left = soft - (_proc_kib("/proc/self/status", "VmSize") or 0)
            avail = left if avail is None else min(avail, left)
    except (OSError, ValueError):
        pass
    return None if avail is None else max(0, avail)


RECENT_SECONDS = 1.0
"""How long a reading of :func:`available_memory` vouches for the small requests of :func:`require_memory`."""
SMALL_SHARE = 8
"""A request of at most 1/SMALL_SHARE of a recent reading passes without a new one."""
_recent: tuple[float, int] | None = None  # (time.monotonic() of the last reading, the bytes it found)


def require_memory(nbytes: int, what: str, argument: str = "images") -> None:
    """Refuse work that would allocate more than the machine can hold (an :class:`ImageShapeError` naming the size,
    instead of a ``MemoryError`` or the kernel killing the process).

    A request of at most 1/:data:`SMALL_SHARE` of a reading taken in the last :data:`RECENT_SECONDS` passes without
    reading /proc again (a batch of photos asks a few MiB of many GiB, call after call); any other request reads the
    memory available now, and only such a fresh reading refuses one. (Memory that other programs take meanwhile shows
    as an allocation that fails, which :func:`typed_memory_errors` turns into the same error.)"""
    global _recent
    now = time.monotonic()
    seen = _recent
    if seen is not None and now - seen[0] < RECENT_SECONDS and nbytes <= seen[1] // SMALL_SHARE:
        return
    avail = available_memory()
    _recent = None if avail is None else (now, avail)
    if avail is not None and nbytes > avail:
        raise ImageShapeError(
            argument, what, f"a size whose working memory fits in the {avail / 2**30:.1f} GiB available "
            f"(it needs about {nbytes / 2**30:.1f} GiB; use smaller images)"
        )


_OUT_OF_MEMORY = ("can't allocate memory", "out of memory", "insufficient memory", "failed to allocate",
                  "cannot allocate memory")  # fmt: skip
"""How torch (CPU and CUDA), OpenCV and the C library word an allocation that failed (as a RuntimeError or cv2.error)."""


def is_out_of_memory(e: BaseException) -> bool:
    """An allocation failure: ``MemoryError``, or torch's / OpenCV's error for one."""
    if isinstance(e, MemoryError):
        return True
    return isinstance(e, Exception) and not isinstance(e, ImageShapeError) and any(
        m in str(e).lower() for m in _OUT_OF_MEMORY) and type(e).__name__ in ("RuntimeError", "OutOfMemoryError", "error")


@contextmanager
def typed_memory_errors(what: str, argument: str = "images") -> Iterator[None]:
    """Turn an allocation that failed anyway (the estimate of :func:`require_memory` was short, or other programs
    took the memory meanwhile) into the same :class:`ImageShapeError`, never a ``MemoryError``."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - re-raised unless it is an allocation failure
        if not is_out_of_memory(e):
            raise
        avail = available_memory()
        left = "" if avail is None else f" ({avail / 2**30:.1f} GiB available now)"
        raise ImageShapeError(
            argument, what, f"a size whose working memory fits in the memory available{left}: it ran out of memory "
            "(use smaller images or batches)"
        ) from None


def _check_size(h: int, w: int, argument: str) -> None:
    if h < MIN_SIDE or w < MIN_SIDE:
        raise ImageShapeError(argument, f"{h}x{w} (HxW)", f"images of at least {MIN_SIDE} px per side")


def _check_float_range(t: torch.Tensor, argument: str) -> None:
    if t.numel() == 0:
        return
    lo, hi = torch.aminmax(t.detach().to(torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.detach())
    lo_f, hi_f = float(lo), float(hi)
    if not (np.isfinite(lo_f) and np.isfinite(hi_f)) or lo_f < -_FLOAT_TOL or hi_f > 1 + _FLOAT_TOL:
        raise ImageRangeError(
            argument,
            f"values in [{lo_f:.4g}, {hi_f:.4g}]",
            "float images with values in [0, 1] (or uint8 images in 0..255)",
        )


def _check_channels(c: int, argument: str) -> None:
    if c not in (1, 3, 4):
        raise ImageShapeError(argument, f"{c} channels", "1 (gray), 3 (RGB) or 4 (RGBA) channels")


def to_batch(images: Any, argument: str = "images", device: torch.device | str | None = None) -> Batch:
    """Convert user input to a :class:`Batch` (validating type, shape and range)."""
    device = _target_device(device)
    if isinstance(images, Image.Image):
        return _from_pil([images], batched=False, argument=argument, device=device)
    if isinstance(images, (list, tuple)) and images and all(isinstance(i, Image.Image) for i in images):
        return _from_pil(list(images), batched=True, argument=argument, device=device)
    if isinstance(images, np.ndarray):
        return _from_numpy(images, argument, device)
    if isinstance(images, torch.Tensor):
        return _from_tensor(images, argument, device)
    raise ImageTypeError(
        argument,
        type(images).__name__,
        "a torch.Tensor (C x H x W or B x C x H x W), a NumPy array (H x W, H x W x C or B x H x W x C) "
        "or a PIL image (or a list of PIL images)",
    )


def _target_device(device: Any) -> torch.device | None:
    """``device`` as a torch device that exists here (typed error otherwise)."""
    if device is None:
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise InvalidArgumentError("device", device, "a torch device such as 'cpu', 'cuda' or 'cuda:N'") from e
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise InvalidArgumentError("device", device, "'cpu' (no CUDA device is available here)" if not torch.cuda.is_available() else f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    if dev.type == "meta":
        raise InvalidArgumentError("device", device, "a device that holds data ('cpu', 'cuda')")
    if dev.type not in ("cpu", "cuda"):
        try:
            torch.empty(0, device=dev)
        except Exception as e:  # noqa: BLE001 - backends fail with RuntimeError, ModuleNotFoundError, AssertionError
            raise InvalidArgumentError("device", device, "a device this PyTorch build has ('cpu', 'cuda')",
                                       str(e).splitlines()[0][:160] if str(e) else "") from None  # fmt: skip
    return dev


def _from_tensor(t: torch.Tensor, argument: str, device: Any) -> Batch:
    if t.layout != torch.strided:
        raise ImageTypeError(argument, f"a {t.layout} tensor", "a dense (strided) tensor: call .to_dense() first")
    if t.is_meta:
        raise ImageTypeError(argument, "a tensor on the 'meta' device (it holds no pixels)", "a tensor on 'cpu' or 'cuda'")
    if t.dtype not in (torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ImageTypeError(argument, f"torch dtype {t.dtype}", "torch.uint8 (0..255) or a float dtype (0..1)")
    squeeze = False
    if t.ndim == 2:
        t4, batched, squeeze = t[None, None], False, True
    elif t.ndim == 3:
        t4, batched = t[None], False
    elif t.ndim == 4:
        t4, batched = t, True
    else:
        raise ImageShapeError(argument, tuple(t.shape), "H x W, C x H x W or B x C x H x W")
    _check_channels(int(t4.shape[1]), argument)
    _check_size(int(t4.shape[-2]), int(t4.shape[-1]), argument)
    if device is not None:
        t4 = t4.to(device)
    if t.dtype != torch.uint8:
        _check_float_range(t4, argument)
    return Batch(t4, "tensor", batched, int(t4.shape[1]), t.dtype, squeeze_channel=squeeze)


def _from_numpy(a: np.ndarray, argument: str, device: Any) -> Batch:
    if a.dtype not in (np.uint8, np.float16, np.float32, np.float64):
        raise ImageTypeError(argument, f"numpy dtype {a.dtype}", "uint8 (0..255) or float (0..1)")
    squeeze = False
    if a.ndim == 2:
        a4, batched, squeeze = a[None, :, :, None], False, True
    elif a.ndim == 3:
        if a.shape[-1] not in (1, 3, 4):
            raise ImageShapeError(argument, a.shape, "H x W x C with C in (1, 3, 4) (NumPy arrays are channels-last)")
        a4, batched = a[None], False
    elif a.ndim == 4:
        if a.shape[-1] not in (1, 3, 4):
            raise ImageShapeError(argument, a.shape, "B x H x W x C with C in (1, 3, 4)")
        a4, batched = a, True
    else:
        raise ImageShapeError(argument, a.shape, "H x W, H x W x C or B x H x W x C")
    _check_size(int(a4.shape[1]), int(a4.shape[2]), argument)
    if not a4.flags.writeable or any(s < 0 for s in a4.strides):
        a4 = a4.copy()  # torch.from_numpy takes neither read-only nor negatively strided arrays
    t = torch.from_numpy(a4).permute(0, 3, 1, 2)
    if device is not None:
        t = t.to(device)
    if a.dtype != np.uint8:
        _check_float_range(t, argument)
    return Batch(t, "numpy", batched, int(t.shape[1]), a.dtype, squeeze_channel=squeeze)


def _from_pil(imgs: list[Image.Image], batched: bool, argument: str, device: Any) -> Batch:
    sizes = {im.size for im in imgs}
    if len(sizes) != 1:
        raise ImageShapeError(argument, sorted(sizes), "a list of PIL images that all have the same size")
    modes = {im.mode for im in imgs}
    if len(modes) != 1:
        raise ImageShapeError(argument, sorted(modes), "PIL images of one mode")
    mode = imgs[0].mode
    if mode not in PIL_MODES:
        raise ImageTypeError(
            argument, f"PIL mode {mode!r}", f"PIL modes {', '.join(PIL_MODES)} (convert other colour spaces to 'RGB' first)"
        )
    arrays = []
    for im in imgs:
        if mode in _PIL_CONVERT:
            im = im.convert(_PIL_CONVERT[mode])
        a = np.asarray(im)
        if mode in _PIL_16 or mode == "I":
            a = a.astype(np.float64)
            if a.size and (a.min() < 0 or a.max() > 65535):
                raise ImageRangeError(argument, f"values in [{a.min():g}, {a.max():g}]", "mode 'I' images with values in 0..65535")
            a = a / 65535.0
        elif mode == "F":
            a = a.astype(np.float32)
        arrays.append(a if a.ndim == 3 else a[..., None])
    stacked = np.stack(arrays)
    _check_size(int(stacked.shape[1]), int(stacked.shape[2]), argument)
    t = torch.from_numpy(stacked).permute(0, 3, 1, 2)
    if device is not None:
        t = t.to(device)
    if t.dtype != torch.uint8:
        _check_float_range(t, argument)
    out_mode = _PIL_CONVERT.get(mode, mode)
    return Batch(t, "pil", batched, int(t.shape[1]), stacked.dtype, pil_mode=out_mode)


def luma(x: torch.Tensor, integer: bool) -> torch.Tensor:
    """ITU-R 601 luma of b x 3 x H x W; integer mode follows PIL's 'L' conversion."""
    if integer:
        xi = x.to(torch.int32)
        return ((xi[:, 0:1] * 19595 + xi[:, 1:2] * 38470 + xi[:, 2:3] * 7471 + 0x8000) >> 16).to(x.dtype)
    return x[:, 0:1] * 0.299 + x[:, 1:2] * 0.587 + x[:, 2:3] * 0.114


class Output:
    """Collects result chunks (b x 3 x H x W in 0..255) into the input's form."""

    def __init__(self, b: Batch, quantize: bool) -> None:
        self.b = b
        self.to_uint8 = (not b.float_input) or quantize
        n, _, h, w = b.raw.shape
        c = b.channels
        if self.to_uint8 and not b.float_input:
            dtype = torch.uint8
        else:
            dtype = b.raw.dtype
        self.buf = torch.empty((n, c, h, w), dtype=dtype, device=b.raw.device)
        # the buffer holds plain RGB 8-bit levels on the CPU: functionals may write into it (levels_view)
        self.plain_levels = dtype == torch.uint8 and c == 3 and self.buf.is_cpu

    def levels_view(self, a: int, b_: int) -> torch.Tensor | None:
        """Rows a..b-1 of the buffer when it holds plain RGB 8-bit levels on the CPU (ApplyContext.out)."""
        if not self.plain_levels:
            return None
        return self.buf if a == 0 and b_ == len(self.buf) else self.buf[a:b_]

    def put(self, a: int, b_: int, y: torch.Tensor) -> None:
        b = self.b
        if self.plain_levels and y.dtype == torch.uint8 and self._holds(a, b_, y):
            return  # the functional wrote into the buffer (ApplyContext.out)
        y = y.to(self.buf.device)
        if self.to_uint8:
            if self._truncate_in_place(a, b_, y):
                return
            if y.dtype != torch.uint8:
                y = y.clamp(0, 255).to(torch.uint8)  # truncation, as np.uint8 on non-negative values
            if b.channels in (1, 2):
                y = luma(y, integer=True)
            if self.buf.dtype != torch.uint8:  # quantised float output
                y = y.to(self.buf.dtype) / 255.0
        elif y.dtype == torch.uint8:
            y = y.to(self.buf.dtype) / 255.0
            if b.channels in (1, 2):
                y = luma(y, integer=False).clamp(0, 1)
        else:
            y = (y.clamp(0, 255) / 255.0).to(self.buf.dtype)
            if b.channels in (1, 2):
                y = luma(y, integer=False).clamp(0, 1)
        nc = int(y.shape[1])
        self.buf[a:b_, :nc] = y
        al = b.alpha(a, b_)
        if al is not None:
            self.buf[a:b_, nc:] = al

    def _holds(self, a: int, b_: int, y: torch.Tensor) -> bool:
        """Whether ``y`` is rows a..b-1 of the buffer itself (same memory, shape and layout)."""
        first = self.buf.data_ptr() + a * self.buf.stride(0) * self.buf.element_size()
        return y.data_ptr() == first and y.shape == (b_ - a, *self.buf.shape[1:]) and y.is_contiguous()

    def _truncate_in_place(self, a: int, b_: int, y: torch.Tensor) -> bool:
        """The common case (RGB float result, 8-bit output, CPU) as one compiled pass into the buffer."""
        if not (
            self.b.channels == 3
            and self.buf.dtype == torch.uint8
            and y.dtype in (torch.float32, torch.float64)
            and y.is_cpu
            and self.buf.is_cpu
            and y.is_contiguous()
            and tuple(y.shape) == tuple(self.buf[a:b_].shape)
        ):
            return False
        from ._cpu.convert import truncate_to_uint8

        truncate_to_uint8(y.detach().numpy(), self.buf[a:b_].numpy())
        return True

    def result(self) -> Any:
        b, out = self.b, self.buf
        if b.kind == "pil":
            arr = out.permute(0, 2, 3, 1).cpu().numpy()
            mode = b.pil_mode
            if mode == "F":
                arr = arr.astype(np.float32)
            elif mode in _PIL_16 or mode == "I":
                arr = np.round(arr.astype(np.float64) * 65535.0).astype(np.int32 if mode == "I" else np.uint16)
            imgs = [_pil_image(a[..., 0] if a.shape[-1] == 1 else a, mode) for a in arr]
            return imgs if b.batched else imgs[0]
        if b.kind == "numpy":
            res = out.permute(0, 2, 3, 1).cpu().numpy()
            if res.dtype != b.dtype:
                res = res.astype(b.dtype)
            if b.squeeze_channel:
                res = res[..., 0]
            return res if b.batched else res[0]
        if b.squeeze_channel:
            return out[0, 0]
        return out if b.batched else out[0]


def _pil_image(a: np.ndarray, mode: str | None) -> Image.Image:
    if mode in _PIL_16:
        im = Image.fromarray(np.ascontiguousarray(a, dtype=np.uint16))  # mode 'I;16'
        return im if mode == "I;16" else im.convert(mode)
    if mode in ("I", "F"):
        return Image.fromarray(np.ascontiguousarray(a, dtype=np.int32 if mode == "I" else np.float32)).convert(mode)
    return Image.fromarray(a)
