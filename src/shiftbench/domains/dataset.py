"""The ImageNet-D view of a DomainNet download, read in place (no copies, no symlinks).

Layout (as unpacked from http://ai.bu.edu/M3SDA/)::

    <root>/clipart/<class>/<image>          six domains: clipart infograph painting quickdraw real sketch
    <root>/clipart_train.txt                 optional official list files, lines "clipart/<class>/<file> <label>"
    <root>/clipart_test.txt

``root`` may also be one domain folder (``<root>/sketch``): that domain alone,
with its list files looked up next to it.

Images of the ImageNet-D classes are kept; images of the other DomainNet classes
are left out and counted. Labels come from the class folder name, never from a
position in a listing; a list-file label that disagrees with the folder name is
an error. Problems that leave labels intact are counted warnings
(:class:`LoadReport`): ImageNet-D classes with no folder (or no images) in a
domain, listed images missing on disk (or an error with ``bad_images="fail"``),
images on disk that no list file names.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..checks import suggest
from ..errors import InvalidArgumentError
from ..evaluation.data import spread_evenly
from ..io import IMAGE_EXTENSIONS
from .errors import (
    DomainNetLayoutError,
    ListFileError,
    MissingDomainsError,
    MissingImageError,
    UnknownClassFoldersError,
)
from .mapping import DOMAINS, ImageNetDMapping, domainnet_classes, resolve_mapping

__all__ = ["SPLITS", "DomainImage", "LoadReport", "DomainNetDataset"]

SPLITS = ("all", "train", "test")


@dataclass(frozen=True)
class DomainImage:
    """One image of ImageNet-D.

    Attributes:
        domain: its domain.
        key: ``<domain>/<class>/<file>`` (the store's image id).
        label: DomainNet label (index into :func:`domainnet_classes`).
        cls: DomainNet class name.
        path: the file, in place.
    """

    domain: str
    key: str
    label: int
    cls: str
    path: Path


@dataclass
class LoadReport:
    """What was left out or found missing while reading the folder (per domain)."""

    missing_class_folders: dict[str, list[str]] = field(default_factory=dict)
    missing_listed_images: dict[str, list[str]] = field(default_factory=dict)
    unlisted_images: dict[str, int] = field(default_factory=dict)
    duplicate_list_lines: dict[str, int] = field(default_factory=dict)
    outside_imagenet_d: dict[str, int] = field(default_factory=dict)
    list_files: dict[str, list[str]] = field(default_factory=dict)

    def warnings(self) -> list[str]:
        """One line per counted problem (empty when the folder is complete)."""
        out: list[str] = []
        for d, cls in self.missing_class_folders.items():
            if cls:
                out.append(
                    f"{d}: {len(cls)} ImageNet-D class(es) have no folder or no images: {', '.join(cls[:8])}"
                    + (" ..." if len(cls) > 8 else "")
                )
        for d, miss in self.missing_listed_images.items():
            if miss:
                out.append(
                    f"{d}: {len(miss)} image(s) named in the list files are not on disk, skipped: "
                    + ", ".join(miss[:3])
                    + (" ..." if len(miss) > 3 else "")
                )
        for d, n in self.unlisted_images.items():
            if n:
                out.append(f"{d}: {n} image(s) on disk are named in no list file of the chosen split, left out")
        for d, n in self.duplicate_list_lines.items():
            if n:
                out.append(f"{d}: {n} image(s) listed more than once, counted once")
        return out


def _scan_dir(d: Path) -> tuple[list[str], list[str]]:
    """(sub-folder names, file names) of a folder, hidden entries left out, sorted."""
    dirs: list[str] = []
    files: list[str] = []
    with os.scandir(d) as it:
        for e in it:
            if e.name.startswith("."):
                continue
            (dirs if e.is_dir() else files).append(e.name)
    return sorted(dirs), sorted(files)


def _is_image(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


class DomainNetDataset:
    """ImageNet-D images of a DomainNet folder, read in place.

    Args:
        root: the DomainNet root (holding the domain folders), or one domain folder.
        domains: domains to read (default: all six; each must be present).
        split: ``"all"`` (train and test, as ImageNet-D uses both), ``"train"`` or
            ``"test"`` (needs the official list files).
        limit: at most this many images per domain, spread evenly over the sorted list.
        bad_images: ``"skip"``: listed images missing on disk are skipped and
            counted; ``"fail"``: they raise :class:`MissingImageError`.
        mapping: the class mapping: ``"paper"`` (the default, as published), ``"wordnet"`` or an
            :class:`ImageNetDMapping`. It decides which DomainNet folders are read.

    Raises:
        DomainNetLayoutError: ``root`` is missing or holds no domain folder.
        MissingDomainsError: requested domains are absent.
        UnknownClassFoldersError: class folders that are not DomainNet classes.
        ListFileError: a list-file line that is malformed, points outside its
            domain, names an unknown class, or carries a label that disagrees
            with its class folder.
        MissingImageError: listed images missing on disk (``bad_images="fail"``).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        domains: Sequence[str] | None = None,
        split: str = "all",
        limit: int | None = None,
        bad_images: str = "skip",
        mapping: str | ImageNetDMapping | None = None,
    ) -> None:
        self.mapping = resolve_mapping(mapping)
        if split not in SPLITS:
            raise InvalidArgumentError("split", split, f"one of {', '.join(SPLITS)}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidArgumentError("limit", limit, "None or a positive number of images per domain")
        if bad_images not in ("skip", "fail"):
            raise InvalidArgumentError("bad_images", bad_images, "'skip' or 'fail'")
        if domains is not None:
            domains = list(domains)
            bad = [d for d in domains if d not in DOMAINS]
            if bad or not domains:
                raise InvalidArgumentError("domains", bad or domains, f"a non-empty list of {', '.join(DOMAINS)}")
        self.split = split
        self.limit = limit
        self.bad_images = bad_images
        self.report = LoadReport()
        given = Path(root)
        if not given.is_dir():
            raise DomainNetLayoutError(str(root), "does not exist" if not given.exists() else "is not a folder")
        if given.name in DOMAINS and not any((given / d).is_dir() for d in DOMAINS):
            self.root = given.parent
            present = [given.name]
            wanted = list(domains) if domains is not None else present
            if wanted != present:
                raise InvalidArgumentError("domains", wanted, f"[{given.name!r}] for the domain folder {str(given)!r}")
        else:
            self.root = given
            present = [d for d in DOMAINS if (given / d).is_dir()]
            if not present:
                sub = sorted(p.name for p in given.iterdir() if p.is_dir())[:8]
                raise DomainNetLayoutError(
                    str(root), f"holds no domain folder (sub-folders: {', '.join(sub) or 'none'})"
                )
            wanted = list(domains) if domains is not None else list(DOMAINS)
        missing = [d for d in wanted if d not in present]
        if missing:
            raise MissingDomainsError(
                "--data",
                str(given),
                missing,
                f"the domain folders {', '.join(wanted)}",
                f"Present: {', '.join(present)}. mDE needs all six; to evaluate fewer, pass domains=[...] "
                "(Python API) or --data <root>/<domain> for one domain.",
            )
        self.domains = tuple(d for d in DOMAINS if d in wanted)
        self._items: dict[str, list[DomainImage]] = {d: self._read_domain(d) for d in self.domains}
        self.location = str(self.root.resolve())
        h = hashlib.sha256()
        for d in self.domains:
            for it in self._items[d]:
                h.update(it.key.encode() + b"\n")
        self.identity = (
            f"domainnet:{self.location}:{','.join(self.domains)}:split={split}:limit={limit}:{h.hexdigest()[:16]}"
        )

    def items(self, domain: str) -> list[DomainImage]:
        """ImageNet-D images of one domain, sorted by key."""
        if domain not in self._items:
            raise InvalidArgumentError("domain", domain, f"one of {', '.join(self.domains)}")
        return list(self._items[domain])

    def __len__(self) -> int:
        return sum(len(v) for v in self._items.values())

    def describe(self) -> str:
        """One line for reports."""
        counts = ", ".join(f"{d} {len(self._items[d])}" for d in self.domains)
        return f"DomainNet {self.location} (split {self.split}; ImageNet-D images: {counts})"

    # -- reading -------------------------------------------------------------------------------

    def _list_files(self, domain: str) -> list[Path]:
        names = {"all": ("train", "test"), "train": ("train",), "test": ("test",)}[self.split]
        found = [self.root / f"{domain}_{s}.txt" for s in names if (self.root / f"{domain}_{s}.txt").is_file()]
        if self.split != "all" and not found:
            raise DomainNetLayoutError(
                str(self.root),
                f"has no {domain}_{self.split}.txt, needed for split={self.split!r}",
                "Use split='all' to read every image in the class folders.",
            )
        return found

    def _read_domain(self, domain: str) -> list[DomainImage]:
        all_classes = domainnet_classes()
        index = {c: i for i, c in enumerate(all_classes)}
        inside = set(self.mapping.folder_names)
        ddir = self.root / domain
        folders, _ = _scan_dir(ddir)
        unknown = [f for f in folders if f not in index]
        if unknown:
            raise UnknownClassFoldersError(
                str(self.root),
                [f"{domain}/{f}" for f in unknown],
                {f: suggest(f, all_classes) for f in unknown},
            )
        on_disk: dict[str, list[str]] = {}
        for f in folders:
            if f in inside:
                on_disk[f] = [n for n in _scan_dir(ddir / f)[1] if _is_image(n)]
        outside = 0
        lists = self._list_files(domain)
        self.report.list_files[domain] = [str(p) for p in lists]
        items: list[DomainImage] = []
        if lists:
            seen: set[str] = set()
            dup = 0
            missing: list[str] = []
            disk_sets = {c: set(v) for c, v in on_disk.items()}
            for lf in lists:
                with open(lf, encoding="utf-8", errors="surrogateescape") as fh:
                    for n, line in enumerate(fh, 1):
                        if any("\udc80" <= ch <= "\udcff" for ch in line):
                            raise ListFileError(str(lf), n, "the line is not valid UTF-8 text")
                        if not line.strip():
                            continue
                        parts = line.split()
                        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                            raise ListFileError(str(lf), n, f"malformed line {line.strip()!r}")
                        rel, lab = parts[0], int(parts[1])
                        segs = rel.split("/")
                        if len(segs) != 3 or segs[0] != domain:
                            raise ListFileError(str(lf), n, f"{rel!r} is not a path <{domain}>/<class>/<file>")
                        cls, fname = segs[1], segs[2]
                        if cls not in index:
                            hint = suggest(cls, all_classes)
                            raise ListFileError(
                                str(lf),
                                n,
                                f"class folder {cls!r} is not a DomainNet class"
                                + (f" (did you mean {' / '.join(hint)}?)" if hint else ""),
                            )
                        if lab != index[cls]:
                            raise ListFileError(
                                str(lf),
                                n,
                                f"label {lab} disagrees with the class folder {cls!r}, which is label {index[cls]} "
                                f"(label {lab} would be {all_classes[lab]!r})"
                                if 0 <= lab < len(all_classes)
                                else f"label {lab} is outside 0..{len(all_classes) - 1}",
                            )
                        if rel in seen:
                            dup += 1
                            continue
                        seen.add(rel)
                        if cls not in inside:
                            outside += 1
                            continue
                        if fname not in disk_sets.get(cls, set()):
                            missing.append(rel)
                            continue
                        items.append(DomainImage(domain, rel, lab, cls, ddir / cls / fname))
                if missing and self.bad_images == "fail":
                    raise MissingImageError(str(lf), missing)
            self.report.missing_listed_images[domain] = missing
            self.report.duplicate_list_lines[domain] = dup
            self.report.unlisted_images[domain] = sum(
                1 for c, names in on_disk.items() for nm in names if f"{domain}/{c}/{nm}" not in seen
            )
        else:
            for f in folders:
                if f not in inside:
                    outside += sum(1 for n in _scan_dir(ddir / f)[1] if _is_image(n))
                    continue
                items.extend(DomainImage(domain, f"{domain}/{f}/{n}", index[f], f, ddir / f / n) for n in on_disk[f])
        self.report.outside_imagenet_d[domain] = outside
        have = {it.cls for it in items}
        self.report.missing_class_folders[domain] = [c for c in self.mapping.folder_names if c not in have]
        items.sort(key=lambda it: it.key)
        return spread_evenly(items, self.limit)
