"""Test-time methods of Hendrycks & Dietterich (2018, Sections 3.4-3.5, Appendix D) as a classifier wrapper.

* ``tta="ten-crop"`` (Appendix D): the four corner crops and the centre crop of each image and their horizontal
  mirrors go through the network; the prediction is the mean of the 10 softmax distributions (returned as its
  logarithm, so the ranking of classes is that of the mean). As torchvision's ``Resize(256)`` then
  ``TenCrop(224)``: an S x S input (an ImageNet-C image is already the 224 centre crop) is first enlarged to
  ``round(S * 256 / 224)`` (bilinear) and the crops are S x S.
* ``preprocess="clahe"`` (Section 3.5): Contrast Limited Adaptive Histogram Equalization (OpenCV) of the L channel
  in CIE L*a*b*, clip limit 2.0 on an 8 x 8 grid of tiles. The paper names the method but not its settings; these
  are OpenCV's usual ones.
* ``preprocess="nlm-denoise"`` (Section 3.4): non-local means (OpenCV ``fastNlMeansDenoisingColored``, 7 x 7
  patches, 21 x 21 search window) with its strength set to the noise level estimated per image as Donoho &
  Johnstone (1994) do: the median absolute finest-scale diagonal Haar wavelet coefficient / 0.6745, on the gray
  image in 0..255. Clean images get a small estimate and are barely changed, noisy ones are denoised.

The wrapper is a :class:`~shiftbench.evaluation.models.Classifier` whose identity (stored with every result)
names the method, so results with and without it never mix in a store.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InvalidArgumentError, MissingDependencyError
from .models import Classifier

__all__ = ["TTA_METHODS", "PREPROCESSORS", "TestTimeClassifier", "with_test_time", "ten_crops", "clahe", "nlm_denoise",
           "noise_sigma"]

TTA_METHODS = ("ten-crop",)
PREPROCESSORS = ("clahe", "nlm-denoise")

CLAHE_CLIP_LIMIT = 2.0
CLAHE_TILES = (8, 8)
NLM_TEMPLATE = 7
NLM_SEARCH = 21


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as e:  # pragma: no cover - a core dependency
        raise MissingDependencyError("opencv-python-headless", "CLAHE and non-local means preprocessing") from e
    return cv2


def ten_crops(images: torch.Tensor, resize_to: int | None = None) -> torch.Tensor:
    """The 10 crops of B x 3 x S x S images: 10 x B x 3 x S x S (corners top-left, top-right, bottom-left,
    bottom-right, centre, then their mirrors), from the images enlarged to ``resize_to`` (default
    ``round(S * 256 / 224)``)."""
    b, c, h, w = images.shape
    big = resize_to or int(round(min(h, w) * 256 / 224))
    bh, bw = (big, int(round(w * big / h))) if h <= w else (int(round(h * big / w)), big)
    x = images.to(torch.float32)
    if (bh, bw) != (h, w):
        x = F.interpolate(x, size=(bh, bw), mode="bilinear", align_corners=False)
    if images.dtype == torch.uint8:
        x = x.round_().clamp_(0, 255).to(torch.uint8)
    top, left = int(round((bh - h) / 2.0)), int(round((bw - w) / 2.0))
    five = [x[..., :h, :w], x[..., :h, bw - w :], x[..., bh - h :, :w], x[..., bh - h :, bw - w :],
            x[..., top : top + h, left : left + w]]
    return torch.stack(five + [f.flip(-1) for f in five])


def noise_sigma(gray: np.ndarray) -> float:
    """Donoho & Johnstone's noise estimate of a 2-D image: median(|HH|) / 0.6745 of the finest Haar diagonal detail."""
    g = gray.astype(np.float64)
    h, w = (g.shape[0] // 2) * 2, (g.shape[1] // 2) * 2
    g = g[:h, :w]
    hh = (g[0::2, 0::2] - g[0::2, 1::2] - g[1::2, 0::2] + g[1::2, 1::2]) / 2.0
    return float(np.median(np.abs(hh)) / 0.6745)


def clahe(images: torch.Tensor) -> torch.Tensor:
    """CLAHE of the L channel of uint8 B x 3 x H x W RGB images (see the module docstring)."""
    cv2 = _cv2()
    eq = cv2.createCLAHE(clipLimit=CLAHE_CLIP_LIMIT, tileGridSize=CLAHE_TILES)
    out = []
    for im in images.cpu().permute(0, 2, 3, 1).numpy():
        lab = cv2.cvtColor(np.ascontiguousarray(im), cv2.COLOR_RGB2LAB)
        lab[..., 0] = eq.apply(np.ascontiguousarray(lab[..., 0]))
        out.append(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB))
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).contiguous().to(images.device)


def nlm_denoise(images: torch.Tensor) -> torch.Tensor:
    """Non-local means of uint8 B x 3 x H x W RGB images, each at its own estimated noise level (module docstring)."""
    cv2 = _cv2()
    out = []
    for im in images.cpu().permute(0, 2, 3, 1).numpy():
        im = np.ascontiguousarray(im)
        s = noise_sigma(cv2.cvtColor(im, cv2.COLOR_RGB2GRAY))
        if s <= 0:
            out.append(im)
            continue
        out.append(cv2.fastNlMeansDenoisingColored(im, None, s, s, NLM_TEMPLATE, NLM_SEARCH))
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).contiguous().to(images.device)


_PREPROCESS = {"clahe": clahe, "nlm-denoise": nlm_denoise}


class TestTimeClassifier(Classifier):
    """``base`` with a preprocessing of its uint8 input and / or ten-crop averaging (see the module docstring)."""

    __test__ = False  # not a pytest class

    def __init__(self, base: Classifier, *, tta: str | None = None, preprocess: str | None = None) -> None:
        if tta is not None and tta not in TTA_METHODS:
            raise InvalidArgumentError("tta", tta, f"one of {', '.join(TTA_METHODS)} (or none)")
        if preprocess is not None and preprocess not in PREPROCESSORS:
            raise InvalidArgumentError("preprocess", preprocess, f"one of {', '.join(PREPROCESSORS)} (or none)")
        tag = " ".join(x for x in (f"+{preprocess}" if preprocess else "", f"+{tta}" if tta else "") if x)
        super().__init__(base.forward, name=f"{base.name} {tag}".strip(), transform=base.transform,
                         classes=base.classes, checksum=base.checksum,
                         details={**base.details, "tta": tta, "preprocess": preprocess})
        self.base, self.tta, self.preprocess = base, tta, preprocess
        self.device = base.device

    @property
    def identity(self) -> str:
        return f"{self.base.identity} | preprocess={self.preprocess} tta={self.tta}"

    @property
    def test_time(self) -> dict[str, str | None]:
        """The methods as :func:`with_test_time`'s keywords (what a Ray worker needs to wrap its own copy)."""
        return {"tta": self.tta, "preprocess": self.preprocess}

    def to(self, device: torch.device | str) -> TestTimeClassifier:
        self.base.to(device)
        self.device = self.base.device
        return self

    @torch.inference_mode()
    def logits(self, images: torch.Tensor) -> torch.Tensor:
        x = images
        if self.preprocess is not None:
            if x.dtype != torch.uint8:
                raise InvalidArgumentError("images", str(x.dtype), "uint8 images (the preprocessing works on 8-bit levels)")
            x = _PREPROCESS[self.preprocess](x)
        if self.tta is None:
            return self.base.logits(x)
        crops = ten_crops(x)  # 10 x B x 3 x S x S
        n = x.shape[0]
        out = self.base.logits(crops.reshape(10 * n, *crops.shape[2:]))
        probs = torch.softmax(out.to(torch.float64), dim=1).view(10, n, -1).mean(0)
        return torch.log(probs.clamp_min(1e-300)).to(torch.float32)


def with_test_time(clf: Classifier, *, tta: str | None = None, preprocess: str | None = None) -> Classifier:
    """``clf`` itself when neither method is asked for, else a :class:`TestTimeClassifier`."""
    norm = lambda v: None if v in (None, "", "none") else str(v).strip().lower()  # noqa: E731
    tta, preprocess = norm(tta), norm(preprocess)
    if tta is None and preprocess is None:
        return clf
    return TestTimeClassifier(clf, tta=tta, preprocess=preprocess)
