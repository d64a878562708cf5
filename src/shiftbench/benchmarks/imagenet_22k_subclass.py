"""ImageNet-22K subclass robustness (Hendrycks & Dietterich, Section 4.3 and Appendix G): seen and unseen subclasses.

A pretrained ImageNet-1K classifier (``--model``, ``--weights``) is fine-tuned (``--recipe``, default
``finetune-head``: a new final layer over the frozen network) to predict the 25 Appendix G
superclasses from the images of their *seen* subclasses (ImageNet-1K synsets), and tested on a
held-out share of those (10 % per superclass, seeded) and on the *unseen* subclasses (ImageNet-22K
only). Data (``--data``): a folder of ``<wnid>/`` image folders; every image of every listed subclass
folder it holds is read at 224 px into memory, so give it a sample of ImageNet-22K, not the whole
release. The fine-tuned model is written under the store's folder (seeded, resumable); the final
``nn.Linear`` of the network is the one replaced. Records, metrics and store layout as
``icons-50-style`` (:class:`~shiftbench.benchmarks.icons_50_style.HoldoutBenchmark`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from ..distributed.predictions import RAY_OPTIONS
from ..errors import InvalidArgumentError
from ..evaluation.models import DEFAULT_MODEL, load_model
from ..structural import LabelledImages, Split, imagenet22k_superclasses, imagenet22k_wnids, read_wnid_tree, subtype_holdout
from ..training.recipes import TrainedModel, finetune_classifier
from . import register_benchmark
from .icons_50_style import HoldoutBenchmark, parse_recipe, spread

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
    options = ("seed", "recipe", *RAY_OPTIONS)
    default_recipe = "finetune-head"

    def read(self, settings: dict[str, Any]) -> LabelledImages:
        if settings.get("data") is None:
            raise InvalidArgumentError("data", None, "a folder of <wnid>/ image folders (a sample of ImageNet-22K)")
        classes = [s["name"] for s in imagenet22k_superclasses()]
        return read_wnid_tree(settings["data"], {**imagenet22k_wnids("seen"), **imagenet22k_wnids("unseen")}, classes)

    def splits(self, data: LabelledImages, settings: dict[str, Any]) -> list[Split]:
        unseen = sorted(set(imagenet22k_wnids("unseen")) & set(data.subtypes.tolist()))
        seen = sorted(set(imagenet22k_wnids("seen")) & set(data.subtypes.tolist()))
        if not unseen or not seen:
            raise InvalidArgumentError("data", settings.get("data"), "folders of both seen and unseen subclasses",
                                       f"It holds {len(seen)} seen and {len(unseen)} unseen subclass folders.")
        split = subtype_holdout(data, unseen, seed=int(settings.get("seed") or 0))
        return [dataclasses.replace(split, name="imagenet22k:unseen", kind="subclass")]

    def model_for(self, split: Split, settings: dict[str, Any], store: Path) -> TrainedModel:
        spec = parse_recipe(settings.get("recipe"), self.default_recipe)
        clf = load_model(settings.get("model") or DEFAULT_MODEL, weights=settings.get("weights"), device="cpu")
        if not isinstance(clf.forward, torch.nn.Module):
            raise InvalidArgumentError("model", settings.get("model"), "a network (nn.Module) to fine-tune")
        train = split.train_source.subset(spread(split.train_idx, settings.get("limit")))
        tag = hashlib.sha256(json.dumps([clf.checksum, spec.to_dict(), int(settings.get("seed") or 0)],
                                        sort_keys=True).encode()).hexdigest()[:8]
        return finetune_classifier(clf.forward, train, spec, store.parent / "structural-models" / self.name / tag,
                                   head=last_linear(clf.forward), seed=int(settings.get("seed") or 0),
                                   device=settings.get("device") or "cpu", run_name=f"{spec.name}-n{len(train)}")
