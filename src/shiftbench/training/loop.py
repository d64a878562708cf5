"""The shared training loop: seeded, resumable after ``kill -9``, with progress.

Used by the overlap study (:mod:`shiftbench.overlap.harness`) and the structural
recipes (:mod:`shiftbench.training.recipes`).

Reproducibility: the order of the training images, their flips and crop offsets
in epoch ``e`` come from ``numpy.random.default_rng([seed, e, stream])`` and the
torch generator (dropout) is re-seeded from the same triple at the start of each
epoch, so an epoch's updates depend only on the weights it starts from. A run
killed at any moment and started again continues from the last finished epoch
(the checkpoint is written to a temporary file, flushed and renamed: a kill never
leaves half a checkpoint) and ends with the same weights as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import DataError, InvalidArgumentError

__all__ = [
    "Recipe",
    "EpochLog",
    "FitResult",
    "SCHEDULES",
    "fit",
    "lr_at",
    "stream_id",
    "save_checkpoint",
    "load_checkpoint",
    "tensor_batches",
    "random_crop",
    "crop_at",
    "stability_loss",
    "normaliser",
    "MIXES",
]

SCHEDULES = ("step", "cosine", "constant")
MIXES = ("", "beta")

Batches = Callable[[np.ndarray], Iterable[tuple[np.ndarray, torch.Tensor, torch.Tensor]]]


@dataclass
class Recipe:
    """How to train: optimiser, schedule and augmentation.

    Attributes:
        epochs, batch_size, lr, momentum, weight_decay: SGD settings.
        nesterov: Nesterov momentum (the structural papers' recipes).
        schedule: ``"step"`` (``lr * gamma ** #milestones passed``, set per epoch),
            ``"cosine"`` (per step from ``lr`` down to ``lr_min`` over the whole run, as
            the authors' ICONS-50 and CIFAR-100 scripts) or ``"constant"``.
        hflip: random horizontal flips (one draw per image and epoch).
        crop_padding: random crops of the original size from the image zero-padded by
            this many pixels (4 in the papers; 0: no crops).
        mean, std: per-channel input normalisation of [0, 1] images.
        crop_size: random crops of this side from the (larger) training images, without padding,
            as torchvision's ``RandomCrop(crop_size)`` after ``Resize``; 0: none. Drawn from their
            own stream (the other draws of an epoch are those of a recipe without it).
        mix: ``""`` or ``"beta"``: every training image is mixed with another image of its batch,
            ``t x + (1 - t) x[perm]`` with ``t ~ Beta(1, 1)`` per image, and the loss is
            ``mean(t CE(y)) + mean((1 - t) CE(y[perm]))``, as the authors' CIFAR-100 script
            (``old/auxiliary/CIFAR100/train.py``); drawn from their own stream.
        preprocess: ``""`` or a preprocessing of :mod:`shiftbench.evaluation.testtime` (``"clahe"``,
            ``"nlm-denoise"``) applied to every 8-bit training batch (after flips and crops); evaluate the
            model with the same ``--preprocess``.
        stability: ``(noise, weight)``: stability training (Zheng et al., 2016, as Hendrycks & Dietterich
            fine-tune with it): the loss adds ``weight`` times the cross-entropy from the clean image's
            softmax to that of the image with uniform noise in ``[-noise, noise]`` (in [0, 1] units) added;
            the noise is drawn from its own stream.
    """

    epochs: int = 50
    batch_size: int = 128
    lr: float = 0.1
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 5e-4
    schedule: str = "cosine"
    milestones: list[int] = field(default_factory=list)
    gamma: float = 0.1
    lr_min: float = 1e-6
    hflip: bool = True
    crop_padding: int = 4
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.25, 0.25, 0.25)
    crop_size: int = 0
    mix: str = ""
    preprocess: str = ""
    stability: tuple[float, float] | None = None

    def check(self, where: str = "recipe") -> Recipe:
        for k in ("epochs", "batch_size"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidArgumentError(f"{where}.{k}", v, "an integer >= 1")
        if self.schedule not in SCHEDULES:
            raise InvalidArgumentError(f"{where}.schedule", self.schedule, f"one of {', '.join(SCHEDULES)}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise InvalidArgumentError(f"{where}.lr", self.lr, "a number > 0")
        if isinstance(self.crop_padding, bool) or not isinstance(self.crop_padding, int) or self.crop_padding < 0:
            raise InvalidArgumentError(f"{where}.crop_padding", self.crop_padding, "an integer >= 0")
        if isinstance(self.crop_size, bool) or not isinstance(self.crop_size, int) or self.crop_size < 0:
            raise InvalidArgumentError(f"{where}.crop_size", self.crop_size, "an integer >= 0 (0: no random crops)")
        if self.mix not in MIXES:
            raise InvalidArgumentError(f"{where}.mix", self.mix, "'' (none) or 'beta' (the authors' CIFAR-100 input mixing)")
        if self.preprocess not in ("", "clahe", "nlm-denoise"):
            raise InvalidArgumentError(f"{where}.preprocess", self.preprocess, "'', 'clahe' or 'nlm-denoise'")
        if self.stability is not None:
            st = tuple(self.stability)
            if len(st) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in st):
                raise InvalidArgumentError(f"{where}.stability", self.stability, "None or (noise > 0, weight > 0)")
            self.stability = (float(st[0]), float(st[1]))
        return self

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mean"], d["std"] = list(self.mean), list(self.std)
        return d


@dataclass
class EpochLog:
    """What one finished epoch reports (to ``on_epoch`` and the checkpoint's history)."""

    epoch: int  # 1-based, the number of epochs done
    epochs: int
    loss: float
    accuracy: float
    seconds: float  # training time of the whole run so far
    lr: float


@dataclass
class FitResult:
    model: nn.Module
    epochs_done: int
    seconds: float
    history: list[dict[str, float]]
    resumed_from: int
    checkpoint: Path


def stream_id(name: str) -> int:
    """A stable 32-bit number for a run's name (its random stream, next to the seed)."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)


def lr_at(recipe: Recipe, epoch: int, step: int = 0, steps_per_epoch: int = 1) -> float:
    """The learning rate of update ``step`` (0-based within the epoch) of epoch ``epoch`` (0-based)."""
    if recipe.schedule == "constant":
        return recipe.lr
    if recipe.schedule == "step":
        return recipe.lr * recipe.gamma ** sum(1 for m in recipe.milestones if epoch >= m)
    total = recipe.epochs * steps_per_epoch
    t = (epoch * steps_per_epoch + step) / max(1, total)
    return recipe.lr_min + (recipe.lr - recipe.lr_min) * 0.5 * (1.0 + math.cos(math.pi * t))


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically: a temporary file in the same folder, flushed to disk, renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_checkpoint(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors and plain data only)."""
    try:
        ck = torch.load(Path(path), map_location=device, weights_only=True)
    except FileNotFoundError:
        raise DataError(f"checkpoint {str(path)!r} not found") from None
    except Exception as e:  # noqa: BLE001  (torch raises many types for a damaged or unsafe file)
        raise DataError(f"checkpoint {str(path)!r} is not a readable weights-only checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(ck, dict):
        raise DataError(f"checkpoint {str(path)!r} holds {type(ck).__name__}, not a state dict")
    return ck


def tensor_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int) -> Batches:
    """Batches of in-memory uint8 ``N x C x H x W`` images in the order given."""

    def gen(order: np.ndarray) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
        for i in range(0, len(order), batch_size):
            c = order[i : i + batch_size]
            ct = torch.from_numpy(c)
            yield c, x[ct], y[ct]

    return gen


def random_crop(xb: torch.Tensor, offsets: np.ndarray, padding: int) -> torch.Tensor:
    """Crop every image of ``xb`` back to its size from the image zero-padded by ``padding``,
    at ``offsets[i] = (dy, dx)`` in ``0..2 * padding``."""
    if padding == 0:
        return xb
    h, w = xb.shape[-2:]
    p = F.pad(xb, (padding, padding, padding, padding))
    return torch.stack([p[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())])


def stability_loss(clean_logits: torch.Tensor, noisy_logits: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy from the clean softmax to the noisy one, ``-sum p_clean log p_noisy`` (stability training)."""
    return -(torch.softmax(clean_logits, 1) * torch.log_softmax(noisy_logits, 1)).sum(1).mean()


def _preprocessor(name: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    if not name:
        return None
    from ..evaluation import testtime

    fn = {"clahe": testtime.clahe, "nlm-denoise": testtime.nlm_denoise}[name]

    def run(xb: torch.Tensor) -> torch.Tensor:
        if xb.dtype != torch.uint8:
            raise InvalidArgumentError("recipe.preprocess", name, "8-bit training images (the preprocessing works on levels)")
        return fn(xb)

    return run


def crop_at(xb: torch.Tensor, where: np.ndarray, size: int) -> torch.Tensor:
    """``size`` x ``size`` crops of every image of ``xb`` at ``where[i] = (u, v)`` in [0, 1): offsets
    ``floor(u * (H - size + 1))``, ``floor(v * (W - size + 1))`` (a uniform choice, as ``RandomCrop``)."""
    h, w = int(xb.shape[-2]), int(xb.shape[-1])
    if size > min(h, w):
        raise InvalidArgumentError("crop_size", size, f"at most the training images' side ({min(h, w)})")
    dys = np.floor(where[:, 0] * (h - size + 1)).astype(np.int64)
    dxs = np.floor(where[:, 1] * (w - size + 1)).astype(np.int64)
    return torch.stack([xb[i, :, dy : dy + size, dx : dx + size] for i, (dy, dx) in enumerate(zip(dys.tolist(), dxs.tolist()))])


def normaliser(mean: Iterable[float], std: Iterable[float]) -> Callable[[torch.Tensor], torch.Tensor]:
    """uint8 or [0, 1] images -> ``(x - mean) / std`` per channel (one value for all channels on 1-channel data)."""
    m = torch.tensor(list(mean), dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(list(std), dtype=torch.float32).view(1, -1, 1, 1)

    def norm(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.uint8:
            x = x.to(torch.float32) / 255.0
        mm, ss = (m, s) if x.shape[1] == m.shape[1] else (m[:, :1], s[:, :1])
        return (x - mm.to(x.device)) / ss.to(x.device)

    return norm


def _batch_loss(
    net: nn.Module, xb: torch.Tensor, yb: torch.Tensor, norm: Callable[[torch.Tensor], torch.Tensor], recipe: Recipe,
    mixer: np.random.Generator | None, jitter: np.random.Generator | None, dev: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits of one training batch and its loss: cross-entropy, with the recipe's input mixing (``mix``) and
    stability term (``stability``) where it asks for them."""
    xn = norm(xb)
    if mixer is not None:
        t = torch.from_numpy(mixer.beta(1.0, 1.0, size=len(yb)).astype(np.float32)).to(dev)
        perm = torch.from_numpy(mixer.permutation(len(yb))).to(dev)
        logits = net(t.view(-1, 1, 1, 1) * xn + (1 - t.view(-1, 1, 1, 1)) * xn[perm])
        loss = (t * F.cross_entropy(logits, yb, reduction="none")).mean() + (
            (1 - t) * F.cross_entropy(logits, yb[perm], reduction="none")
        ).mean()
    else:
        logits = net(xn)
        loss = F.cross_entropy(logits, yb)
    if jitter is not None:
        assert recipe.stability is not None
        noise, weight = recipe.stability
        u = torch.from_numpy(jitter.uniform(-noise, noise, size=tuple(xb.shape)).astype(np.float32)).to(dev)
        x01 = xb.to(torch.float32) / 255.0 if xb.dtype == torch.uint8 else xb.to(torch.float32)
        noisy = net(norm((x01 + u).clamp(0, 1)))
        loss = loss + weight * stability_loss(logits, noisy)
    return logits, loss


def fit(
    net: nn.Module,
    *,
    n_train: int,
    batches: Batches,
    recipe: Recipe,
    seed: int,
    stream: int,
    checkpoint: Path,
    device: torch.device | str = "cpu",
    normalise: Callable[[torch.Tensor], torch.Tensor] | None = None,
    resume: bool = True,
    batch_hook: Callable[[np.ndarray, torch.Tensor, int], torch.Tensor] | None = None,
    on_epoch: Callable[[EpochLog], None] | None = None,
    on_step: Callable[[int, int, int], None] | None = None,
    meta: dict[str, Any] | None = None,
    label: str = "model",
    log: Callable[[str], None] | None = None,
    params: Iterable[torch.nn.Parameter] | None = None,
) -> FitResult:
    """Train ``net`` (already built and initialised) for ``recipe.epochs`` epochs, checkpointing each.

    Args:
        n_train: number of training images; ``batches(order)`` yields ``(indices, uint8
            images N x C x H x W, labels)`` for a permutation of ``range(n_train)``.
        seed, stream: the random streams (see the module docstring); ``stream`` tells
            runs with the same seed apart (:func:`stream_id` of the run's name).
        checkpoint: where the model, optimiser and history are saved after every epoch.
        resume: continue from ``checkpoint`` when it exists (else it is overwritten).
        batch_hook: ``(indices, images, epoch) -> images`` after flips and crops (the
            overlap study corrupts part of each batch here).
        on_epoch / on_step: progress callbacks (``on_step(epoch, step, steps)``).
        meta: plain data stored in the checkpoint next to the weights.
        params: the parameters to optimise (default all; fine-tuning a head passes the head's).
    """
    say = log or (lambda s: None)
    recipe.check()
    dev = torch.device(device)
    norm = normalise or normaliser(recipe.mean, recipe.std)
    trainable = list(params) if params is not None else [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.SGD(
        trainable, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay, nesterov=recipe.nesterov and recipe.momentum > 0
    )
    path = Path(checkpoint)
    start, seconds, history = 0, 0.0, []
    if resume and path.is_file():
        ck = load_checkpoint(path, dev)
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        start = int(ck["epoch"])
        seconds = float(ck.get("seconds", 0.0))
        history = list(ck.get("history", []))[:start]
        if start < recipe.epochs:
            say(f"  {label}: resuming after epoch {start}/{recipe.epochs}")
    steps = max(1, math.ceil(n_train / recipe.batch_size))
    for epoch in range(start, recipe.epochs):
        t0 = time.perf_counter()
        net.train()
        rng = np.random.default_rng([int(seed), epoch, int(stream)])
        torch.manual_seed(int(np.random.default_rng([int(seed), epoch, int(stream), 1]).integers(2**62)))
        order = rng.permutation(n_train)
        flips = rng.random(n_train) < 0.5
        offsets = rng.integers(0, 2 * recipe.crop_padding + 1, size=(n_train, 2)) if recipe.crop_padding else None
        # draws of the newer options come from streams of their own, so the draws above stay as they were
        crops = np.random.default_rng([int(seed), epoch, int(stream), 2]).random((n_train, 2)) if recipe.crop_size else None
        mixer = np.random.default_rng([int(seed), epoch, int(stream), 3]) if recipe.mix else None
        jitter = np.random.default_rng([int(seed), epoch, int(stream), 4]) if recipe.stability else None
        prep = _preprocessor(recipe.preprocess)
        tot_loss, tot_ok, tot_n = 0.0, 0, 0
        lr = lr_at(recipe, epoch, 0, steps)
        for step, (idx, xb, yb) in enumerate(batches(order)):
            lr = lr_at(recipe, epoch, step, steps)
            for g in opt.param_groups:
                g["lr"] = lr
            xb, yb = xb.to(dev), yb.to(dev)
            if recipe.hflip:
                f = torch.from_numpy(flips[idx]).to(dev)
                xb = torch.where(f.view(-1, 1, 1, 1), xb.flip(-1), xb)
            if offsets is not None:
                xb = random_crop(xb, offsets[idx], recipe.crop_padding)
            if crops is not None:
                xb = crop_at(xb, crops[idx], recipe.crop_size)
            if batch_hook is not None:
                xb = batch_hook(idx, xb, epoch)
            if prep is not None:
                xb = prep(xb)
            logits, loss = _batch_loss(net, xb, yb, norm, recipe, mixer, jitter, dev)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot_loss += float(loss.detach()) * len(idx)
            tot_ok += int((logits.argmax(1) == yb).sum())
            tot_n += len(idx)
            if on_step is not None:
                on_step(epoch, step + 1, steps)
        seconds += time.perf_counter() - t0
        ep = EpochLog(epoch + 1, recipe.epochs, tot_loss / max(1, tot_n), tot_ok / max(1, tot_n), seconds, lr)
        history.append(asdict(ep))
        save_checkpoint(
            path,
            {
                **(meta or {}),
                "model": net.state_dict(),
                "optimizer": opt.state_dict(),
                "epoch": epoch + 1,
                "seconds": seconds,
                "history": history,
                "recipe": recipe.to_dict(),
            },
        )
        if on_epoch is not None:
            on_epoch(ep)
        say(f"  {label}: epoch {epoch + 1}/{recipe.epochs} loss {ep.loss:.3f} train acc {ep.accuracy:.3f} ({seconds:.0f} s)")
    return FitResult(net, recipe.epochs, seconds, history, start, path)
