"""The corruption engine's operations, registered on import.

Namespace ``"imagenet_c"`` (the default): the 19 ImageNet-C corruptions (15 benchmark + 4 extra),
in :mod:`.noise`, :mod:`.blur`, :mod:`.weather`, :mod:`.digital` and :mod:`.elastic`.
Namespace ``"noc"``: the 25 candidate corruptions of the overlap study (:mod:`.candidates`).
Namespace ``"style"``: style transfer as a corruption (:mod:`.style_transfer`).

Packages built on the engine, and new corruptions (:func:`register`), read the registry
(:func:`get_corruption`, :func:`list_corruptions`,
:class:`Corruption`, :class:`SampleContext`, :class:`ApplyContext`) and image batches
(:func:`to_batch`, :class:`Batch`) from here, and shared kernels from :mod:`.kernels`.
"""

from . import blur, candidates, digital, elastic, noise, style_transfer, weather  # noqa: F401
from ._images import Batch, to_batch
from ._registry import ApplyContext, Corruption, SampleContext, get_corruption, list_corruptions, register

# the registry and image batches, public for the packages built on the engine (overlap, perturbations, evaluation)
__all__ = [
    "ApplyContext",
    "Batch",
    "Corruption",
    "SampleContext",
    "get_corruption",
    "list_corruptions",
    "register",
    "to_batch",
]
