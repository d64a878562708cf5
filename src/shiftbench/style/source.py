"""A folder of style images: its files in a fixed order, a digest of the set, seeded crops."""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from pathlib import Path
from threading import Lock

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from ..errors import InvalidArgumentError
from ..io import image_rgb

__all__ = ["StyleSource", "STYLE_EXTENSIONS"]

STYLE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
_CACHE_ENTRIES = 64


class StyleSource:
    """The style images of a folder (searched recursively), ordered by relative path.

    ``digest`` is the SHA-256 over every file's relative path and SHA-256 of its bytes, so
    two runs with the same digest drew their styles from the same images in the same order
    (a style is drawn as an index into that order). Every file is decoded once when the
    source is opened, so an unreadable image is reported then, not in the middle of a run.

    Raises:
        InvalidArgumentError (argument ``styles``): the path is not a folder, holds no image
            file, or one of its image files cannot be decoded.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        root = Path(folder).expanduser()
        if not root.is_dir():
            raise InvalidArgumentError("styles", str(folder), "a folder of style images (jpg, png, ...)")
        try:
            files = sorted(
                (p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in STYLE_EXTENSIONS),
                key=lambda p: p.relative_to(root).as_posix(),
            )
        except OSError as exc:
            raise InvalidArgumentError("styles", str(folder), "a readable folder of style images", str(exc)) from None
        if not files:
            raise InvalidArgumentError(
                "styles", str(folder), f"a folder holding at least one image file ({', '.join(STYLE_EXTENSIONS)})", "It holds none."
            )
        h = hashlib.sha256()
        for p in files:
            rel = p.relative_to(root).as_posix()
            try:
                data = p.read_bytes()
                with Image.open(p) as im:
                    im.load()
                    if min(im.size) < 1:
                        raise OSError("empty image")
                    image_rgb(im, repr(rel))  # a mode read exactly (16-bit and float scaled) or refused now
            except (OSError, ValueError, SyntaxError, EOFError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
                raise InvalidArgumentError(
                    "styles", str(folder), "a folder whose image files all decode", f"{rel} cannot be read: {exc}"
                ) from None
            h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        self.root = root
        self.files = tuple(files)
        self.digest = h.hexdigest()
        self._cache: OrderedDict[tuple[int, int], torch.Tensor] = OrderedDict()
        self._lock = Lock()

    def __len__(self) -> int:
        return len(self.files)

    def __repr__(self) -> str:
        return f"StyleSource({str(self.root)!r}, {len(self)} images, digest={self.digest[:12]})"

    def names(self) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self.files]

    def resized(self, index: int, short_side: int) -> torch.Tensor:
        """Style ``index`` as 3 x H x W float32 in [0, 1], its shorter side resized to ``short_side`` (bilinear)."""
        key = (int(index), int(short_side))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        with Image.open(self.files[key[0]]) as opened:
            opened.load()
            im = image_rgb(opened, repr(str(self.files[key[0]])))
            w, h = im.size
            s = short_side / min(w, h)
            size = (max(short_side, round(w * s)), max(short_side, round(h * s)))
            im = im.resize(size, Image.Resampling.BILINEAR)
            t = torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1).contiguous()
        with self._lock:
            self._cache[key] = t
            while len(self._cache) > _CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return t

    def crop(self, index: int, short_side: int, side: int, fy: float, fx: float) -> torch.Tensor:
        """A ``side`` x ``side`` crop of the resized style at fractional position (fy, fx) in [0, 1)."""
        t = self.resized(index, short_side)
        h, w = t.shape[-2:]
        side = min(side, h, w)
        top = min(int(fy * (h - side + 1)), h - side)
        left = min(int(fx * (w - side + 1)), w - side)
        return t[:, top : top + side, left : left + side]
