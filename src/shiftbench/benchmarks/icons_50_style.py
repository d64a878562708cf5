"""ICONS-50 style hold-out (Hendrycks & Dietterich, Section 4.2): train without one icon style, test on it.

Conditions: per split, the held-out style's images; with ``--seen-test-share F`` also a share F of each
class of the seen styles kept out of training (seeded). By default nothing is kept out: the model trains
on all the seen images, as the authors' script does (``hendrycks/robustness`` ``old/Icons-50/train.py``,
``--valid_size 0``), and the seen accuracy and the gap are not measured. Data (``--data``): ``Icons-50.npy``, the ICONS-50 folder release,
or the emoji-styles folder / ``.npz``. Records: each item's label and top-5 classes. Metrics:
accuracy on each part and the gap (seen - held out), per split and averaged with ``--holdout all``
(leave-one-style-out).

The model: ``--model`` a checkpoint written by
``shiftbench.training.recipes.train_classifier`` on the split's training part; without one
(``--model`` left at its default, or ``train``), the split's recipe (``--recipe``, default
``icons50-wrn-16-4``, the paper's WRN-16-4 for 50 epochs) is trained into
``<store folder>/structural-models/`` first: seeded (``--seed``) and resumed after an
interruption from its last finished epoch.

:class:`~shiftbench.benchmarks.holdout.HoldoutBenchmark` is the shared part of the structural hold-out benchmarks.
"""

from __future__ import annotations

from ..structural import LabelledImages, Split
from ..structural.splits import leave_one_style_out, style_holdout
from . import register_benchmark
from .holdout import (
    HoldoutBenchmark,
    IconsSettings,
    holdout_figures,
    parse_recipe,
    read_icons_data,
    seen_test_share,
    spread,
)

__all__ = ["Icons50Style", "HoldoutBenchmark", "holdout_figures", "read_icons_data", "parse_recipe", "spread"]


@register_benchmark
class Icons50Style(HoldoutBenchmark):
    name = "icons-50-style"
    title = "ICONS-50 style hold-out (Hendrycks & Dietterich, Section 4.2)"
    measures = "Accuracy on a held-out icon style against a held-out share of the seen styles, and the gap."
    conditions = ("per split: the held-out style (and, with --seen-test-share, that share of each class of the seen "
                  "styles, seeded)")
    Settings = IconsSettings
    full_set = ("ICONS-50's 10,000 images (Hendrycks & Dietterich, 2018, Section 4.2); per split, every image of the "
                "held-out style is tested; no per-style count is published, so the report cannot flag a smaller one")
    sources = ("Icons-50.npy or the ICONS-50 folder release (--data)", "the emoji-styles folder or .npz (--data)")
    published_heldout = {"style:microsoft": (57.0, 141), "style:apple": (93.0, 141)}  # Hendrycks & Dietterich (2018) Section 4.2

    def splits(self, data: LabelledImages, s: IconsSettings) -> list[Split]:
        h, share = s.holdout, seen_test_share(s)
        if h is not None and str(h).strip().lower() == "all":
            return leave_one_style_out(data, seed=s.seed, seen_test_fraction=share)
        return [style_holdout(data, None if h in (None, "") else str(h).strip(), seed=s.seed, seen_test_fraction=share)]
