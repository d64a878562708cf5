"""Geometric primitives shared by blur and weather corruptions.

* :func:`motion_blur` reproduces ImageMagick's ``MotionBlurImage`` (used by the
  reference for motion_blur and for the snow layer): a one-sided half-Gaussian
  kernel of width ``2*ceil(radius)+1``, integer tap offsets
  ``ceil(i*cos(a) - 0.5), ceil(i*sin(a) - 0.5)``, edge replication, result
  rounded to 8 bits.
* :func:`clipped_zoom` reproduces the reference's ``clipped_zoom``: crop the
  centre ``ceil(H/z) x ceil(W/z)``, zoom with ``scipy.ndimage.zoom(order=1)``
  (corner-aligned bilinear), centre-trim to H x W.
"""

from __future__ import annotations

import torch

__all__ = ["motion_blur", "clipped_zoom"]


def motion_blur(x: torch.Tensor, radius: float, sigma: float, angle_deg: torch.Tensor) -> torch.Tensor:
    """ImageMagick motion blur of a batch.

    Args:
        x: B x C x H x W float tensor holding 8-bit values 0..255.
        radius, sigma: ImageMagick's radius and sigma (same for the whole batch).
        angle_deg: B angles in degrees (one per image), image y axis pointing down.

    Returns:
        B x C x H x W float tensor of 8-bit values (rounded to nearest), same dtype/device.
    """
    raise NotImplementedError


def clipped_zoom(x: torch.Tensor, zoom: float) -> torch.Tensor:
    """The reference ``clipped_zoom`` on ... x H x W (any leading dims, any H, W; same dtype)."""
    raise NotImplementedError
