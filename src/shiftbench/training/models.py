"""Architectures of the shared training harness.

* :class:`SmallCNN`: four 3 x 3 conv layers (the overlap study at CPU scale).
* :class:`WideResNet`: WRN-d-k (Zagoruyko & Komodakis 2016) with dropout between the
  two convolutions of each block, pre-activation, for 32 x 32 inputs: the structural
  papers' WRN-16-4 (ICONS-50) and WRN-40-2 (CIFAR-100), both with dropout 0.3.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidArgumentError, MissingDependencyError

__all__ = ["SmallCNN", "WideResNet", "build_network", "ARCH_FORMS"]

ARCH_FORMS = ("small_cnn", "wrn-<depth>-<width>", "resnet18", "torchvision:<name>")


class SmallCNN(nn.Module):
    """Four 3 x 3 conv layers with batch norm, two max-pools, global average pool, linear head."""

    def __init__(self, channels: int, classes: int, width: int = 16) -> None:
        super().__init__()
        w = width

        def block(i: int, o: int) -> list[nn.Module]:
            return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]

        self.features = nn.Sequential(
            *block(channels, w),
            *block(w, w),
            nn.MaxPool2d(2),
            *block(w, 2 * w),
            *block(2 * w, 2 * w),
            nn.MaxPool2d(2),
            *block(2 * w, 4 * w),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * w, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class _WideBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.dropout = dropout
        self.shortcut = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, 0, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = F.relu(self.bn1(x))
        h = self.conv1(a)
        h = F.relu(self.bn2(h))
        if self.dropout > 0:
            h = F.dropout(h, p=self.dropout, training=self.training)
        h = self.conv2(h)
        return h + (x if self.shortcut is None else self.shortcut(a))


class WideResNet(nn.Module):
    """WRN-``depth``-``width`` for small images: three groups of ``(depth - 4) / 6`` blocks
    with 16k, 32k, 64k channels (strides 1, 2, 2), then BN-ReLU, global average pool, linear."""

    def __init__(self, depth: int, width: int, classes: int, dropout: float = 0.3, channels: int = 3) -> None:
        super().__init__()
        if (depth - 4) % 6 or depth < 10:
            raise InvalidArgumentError("depth", depth, "6n + 4 with n >= 1 (10, 16, 22, 28, 40...)")
        n = (depth - 4) // 6
        widths = [16, 16 * width, 32 * width, 64 * width]
        self.conv = nn.Conv2d(channels, widths[0], 3, 1, 1, bias=False)
        blocks: list[nn.Module] = []
        for g in range(3):
            for i in range(n):
                blocks.append(_WideBlock(widths[g] if i == 0 else widths[g + 1], widths[g + 1], (1 if g == 0 else 2) if i == 0 else 1, dropout))
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(widths[3])
        self.head = nn.Linear(widths[3], classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.blocks(self.conv(x))))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


_WRN = re.compile(r"^wrn-(\d+)-(\d+)$")


def build_network(arch: str, channels: int, classes: int, *, width: int = 16, dropout: float = 0.3) -> nn.Module:
    """A randomly initialised network: ``small_cnn`` (``width``), ``wrn-<depth>-<width>`` (``dropout``),
    ``resnet18`` or ``torchvision:<name>`` (needs torchvision)."""
    if arch == "small_cnn":
        return SmallCNN(channels, classes, width)
    m = _WRN.match(arch)
    if m:
        return WideResNet(int(m[1]), int(m[2]), classes, dropout, channels)
    if arch != "resnet18" and not arch.startswith("torchvision:"):
        raise InvalidArgumentError("arch", arch, f"one of {', '.join(ARCH_FORMS)}")
    name = arch.split(":", 1)[1] if arch.startswith("torchvision:") else arch
    try:
        import torchvision
    except ImportError as e:
        raise MissingDependencyError("torchvision", f"model.arch={arch!r}", "torchvision") from e
    if channels != 3:
        raise InvalidArgumentError("model.arch", arch, "small_cnn or wrn-d-k for 1-channel data (torchvision models take RGB)")
    return torchvision.models.get_model(name, weights=None, num_classes=classes)
