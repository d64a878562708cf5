"""ImageNet-22K subclass robustness (Hendrycks & Dietterich, Section 4.3 and Appendix G): seen and unseen subclasses.

A pretrained ImageNet-1K classifier (``--model``, ``--weights``) is fine-tuned (``--recipe``, default
``finetune-head``: a new final layer over the frozen network) to predict the 25 Appendix G
superclasses from the images of their *seen* subclasses (ImageNet-1K synsets), and tested on a
held-out share of those (10 % per superclass, seeded) and on the *unseen* subclasses (ImageNet-22K
only). Data (``--data``): a folder of ``<wnid>/`` image folders; every image of every listed subclass
folder it holds is read at 224 px into memory, so give it a sample of ImageNet-22K, not the whole
release. The fine-tuned model is written under the store's folder (seeded, resumable); the final
``nn.Linear`` of the network is the one replaced. Records, metrics and store layout as
``icons-50-style`` (:class:`~shiftbench.benchmarks.holdout.HoldoutBenchmark`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from ..errors import InvalidArgumentError
from ..structural import LabelledImages, Split, imagenet22k_superclasses, imagenet22k_wnids, read_wnid_tree, subtype_holdout
from ..training.recipes import TrainedModel, finetune_classifier
from . import register_benchmark
from .holdout import HoldoutBenchmark, SubclassSettings, parse_recipe, spread

__all__ = ["ImageNet22kSubclass", "last_linear"]


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
    conditions = "the unseen subclasses' images, and 10 % of each superclass of the seen subclasses' images (seeded)"
    sources = ("a folder of <wnid>/ image folders holding seen and unseen subclasses (--data)",)
    Settings = SubclassSettings  # type: ignore[assignment]
    default_recipe = "finetune-head"

    def read(self, s: SubclassSettings) -> LabelledImages:
        if s.data is None:
            raise InvalidArgumentError("data", None, "a folder of <wnid>/ image folders (a sample of ImageNet-22K)")
        classes = [c["name"] for c in imagenet22k_superclasses()]
        return read_wnid_tree(s.data, {**imagenet22k_wnids("seen"), **imagenet22k_wnids("unseen")}, classes)

    def splits(self, data: LabelledImages, s: SubclassSettings) -> list[Split]:
        unseen = sorted(set(imagenet22k_wnids("unseen")) & set(data.subtypes.tolist()))
        seen = sorted(set(imagenet22k_wnids("seen")) & set(data.subtypes.tolist()))
        if not unseen or not seen:
            raise InvalidArgumentError("data", s.data, "folders of both seen and unseen subclasses",
                                       f"It holds {len(seen)} seen and {len(unseen)} unseen subclass folders.")
        split = subtype_holdout(data, unseen, seed=s.seed)
        return [dataclasses.replace(split, name="imagenet22k:unseen", kind="subclass")]

    def model_for(self, split: Split, s: SubclassSettings, ctx: Any) -> TrainedModel:
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
