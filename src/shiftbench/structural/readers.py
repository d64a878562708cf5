"""Readers of the structural-robustness datasets, all into one in-memory form.

Every reader returns :class:`LabelledImages`: uint8 images ``(N, H, W, 3)``, the
label of each image (an index into ``classes``, the *superclass* of the subclass
experiments), its ``subtypes`` (the subclass: an ICONS-50 subtype, a CIFAR-100
fine class, an ImageNet wnid) and, where the dataset has them, its ``styles``.

Formats:

* ICONS-50 ``Icons-50.npy`` (Hendrycks & Dietterich 2019): an NPY file holding a
  pickled dict with ``class`` (0..49, the classes in Appendix E order), ``style``,
  ``image`` (N x 3 x 32 x 32), ``rendition`` and ``subtype``; unpickled with
  :mod:`shiftbench.safe_pickle` (no code in the file can run).
* ICONS-50 folder release: ``<root>/<class>/<style>_<subtype>_<rendition>.png``
  (the convention the authors' training script relies on when it matches a style
  or a rendition in the file path).
* emoji-styles (``shared/data/emoji-styles``): ``emoji-styles-32.npz`` /
  ``-64.npz`` with ``images``, ``class``, ``subtype``, ``style`` and extras.
* CIFAR-100 "python version": ``<root>/train`` and ``<root>/test`` pickles with
  ``data``, ``fine_labels``, ``coarse_labels`` (``meta`` holds the names).
* ImageNet-22K / ImageNet-1K wnid folder trees (``<root>/<wnid>/*.JPEG``), read by
  :func:`read_wnid_tree` against a superclass split.

Every file that cannot be read gives :class:`~shiftbench.errors.DataError` naming it.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import safe_pickle
from ..errors import DataError, InvalidArgumentError
from ..io import check_cifar100_labels, image_array, image_rgb, label_array, wide_levels

__all__ = [
    "LabelledImages",
    "ICONS50_CLASSES",
    "CIFAR100_COARSE",
    "CIFAR100_FINE",
    "read_icons50",
    "read_icons50_npy",
    "read_icons50_folder",
    "read_emoji_styles",
    "read_cifar100",
    "read_image_files",
    "read_wnid_tree",
]

# Appendix E of the paper, in its (alphabetical) order, which is also the label order of
# the released Icons-50.npy (``class`` 0..49) and of the folder release read by ImageFolder.
ICONS50_CLASSES: tuple[str, ...] = (
    "Airplane", "Arrow Directions", "Ball", "Biking", "Bird", "Blade", "Boat", "Books", "Building",
    "Bunny Ears", "Cartwheeling", "Clock", "Cloud", "Disk", "Drink", "Emotion Face", "Envelope", "Family",
    "Fast Train", "Feline", "Flag", "Flower", "Footwear", "Golfing", "Hand", "Hat", "Heart", "Holding Hands",
    "Japanese Ideograph", "Kiss", "Lock", "Mailbox", "Marine Animal", "Medal", "Money", "Monkey", "Moon",
    "Mountain", "Numbers", "Phone", "Prohibit Sign", "Star", "Surfing", "Tree", "Umbrella", "Vehicle",
    "Water Polo", "Worker", "Wrestling", "Writing Utensil",
)  # fmt: skip

# CIFAR-100's label names (its ``meta`` file; Krizhevsky 2009), index = label.
CIFAR100_COARSE: tuple[str, ...] = (
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
    "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
    "large_man-made_outdoor_things", "large_natural_outdoor_scenes", "large_omnivores_and_herbivores",
    "medium_mammals", "non-insect_invertebrates", "people", "reptiles", "small_mammals", "trees",
    "vehicles_1", "vehicles_2",
)  # fmt: skip
CIFAR100_FINE: tuple[str, ...] = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle", "bowl",
    "boy", "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle", "chair",
    "chimpanzee", "clock", "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur", "dolphin",
    "elephant", "flatfish", "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard", "lamp",
    "lawn_mower", "leopard", "lion", "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain",
    "mouse", "mushroom", "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck",
    "pine_tree", "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road",
    "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider",
    "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone", "television",
    "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf",
    "woman", "worm",
)  # fmt: skip

_IMG_EXT = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".pgm", ".tif", ".tiff"}  # torchvision's, and gif


@dataclass(frozen=True)
class LabelledImages:
    """Images with a class (superclass) label, a subtype (subclass) and, optionally, a style.

    Attributes:
        name: what was read (dataset and path), for messages and result files.
        images: ``(N, H, W, 3)`` uint8.
        labels: ``(N,)`` int64, an index into ``classes``.
        classes: the class names (label order).
        subtypes: ``(N,)`` str, the subclass of each image.
        styles: ``(N,)`` str, or ``None`` when the dataset has no styles.
        extra: further ``(N,)`` metadata columns (``rendition``, ``vendor``, ``file``...).
    """

    name: str
    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    subtypes: np.ndarray
    styles: np.ndarray | None = None
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.images)
        if self.images.ndim != 4 or self.images.shape[-1] != 3 or self.images.dtype != np.uint8:
            raise DataError(f"{self.name}: images must be (N, H, W, 3) uint8, got {self.images.shape} {self.images.dtype}")
        cols = {"labels": self.labels, "subtypes": self.subtypes, **dict(self.extra)}
        if self.styles is not None:
            cols["styles"] = self.styles
        for k, v in cols.items():
            if len(v) != n:
                raise DataError(f"{self.name}: {k} has {len(v)} entries for {n} images")
        if n and (self.labels.min() < 0 or self.labels.max() >= len(self.classes)):
            raise DataError(f"{self.name}: labels outside 0..{len(self.classes) - 1}")

    def __len__(self) -> int:
        return len(self.images)

    @property
    def class_names(self) -> np.ndarray:
        """``(N,)`` the class name of each image."""
        return np.asarray(self.classes, dtype=object)[self.labels].astype(str)

    def subset(self, idx: np.ndarray | Sequence[int]) -> LabelledImages:
        """The images at ``idx`` (same classes, so labels keep their meaning)."""
        i = np.asarray(idx, dtype=np.int64)
        return LabelledImages(
            self.name,
            self.images[i],
            self.labels[i],
            self.classes,
            self.subtypes[i],
            None if self.styles is None else self.styles[i],
            {k: v[i] for k, v in self.extra.items()},
        )

    def resized(self, size: int) -> LabelledImages:
        """The same images at ``size`` x ``size`` (Pillow bilinear, as torchvision's Resize)."""
        if self.images.shape[1:3] == (size, size):
            return self
        from PIL import Image

        out = np.stack(
            [np.asarray(Image.fromarray(im).resize((size, size), Image.BILINEAR)) for im in self.images]
        ) if len(self) else np.zeros((0, size, size, 3), np.uint8)
        return LabelledImages(self.name, out, self.labels, self.classes, self.subtypes, self.styles, self.extra)


# ---------------------------------------------------------------------------------------------
# ICONS-50


def _str_array(values: Iterable[Any], source: str, key: str) -> np.ndarray:
    out = []
    for v in values:
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if not isinstance(v, (str, np.str_)):
            raise DataError(f"{source}: {key!r} must hold strings, found {type(v).__name__} {v!r}")
        out.append(str(v))
    return np.array(out, dtype=str)


def _unpickle_npy(path: Path) -> Any:
    """A pickled object stored in an NPY file (``np.save`` of a dict), through the restricted unpickler."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{str(path)!r} cannot be read: {e.strerror or e}") from e
    if not raw.startswith(b"\x93NUMPY"):
        return safe_pickle.load(io.BytesIO(raw), source=repr(str(path)), encoding="latin1")
    f = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
    except (ValueError, OSError) as e:
        raise DataError(f"{str(path)!r}: not a readable NPY file ({e})") from e
    if dtype.hasobject:
        arr = safe_pickle.load(f, source=repr(str(path)), encoding="latin1")
    else:
        raise DataError(f"{str(path)!r}: holds a plain {dtype} array of shape {shape}, not the pickled ICONS-50 dict")
    if isinstance(arr, np.ndarray) and arr.shape == ():
        return arr.item()
    return arr


def read_icons50_npy(path: str | Path) -> LabelledImages:
    """The released ``Icons-50.npy`` (a pickled dict; see the module docstring)."""
    p = Path(path).expanduser()
    d = _unpickle_npy(p)
    src = repr(str(p))
    if not isinstance(d, dict):
        raise DataError(f"{src}: expected a dict with class, style, image, rendition, subtype; got {type(d).__name__}")
    missing = [k for k in ("class", "style", "image", "subtype") if k not in d]
    if missing:
        raise DataError(f"{src}: the ICONS-50 dict lacks {missing} (has {sorted(map(str, d))})")
    img = image_array(np.asarray(d["image"]) if isinstance(d["image"], np.ndarray) else d["image"], f"{src} 'image'",
                      layout="NCHW")  # fmt: skip
    n = len(img)
    cls = d["class"]
    if isinstance(cls, np.ndarray) and cls.dtype.kind in "iuf" or isinstance(cls, (list, tuple)) and cls and all(
        isinstance(v, (int, float, np.integer, np.floating)) for v in cls
    ):
        labels = label_array(cls, n, f"{src} 'class'")
        classes = ICONS50_CLASSES if labels.size == 0 or labels.max() < len(ICONS50_CLASSES) else tuple(
            str(i) for i in range(int(labels.max()) + 1)
        )
    else:
        names = _str_array(cls, src, "class")
        if len(names) != n:
            raise DataError(f"{src}: {len(names)} 'class' entries for {n} images; allowed: one per image")
        classes = tuple(sorted(set(names.tolist())))
        labels = np.searchsorted(np.array(classes), names).astype(np.int64)
    extra: dict[str, np.ndarray] = {}
    if "rendition" in d:
        extra["rendition"] = np.array([str(r) for r in d["rendition"]], dtype=str)
    return LabelledImages(
        f"ICONS-50 {p.name}",
        np.ascontiguousarray(img.transpose(0, 2, 3, 1)),
        labels,
        classes,
        _str_array(d["subtype"], src, "subtype"),
        _str_array(d["style"], src, "style"),
        extra,
    )


_ICON_NAME = re.compile(r"^(?P<style>[^_]+)_(?P<subtype>.+?)(?:_(?P<rendition>\d+))?$")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name).strip().lower()


def _decode(path: Path, size: int | None) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.load()
            wide = wide_levels(im, repr(str(path)))  # a 16-bit colour file at its exact levels
            im = Image.fromarray(wide) if wide is not None else im
            im = im.convert("RGBA") if im.mode in ("P", "LA", "RGBA") else im
            if im.mode == "RGBA":  # icons with transparency: composite on white, as rendered icons are shown
                bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(bg, im)
            rgb = image_rgb(im, repr(str(path)))
            if size is not None and rgb.size != (size, size):
                rgb = rgb.resize((size, size), Image.BILINEAR)
            return np.asarray(rgb, dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise DataError(f"{str(path)!r}: not a readable image ({e})") from e


def read_icons50_folder(root: str | Path, *, image_size: int = 32) -> LabelledImages:
    """The ICONS-50 folder release, read as the authors' script reads it: ``<root>/<class>/<file>``.

    ``old/Icons-50/train.py`` opens the release with torchvision's ``ImageFolder`` (one folder per class,
    any file name) and selects images by substrings of their paths: the test style (``'microsoft' in
    path``), the held-out subtypes, ``'_2'`` for a second rendition. So every image file of a class
    folder is read here too (dot-files and dot-folders aside), and ``extra["file"]`` keeps its path
    (``<class folder>/<file>``) for those substring matches (``match="paper"`` of the splits).
    A file named ``<style>_<subtype>[_<rendition>]`` also gets its style, subtype and rendition,
    which the exact-match splits use; other names get style ``""`` and their stem as the subtype.

    Class folders are matched to the Appendix E names ignoring case, ``_`` and ``-``
    (``emotion_face`` -> ``Emotion Face``); other folder names are kept as they are.
    Images are resized to ``image_size`` (the paper trains at 32 x 32).
    """
    r = Path(root).expanduser()
    if not r.is_dir():
        raise DataError(f"root={str(r)!r}: no such folder (expected one sub-folder per ICONS-50 class)")
    folders = sorted(d for d in r.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not folders:
        raise DataError(f"root={str(r)!r}: no class folders inside (expected <root>/<class>/<style>_<subtype>_<n>.png)")
    known = {_norm(c): c for c in ICONS50_CLASSES}
    names = [known.get(_norm(d.name), d.name) for d in folders]
    classes = tuple(sorted(set(names), key=lambda c: (c not in ICONS50_CLASSES, ICONS50_CLASSES.index(c) if c in ICONS50_CLASSES else 0, c)))
    imgs, labels, styles, subtypes, rend, files = [], [], [], [], [], []
    for d, cname in zip(folders, names):
        for f in sorted(d.iterdir()):
            if f.suffix.lower() not in _IMG_EXT or f.name.startswith(".") or not f.is_file():
                continue
            m = _ICON_NAME.match(f.stem)
            imgs.append(_decode(f, image_size))
            labels.append(classes.index(cname))
            styles.append(m["style"].lower() if m else "")
            subtypes.append(m["subtype"] if m else f.stem)
            rend.append((m["rendition"] or "") if m else "")
            files.append(f.relative_to(r).as_posix())
    if not imgs:
        raise DataError(f"root={str(r)!r}: the class folders hold no images ({', '.join(sorted(_IMG_EXT))})")
    return LabelledImages(
        f"ICONS-50 folder {r}",
        np.stack(imgs),
        np.array(labels, np.int64),
        classes,
        np.array(subtypes, dtype=str),
        np.array(styles, dtype=str),
        {"rendition": np.array(rend, dtype=str), "file": np.array(files, dtype=str)},
    )


def read_icons50(path: str | Path, *, image_size: int = 32) -> LabelledImages:
    """ICONS-50 from either release: ``Icons-50.npy`` or the folder of class folders."""
    p = Path(path).expanduser()
    if p.is_dir():
        npy = p / "Icons-50.npy"
        return read_icons50_npy(npy) if npy.is_file() else read_icons50_folder(p, image_size=image_size)
    if not p.exists():
        raise DataError(f"path={str(p)!r}: no such file or folder (expected Icons-50.npy or the folder release)")
    return read_icons50_npy(p)


# ---------------------------------------------------------------------------------------------
# emoji-styles


def read_emoji_styles(path: str | Path, *, size: int = 32) -> LabelledImages:
    """The emoji-styles stand-in (an ``.npz`` file, or its folder and ``size`` 32 or 64).

    ``styles`` are the emoji sets (``twemoji``, ``fluent-emoji-high-contrast``...);
    ``extra["vendor"]`` the vendors (``Microsoft``...), ``extra["codepoint"]`` the emoji.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        if size not in (32, 64):
            raise InvalidArgumentError("size", size, "32 or 64 (the emoji-styles files)")
        p = p / f"emoji-styles-{size}.npz"
    if not p.is_file():
        raise DataError(f"path={str(p)!r}: no such file (expected emoji-styles-32.npz or emoji-styles-64.npz)")
    try:
        with open(p, "rb") as fh, np.load(fh, allow_pickle=False) as z:
            cols = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(f"{str(p)!r}: not a readable .npz file ({e})") from e
    need = ("images", "class", "subtype", "style")
    missing = [k for k in need if k not in cols]
    if missing:
        raise DataError(f"{str(p)!r}: lacks the arrays {missing} (has {sorted(cols)})")
    images = image_array(cols["images"], f"{str(p)!r} 'images'")
    for k in ("class", "subtype", "style"):
        if cols[k].ndim != 1 or len(cols[k]) != len(images):
            raise DataError(f"{str(p)!r}: {k!r} of shape {cols[k].shape} for {len(images)} images; allowed: one per image")
    names = _str_array(cols["class"], repr(str(p)), "class")
    classes = tuple(sorted(set(names.tolist())))
    labels = np.searchsorted(np.array(classes), names).astype(np.int64)
    extra = {k: v.astype(str) for k, v in cols.items() if k not in (*need,) and v.ndim == 1}
    return LabelledImages(
        f"emoji-styles {p.name}",
        images,
        labels,
        classes,
        cols["subtype"].astype(str),
        cols["style"].astype(str),
        extra,
    )


# ---------------------------------------------------------------------------------------------
# CIFAR-100


def read_cifar100(root: str | Path, part: str = "train") -> LabelledImages:
    """One part (``"train"`` or ``"test"``) of the ``cifar-100-python`` release.

    Labels are the 20 coarse classes (superclasses), ``subtypes`` the fine class
    names, ``extra["fine_label"]`` the fine label indices.
    """
    if part not in ("train", "test"):
        raise InvalidArgumentError("part", part, "'train' or 'test'")
    r = Path(root).expanduser()
    if r.is_dir() and (r / "cifar-100-python").is_dir():
        r = r / "cifar-100-python"
    f = r / part
    if not f.is_file():
        raise DataError(f"root={str(root)!r}: {str(f)!r} not found (expected the cifar-100-python folder with train and test)")
    d = safe_pickle.load_file(f, encoding="bytes")
    src = repr(str(f))
    if not isinstance(d, dict):
        raise DataError(f"{src}: expected a dict with data, fine_labels, coarse_labels; got {type(d).__name__}")
    d = {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}
    missing = [k for k in ("data", "fine_labels", "coarse_labels") if k not in d]
    if missing:
        raise DataError(f"{src}: lacks {missing} (has {sorted(map(str, d))})")
    data = np.asarray(d["data"])
    if data.ndim != 2 or data.shape[1] != 3072 or data.dtype != np.uint8:
        raise DataError(f"{src}: 'data' must be N x 3072 uint8 (32x32 RGB planes), got {data.shape} {data.dtype}")
    fine = label_array(d["fine_labels"], len(data), f"{src} fine_labels", classes=100)
    coarse = label_array(d["coarse_labels"], len(data), f"{src} coarse_labels", classes=20)
    check_cifar100_labels(fine, coarse, src)
    return LabelledImages(
        f"CIFAR-100 {part} {r}",
        np.ascontiguousarray(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)),
        coarse,
        CIFAR100_COARSE,
        np.asarray(CIFAR100_FINE, dtype=object)[fine].astype(str),
        None,
        {"fine_label": fine},
    )


# ---------------------------------------------------------------------------------------------
# image files and wnid trees (ImageNet-22K, ImageNet-1K)


def read_image_files(
    files: Sequence[str | Path],
    labels: Sequence[int],
    classes: Sequence[str],
    subtypes: Sequence[str],
    *,
    image_size: int,
    name: str = "image files",
) -> LabelledImages:
    """Decode image files (RGB, resized to ``image_size``) into :class:`LabelledImages`."""
    imgs = [_decode(Path(f), image_size) for f in files]
    return LabelledImages(
        name,
        np.stack(imgs) if imgs else np.zeros((0, image_size, image_size, 3), np.uint8),
        np.asarray(labels, np.int64),
        tuple(classes),
        np.asarray(list(subtypes), dtype=str),
        None,
        {"file": np.asarray([str(f) for f in files], dtype=str)},
    )


def read_wnid_tree(
    root: str | Path,
    wnid_to_class: Mapping[str, str],
    classes: Sequence[str],
    *,
    image_size: int = 224,
    per_wnid: int | None = None,
    require: bool = False,
) -> LabelledImages:
    """Images of ``<root>/<wnid>/*`` for the wnids in ``wnid_to_class`` (a subclass -> superclass map).

    Args:
        root: an ImageNet-22K (or ImageNet-1K val/train) folder with one folder per wnid.
        wnid_to_class: which wnid folders to read and the superclass of each.
        classes: the superclass names (label order).
        per_wnid: read at most this many images per wnid (sorted file order).
        require: raise when a wnid of the map has no folder (default: skip it).
    """
    r = Path(root).expanduser()
    if not r.is_dir():
        raise DataError(f"root={str(r)!r}: no such folder (expected one sub-folder per wnid)")
    present = {d.name for d in r.iterdir() if d.is_dir()}
    if not any(re.fullmatch(r"n\d{8}", d) for d in present):
        raise DataError(f"root={str(r)!r}: no wnid folders (n########) inside")
    cls = list(classes)
    files: list[Path] = []
    labels: list[int] = []
    subs: list[str] = []
    for wnid in sorted(wnid_to_class):
        if wnid not in present:
            if require:
                raise DataError(f"root={str(r)!r}: the folder of {wnid} ({wnid_to_class[wnid]}) is missing")
            continue
        fs = sorted(f for f in (r / wnid).iterdir() if f.suffix.lower() in _IMG_EXT)
        if per_wnid is not None:
            fs = fs[:per_wnid]
        files += fs
        labels += [cls.index(wnid_to_class[wnid])] * len(fs)
        subs += [wnid] * len(fs)
    return read_image_files(files, labels, cls, subs, image_size=image_size, name=f"wnid tree {r}")
