"""Structural robustness (Hendrycks & Dietterich, 2018, Section 4): style and subclass hold-outs.

Readers of ICONS-50, the emoji-styles stand-in, CIFAR-100 and wnid folder trees
(:mod:`.readers`); the hold-out splits as data (:mod:`.splits`); evaluation of a
trained model on a split (:mod:`.evaluate`). Training goes through the shared
harness :mod:`shiftbench.training`.
"""

from __future__ import annotations

from .readers import (
    CIFAR100_COARSE,
    CIFAR100_FINE,
    ICONS50_CLASSES,
    LabelledImages,
    read_cifar100,
    read_emoji_styles,
    read_icons50,
    read_icons50_folder,
    read_icons50_npy,
    read_image_files,
    read_wnid_tree,
)

__all__ = [
    "CIFAR100_COARSE",
    "CIFAR100_FINE",
    "ICONS50_CLASSES",
    "LabelledImages",
    "read_cifar100",
    "read_emoji_styles",
    "read_icons50",
    "read_icons50_folder",
    "read_icons50_npy",
    "read_image_files",
    "read_wnid_tree",
]

from .evaluate import HoldoutScore, ItemPredictions, evaluate_split, plot_seen_unseen, predict, score  # noqa: E402
from .splits import (  # noqa: E402
    CIFAR100_COARSE_TO_FINE,
    IMAGENET22K_SPLITS,
    PAPER_HELD_OUT_SUBTYPES,
    SEEN_TEST_SHARE,
    Split,
    cifar100_held_out,
    cifar100_subclass_split,
    default_style,
    imagenet22k_superclasses,
    imagenet22k_wnids,
    leave_one_style_out,
    paper_subtypes_for,
    random_subtypes,
    style_holdout,
    subtype_holdout,
)

__all__ += [
    "CIFAR100_COARSE_TO_FINE",
    "PAPER_HELD_OUT_SUBTYPES",
    "SEEN_TEST_SHARE",
    "Split",
    "HoldoutScore",
    "ItemPredictions",
    "cifar100_held_out",
    "cifar100_subclass_split",
    "default_style",
    "evaluate_split",
    "IMAGENET22K_SPLITS",
    "imagenet22k_superclasses",
    "imagenet22k_wnids",
    "leave_one_style_out",
    "paper_subtypes_for",
    "plot_seen_unseen",
    "predict",
    "random_subtypes",
    "score",
    "style_holdout",
    "subtype_holdout",
]
