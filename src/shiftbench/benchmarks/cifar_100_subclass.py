"""CIFAR-100 subclass hold-out (Hendrycks & Dietterich, Section 4.3): a 20-superclass classifier trained
without k subclasses of each superclass.

Conditions: the test images of the ``k`` held-out subclasses per superclass (``--holdout 1|2|3``,
default 1; the first k of each superclass in the authors' order) and the test images of the seen
subclasses. Data (``--data``): the ``cifar-100-python`` folder (train and test, read with the
restricted unpickler). Model: a ``train_classifier`` checkpoint (``--model``) or the paper's
``cifar100-wrn-40-2`` recipe (``--recipe`` to change it) trained under the store's folder.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidArgumentError
from ..structural import LabelledImages, Split, cifar100_subclass_split, read_cifar100
from . import register_benchmark
from .holdout import HoldoutBenchmark, HoldoutSettings

__all__ = ["Cifar100Subclass"]


@register_benchmark
class Cifar100Subclass(HoldoutBenchmark):
    name = "cifar-100-subclass"
    title = "CIFAR-100 subclass hold-out (Hendrycks & Dietterich, Section 4.3)"
    measures = "Superclass accuracy on held-out subclasses against the seen subclasses' test images, and the gap."
    conditions = "k = 1, 2 or 3 held-out subclasses per superclass: their test images, and the seen subclasses' test images"
    sources = ("the cifar-100-python folder (--data)",)
    default_recipe = "cifar100-wrn-40-2"
    published_heldout = {"cifar100:k=1": (40.9, 149), "cifar100:k=2": (26.78, 149), "cifar100:k=3": (25.3, 149)}

    def read(self, s: HoldoutSettings) -> LabelledImages:
        return read_cifar100(_folder(s), "train")

    def splits(self, data: LabelledImages, s: HoldoutSettings) -> list[Split]:
        h = str(s.holdout or "1").strip()
        if h not in ("1", "2", "3"):
            raise InvalidArgumentError("holdout", h, "1, 2 or 3 held-out subclasses per superclass (the paper's settings)")
        return [cifar100_subclass_split(data, read_cifar100(_folder(s), "test"), int(h), seed=s.seed)]


def _folder(s: HoldoutSettings) -> str | Path:
    if s.data is None:
        raise InvalidArgumentError("data", None, "the cifar-100-python folder (train and test)")
    return s.data
