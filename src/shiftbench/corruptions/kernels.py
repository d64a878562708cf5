"""Image kernels of the corruption engine that other benchmarks reuse (ImageNet-P's motion and blur sequences).

* :func:`motion_blur`: ImageMagick-compatible motion blur (ImageNet-C's motion_blur).
* :func:`gaussian_filter2d`: SciPy-compatible 2-D Gaussian filter on tensors.
* :func:`fdiv`: float division rounded as NumPy does it (the engine's float64 contract).
* :func:`run_threaded`: split ``n`` rows over the engine's worker threads.
* :func:`require_memory`, :func:`typed_memory_errors`: refuse work larger than the memory available with an
  ``ImageShapeError`` naming the size (before allocating it, and for an allocation that fails anyway).
"""

from __future__ import annotations

from ._geometry import motion_blur, run_threaded
from ._images import available_memory, require_memory, typed_memory_errors
from ._ops import fdiv, gaussian_filter2d

__all__ = ["motion_blur", "gaussian_filter2d", "fdiv", "run_threaded", "available_memory", "require_memory",
           "typed_memory_errors"]
