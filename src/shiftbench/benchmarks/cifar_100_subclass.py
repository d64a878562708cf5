"""CIFAR-100 subclass hold-out (Hendrycks & Dietterich, Section 4.3): a 20-superclass classifier trained
without k subclasses of each superclass.

Conditions: the test images of the ``k`` held-out subclasses per superclass (``--holdout 1|2|3``,
default 1; the first k of each superclass in the authors' order) and the test images of the seen
subclasses. Data (``--data``): the ``cifar-100-python`` folder (train and test, read with the
restricted unpickler). Model: a ``train_classifier`` checkpoint (``--model``) or the paper's
``cifar100-wrn-40-2`` recipe (``--recipe`` to change it) trained under the store's folder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError
from ..structural import CIFAR100_COARSE_TO_FINE, LabelledImages, Split, cifar100_subclass_split, read_cifar100
from . import register_benchmark
from .holdout import HoldoutBenchmark, HoldoutSettings

__all__ = ["Cifar100Subclass", "CIFAR100_TEST_PER_FINE"]

CIFAR100_TEST_PER_FINE = 100
"""Test images of each CIFAR-100 fine class (the dataset's 10,000 test images over 100 classes)."""


@register_benchmark
class Cifar100Subclass(HoldoutBenchmark):
    name = "cifar-100-subclass"
    title = "CIFAR-100 subclass hold-out (Hendrycks & Dietterich, Section 4.3)"
    measures = "Superclass accuracy on held-out subclasses against the seen subclasses' test images, and the gap."
    conditions = "k = 1, 2 or 3 held-out subclasses per superclass: their test images, and the seen subclasses' test images"
    sources = ("the cifar-100-python folder (--data)",)
    default_recipe = "cifar100-wrn-40-2"
    full_set = ("the CIFAR-100 test set's 10,000 images: 100 of each held-out fine class, so 2,000 k held-out images "
                "for k held-out subclasses of each of the 20 superclasses (Hendrycks & Dietterich, 2018, Section 4.3)")

    def coverage(self, record: Mapping[str, Any]) -> tuple[int, int] | None:
        """The held-out images scored against the 2,000 k of the full CIFAR-100 test set (split ``cifar100:k=K``)."""
        m = re.fullmatch(r"cifar100:k=([123])", str(record.get("split", "")))
        n = record.get("n_heldout")
        if m is None or not isinstance(n, int) or isinstance(n, bool):
            return None
        return n, CIFAR100_TEST_PER_FINE * len(CIFAR100_COARSE_TO_FINE) * int(m[1])
    published_heldout = {"cifar100:k=1": (40.9, 149), "cifar100:k=2": (26.78, 149), "cifar100:k=3": (25.3, 149)}

    def read(self, s: HoldoutSettings) -> LabelledImages:
        if s.data is None:
            raise InvalidArgumentError("data", None, "the cifar-100-python folder (train and test)")
        return read_cifar100(s.data, "train")

    def splits(self, data: LabelledImages, s: HoldoutSettings) -> list[Split]:
        h = str(s.holdout or "1").strip()
        if h not in ("1", "2", "3"):
            raise InvalidArgumentError("holdout", h, "1, 2 or 3 held-out subclasses per superclass (the paper's settings)")
        return [cifar100_subclass_split(data, read_cifar100(s.data, "test"), int(h), seed=s.seed)]
