"""CondenseNet-74 for ImageNet, the converted (group-convolution) form its authors published weights for.

Huang, Liu, van der Maaten & Weinberger (2018), *CondenseNet: An Efficient DenseNet using Learned Group
Convolutions*, CVPR. The authors' repository (``ShichenLiu/CondenseNet``, MIT licence) publishes two ImageNet
models, CondenseNet-74 with C = G = 4 and with C = G = 8, as "converted" checkpoints: the learned group
convolutions already condensed into standard group convolutions, each preceded by a fixed selection of input
channels (an ``index`` buffer) and followed by a channel shuffle. Hendrycks & Dietterich (2018, Section 3.5)
evaluate both on ImageNet-C (26.3 % error / 80.8 % mCE and 28.9 % / 84.6 %), loading these files in their
``ImageNet-C/test.py``.

The module names follow the checkpoint's parameter names (``features.denseblock_1.denselayer_1.conv_1.index``...),
so the published ``state_dict`` loads with ``strict=True`` once its ``module.`` prefix is stripped (the zoo entries
``condensenet74-c4-g4`` and ``condensenet74-c8-g8`` say so). Stages 4-6-8-10-8, growth 8-16-32-64-128, bottleneck
4, a 3 x 3 stride-2 stem, 2 x 2 average pooling between blocks, a 7 x 7 average pool and a linear layer on half of
the final features (the half the condensation kept).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CondenseNet", "condensenet74_c4_g4", "condensenet74_c8_g8", "STAGES", "GROWTH"]

STAGES = (4, 6, 8, 10, 8)
GROWTH = (8, 16, 32, 64, 128)
BOTTLENECK = 4


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Interleave the channels of ``groups`` groups (group-major -> channel-major order)."""
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class SelectConv(nn.Module):
    """A condensed 1 x 1 convolution: select input channels (``index``), BN, ReLU, group convolution, shuffle."""

    def __init__(self, in_channels: int, out_channels: int, groups: int) -> None:
        super().__init__()
        self.groups = groups
        self.norm = nn.BatchNorm2d(in_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, groups=groups, bias=False)
        self.register_buffer("index", torch.arange(in_channels, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(self.relu(self.norm(torch.index_select(x, 1, self.index))))
        return channel_shuffle(x, self.groups)


class NormReluConv(nn.Sequential):
    """BN, ReLU and a 3 x 3 group convolution (the second convolution of a dense layer)."""

    def __init__(self, in_channels: int, out_channels: int, groups: int) -> None:
        super().__init__()
        self.add_module("norm", nn.BatchNorm2d(in_channels))
        self.add_module("relu", nn.ReLU(inplace=True))
        self.add_module("conv", nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, groups=groups, bias=False))


class DenseLayer(nn.Module):
    """``x`` concatenated with ``growth`` new channels (1 x 1 to ``BOTTLENECK * growth``, then 3 x 3)."""

    def __init__(self, in_channels: int, growth: int, groups: int) -> None:
        super().__init__()
        self.conv_1 = SelectConv(in_channels, BOTTLENECK * growth, groups)
        self.conv_2 = NormReluConv(BOTTLENECK * growth, growth, groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv_2(self.conv_1(x))], 1)


class Transition(nn.Module):
    """2 x 2 average pooling between dense blocks (no parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


class SelectLinear(nn.Module):
    """The classifier: a linear layer on the selected half of the features (``index``)."""

    def __init__(self, in_features: int, out_features: int, keep: float = 0.5) -> None:
        super().__init__()
        n = int(in_features * keep)
        self.linear = nn.Linear(n, out_features)
        self.register_buffer("index", torch.arange(n, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.index_select(x, 1, self.index))


class CondenseNet(nn.Module):
    """Converted CondenseNet for 224 x 224 ImageNet inputs (``groups`` = C = G)."""

    def __init__(self, groups: int, num_classes: int = 1000, stages: tuple[int, ...] = STAGES,
                 growth: tuple[int, ...] = GROWTH) -> None:
        super().__init__()
        self.num_classes = num_classes
        n = 2 * growth[0]
        self.features = nn.Sequential()
        self.features.add_module("init_conv", nn.Conv2d(3, n, kernel_size=3, stride=2, padding=1, bias=False))
        for i, (layers, g) in enumerate(zip(stages, growth, strict=True)):
            block = nn.Sequential()
            for j in range(layers):
                block.add_module(f"denselayer_{j + 1}", DenseLayer(n + j * g, g, groups))
            self.features.add_module(f"denseblock_{i + 1}", block)
            n += layers * g
            if i < len(stages) - 1:
                self.features.add_module(f"transition_{i + 1}", Transition())
        self.features.add_module("norm_last", nn.BatchNorm2d(n))
        self.features.add_module("relu_last", nn.ReLU(inplace=True))
        self.features.add_module("pool_last", nn.AvgPool2d(7))
        self.classifier = SelectLinear(n, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def condensenet74_c4_g4(num_classes: int = 1000) -> CondenseNet:
    """CondenseNet-74, C = G = 4 (the authors' ``converted_condensenet_4.pth.tar``)."""
    return CondenseNet(4, num_classes)


def condensenet74_c8_g8(num_classes: int = 1000) -> CondenseNet:
    """CondenseNet-74, C = G = 8 (the authors' ``converted_condensenet_8.pth.tar``)."""
    return CondenseNet(8, num_classes)
