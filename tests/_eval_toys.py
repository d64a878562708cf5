"""Tiny, fast, deterministic models and data for the evaluation tests."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from shiftbench.evaluation import Classifier, InputTransform, imagenet_wnids

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PAPER_000 = SHARED / "papers" / "000_430187b989425aff.txt"
SAMPLE_DIR = SHARED / "data" / "imagenet-sample-100"

RAW = InputTransform(None, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 255.0)
"""Pass-through transform (0..1 input, any size)."""


class ColourNet(torch.nn.Module):
    """Logits from a 4x4 colour thumbnail through a fixed random linear layer (fast, deterministic)."""

    def __init__(self, n_classes: int = 1000, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.nn.Parameter(torch.randn(n_classes, 48, generator=g))
        self.bias = torch.nn.Parameter(torch.randn(n_classes, generator=g) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional.adaptive_avg_pool2d(x, 4).flatten(1)
        return f @ self.weight.T + self.bias


def toy_classifier(name: str = "toy", seed: int = 0, n_classes: int = 1000) -> Classifier:
    """A :class:`ColourNet` over the 1000 ImageNet classes (or ``n_classes`` anonymous ones)."""
    classes = imagenet_wnids() if n_classes == 1000 else [str(i) for i in range(n_classes)]
    return Classifier(ColourNet(n_classes, seed), name=name, transform=RAW, classes=classes)


def image_folder(root: Path, n_per_class: int = 2, n_classes: int = 2) -> Path:
    """An ImageFolder of real photos (copied from the shared sample set into ``root``)."""
    photos = sorted(SAMPLE_DIR.glob("*.JPEG"))
    for c in range(n_classes):
        p = photos[c * 10]
        wnid = p.name.split("_")[0]
        d = root / wnid
        d.mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            shutil.copy(photos[c * 10 + i], d / f"img{i}.JPEG")
    return root


def released_tree(
    root: Path, corruptions: list[str], severities: list[int], classes: list[str], n: int = 2, size: int = 64
) -> Path:
    """A fake released tree ``<root>/<corruption>/<s>/<class>/<file>.JPEG`` of random JPEGs."""
    rng = np.random.default_rng(0)
    for c in corruptions:
        for s in severities:
            for cls in classes:
                d = root / c / str(s) / cls
                d.mkdir(parents=True, exist_ok=True)
                for i in range(n):
                    a = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
                    Image.fromarray(a).save(d / f"{cls}_{i}.JPEG", quality=85)
    return root


def truncated_jpeg(path: Path) -> None:
    """Write a JPEG cut in half (decoding it fails)."""
    buf = io.BytesIO()
    Image.fromarray(np.full((300, 300, 3), 120, np.uint8)).save(buf, format="JPEG")
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])


# -- one benchmark's summary through shiftbench.evaluate (the Python twin of `shiftbench evaluate`) -------------


class _Callback:
    """A ``callback(done, total[, label])`` as the driver's progress display (tests that count progress)."""

    def __init__(self, callback: Any) -> None:
        self.callback, self.done, self.total = callback, 0, 0

    def start(self, total: int, description: str) -> None:
        self.total = total

    def advance(self, n: int, description: str) -> None:
        self.done += n
        try:
            self.callback(self.done, self.total, description)
        except TypeError:
            self.callback(self.done, self.total)

    def stop(self) -> None:
        pass


def summary_of(benchmark: str, model: Any, **kw: Any) -> Any:
    """``shiftbench.evaluate(model, benchmark, **kw).summary`` (a ``progress`` callable becomes a Progress)."""
    import shiftbench

    p = kw.get("progress")
    if p is not None and callable(p) and not hasattr(p, "start"):
        kw["progress"] = _Callback(p)
    return shiftbench.evaluate(model, benchmark, **kw).summary


def evaluate_c(model: Any = "efficientnet-lite0", *, benchmark: str = "imagenet-c", **kw: Any) -> Any:
    """ImageNet-C's summary (:class:`shiftbench.benchmarks.imagenet_c.EvaluationResult`)."""
    return summary_of(benchmark, model, **kw)


def evaluate_p(model: Any = "efficientnet-lite0", **kw: Any) -> Any:
    """ImageNet-P's summary (:class:`shiftbench.perturbations.pipeline.PEvaluationResult`)."""
    return summary_of("imagenet-p", model, **kw)


def evaluate_noc(model: Any = "efficientnet-lite0", *, benchmark: Any = None, **kw: Any) -> Any:
    """ImageNet-NOC's summary (a saved benchmark: ``benchmark=`` its file)."""
    if benchmark is not None:
        kw["corruptions"] = str(benchmark)
    return summary_of("imagenet-noc", model, **kw)


def evaluate_imagenet_d(model: Any, data: Any, **kw: Any) -> Any:
    """ImageNet-D's summary (:class:`shiftbench.domains.ImageNetDResult`); no store unless given."""
    kw.setdefault("store", None)
    return summary_of("imagenet-d", model, data=data, **kw)
