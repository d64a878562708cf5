"""The structural papers' training recipes as data, and training on :class:`LabelledImages`.

Defaults are the authors' scripts (``hendrycks/robustness`` at e0377d46: ``old/Icons-50/train.py``,
``old/auxiliary/CIFAR100/train.py``, ``old/auxiliary/ImageNet22K/train.py``); the variants that keep only what
the paper text states, and shiftbench's earlier fine-tuning defaults, are named apart with their reason.

==================================  =========  =======  ======  =====  ======  ==========================  ===========================
recipe                              network    dropout  epochs  lr     decay   inputs                      source
==================================  =========  =======  ======  =====  ======  ==========================  ===========================
``icons50-wrn-16-4``                WRN-16-4   0.3      50      0.1    1e-4    [0, 1], no normalisation    authors' ICONS-50 script
``icons50-wrn-16-4-paper``          WRN-16-4   0.3      50      0.1    1e-4    mean 0.5, std 0.25          paper text (no inputs given)
``cifar100-wrn-40-2``               WRN-40-2   0.3      100     0.1    5e-4    CIFAR statistics, Beta mix  authors' CIFAR-100 script
``cifar100-wrn-40-2-paper``         WRN-40-2   0.3      100     0.1    5e-4    mean 0.5, std 0.25, no mix  paper text (no mixing told)
``imagenet22k-head``                (given)    -        1       0.01   5e-4    ImageNet statistics         authors' ImageNet-22K script
``finetune-head``                   (given)    -        10      0.1    0       ImageNet statistics         shiftbench's earlier default
``finetune-full``                   (given)    -        10      0.01   1e-4    ImageNet statistics         shiftbench
``clahe-finetune``                  (given)    -        5       0.01   1e-4    CLAHE, ImageNet statistics  paper Section 3.5
``stability-finetune``              (given)    -        5       0.01   1e-4    + stability loss            paper Section 3.4
==================================  =========  =======  ======  =====  ======  ==========================  ===========================

All: SGD with Nesterov momentum 0.9, batch 128, cosine learning rate per step. The 32 px recipes train on random
crops (4 px padding) and horizontal flips; ``imagenet22k-head`` on ``Resize(256)`` images, random 224 crops and
flips, evaluated on the centre 224 crop (the authors' train and test transforms), with a new linear head over
the frozen network. The CIFAR-100 script mixes every input with another image of its batch (``t ~ Beta(1, 1)``,
mixed loss: :class:`~shiftbench.training.loop.Recipe` ``mix="beta"``); the paper does not mention it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import DataError, InvalidArgumentError
from ..registry import Registry
from .loop import FitResult, Recipe, fit, load_checkpoint, stream_id, tensor_batches
from .models import build_network

__all__ = ["TrainingSpec", "RECIPES", "get_recipe", "TrainedModel", "train_classifier", "finetune_classifier", "load_trained", "HeadOnly",
           "CentreCrop"]

_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class TrainingSpec:
    """A named recipe: the network (``arch``, ``dropout``), the input size and the :class:`Recipe`.

    ``finetune`` is ``None`` for training from scratch, ``"head"`` or ``"full"`` for fine-tuning.
    """

    name: str
    arch: str
    dropout: float
    image_size: int
    recipe: Recipe
    finetune: str | None = None
    source: str = ""

    def with_overrides(self, **kw: Any) -> TrainingSpec:
        """A copy with recipe fields (``epochs``, ``lr``...) or spec fields (``arch``, ``dropout``, ``image_size``) changed."""
        spec_fields = {"arch", "dropout", "image_size"}
        rec = {k: v for k, v in kw.items() if k not in spec_fields}
        bad = [k for k in rec if k not in Recipe.__dataclass_fields__]
        if bad:
            raise InvalidArgumentError(bad[0], rec[bad[0]], f"a recipe field ({', '.join(sorted(Recipe.__dataclass_fields__))}) or arch, dropout, image_size")
        return replace(self, recipe=replace(self.recipe, **rec).check(), **{k: v for k, v in kw.items() if k in spec_fields})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arch": self.arch, "dropout": self.dropout, "image_size": self.image_size, "finetune": self.finetune, "recipe": self.recipe.to_dict()}


_CIFAR_MEAN = tuple(v / 255 for v in (125.3, 123.0, 113.9))  # the authors' CIFAR-100 script
_CIFAR_STD = tuple(v / 255 for v in (63.0, 62.1, 66.7))


def _wrn(epochs: int, decay: float, **kw: Any) -> Recipe:
    return Recipe(epochs=epochs, batch_size=128, lr=0.1, momentum=0.9, nesterov=True, weight_decay=decay, schedule="cosine",
                  hflip=True, crop_padding=4, **kw)


RECIPES: Registry[TrainingSpec] = Registry("recipe", cutoff=0.4, normalise=str.strip, entries={
    "icons50-wrn-16-4": TrainingSpec(
        "icons50-wrn-16-4", "wrn-16-4", 0.3, 32, _wrn(50, 1e-4, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)), None,
        "authors' old/Icons-50/train.py (no input normalisation); paper Section 4.2, Appendix F"),
    "icons50-wrn-16-4-paper": TrainingSpec(
        "icons50-wrn-16-4-paper", "wrn-16-4", 0.3, 32, _wrn(50, 1e-4), None,
        "paper Section 4.2, Appendix F only: the text gives no input normalisation (mean 0.5, std 0.25 here)"),
    "cifar100-wrn-40-2": TrainingSpec(
        "cifar100-wrn-40-2", "wrn-40-2", 0.3, 32, _wrn(100, 5e-4, mean=_CIFAR_MEAN, std=_CIFAR_STD, lr_min=0.0, mix="beta"), None,
        "authors' old/auxiliary/CIFAR100/train.py (CIFAR statistics, Beta(1, 1) input mixing); paper Appendix F"),
    "cifar100-wrn-40-2-paper": TrainingSpec(
        "cifar100-wrn-40-2-paper", "wrn-40-2", 0.3, 32, _wrn(100, 5e-4), None,
        "paper Section 4.3, Appendix F only: no input mixing (the text does not mention it), mean 0.5, std 0.25"),
    "imagenet22k-head": TrainingSpec(
        "imagenet22k-head", "pretrained", 0.0, 256,
        Recipe(epochs=1, batch_size=128, lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4, schedule="cosine",
               lr_min=0.0, hflip=True, crop_padding=0, crop_size=224, mean=_IMAGENET_MEAN, std=_IMAGENET_STD),
        "head", "authors' old/auxiliary/ImageNet22K/train.py: frozen network, new linear head, 1 epoch"),
    "finetune-head": TrainingSpec(
        "finetune-head", "pretrained", 0.0, 224,
        Recipe(epochs=10, batch_size=128, lr=0.1, weight_decay=0.0, crop_padding=0, mean=_IMAGENET_MEAN, std=_IMAGENET_STD),
        "head", "shiftbench's earlier default (before the authors' script was followed): 10 epochs, lr 0.1, no crops",
    ),
    "finetune-full": TrainingSpec(
        "finetune-full", "pretrained", 0.0, 224,
        Recipe(epochs=10, batch_size=128, lr=0.01, weight_decay=1e-4, crop_padding=0, mean=_IMAGENET_MEAN, std=_IMAGENET_STD),
        "full", "shiftbench (the paper fine-tunes only the head)",
    ),
    "clahe-finetune": TrainingSpec(
        "clahe-finetune", "pretrained", 0.0, 224,
        Recipe(epochs=5, batch_size=128, lr=0.01, weight_decay=1e-4, crop_padding=0, mean=_IMAGENET_MEAN, std=_IMAGENET_STD,
               preprocess="clahe"),
        "full", "paper Section 3.5: the whole pretrained network, 5 epochs on CLAHE-processed images (lr, decay: shiftbench's)",
    ),
    "stability-finetune": TrainingSpec(
        "stability-finetune", "pretrained", 0.0, 224,
        Recipe(epochs=5, batch_size=128, lr=0.01, weight_decay=1e-4, crop_padding=0, mean=_IMAGENET_MEAN, std=_IMAGENET_STD,
               stability=(0.05, 0.05)),
        "full", "paper Section 3.4: stability training for 5 epochs; noise and weight 0.05, the middle of the paper's grids",
    ),
})  # fmt: skip
"""The training recipes by name (:func:`get_recipe`; ``RECIPES.register(name, spec)`` adds one)."""


def get_recipe(name: str, **overrides: Any) -> TrainingSpec:
    """A recipe of :data:`RECIPES` by name, with optional overrides (see :meth:`TrainingSpec.with_overrides`)."""
    spec = RECIPES.get(name)  # UnknownNameError with the recipes and the closest names
    return spec.with_overrides(**overrides) if overrides else replace(spec, recipe=replace(spec.recipe))


@dataclass
class TrainedModel:
    """A trained network with what is needed to evaluate it (classes, input size, normalisation)."""

    net: nn.Module
    classes: tuple[str, ...]
    spec: TrainingSpec
    result: FitResult
    checkpoint: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def image_size(self) -> int:
        return self.spec.image_size


def _fingerprint(images: np.ndarray, labels: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(str(images.shape).encode())
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def _as_tensors(data: Any, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    d = data.resized(size)
    x = torch.from_numpy(np.ascontiguousarray(d.images.transpose(0, 3, 1, 2)))
    return x, torch.from_numpy(d.labels.astype(np.int64))


def _check_resume(path: Path, fp: str, spec: TrainingSpec) -> None:
    if path.is_file():
        ck = load_checkpoint(path)
        if ck.get("data_fingerprint") != fp or ck.get("spec") != spec.to_dict():
            raise DataError(
                f"checkpoint {str(path)!r} belongs to another run (different training data or recipe); "
                "use another output folder or delete it"
            )


def train_classifier(
    train: Any,
    spec: TrainingSpec | str,
    output: str | Path,
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
    log: Callable[[str], None] | None = None,
    on_step: Callable[[int, int, int], None] | None = None,
    on_epoch: Callable[[Any], None] | None = None,
    run_name: str = "model",
) -> TrainedModel:
    """Train ``spec``'s network from scratch on ``train`` (:class:`~shiftbench.structural.LabelledImages`).

    The checkpoint ``<output>/<run_name>.pt`` is written after every epoch; calling again with the
    same data, recipe and output resumes (or returns at once when the run is complete).
    """
    sp = get_recipe(spec) if isinstance(spec, str) else spec
    if sp.finetune is not None:
        raise InvalidArgumentError("spec", sp.name, "a recipe that trains from scratch (use finetune_classifier)")
    path, x, y, fp = _prepare(train, sp, output, run_name)
    _seed_torch(seed, run_name)
    net = build_network(sp.arch, 3, len(train.classes), dropout=sp.dropout)
    return _fit_and_wrap(net, x, y, train, sp, fp, path, seed=seed, device=device, run_name=run_name, log=log,
                         on_step=on_step, on_epoch=on_epoch)


def _prepare(train: Any, sp: TrainingSpec, output: str | Path, run_name: str) -> tuple[Path, torch.Tensor, torch.Tensor, str]:
    """The checkpoint path, the training tensors and their fingerprint; refuses a checkpoint of other data or recipe."""
    path = Path(output).expanduser() / f"{run_name}.pt"
    x, y = _as_tensors(train, sp.image_size)
    fp = _fingerprint(x.numpy(), y.numpy())
    _check_resume(path, fp, sp)
    return path, x, y, fp


def _seed_torch(seed: int, run_name: str) -> None:
    torch.manual_seed(int(np.random.default_rng([int(seed), stream_id(run_name)]).integers(2**62)))


def _fit_and_wrap(
    net: nn.Module, x: torch.Tensor, y: torch.Tensor, train: Any, sp: TrainingSpec, fp: str, path: Path, *,
    seed: int, device: str | torch.device, run_name: str, log: Callable[[str], None] | None,
    on_step: Callable[[int, int, int], None] | None, on_epoch: Any = None, meta: dict[str, Any] | None = None,
) -> TrainedModel:
    """Train ``net`` with the shared harness (checkpoint every epoch, resumable) and return it in eval mode."""
    dev = torch.device(device)
    if sp.recipe.crop_size:  # trained on random crops, evaluated on the centre crop (torchvision's CenterCrop)
        net = CentreCrop(sp.recipe.crop_size, net)
    net = net.to(dev)
    res = fit(
        net,
        n_train=len(y),
        batches=tensor_batches(x, y, sp.recipe.batch_size),
        recipe=sp.recipe,
        seed=seed,
        stream=stream_id(run_name),
        checkpoint=path,
        device=dev,
        on_step=on_step,
        on_epoch=on_epoch,
        meta={"classes": list(train.classes), "spec": sp.to_dict(), "data_fingerprint": fp, "seed": int(seed), **(meta or {})},
        label=run_name,
        log=log,
    )
    net.eval()
    return TrainedModel(net, tuple(train.classes), sp, res, path)


class CentreCrop(nn.Module):
    """``net`` on the centre ``size`` x ``size`` crop of its input (offsets ``int(round(d / 2))``, as torchvision's
    CenterCrop); inputs of that size pass unchanged (the random training crops)."""

    def __init__(self, size: int, net: nn.Module) -> None:
        super().__init__()
        self.size = int(size)
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = int(x.shape[-2]), int(x.shape[-1])
        top, left = int(round((h - self.size) / 2.0)), int(round((w - self.size) / 2.0))
        return self.net(x[..., top : top + self.size, left : left + self.size])


class HeadOnly(nn.Module):
    """A frozen backbone (kept in eval mode: batch-norm statistics do not move) and a trainable head."""

    def __init__(self, backbone: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head
        for p in self.backbone.parameters():
            p.requires_grad_(False)

    def train(self, mode: bool = True) -> HeadOnly:
        super().train(mode)
        self.backbone.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            f = self.backbone(x)
        return self.head(torch.flatten(f, 1))


def _split_head(net: nn.Module, head: str) -> tuple[nn.Module, nn.Linear]:
    parent: nn.Module = net
    parts = head.split(".")
    for p in parts[:-1]:
        parent = getattr(parent, p)
    last = getattr(parent, parts[-1], None)
    if not isinstance(last, nn.Linear):
        raise InvalidArgumentError("head", head, "the attribute path of the network's final nn.Linear (e.g. 'fc', 'classifier.1', 'head')")
    return parent, last


def finetune_classifier(
    pretrained: nn.Module,
    train: Any,
    spec: TrainingSpec | str,
    output: str | Path,
    *,
    head: str = "fc",
    seed: int = 0,
    device: str | torch.device = "cpu",
    log: Callable[[str], None] | None = None,
    on_step: Callable[[int, int, int], None] | None = None,
    run_name: str = "finetune",
) -> TrainedModel:
    """Fine-tune a pretrained ImageNet-1K classifier to predict ``train.classes`` (ImageNet-22K superclasses).

    The final linear layer (attribute path ``head``) is replaced by a new one with one output per class;
    ``spec.finetune == "head"`` trains only that layer (frozen backbone in eval mode), ``"full"`` everything.
    Resumable like :func:`train_classifier`.
    """
    sp = get_recipe(spec) if isinstance(spec, str) else spec
    if sp.finetune not in ("head", "full"):
        raise InvalidArgumentError("spec", sp.name, "a fine-tuning recipe (imagenet22k-head, finetune-head, finetune-full, "
                                   "clahe-finetune or stability-finetune)")
    path, x, y, fp = _prepare(train, sp, output, run_name)
    parent, old = _split_head(pretrained, head)
    _seed_torch(seed, run_name)
    new = nn.Linear(old.in_features, len(train.classes))
    if sp.finetune == "head":
        setattr(parent, head.split(".")[-1], nn.Identity())
        net: nn.Module = HeadOnly(pretrained, new)
    else:
        setattr(parent, head.split(".")[-1], new)
        net = pretrained
    return _fit_and_wrap(net, x, y, train, sp, fp, path, seed=seed, device=device, run_name=run_name, log=log,
                         on_step=on_step, meta={"head": head})


def load_trained(path: str | Path, device: str | torch.device = "cpu") -> TrainedModel:
    """A model written by :func:`train_classifier` (weights-only checkpoint), ready to evaluate."""
    ck = load_checkpoint(Path(path), device)
    try:
        sd = ck["spec"]
        sp = TrainingSpec(sd["name"], sd["arch"], float(sd["dropout"]), int(sd["image_size"]), Recipe(**{**sd["recipe"], "mean": tuple(sd["recipe"]["mean"]), "std": tuple(sd["recipe"]["std"])}), sd["finetune"])
        classes = tuple(ck["classes"])
    except (KeyError, TypeError) as e:
        raise DataError(f"checkpoint {str(path)!r} was not written by train_classifier (missing {e})") from e
    if sp.finetune is not None:
        raise DataError(f"checkpoint {str(path)!r} is a fine-tuned model: rebuild the pretrained network and load its 'model' weights")
    net = build_network(sp.arch, 3, len(classes), dropout=sp.dropout).to(device)
    if sp.recipe.crop_size:
        net = CentreCrop(sp.recipe.crop_size, net)
    net.load_state_dict(ck["model"])
    net.eval()
    res = FitResult(net, int(ck["epoch"]), float(ck.get("seconds", 0.0)), list(ck.get("history", [])), int(ck["epoch"]), Path(path))
    return TrainedModel(net, classes, sp, res, Path(path))
