"""AdaIN (Huang & Belongie, ICCV 2017): the normalised VGG-19 encoder, the decoder and the AdaIN layer.

The networks are built in the layout of the public PyTorch port of the authors' Torch
release, so that its two weight files load as they are published:

* ``vgg_normalised.pth``: a ``state_dict`` of a 53-module ``nn.Sequential`` (a 1 x 1
  conv that takes RGB in [0, 1] to the Caffe VGG's mean-subtracted BGR, then VGG-19 up to
  relu5_4, every 3 x 3 conv preceded by a 1-pixel reflection pad, 2 x 2 max pools in
  ceil mode). Keys ``0.weight``, ``0.bias``, ``2.weight``, ... ``51.bias``. AdaIN uses the
  first 31 modules (up to relu4_1); the deeper layers' keys are accepted and ignored, and a
  file that stops at relu4_1 loads too.
* ``decoder.pth``: a ``state_dict`` of the 29-module decoder that mirrors the encoder (nine
  3 x 3 convs with reflection padding, nearest-neighbour upsampling by 2, no ReLU after
  the last conv). Keys ``1.weight`` ... ``28.bias``.

Files come from the releases page of the public PyTorch port (``naoto0804/pytorch-AdaIN``,
files ``vgg_normalised.pth`` and ``decoder.pth``, converted from the authors'
``xunhuang1995/AdaIN-style`` Torch models). They are read with
``torch.load(..., weights_only=True)``, so a file that carries code is refused.

AdaIN statistics are the published ones: per-channel mean and the square root of the
*unbiased* per-channel variance plus ``eps = 1e-5``. The content-style trade-off ``alpha``
blends the AdaIN features with the content features before decoding; the output is
clamped to [0, 1]. ``alpha = 0`` is not the clean image: the content features still pass
the decoder (a reconstruction).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidArgumentError, MissingWeightsError, WeightsFormatError

__all__ = [
    "ENCODER_LAYERS",
    "RELU4_1",
    "EPS",
    "WEIGHTS_HELP",
    "build_encoder",
    "build_decoder",
    "mean_std",
    "adain",
    "load_state_dict",
    "AdaINNetworks",
    "file_sha256",
]

EPS = 1e-5
"""Added to the per-channel variance (the published ``calc_mean_std``)."""

RELU4_1 = 31
"""Modules of the encoder that AdaIN uses (indices 0..30, ending with relu4_1)."""

# VGG-19's 3 x 3 convs, "M" for a 2 x 2 max pool (torchvision's "E" configuration)
_VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512)
# the decoder: (in, out) channels of its convs, "U" for a nearest upsampling by 2
_DECODER = ((512, 256), "U", (256, 256), (256, 256), (256, 256), (256, 128), "U", (128, 128), (128, 64), "U", (64, 64), (64, 3))

WEIGHTS_HELP = (
    "AdaIN needs the published weight files vgg_normalised.pth and decoder.pth (from the releases page of the "
    "public PyTorch port naoto0804/pytorch-AdaIN, converted from the authors' xunhuang1995/AdaIN-style models). "
    "Point to them with shiftbench.style.configure(vgg=..., decoder=...), the environment variables "
    "SHIFTBENCH_ADAIN_VGG and SHIFTBENCH_ADAIN_DECODER, or SHIFTBENCH_ADAIN_DIR (a folder holding both). "
    "Without them, the offline backend runs: shiftbench.style.configure(backend='magenta-lite') (not the paper's AdaIN)."
)


def _conv3(cin: int, cout: int) -> list[nn.Module]:
    return [nn.ReflectionPad2d((1, 1, 1, 1)), nn.Conv2d(cin, cout, (3, 3))]


def build_encoder(depth: int = 53) -> nn.Sequential:
    """The normalised VGG-19 in the published module order (``depth`` = modules kept; 31 ends at relu4_1)."""
    layers: list[nn.Module] = [nn.Conv2d(3, 3, (1, 1))]
    cin = 3
    for v in _VGG19:
        if v == "M":
            layers.append(nn.MaxPool2d((2, 2), (2, 2), (0, 0), ceil_mode=True))
        else:
            layers += _conv3(cin, int(v)) + [nn.ReLU()]
            cin = int(v)
    return nn.Sequential(*layers[:depth])


def build_decoder() -> nn.Sequential:
    """The AdaIN decoder in the published module order (29 modules, 9 convs)."""
    layers: list[nn.Module] = []
    for item in _DECODER:
        if isinstance(item, str):  # "U"
            layers.append(nn.Upsample(scale_factor=2, mode="nearest"))
        else:
            cin, cout = item
            layers += _conv3(cin, cout) + [nn.ReLU()]
    return nn.Sequential(*layers[:-1])  # no ReLU after the last conv


def _layout(module: nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


ENCODER_LAYERS = _layout(build_encoder(53))
"""Key -> shape of the published ``vgg_normalised.pth`` (all 53 modules)."""


def mean_std(feat: torch.Tensor, eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample, per-channel mean and ``sqrt(unbiased variance + eps)`` of N x C x H x W features."""
    n, c = feat.shape[:2]
    flat = feat.reshape(n, c, -1)
    var = flat.var(dim=2, unbiased=True) + eps
    return flat.mean(dim=2).view(n, c, 1, 1), var.sqrt().view(n, c, 1, 1)


def adain(content_feat: torch.Tensor, style_feat: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Adaptive instance normalisation: content features with the style features' channel statistics."""
    if content_feat.shape[:2] != style_feat.shape[:2]:
        raise InvalidArgumentError(
            "style_feat", tuple(style_feat.shape), f"features with the content's batch and channels {tuple(content_feat.shape[:2])}"
        )
    cm, cs = mean_std(content_feat, eps)
    sm, ss = mean_std(style_feat, eps)
    return (content_feat - cm) / cs * ss + sm


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_state_dict(
    path: str | os.PathLike[str] | None,
    argument: str,
    required: Mapping[str, tuple[int, ...]],
    optional: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, torch.Tensor]:
    """Read a published ``state_dict`` with ``weights_only=True`` and check its keys and shapes.

    Raises:
        MissingWeightsError: no path, or no file there (the message says where the files come from).
        WeightsFormatError: not a tensor state_dict (a pickle with code in it included), a key
            missing or unknown, or a tensor of the wrong shape.
    """
    if path is None:
        raise MissingWeightsError(argument, None, WEIGHTS_HELP)
    p = Path(path)
    if not p.is_file():
        raise MissingWeightsError(argument, p, WEIGHTS_HELP)
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsFormatError(
            argument, p, f"it is not a plain tensor state_dict; torch.load(weights_only=True) refused it ({first})"
        ) from None
    except Exception as exc:  # noqa: BLE001 - torch raises several types for files that are not checkpoints
        raise WeightsFormatError(argument, p, f"torch.load cannot read it ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, Mapping) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise WeightsFormatError(argument, p, f"expected a state_dict (str -> tensor), got {type(state).__name__}")
    optional = optional or {}
    missing = [k for k in required if k not in state]
    unknown = [k for k in state if k not in required and k not in optional]
    if missing or unknown:
        raise WeightsFormatError(
            argument, p, f"keys do not follow the published layout (missing {missing[:6]}, unknown {unknown[:6]})"
        )
    for k, v in state.items():
        want = required.get(k, optional.get(k))
        if tuple(v.shape) != want:
            raise WeightsFormatError(argument, p, f"{k} has shape {tuple(v.shape)}, the published layout has {want}")
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise WeightsFormatError(argument, p, f"{k} holds NaN or infinite values (a damaged or diverged file)")
    return {k: v.to(torch.float32) for k, v in state.items() if k in required}


class AdaINNetworks(nn.Module):
    """The encoder up to relu4_1, the decoder and the AdaIN stylisation of Huang & Belongie (2017)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = build_encoder(RELU4_1)
        self.decoder = build_decoder()
        self.digests: dict[str, str] = {}
        self.eval()
        for prm in self.parameters():
            prm.requires_grad_(False)

    @classmethod
    def from_files(cls, vgg: str | os.PathLike[str] | None, decoder: str | os.PathLike[str] | None) -> AdaINNetworks:
        """Load the published ``vgg_normalised.pth`` and ``decoder.pth``."""
        net = cls()
        enc_required = _layout(net.encoder)
        enc_optional = {k: s for k, s in ENCODER_LAYERS.items() if k not in enc_required}
        net.encoder.load_state_dict(load_state_dict(vgg, "vgg", enc_required, enc_optional))
        net.decoder.load_state_dict(load_state_dict(decoder, "decoder", _layout(net.decoder)))
        net.digests = {"vgg": file_sha256(vgg), "decoder": file_sha256(decoder)}  # type: ignore[arg-type]
        return net

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """relu4_1 features of RGB images in [0, 1] (N x 3 x H x W)."""
        return self.encoder(x)

    @torch.no_grad()
    def stylize(self, content: torch.Tensor, style: torch.Tensor, alpha: float | torch.Tensor = 1.0) -> torch.Tensor:
        """Content images rendered in the styles (N x 3 x H x W and N x 3 x h x w, RGB in [0, 1]).

        ``alpha`` (a number or one value per image) in [0, 1]: the weight of the AdaIN
        features against the content features. Images whose sides are not multiples of 8
        are reflection-padded to the next multiple (the encoder halves them three times)
        and cropped back. Returns N x 3 x H x W in [0, 1].
        """
        a = torch.as_tensor(alpha, dtype=torch.float32, device=content.device)
        if bool(((a < 0) | (a > 1)).any()):
            raise InvalidArgumentError("alpha", alpha, "values in [0, 1]")
        a = a.reshape(-1, 1, 1, 1) if a.ndim else a
        h, w = content.shape[-2:]
        ph, pw = (-h) % 8, (-w) % 8
        x = F.pad(content, (0, pw, 0, ph), mode="reflect") if ph or pw else content
        fc = self.encode(x)
        fs = self.encode(style)
        t = adain(fc, fs)
        t = a * t + (1 - a) * fc
        y = self.decoder(t)[..., :h, :w]
        return y.clamp(0.0, 1.0)

    def forward(self, content: torch.Tensor, style: torch.Tensor, alpha: Any = 1.0) -> torch.Tensor:
        return self.stylize(content, style, alpha)
