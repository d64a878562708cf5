"""ImageNet-22K subclass robustness (Hendrycks & Dietterich, Section 4.3 and Appendix G): seen and unseen subclasses.

As the authors ran it (``old/auxiliary/ImageNet22K/train.py`` and ``test.py`` of ``hendrycks/robustness``): a
pretrained ImageNet-1K classifier (``--model``, ``--weights``) gets a new linear head over its frozen network and is
fine-tuned (``--recipe``, default ``imagenet22k-head``: 1 epoch, lr 0.01, weight decay 5e-4, Nesterov, cosine,
Resize(256) + RandomCrop(224) + flips) to predict the 25 Appendix G superclasses from every image of their *seen*
subclasses (ImageNet-1K synsets) in ``--data``; it is tested on the *unseen* subclasses (ImageNet-22K only) and,
given ``--seen-data`` (the ImageNet-1K validation images of the seen subclasses), on those, at the centre 224 crop
of Resize(256). The subclass lists (``--holdout``) are the authors' (``authors``, the default) or the WordNet-built
ones (``wordnet``). Named variants: ``--recipe finetune-head`` (shiftbench's earlier recipe) and, without
``--seen-data``, a seeded 10 % of each superclass's seen images of ``--data`` kept out of training for the seen
accuracy. Data (``--data``): a folder of ``<wnid>/`` image folders; every image of every listed subclass folder it
holds is read into memory (squashed to the recipe's input side), so give it a sample of ImageNet-22K, not the
whole release. The fine-tuned model is written under the store's folder (seeded, resumable); the final ``nn.Linear``
of the network is the one replaced. Records, metrics and store layout as ``icons-50-style``
(:class:`~shiftbench.benchmarks.holdout.HoldoutBenchmark`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InvalidArgumentError
from ..evaluation.protocol import option
from ..structural import (
    IMAGENET22K_SPLITS,
    LabelledImages,
    Split,
    imagenet22k_superclasses,
    imagenet22k_wnids,
    read_wnid_tree,
    subtype_holdout,
)
from ..training.recipes import TrainedModel, finetune_classifier
from . import register_benchmark
from .holdout import HoldoutBenchmark, SubclassSettings, parse_recipe, spread

__all__ = ["ImageNet22kSubclass", "Subclass22kSettings", "last_linear"]


@dataclass(frozen=True)
class Subclass22kSettings(SubclassSettings):
    """The options of the ImageNet-22K subclass benchmark."""

    holdout: str | None = option(
        None, help="The subclass lists: authors (Hendrycks & Dietterich's, the default) or wordnet.")
    seen_data: str | Path | None = option(
        None, metavar="PATH", help="ImageNet-1K validation images of the seen subclasses (<wnid>/ folders) for the "
        "seen accuracy, as the authors' script; without it, 10 % of the seen images of --data.")


def last_linear(net: torch.nn.Module) -> str:
    """The attribute path of the network's last ``nn.Linear`` (its classification head)."""
    names = [n for n, m in net.named_modules() if isinstance(m, torch.nn.Linear)]
    if not names:
        raise InvalidArgumentError("model", type(net).__name__, "a network ending in an nn.Linear head to replace")
    return names[-1]


@register_benchmark
class ImageNet22kSubclass(HoldoutBenchmark):
    name = "imagenet-22k-subclass"
    title = "ImageNet-22K seen and unseen subclasses (Hendrycks & Dietterich, Section 4.3, Appendix G)"
    measures = "Superclass accuracy on unseen (ImageNet-22K only) against seen (ImageNet-1K) subclasses, and the gap."
    conditions = ("the unseen subclasses' images, and the seen subclasses' ImageNet-1K validation images (--seen-data) "
                  "or 10 % of each superclass of the seen images of --data (seeded)")
    sources = ("a folder of <wnid>/ image folders holding seen and unseen subclasses (--data)",
               "ImageNet-1K validation images of the seen subclasses, <wnid>/ folders (--seen-data, optional)")
    Settings = Subclass22kSettings  # type: ignore[assignment]
    default_recipe = "imagenet22k-head"
    full_set = ("every ImageNet-22K image of the unseen subclasses, and the 50 ImageNet-1K validation images of each "
                "seen subclass (Hendrycks & Dietterich, 2018, Appendix G); the ImageNet-22K release changed, so no "
                "count is fixed and the report cannot flag a smaller evaluation")

    @staticmethod
    def lists(s: Any) -> str:
        """The subclass lists (``--holdout``): ``authors`` (default) or ``wordnet``."""
        h = str(s.holdout or "authors").strip().lower()
        if h not in IMAGENET22K_SPLITS:
            raise InvalidArgumentError("holdout", h, "the subclass lists: authors (Hendrycks & Dietterich's, the default) or wordnet")
        return h

    def image_size(self, s: Any) -> int:
        return int(parse_recipe(s.recipe, self.default_recipe).image_size)

    def read(self, s: Any) -> LabelledImages:
        if s.data is None:
            raise InvalidArgumentError("data", None, "a folder of <wnid>/ image folders (a sample of ImageNet-22K)")
        lists = self.lists(s)
        classes = [c["name"] for c in imagenet22k_superclasses(lists)]
        wnids = {**imagenet22k_wnids("unseen", lists), **imagenet22k_wnids("seen", lists)}
        return read_wnid_tree(s.data, wnids, classes, image_size=self.image_size(s))

    def splits(self, data: LabelledImages, s: Any) -> list[Split]:
        lists = self.lists(s)
        unseen = sorted(set(imagenet22k_wnids("unseen", lists)) & set(data.subtypes.tolist()))
        seen = sorted(set(imagenet22k_wnids("seen", lists)) & set(data.subtypes.tolist()))
        if not unseen or not seen:
            raise InvalidArgumentError("data", s.data, "folders of both seen and unseen subclasses",
                                       f"It holds {len(seen)} seen and {len(unseen)} unseen subclass folders.")
        name = "imagenet22k:unseen" if lists == "authors" else f"imagenet22k-{lists}:unseen"
        seen_data = s.seen_data
        if seen_data is None:  # the named variant: a seeded share of --data's seen images
            split = subtype_holdout(data, unseen, seed=s.seed)
            return [dataclasses.replace(split, name=name, kind="subclass", info={**split.info, "lists": lists})]
        val = read_wnid_tree(seen_data, imagenet22k_wnids("seen", lists), list(data.classes), image_size=self.image_size(s))
        held = np.isin(data.subtypes, np.array(unseen, dtype=str))
        info = {"lists": lists, "seen_test": f"--seen-data {seen_data}", "seed": s.seed}
        return [Split(name, "subclass", tuple(unseen), data, data, np.flatnonzero(~held), np.arange(len(val)),
                      np.flatnonzero(held), info, seen_source=val)]

    def model_for(self, split: Split, s: Any, ctx: Any) -> TrainedModel:
        spec = parse_recipe(s.recipe, self.default_recipe)
        clf = ctx.classifier()
        if not isinstance(clf.forward, torch.nn.Module):
            raise InvalidArgumentError("model", ctx.model_spec, "a network (nn.Module) to fine-tune")
        train = split.train_source.subset(spread(split.train_idx, s.limit))
        tag = hashlib.sha256(json.dumps([clf.checksum, spec.to_dict(), s.seed], sort_keys=True).encode()).hexdigest()[:8]
        store = ctx.store if ctx.store is not None else Path.cwd() / "results.sqlite"
        return finetune_classifier(clf.forward, train, spec, store.parent / "structural-models" / self.name / tag,
                                   head=last_linear(clf.forward), seed=s.seed, device=ctx.device or "cpu",
                                   run_name=f"{spec.name}-n{len(train)}")
