"""Structural-robustness readers (real and generated files in each released format) and hold-out splits."""

from __future__ import annotations

import importlib.util
import io
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shiftbench.errors import DataError, InvalidArgumentError, UnknownNameError
from shiftbench.safe_pickle import UnsafePickleError
from shiftbench.structural import (
    CIFAR100_COARSE,
    CIFAR100_COARSE_TO_FINE,
    CIFAR100_FINE,
    ICONS50_CLASSES,
    PAPER_HELD_OUT_SUBTYPES,
    cifar100_held_out,
    cifar100_subclass_split,
    default_style,
    leave_one_style_out,
    paper_subtypes_for,
    read_cifar100,
    read_emoji_styles,
    read_icons50,
    read_icons50_folder,
    read_wnid_tree,
    style_holdout,
    subtype_holdout,
)

EMOJI = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "emoji-styles"
needs_emoji = pytest.mark.skipif(not (EMOJI / "emoji-styles-32.npz").is_file(), reason="shared emoji-styles data not present")


def _foolbox_data() -> Path | None:
    spec = importlib.util.find_spec("foolbox")
    if spec is None or spec.origin is None:
        return None
    d = Path(spec.origin).parent / "data"
    return d if d.is_dir() else None


# ---------------------------------------------------------------------------------------------
# a small ICONS-50 in both released forms


ICON_ROWS = [  # class, style, subtype, rendition
    ("Books", "apple", "books", "1"),
    ("Books", "microsoft", "books", "1"),
    ("Books", "apple", "blue_book", "1"),
    ("Books", "google", "blue_book", "2"),
    ("Monkey", "apple", "monkey", "1"),
    ("Monkey", "apple", "see_no_evil_monkey", "1"),
    ("Monkey", "microsoft", "see_no_evil_monkey", "1"),
    ("Monkey", "google", "monkey_face", "1"),
    ("Airplane", "apple", "small_airplane", "1"),
    ("Airplane", "microsoft", "airplane", "1"),
    ("Airplane", "google", "airplane", "2"),
    ("Airplane", "samsung", "airplane_departure", "1"),
]


def icons_dict(n_rows: list[tuple[str, str, str, str]] = ICON_ROWS) -> dict:
    rng = np.random.default_rng(0)
    return {
        "class": np.array([ICONS50_CLASSES.index(c) for c, *_ in n_rows]),
        "style": np.array([s for _, s, _, _ in n_rows]),
        "image": rng.integers(0, 256, (len(n_rows), 3, 32, 32), dtype=np.uint8),
        "rendition": np.array([r for *_, r in n_rows]),
        "subtype": np.array([t for _, _, t, _ in n_rows]),
    }


def write_icons_npy(tmp: Path) -> Path:
    p = tmp / "Icons-50.npy"
    np.save(p, icons_dict(), allow_pickle=True)  # the released file: an NPY holding a pickled dict
    return p


def write_icons_folder(tmp: Path) -> Path:
    root = tmp / "Icons-50"
    d = icons_dict()
    for i, (c, s, t, r) in enumerate(ICON_ROWS):
        f = root / c.lower().replace(" ", "_") / f"{s}_{t}_{r}.png"
        f.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(d["image"][i].transpose(1, 2, 0)).resize((64, 64)).save(f)
    return root


def test_icons50_npy_release_is_read_without_running_code(tmp_path: Path) -> None:
    x = read_icons50(write_icons_npy(tmp_path))
    d = icons_dict()
    assert x.images.shape == (12, 32, 32, 3) and x.images.dtype == np.uint8
    np.testing.assert_array_equal(x.images, d["image"].transpose(0, 2, 3, 1))
    assert x.classes == ICONS50_CLASSES and len(x.classes) == 50
    assert x.class_names.tolist() == [c for c, *_ in ICON_ROWS]
    assert x.styles.tolist() == [s for _, s, _, _ in ICON_ROWS]
    assert x.extra["rendition"].tolist() == [r for *_, r in ICON_ROWS]
    # a directory holding Icons-50.npy is read the same way
    assert read_icons50(tmp_path).subtypes.tolist() == x.subtypes.tolist()


def test_icons50_npy_bad_files_name_the_file(tmp_path: Path) -> None:
    good = write_icons_npy(tmp_path).read_bytes()
    trunc = tmp_path / "trunc.npy"
    trunc.write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match=re.escape(str(trunc))):
        read_icons50(trunc)

    class Evil:
        def __reduce__(self) -> tuple:
            return (print, ("pwned",))

    evil = tmp_path / "evil.npy"
    evil.write_bytes(pickle.dumps({"class": Evil()}))
    with pytest.raises(UnsafePickleError, match="builtins.print"):
        read_icons50(evil)
    plain = tmp_path / "plain.npy"
    np.save(plain, np.zeros((2, 2)))
    with pytest.raises(DataError, match="not the pickled ICONS-50 dict"):
        read_icons50(plain)
    lacking = tmp_path / "lacking.npy"
    np.save(lacking, {"class": np.array([0])}, allow_pickle=True)
    with pytest.raises(DataError, match="lacks"):
        read_icons50(lacking)
    with pytest.raises(DataError, match="no such file"):
        read_icons50(tmp_path / "nope.npy")


def test_icons50_folder_release(tmp_path: Path) -> None:
    root = write_icons_folder(tmp_path)
    x = read_icons50_folder(root)
    assert x.images.shape == (12, 32, 32, 3)  # resized to 32 x 32 as the paper trains
    assert x.classes == ("Airplane", "Books", "Monkey")  # folder names mapped to Appendix E names
    rows = sorted(zip(x.class_names.tolist(), x.styles.tolist(), x.subtypes.tolist(), x.extra["rendition"].tolist()))
    assert rows == sorted(ICON_ROWS)
    assert all(f.count("/") == 1 for f in x.extra["file"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no class folders"):
        read_icons50(empty)
    (root / "books" / "apple_broken_1.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="apple_broken_1.png"):
        read_icons50_folder(root)


def test_icons50_folder_is_read_as_the_authors_imagefolder(tmp_path: Path) -> None:
    """The authors' script reads the release with torchvision's ImageFolder (any file name under a class folder)
    and selects by substrings of the path; the reader keeps every image and its path, so 'paper' matching selects
    exactly the files the script's ``args.test_style in img_name`` selects."""
    from shiftbench.structural import style_holdout, subtype_holdout

    root = write_icons_folder(tmp_path)
    (root / "books" / "microsoft-books-2.jpg").write_bytes(b"")  # a name of another form, in another format
    Image.open(root / "books" / "apple_books_1.png").convert("RGB").save(root / "books" / "microsoft-books-2.jpg")
    (root / "books" / ".hidden.png").write_bytes(b"not read")
    (root / "books" / "notes.txt").write_text("not an image")
    x = read_icons50_folder(root)
    assert len(x) == 13
    i = x.extra["file"].tolist().index("books/microsoft-books-2.jpg")
    assert x.styles[i] == "" and x.subtypes[i] == "microsoft-books-2" and x.class_names[i] == "Books"
    # the script's listing: class folders sorted, files sorted, the test style a substring of the path
    listing = [f"{d.name}/{f.name}" for d in sorted(root.iterdir()) for f in sorted(d.iterdir())
               if f.suffix in (".png", ".jpg") and not f.name.startswith(".")]
    assert sorted(x.extra["file"].tolist()) == sorted(listing)
    split = style_holdout(x, "microsoft", match="paper", seen_test_fraction=0.0)
    assert sorted(x.extra["file"][split.heldout_idx].tolist()) == sorted(p for p in listing if "microsoft" in p)
    assert sorted(x.extra["file"][split.train_idx].tolist()) == sorted(p for p in listing if "microsoft" not in p)
    sub = subtype_holdout(x, ["books"], match="paper", seen_test_fraction=0.0)
    assert sorted(x.extra["file"][sub.heldout_idx].tolist()) == sorted(p for p in listing if "books" in p)


# ---------------------------------------------------------------------------------------------
# emoji-styles (real files)


@needs_emoji
def test_emoji_styles_real_files_match_their_readme() -> None:
    x = read_emoji_styles(EMOJI)
    assert len(x) == 3669 and len(x.classes) == 48 and len(set(x.subtypes.tolist())) == 569
    per_style = {s: int((x.styles == s).sum()) for s in sorted(set(x.styles.tolist()))}
    assert per_style == {
        "emojione": 459, "fluent-emoji": 569, "fluent-emoji-flat": 568, "fluent-emoji-high-contrast": 567,
        "fxemoji": 368, "noto": 569, "twemoji": 569,
    }  # fmt: skip
    assert set(x.classes) <= set(ICONS50_CLASSES) and set(ICONS50_CLASSES) - set(x.classes) == {"Family", "Holding Hands"}
    meta = json.loads((EMOJI / "classes.json").read_text(encoding="utf-8"))
    assert {c: len(v) for c, v in meta.items()} == {c: len(set(x.subtypes[x.class_names == c].tolist())) for c in x.classes}
    assert default_style(x) == "fluent-emoji-high-contrast"
    big = read_emoji_styles(EMOJI, size=64)
    assert big.images.shape == (3669, 64, 64, 3) and (big.subtypes == x.subtypes).all()
    with pytest.raises(InvalidArgumentError, match="size=48"):
        read_emoji_styles(EMOJI, size=48)


def test_emoji_styles_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "emoji-styles-32.npz"
    bad.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DataError, match=re.escape(str(bad))):
        read_emoji_styles(bad)
    np.savez(tmp_path / "partial.npz", images=np.zeros((1, 32, 32, 3), np.uint8))
    with pytest.raises(DataError, match="lacks"):
        read_emoji_styles(tmp_path / "partial.npz")


# ---------------------------------------------------------------------------------------------
# CIFAR-100


# The CIFAR-100 superclasses and their subclasses as the dataset's page lists them
# (Krizhevsky 2009), an independent check of the coarse-to-fine table.
CIFAR100_PAGE = {
    "aquatic_mammals": "beaver dolphin otter seal whale",
    "fish": "aquarium_fish flatfish ray shark trout",
    "flowers": "orchid poppy rose sunflower tulip",
    "food_containers": "bottle bowl can cup plate",
    "fruit_and_vegetables": "apple mushroom orange pear sweet_pepper",
    "household_electrical_devices": "clock keyboard lamp telephone television",
    "household_furniture": "bed chair couch table wardrobe",
    "insects": "bee beetle butterfly caterpillar cockroach",
    "large_carnivores": "bear leopard lion tiger wolf",
    "large_man-made_outdoor_things": "bridge castle house road skyscraper",
    "large_natural_outdoor_scenes": "cloud forest mountain plain sea",
    "large_omnivores_and_herbivores": "camel cattle chimpanzee elephant kangaroo",
    "medium_mammals": "fox porcupine possum raccoon skunk",
    "non-insect_invertebrates": "crab lobster snail spider worm",
    "people": "baby boy girl man woman",
    "reptiles": "crocodile dinosaur lizard snake turtle",
    "small_mammals": "hamster mouse rabbit shrew squirrel",
    "trees": "maple_tree oak_tree palm_tree pine_tree willow_tree",
    "vehicles_1": "bicycle bus motorcycle pickup_truck train",
    "vehicles_2": "lawn_mower rocket streetcar tank tractor",
}


def test_cifar100_coarse_to_fine_matches_the_dataset_page() -> None:
    assert list(CIFAR100_PAGE) == list(CIFAR100_COARSE)
    for c, fines in CIFAR100_COARSE_TO_FINE.items():
        assert {CIFAR100_FINE[f] for f in fines} == set(CIFAR100_PAGE[CIFAR100_COARSE[c]].split())
    assert sorted(f for v in CIFAR100_COARSE_TO_FINE.values() for f in v) == list(range(100))


def fine_to_coarse() -> dict[int, int]:
    return {f: c for c, fs in CIFAR100_COARSE_TO_FINE.items() for f in fs}


def write_cifar100(root: Path, images: np.ndarray, fine: list[int], part: str = "test") -> Path:
    d = root / "cifar-100-python"
    d.mkdir(parents=True, exist_ok=True)
    f2c = fine_to_coarse()
    batch = {
        b"filenames": [f"img_{i}.png".encode() for i in range(len(fine))],
        b"batch_label": b"testing batch 1 of 1",
        b"fine_labels": list(fine),
        b"coarse_labels": [f2c[x] for x in fine],
        b"data": images.transpose(0, 3, 1, 2).reshape(len(fine), -1),
    }
    (d / part).write_bytes(pickle.dumps(batch, protocol=2))
    return d


@pytest.mark.skipif(_foolbox_data() is None, reason="foolbox wheel (its 20 real CIFAR-100 images) not installed")
def test_cifar100_reader_on_real_images(tmp_path: Path) -> None:
    files = sorted(_foolbox_data().glob("cifar100_*.png"))  # type: ignore[union-attr]
    assert len(files) == 20
    imgs = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in files])
    fine = [int(f.stem.split("_")[-1]) for f in files]
    write_cifar100(tmp_path, imgs, fine, "test")
    x = read_cifar100(tmp_path, "test")
    np.testing.assert_array_equal(x.images, imgs)
    assert x.extra["fine_label"].tolist() == fine
    assert x.subtypes[0] == "mountain" and x.class_names[0] == "large_natural_outdoor_scenes"  # test image 0: fine 49
    assert [CIFAR100_FINE.index(s) for s in x.subtypes] == fine


def test_cifar100_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="part='val'"):
        read_cifar100(tmp_path, "val")
    with pytest.raises(DataError, match="not found"):
        read_cifar100(tmp_path, "train")
    d = write_cifar100(tmp_path, np.zeros((3, 32, 32, 3), np.uint8), [0, 1, 2], "train")
    raw = (d / "train").read_bytes()
    (d / "train").write_bytes(raw[:40])
    with pytest.raises(DataError, match=re.escape(str(d / "train"))):
        read_cifar100(tmp_path, "train")
    (d / "train").write_bytes(pickle.dumps({b"data": np.zeros((2, 10), np.uint8), b"fine_labels": [0, 1], b"coarse_labels": [4, 1]}))
    with pytest.raises(DataError, match="N x 3072"):
        read_cifar100(tmp_path, "train")


# ---------------------------------------------------------------------------------------------
# wnid trees


def test_wnid_tree(tmp_path: Path) -> None:
    for wnid, n in (("n02084071", 2), ("n02121620", 1), ("n09999999", 1)):
        (tmp_path / wnid).mkdir()
        for i in range(n):
            Image.new("RGB", (40, 30), (i * 50, 0, 0)).save(tmp_path / wnid / f"{wnid}_{i}.JPEG")
    x = read_wnid_tree(tmp_path, {"n02084071": "Dog", "n02121620": "Cat", "n01111111": "Cat"}, ["Cat", "Dog"], image_size=16)
    assert x.images.shape == (3, 16, 16, 3) and x.subtypes.tolist() == ["n02084071", "n02084071", "n02121620"]
    assert x.class_names.tolist() == ["Dog", "Dog", "Cat"]
    with pytest.raises(DataError, match="n01111111"):
        read_wnid_tree(tmp_path, {"n01111111": "Cat"}, ["Cat"], require=True)
    with pytest.raises(DataError, match="no wnid folders"):
        read_wnid_tree(tmp_path / "n09999999", {}, [])


# ---------------------------------------------------------------------------------------------
# splits


def test_exact_subtype_matching_keeps_books_and_monkey_classes_in_training(tmp_path: Path) -> None:
    x = read_icons50(write_icons_npy(tmp_path))
    exact = subtype_holdout(x, ["books", "monkey"], seen_test_fraction=0)
    assert sorted(set(x.subtypes[exact.heldout_idx].tolist())) == ["books", "monkey"]
    assert len(exact.heldout_idx) == 3
    trained = set(x.subtypes[exact.train_idx].tolist())
    assert {"blue_book", "see_no_evil_monkey", "monkey_face"} <= trained  # the classes Books and Monkey still train
    # the authors' substring matching on the path swallows the whole classes Books and Monkey
    paper = subtype_holdout(x, ["books", "monkey"], match="paper", seen_test_fraction=0)
    assert set(x.class_names[paper.heldout_idx].tolist()) == {"Books", "Monkey"}
    assert len(paper.heldout_idx) == 8 and set(x.class_names[paper.train_idx].tolist()) == {"Airplane"}
    assert paper.info["classes_without_training_images"] == ["Books", "Monkey"]
    # the folder release: the same with real paths
    y = read_icons50_folder(write_icons_folder(tmp_path))
    assert len(subtype_holdout(y, ["books", "monkey"], match="paper", seen_test_fraction=0).heldout_idx) == 8
    assert len(subtype_holdout(y, ["books", "monkey"], seen_test_fraction=0).heldout_idx) == 3


def test_style_holdout_and_parts_are_disjoint(tmp_path: Path) -> None:
    x = read_icons50(write_icons_npy(tmp_path))
    s = style_holdout(x)
    assert s.name == "style:microsoft" and s.held_out == ("microsoft",)
    assert set(x.styles[s.heldout_idx].tolist()) == {"microsoft"}
    assert "microsoft" not in set(x.styles[s.train_idx].tolist()) | set(x.styles[s.seen_test_idx].tolist())
    parts = [set(s.train_idx.tolist()), set(s.seen_test_idx.tolist()), set(s.heldout_idx.tolist())]
    assert sum(map(len, parts)) == len(x) and set().union(*parts) == set(range(len(x)))
    assert [sp.held_out[0] for sp in leave_one_style_out(x)] == ["apple", "google", "microsoft", "samsung"]
    with pytest.raises(UnknownNameError) as e:
        style_holdout(x, "microsfot")
    assert e.value.argument == "style" and "microsoft" in e.value.suggestions and "apple" in str(e.value)
    with pytest.raises(InvalidArgumentError, match="match='substring'"):
        style_holdout(x, "apple", match="substring")
    with pytest.raises(InvalidArgumentError, match="seen_test_fraction"):
        style_holdout(x, "apple", seen_test_fraction=1.5)


def test_subtype_errors(tmp_path: Path) -> None:
    x = read_icons50(write_icons_npy(tmp_path))
    with pytest.raises(UnknownNameError) as e:
        subtype_holdout(x, ["books", "unicorn"])
    assert e.value.argument == "subtypes" and e.value.value == "unicorn" and "books" in e.value.choices
    with pytest.raises(InvalidArgumentError, match="subtypes='all'"):
        subtype_holdout(x, "all")


@needs_emoji
def test_splits_on_emoji_styles_are_seeded_and_complete() -> None:
    x = read_emoji_styles(EMOJI)
    s = style_holdout(x, seed=3, seen_test_fraction=0.1)
    assert (s.heldout_idx == np.flatnonzero(x.styles == "fluent-emoji-high-contrast")).all()
    assert (style_holdout(x, seed=3, seen_test_fraction=0.1).seen_test_idx == s.seen_test_idx).all()
    assert not (style_holdout(x, seed=4, seen_test_fraction=0.1).seen_test_idx == s.seen_test_idx).all()
    v = style_holdout(x, "Microsoft", field="vendor")
    assert len(v.heldout_idx) == 569 + 568 + 567
    assert len(leave_one_style_out(x)) == 7
    found, missing = paper_subtypes_for(x)
    assert len(found) + len(missing) == 50 and {"books", "monkey", "small airplane", "pencil"} <= set(found)
    r = subtype_holdout(x, "random", seed=1)
    held = set(r.held_out)
    # one subtype per class with at least two; every image of a held-out subtype is held out, in all styles
    assert len(held) == sum(1 for c in range(48) if len(set(x.subtypes[x.labels == c].tolist())) >= 2)
    assert set(x.subtypes[r.heldout_idx].tolist()) == held and not held & set(x.subtypes[r.train_idx].tolist())
    assert set(x.labels[r.train_idx].tolist()) == set(range(48))


def test_cifar100_subclass_splits() -> None:
    assert cifar100_held_out(1) == {c: (f[0],) for c, f in CIFAR100_COARSE_TO_FINE.items()}
    assert all(len(v) == 3 for v in cifar100_held_out(3).values())
    assert cifar100_held_out(2, order="random", seed=5) == cifar100_held_out(2, order="random", seed=5)
    assert cifar100_held_out(2, order="random", seed=5) != cifar100_held_out(2, order="random", seed=6)
    for bad in (0, 4, 1.0, True):
        with pytest.raises(InvalidArgumentError) as e:
            cifar100_held_out(bad)  # type: ignore[arg-type]
        assert e.value.argument == "k" and "1, 2 or 3" in e.value.allowed
    with pytest.raises(InvalidArgumentError, match="order='shuffled'"):
        cifar100_held_out(1, order="shuffled")
    rng = np.random.default_rng(0)
    fine = np.repeat(np.arange(100), 2)
    f2c = fine_to_coarse()
    from shiftbench.structural import LabelledImages

    def make(n: str) -> LabelledImages:
        return LabelledImages(n, rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8), np.array([f2c[f] for f in fine]),
                              CIFAR100_COARSE, np.array([CIFAR100_FINE[f] for f in fine]), None, {"fine_label": fine})  # fmt: skip

    tr, te = make("train"), make("test")
    for k in (1, 2, 3):
        s = cifar100_subclass_split(tr, te, k)
        held = {f for v in cifar100_held_out(k).values() for f in v}
        assert len(s.heldout_idx) == 2 * 20 * k and len(s.train_idx) == 2 * 20 * (5 - k)
        assert set(te.extra["fine_label"][s.heldout_idx].tolist()) == held
        assert not held & set(tr.extra["fine_label"][s.train_idx].tolist())
        assert not held & set(te.extra["fine_label"][s.seen_test_idx].tolist())
    assert "seal" in cifar100_subclass_split(tr, te, 1).held_out  # aquatic mammals: seal first in the authors' order
    assert PAPER_HELD_OUT_SUBTYPES[:2] == ("small_airplane", "top_with_upwards_arrow_above") and len(PAPER_HELD_OUT_SUBTYPES) == 50
    _ = io  # keep the io import for readers of this file
