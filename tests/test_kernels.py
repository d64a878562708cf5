"""CPU fast paths equal the device-agnostic tensor paths they stand in for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shiftbench.corruptions._hsv_cpu import hsv_edit_cpu
from shiftbench.corruptions._ops import hsv_to_rgb, rgb_to_hsv

from .conftest import photos


def _tensor_path(x: torch.Tensor, mode: int, a: float, b: float) -> torch.Tensor:
    hsv = rgb_to_hsv(x / 255.0)
    if mode == 0:
        hsv = torch.stack([hsv[:, 0], hsv[:, 1], torch.clamp(hsv[:, 2] + a, 0, 1)], dim=1)
    else:
        hsv = torch.stack([hsv[:, 0], torch.clamp(hsv[:, 1] * a + b, 0, 1), hsv[:, 2]], dim=1)
    return torch.clamp(hsv_to_rgb(hsv), 0, 1) * 255


@pytest.mark.parametrize(("mode", "a", "b"), [(0, 0.2, 0.0), (0, 0.5, 0.0), (0, -0.3, 0.0), (1, 0.1, 0.0), (1, 5.0, 0.1), (1, 20.0, 0.2)])
def test_fused_hsv_equals_tensor_path(mode: int, a: float, b: float) -> None:
    rng = np.random.default_rng(0)
    real = torch.from_numpy(photos("64", 2)).permute(0, 3, 1, 2).to(torch.float64)
    # plus every kind of tie: gray pixels, two equal maxima, black and white
    synth = torch.from_numpy(rng.integers(0, 4, (2, 3, 64, 64)).astype(np.float64) * 85.0)
    for x in (real, synth):
        assert torch.equal(hsv_edit_cpu(x, mode, a, b), _tensor_path(x, mode, a, b))
