"""ICONS-50 subtype hold-out (Hendrycks & Dietterich, Section 4.3): train without some subtypes of each class.

Conditions: the held-out subtypes' images (and, with ``--seen-test-share F``, a share F of each class of the
seen subtypes kept out of training, seeded; by default all the seen images train, as in the authors' script). ``--holdout``: ``paper`` (default: the paper's 50 held-out subtypes from the authors'
script; on emoji-styles the 23 of them it has), ``random`` (one seeded subtype per class), or a
comma-separated list of subtype names. Data, model and records as ``icons-50-style``
(:class:`~shiftbench.benchmarks.holdout.HoldoutBenchmark`).
"""

from __future__ import annotations

from typing import Any

from ..structural import LabelledImages, Split, subtype_holdout
from . import register_benchmark
from .holdout import HoldoutBenchmark, IconsSettings, seen_test_share

__all__ = ["Icons50Subtype"]


@register_benchmark
class Icons50Subtype(HoldoutBenchmark):
    name = "icons-50-subtype"
    title = "ICONS-50 subtype hold-out (Hendrycks & Dietterich, Section 4.3)"
    measures = "Accuracy on held-out subtypes of each class against a held-out share of the seen subtypes, and the gap."
    conditions = ("the held-out subtypes (paper's 50, seeded random, or named); with --seen-test-share, that share of "
                  "each class of the seen ones")
    Settings = IconsSettings
    full_set = ("ICONS-50's 10,000 images (Hendrycks & Dietterich, 2018, Section 4.3); every image of the held-out "
                "subtypes is tested; no per-subtype count is published, so the report cannot flag a smaller one")
    sources = ("Icons-50.npy or the ICONS-50 folder release (--data)", "the emoji-styles folder or .npz (--data)")
    published_heldout = {"subtype:paper": (60.4, 156)}  # Hendrycks & Dietterich (2018) Section 4.3, ICONS-50's 50 held-out subtypes

    def splits(self, data: LabelledImages, s: IconsSettings) -> list[Split]:
        h = str(s.holdout or "paper").strip()
        held: Any = h if h in ("paper", "random") else [x.strip() for x in h.split(",") if x.strip()]
        return [subtype_holdout(data, held, seed=s.seed, seen_test_fraction=seen_test_share(s))]
