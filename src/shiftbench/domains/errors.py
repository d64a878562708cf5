"""Typed errors of ImageNet-D: a DomainNet folder that cannot be read without guessing labels.

They extend :mod:`shiftbench.errors` and :mod:`shiftbench.evaluation.errors`: each names
the folder or file, what is wrong, and what is expected, and keeps those as attributes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import DataError
from ..evaluation.errors import IncompleteDatasetError

__all__ = [
    "DomainNetLayoutError",
    "UnknownClassFoldersError",
    "MissingDomainsError",
    "ListFileError",
    "MissingImageError",
]


class DomainNetLayoutError(DataError):
    """The folder is not a DomainNet download (``<root>/<domain>/<class>/<image>``).

    Attributes:
        root: the folder given.
        problem: what is wrong, in words.
    """

    def __init__(self, root: str, problem: str, hint: str = "") -> None:
        self.root = root
        self.problem = problem
        msg = (
            f"--data {root!r} {problem}. Expected the DomainNet layout <root>/<domain>/<class>/<image> with domains "
            "clipart, infograph, painting, quickdraw, real, sketch (as unpacked from http://ai.bu.edu/M3SDA/)."
        )
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class UnknownClassFoldersError(DomainNetLayoutError):
    """Class folders whose names are not DomainNet classes (their label would be a guess).

    Attributes:
        folders: ``<domain>/<folder>`` for each unknown folder.
        suggestions: for each unknown folder name, close DomainNet class names.
    """

    def __init__(self, root: str, folders: Sequence[str], suggestions: dict[str, list[str]]) -> None:
        self.folders = list(folders)
        self.suggestions = dict(suggestions)
        parts = []
        for f in self.folders[:10]:
            near = suggestions.get(f.split("/", 1)[1])
            parts.append(f + (f" (did you mean {' / '.join(near)}?)" if near else ""))
        shown = ", ".join(parts)
        more = f", ... ({len(self.folders)} in all)" if len(self.folders) > 10 else ""
        super().__init__(
            root,
            f"has class folders that are not DomainNet classes: {shown}{more}",
            "Rename them to DomainNet's class names (shiftbench/data/domainnet_classes.txt) or move them out; "
            "shiftbench never guesses a label.",
        )


class MissingDomainsError(IncompleteDatasetError):
    """Requested DomainNet domains are absent."""


class ListFileError(DataError):
    """A line of an official list file (``<domain>_train.txt``) cannot be trusted.

    Attributes:
        path: the list file.
        line: the 1-based line number.
        problem: what is wrong.
    """

    def __init__(self, path: str, line: int, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        super().__init__(
            f"list file {path!r}, line {line}: {problem}. Expected lines '<domain>/<class>/<file> <label>' with "
            "the label of <class> in DomainNet's class order (shiftbench/data/domainnet_classes.txt)."
        )


class MissingImageError(DataError):
    """A list file names an image that is not on disk (raised with ``bad_images="fail"``).

    Attributes:
        path: the list file.
        missing: the relative paths that are missing.
    """

    def __init__(self, path: str, missing: Sequence[str]) -> None:
        self.path = path
        self.missing = list(missing)
        shown = ", ".join(self.missing[:5]) + (f", ... ({len(self.missing)} in all)" if len(self.missing) > 5 else "")
        super().__init__(
            f"list file {path!r} names {len(self.missing)} image(s) that are not on disk: {shown}. "
            "Pass --bad-images skip (bad_images='skip') to skip and count them instead."
        )
