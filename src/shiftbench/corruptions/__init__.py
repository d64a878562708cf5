"""The corruption engine's operations, registered on import.

Namespace ``"imagenet_c"`` (the default): the 19 ImageNet-C corruptions (15 benchmark + 4 extra),
in :mod:`.noise`, :mod:`.blur`, :mod:`.weather`, :mod:`.digital` and :mod:`.elastic`.
Namespace ``"noc"``: the 25 candidate corruptions of the overlap study (:mod:`.candidates`).
Namespace ``"style"``: style transfer as a corruption (:mod:`.style_transfer`).

Packages built on the engine, and new corruptions (:func:`register`), read the registry
(:func:`get_corruption`, :func:`list_corruptions`,
:class:`Corruption`, :class:`SampleContext`, :class:`ApplyContext`) and image batches
(:func:`to_batch`, :class:`Batch`) from here, as well as the image kernels ImageNet-P's sequences reuse:

* :func:`imagemagick_motion_blur`: ImageMagick-compatible motion blur (ImageNet-C's motion_blur).
* :func:`gaussian_filter2d`: SciPy-compatible 2-D Gaussian filter on tensors.
* :func:`fdiv`: float division rounded as NumPy does it (the engine's float64 contract).
* :func:`run_threaded`: split ``n`` rows over the engine's worker threads.
* :func:`require_memory`, :func:`typed_memory_errors`, :func:`available_memory`: refuse work larger than the memory
  available with an ``ImageShapeError`` naming the size (before allocating it, and for an allocation that fails
  anyway).
"""

from . import blur, candidates, digital, elastic, noise, style_transfer, weather  # noqa: F401
from ._geometry import motion_blur as imagemagick_motion_blur
from ._geometry import run_threaded
from ._images import Batch, available_memory, require_memory, to_batch, typed_memory_errors
from ._ops import fdiv, gaussian_filter2d
from ._registry import ApplyContext, Corruption, SampleContext, get_corruption, list_corruptions, register

# the registry, image batches and shared kernels, public for the packages built on the engine (overlap,
# perturbations, evaluation)
__all__ = [
    "ApplyContext",
    "Batch",
    "Corruption",
    "SampleContext",
    "available_memory",
    "fdiv",
    "gaussian_filter2d",
    "get_corruption",
    "imagemagick_motion_blur",
    "list_corruptions",
    "register",
    "require_memory",
    "run_threaded",
    "to_batch",
    "typed_memory_errors",
]
